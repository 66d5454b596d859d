"""What drf-spectacular calls while it builds the reference: the bearer API-key scheme,
the library classes whose docstrings describe nothing, and the postprocessing hook
that finishes the document (the refusals every operation shares, the URL ids, the MCP
tools). ``spectacular.SPECTACULAR_SETTINGS`` names them; coordination's AppConfig
imports this module so that the scheme is registered."""

from http import HTTPStatus
from typing import Any

from django.urls import Resolver404, resolve
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_examples_list, get_lib_doc_excludes

from coordination.api import access
from coordination.api.reference.error_bodies import error_schema
from coordination.api.reference.refusals import FORCE_TO_MINT, Refusal, by_status
from coordination.api.reference.shared import shared_refusals
from coordination.tools import TOOLS  # the MCP table, below both the API and MCP


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "coordination.api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A workspace API key."}


def lib_doc_excludes() -> list[type]:
    """DRF's classes and FieldsBoundOnce: a serializer without a docstring of its own
    has no description, not the mixin's."""
    from coordination.api.serializers.base import FieldsBoundOnce

    return [*get_lib_doc_excludes(), FieldsBoundOnce]


# --- the postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]) ---------------

# What the {id} of each resource's URL names, and a plausible one.
URL_IDS = {
    "sessions": ("session", "12"),
    "projects": ("project", "1"),
    "issues": ("issue", "7"),
    "leases": ("lease", "31"),
    "file-claims": ("file claim", "88"),
    "runs": ("run", "5"),
}
# The URLs whose {id} is a name: what it names, and a plausible one.
URL_NAMES = {"resources": ("resource", "db:test")}
# Where `make run` serves the API: the pages of the list examples link there.
EXAMPLE_ORIGIN = "http://127.0.0.1:8000"


def postprocess(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Finish each operation (success descriptions, the shared refusals, the URL id,
    its MCP tools, its list examples) and append the MCP tools to the description."""
    components = result.get("components", {}).get("schemas", {})
    for path, operations in result["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for status, response in responses.items():  # a success says what it is
                response["description"] = response["description"] or HTTPStatus(int(status)).phrase
            keyed = key_refusals(method, path)
            add_refusals(
                responses,
                shared_refusals(method=method, path=path, operation=operation, keyed=keyed),
            )
            operation["responses"] = dict(sorted(responses.items()))
            describe_url_id(path, operation)
            name_mcp_tools(method, path, operation)
            if method == "get":
                paginate_examples(path, responses.get("200", {}), components)
    result["info"]["description"] += mcp_tool_table()
    return result


def key_refusals(method: str, path: str) -> list[Refusal]:
    """What the route's rule refuses a key (invariant 13 (the key is the actor)), looked up as a
    request to that path would be (the URL id as 1)."""
    try:
        match = resolve(path.replace("{id}", "1"))
    except Resolver404:
        return []
    refusals = access.refusals_of(access.rule_of(match.url_name, method.upper()))
    if (match.url_name, method.upper()) == ("key-list", "POST"):
        refusals.append(FORCE_TO_MINT)
    return refusals


def add_refusals(responses: dict[str, Any], refusals: list[Refusal]) -> None:
    """Merge ``refusals`` into the responses, beside those the operation declared."""
    for status, group in by_status(refusals):
        response = responses.setdefault(str(status), {"description": ""})
        described = response["description"]
        lines = [r.line for r in group if r.line not in described]
        response["description"] = "\n".join(filter(None, [described, *lines]))
        media = response.setdefault("content", {}).setdefault("application/json", {})
        declared = media.get("schema", {}).get("properties", {}).get("code", {}).get("enum", [])
        media["schema"] = error_schema([*declared, *(r.code for r in group)])
        examples = media.setdefault("examples", {})
        for name, example in build_examples_list([r.example for r in group]).items():
            examples.setdefault(name, example)
        if status in (429, 503):
            response["headers"] = {
                "Retry-After": {
                    "schema": {"type": "integer"},
                    "description": "Seconds to wait before retrying.",
                }
            }


def describe_url_id(path: str, operation: dict[str, Any]) -> None:
    segment = path.split("/")[3]
    if segment in URL_NAMES:
        noun, example = URL_NAMES[segment]
        description = f"The {noun}'s name."
    else:
        noun, example = URL_IDS.get(segment, ("object", "1"))
        description = f"The {noun}'s id."
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path" and parameter["name"] == "id":
            parameter["description"] = description
            parameter["example"] = example


def name_mcp_tools(method: str, path: str, operation: dict[str, Any]) -> None:
    names = [f"`{t.name}`" for t in TOOLS if t.method == method.upper() and t.path == path]
    if names:
        said = operation.get("description", "").rstrip()
        label = "MCP tool" if len(names) == 1 else "MCP tools"
        operation["description"] = f"{said}\n\n{label}: {', '.join(names)}.".lstrip()


def mcp_tool_table() -> str:
    rows = [
        f"| `{t.name}` | `{t.method} {t.path}` | {as_markdown_text(t.description)} |" for t in TOOLS
    ]
    return "\n".join(["", "", "| tool | REST call | what it does |", "|---|---|---|", *rows])


def as_markdown_text(text: str) -> str:
    """Plain text in a Markdown table: ``<id>`` is not a tag, ``|`` not a column."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "/")


def paginate_examples(path: str, response: dict[str, Any], components: dict[str, Any]) -> None:
    """A list's examples as page 2 of 3 of this list, not of DRF's ``/accounts/``."""
    media = response.get("content", {}).get("application/json", {})
    ref = media.get("schema", {}).get("$ref", "")
    page = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
    if not ref or not {"count", "next", "previous", "results"} <= set(page):
        return
    links = {"count": 250, "next": f"{EXAMPLE_ORIGIN}{path}?page=3"}
    links["previous"] = f"{EXAMPLE_ORIGIN}{path}?page=1"
    for name, value in links.items():
        page[name]["example"] = value
    for example in media.get("examples", {}).values():
        if isinstance(example.get("value"), dict) and "results" in example["value"]:
            example["value"] = {**example["value"], **links}
