"""Each tool's input schema, derived from the REST API's own OpenAPI document.

The document is the one drf-spectacular serves at /api/v1/schema/, built from the
input serializers and filtersets the REST views validate with; so the schema an
agent reads is the one its call is checked against. A tool's schema is an object
of: its URL id (required; an integer, or a resource's name as the route's pattern
says), its query parameters (GET) or the properties of its
request body (POST, PATCH; less those the call refuses, ``ToolSpec.omit``), with
``$ref`` resolved and OpenAPI 3.0's ``nullable`` turned into JSON Schema. A
parameter the tool defaults (``ToolSpec.defaults``) says so, and takes ``null``.
"""

import logging
from functools import cache
from typing import Any

from drf_spectacular.generators import SchemaGenerator

from coordination.models import MAX_ID
from coordination.tools import TOOLS, ToolSpec

logger = logging.getLogger(__name__)

# OpenAPI keywords that JSON Schema does not have (or that mean nothing to a caller).
OPENAPI_ONLY = frozenset(
    {"nullable", "readOnly", "writeOnly", "example", "xml", "externalDocs", "discriminator"}
)
ANY_OBJECT: dict[str, Any] = {"type": "object"}


class MissingOperation(LookupError):
    """The REST route of a tool is not in the OpenAPI document."""


@cache
def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


def _json_schema(node: Any, components: dict[str, Any], seen: frozenset[str]) -> Any:
    """``node`` (an OpenAPI 3.0 schema) as a self-contained JSON Schema."""
    if isinstance(node, list):
        return [_json_schema(item, components, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive schema {name}")
        resolved = _json_schema(components[name], components, seen | {name})
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**resolved, **_json_schema(extra, components, seen)} if extra else resolved
    schema: dict[str, Any] = {}
    for key, value in node.items():
        if key in OPENAPI_ONLY:
            continue
        if key == "properties":
            schema[key] = {
                name: _json_schema(prop, components, seen)
                for name, prop in value.items()
                if not (isinstance(prop, dict) and prop.get("readOnly"))
            }
        else:
            schema[key] = _json_schema(value, components, seen)
    if "required" in schema and "properties" in schema:
        schema["required"] = [name for name in schema["required"] if name in schema["properties"]]
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        # How OpenAPI 3.0 documents a field beside its $ref (a help text): one schema.
        (only,) = schema.pop("allOf")
        schema = {**only, **schema}
    if node.get("nullable"):
        schema = _nullable(schema)
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("type"), str):
        schema = {**schema, "type": [schema["type"], "null"]}
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def derived_input_schema(tool: ToolSpec, document: dict[str, Any]) -> dict[str, Any]:
    """The tool's input schema from ``document``; MissingOperation if its route is absent."""
    operation = document.get("paths", {}).get(tool.path, {}).get(tool.method.lower())
    if operation is None:
        raise MissingOperation(f"{tool.method} {tool.path}")
    components = document.get("components", {}).get("schemas", {})
    properties: dict[str, Any] = {}
    required: list[str] = []

    def add(name: str, schema: dict[str, Any], is_required: bool) -> None:
        if name in properties:
            raise ValueError(f"{tool.name}: argument {name!r} given twice")
        properties[name] = schema
        if is_required:
            required.append(name)

    for parameter in operation.get("parameters", []):
        schema = _json_schema(parameter.get("schema", {}), components, frozenset())
        if parameter["in"] == "path" and parameter["name"] in tool.path_ids:
            name = tool.path_ids[parameter["name"]]
            integer = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
            add(name, {**integer, "description": f"The {name} id."}, True)
        elif parameter["in"] == "path" and tool.url_id is not None and tool.url_id_is_name:
            # A name in the path (a resource's) is a string argument, of the route's pattern.
            described = parameter.get("description") or f"The {tool.url_id}."
            add(tool.url_id, {**schema, "description": described}, True)
        elif parameter["in"] == "path" and tool.url_id is not None:
            # The URL's {id} (a digit string in the path) is an integer argument.
            url_id = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
            add(tool.url_id, {**url_id, "description": f"The {tool.url_id} id."}, True)
        elif parameter["in"] == "query":
            if parameter.get("description"):
                schema = {**schema, "description": parameter["description"]}
            add(parameter["name"], schema, bool(parameter.get("required")))
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    if "schema" in body:
        body_schema = _json_schema(body["schema"], components, frozenset())
        if body_schema.get("type") != "object":
            raise ValueError(f"{tool.name}: the request body is not an object")
        body_required = set(body_schema.get("required", []))
        for name, schema in body_schema.get("properties", {}).items():
            if name not in tool.omit:
                add(name, schema, name in body_required)
    for name, default in tool.defaults.items():
        # Absent: the default; null: no parameter, the REST call's own default.
        properties[name] = _nullable({**properties[name], "default": default})
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    return input_schema


def input_schema(tool: ToolSpec, document: dict[str, Any]) -> dict[str, Any]:
    """The derived schema; a bare object (and an error in the log) if it cannot be had."""
    try:
        return derived_input_schema(tool, document)
    except MissingOperation:
        logger.error("MCP tool %s: its REST route is missing from the OpenAPI document", tool.name)
    except (KeyError, TypeError, ValueError):
        logger.exception("MCP tool %s: no input schema could be derived", tool.name)
    return ANY_OBJECT


@cache
def input_schemas() -> dict[str, dict[str, Any]]:
    """Every tool's input schema, computed once per process."""
    try:
        document = openapi_document()
    except Exception:  # noqa: BLE001 - a broken schema must not take the tools down
        logger.exception("The OpenAPI document could not be built; MCP tools have bare schemas")
        document = {}
    return {tool.name: input_schema(tool, document) for tool in TOOLS}
