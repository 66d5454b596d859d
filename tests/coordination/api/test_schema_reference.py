"""The API reference (/api/v1/docs/): every operation has a tag, a summary, a
description and each error it can answer, with an example body in the error shape;
the examples are small and fit their schemas; the description tells of /mcp.

The schema is walked both as built in-process and as served."""

import asyncio
import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

import coordination
from coordination import errors
from coordination.api.reference import spectacular
from coordination.models import ApiKey, Issue
from coordination.tools import TOOLS
from tests.api_helpers import V1, post
from tests.conftest import expire

# The 409 codes of each operation, from reading the services it calls (an operation
# not listed answers no 409). coordination/services/leases.claim_issue: closed issue
# (invalid_transition), dead session, live holder, WIP cap; file_claims.claim_files adds
# the conflict and the fence; work.start_work cannot meet a dead session (it makes it).
CONFLICTS = {
    "POST /api/v1/resources/{id}/acquire/": {"resource_busy", "session_not_live"},
    "POST /api/v1/resources/{id}/release/": {"hold_not_held", "stale_fence"},
    "POST /api/v1/landings/": {
        "landing_exists",
        "session_not_live",
        "lease_not_held",
        "stale_fence",
    },
    "POST /api/v1/landings/take/": {"session_not_live"},
    "POST /api/v1/landings/{id}/land/": {"stale_fence"},
    "POST /api/v1/landings/{id}/reject/": {"stale_fence"},
    "POST /api/v1/landings/return/": {"stale_fence"},
    "POST /api/v1/issues/{id}/claim/": {
        "lease_held",
        "wip_limit_reached",
        "session_not_live",
        "invalid_transition",
    },
    "POST /api/v1/issues/{id}/release/": {"lease_not_held", "stale_fence"},
    "POST /api/v1/issues/{id}/transition/": {"invalid_transition", "blocked"},
    "POST /api/v1/issues/{id}/links/": {"dependency_cycle"},
    "POST /api/v1/issues/": {"invalid_transition"},  # a status past todo, or not ready
    "POST /api/v1/sessions/{id}/heartbeat/": {"session_ended"},
    "POST /api/v1/sessions/{id}/progress/": {"session_ended"},
    "POST /api/v1/file-claims/": {
        "file_conflict",
        "session_not_live",
        "invalid_transition",
        "stale_fence",
    },
    "POST /api/v1/runs/": {
        "worktree_busy",
        "lease_held",
        "wip_limit_reached",
        "session_not_live",
        "invalid_transition",
    },
    "POST /api/v1/runs/{id}/finish/": {"run_not_running", "stale_fence"},
    "POST /api/v1/work/start/": {
        "blocked",
        "lease_held",
        "wip_limit_reached",
        "file_conflict",
        "invalid_transition",
    },
    "POST /api/v1/work/finish/": {"invalid_transition", "lease_not_held", "stale_fence"},
}
# What an operation answers beyond what every one of its kind does: status → words of
# the response's description.
HUMAN_GATE = {"403": "human gate"}
BODY_ISSUE = {"404": "the body's `issue`"}
OWN_REFUSALS = {
    "POST /api/v1/issues/{id}/transition/": HUMAN_GATE,
    "POST /api/v1/work/finish/": {**HUMAN_GATE, **BODY_ISSUE},
    "POST /api/v1/work/start/": BODY_ISSUE,
    "POST /api/v1/runs/": {**BODY_ISSUE, "422": "`worktree_unresolved`"},
    "POST /api/v1/file-claims/": BODY_ISSUE,
    "POST /api/v1/file-claims/release/": BODY_ISSUE,
    "POST /api/v1/file-claims/check/": BODY_ISSUE,
}
# The status of each code of coordination/errors.py (Conflict itself names no code).
DOMAIN_CODES = {
    cls.code: cls.status
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.CoordinationError) and "code" in vars(cls)
}


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


@pytest.fixture(params=["built", pytest.param("served", marks=pytest.mark.django_db)])
def schema(request: pytest.FixtureRequest, built: dict[str, Any]) -> dict[str, Any]:
    if request.param == "built":
        return built
    response = APIClient().get(f"{V1}/schema/?format=json")
    assert response.status_code == 200
    document: dict[str, Any] = json.loads(response.content)
    return document


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def codes(response: dict[str, Any]) -> set[str]:
    media = response.get("content", {}).get("application/json", {})
    return set(media.get("schema", {}).get("properties", {}).get("code", {}).get("enum", []))


# --- every operation ---------------------------------------------------------------------


def test_every_operation_has_a_tag_a_summary_and_a_description(schema):
    tags = {tag["name"] for tag in schema["tags"]}
    untold = [
        name
        for name, operation in operations(schema)
        if not operation.get("summary")
        or len(operation.get("description", "")) < 40
        or len(operation.get("tags", [])) != 1
        or not set(operation["tags"]) <= tags
    ]
    assert not untold, untold
    assert len(list(operations(schema))) >= 38


def test_every_tag_is_described_and_used(schema):
    used = {tag for _, operation in operations(schema) for tag in operation["tags"]}
    assert [tag["name"] for tag in schema["tags"]] == [
        tag["name"] for tag in settings.SPECTACULAR_SETTINGS["TAGS"]
    ]
    assert {tag["name"] for tag in schema["tags"]} == used
    assert all(len(tag["description"]) > 40 for tag in schema["tags"])
    assert "api" not in used


def test_the_settings_are_the_reference_packages_and_import_no_django():
    """projektor/settings.py takes drf-spectacular's settings from the reference package,
    whose module of settings imports nothing of Django's, and every hook they name is
    there."""
    assert settings.SPECTACULAR_SETTINGS is spectacular.SPECTACULAR_SETTINGS
    named = [
        *spectacular.SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"],
        spectacular.SPECTACULAR_SETTINGS["GET_LIB_DOC_EXCLUDES"],
    ]
    assert all(callable(import_string(hook)) for hook in named)
    probe = (
        "import sys; import coordination.api.reference.spectacular; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'django', 'rest_framework', 'drf_spectacular'}))"
    )
    root = Path(coordination.__file__).parent.parent
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "[]"


def test_every_operation_documents_the_client_errors_it_can_give(schema):
    missing = []
    for name, operation in operations(schema):
        method, path = name.split(" ")
        statuses = set(operation["responses"])
        expected = {"401", "429", "503"} if operation.get("security") else {"429", "503"}
        if "requestBody" in operation or any(
            p["in"] == "query" for p in operation.get("parameters", [])
        ):
            expected.add("400")
        if "{id}" in path:
            expected.add("404")
        if method != "GET":
            expected.add("403")
        if "requestBody" in operation:
            expected |= {"413", "415"}
        if not expected <= statuses or not statuses & {"400", "404"}:
            missing.append(f"{name}: {sorted(expected - statuses)}")
    assert not missing, missing


def test_each_operation_documents_the_conflicts_its_services_raise(schema):
    documented = {
        name: codes(operation["responses"]["409"])
        for name, operation in operations(schema)
        if "409" in operation["responses"]
    }
    assert documented == CONFLICTS


def test_operations_document_their_own_refusals(schema):
    ops = dict(operations(schema))
    for name, refusals in OWN_REFUSALS.items():
        for status, words in refusals.items():
            assert words in ops[name]["responses"][status]["description"], (name, status)


def test_every_error_response_shows_each_of_its_codes_in_the_error_shape(schema):
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            media = response["content"]["application/json"]
            bodies = [example["value"] for example in media["examples"].values()]
            documented = codes(response)
            assert documented and {body["code"] for body in bodies} == documented, name
            for body in bodies:
                assert isinstance(body["detail"], str) and body["detail"], (name, body)
                if body["code"] in DOMAIN_CODES:  # the class of that code answers this status
                    assert DOMAIN_CODES[body["code"]] == int(status), (name, body)
            for code in documented:
                assert f"`{code}`" in response["description"], (name, code)


# --- the examples -----------------------------------------------------------------------


def example_values(node: Any) -> Iterator[Any]:
    """Every example value in the document (media types, parameters, properties)."""
    if isinstance(node, dict):
        if isinstance(node.get("examples"), dict):
            for example in node["examples"].values():
                if isinstance(example, dict) and "value" in example:
                    yield example["value"]
        if "example" in node:
            yield node["example"]
        for key, value in node.items():
            if key not in ("examples", "example"):
                yield from example_values(value)
    elif isinstance(node, list):
        for item in node:
            yield from example_values(item)


def integers(value: Any) -> Iterator[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, str) and value.isdigit():
        yield int(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from integers(item)
    elif isinstance(value, list):
        for item in value:
            yield from integers(item)


def test_examples_use_small_ids(schema):
    found = [number for value in example_values(schema["paths"]) for number in integers(value)]
    assert found and max(found) < 10_000, max(found)
    assert "9223372036854776000" not in json.dumps(schema["paths"])


def test_every_operation_shows_a_request_and_a_response_example(schema):
    bare = []
    for name, operation in operations(schema):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        if "requestBody" in operation and not body.get("examples"):
            bare.append(f"{name}: request")
        for status, response in operation["responses"].items():
            if status == "204":
                assert "content" not in response, name  # no body to show
                continue
            content = response["content"]
            media = content.get("application/json") or content["text/event-stream"]
            if status.startswith("2") and not media.get("examples"):
                bare.append(f"{name}: {status}")
    assert not bare, bare


OPENAPI_ONLY = {"nullable", "readOnly", "writeOnly", "example", "examples", "description"}


def as_json_schema(node: Any, components: dict[str, Any]) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema, refs inlined; an object takes no key it
    does not declare, so an example cannot carry a field the API lacks."""
    if isinstance(node, list):
        return [as_json_schema(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return as_json_schema(components[node["$ref"].rsplit("/", 1)[-1]], components)
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            converted[key] = {name: as_json_schema(p, components) for name, p in value.items()}
        elif key not in OPENAPI_ONLY:
            converted[key] = as_json_schema(value, components)
    if "properties" in converted and "additionalProperties" not in converted:
        converted["additionalProperties"] = False
    if node.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def media_examples(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    for name, operation in operations(schema):
        bodies = [("request", operation.get("requestBody", {}))]
        bodies += [(status, response) for status, response in operation["responses"].items()]
        for where, body in bodies:
            media = body.get("content", {}).get("application/json", {})
            for key, example in media.get("examples", {}).items():
                yield f"{name} {where} {key}", media["schema"], example["value"]


def test_every_example_fits_its_schema(schema):
    components = schema["components"]["schemas"]
    checked = 0
    for name, media_schema, value in media_examples(schema):
        try:
            jsonschema.validate(value, as_json_schema(copy.deepcopy(media_schema), components))
        except jsonschema.ValidationError as error:
            pytest.fail(f"{name}: {error.message} at {list(error.absolute_path)}")
        checked += 1
    assert checked > 200


# --- what the API really answers ----------------------------------------------------------


def refused_as_documented(built, name: str, response: Any, code: str) -> None:
    """The API's refusal has ``code``, a status and code the reference lists for the
    operation, and a body that fits the documented schema."""
    body = response.json()
    assert body["code"] == code, (name, body)
    documented = dict(operations(built))[name]["responses"][str(response.status_code)]
    assert code in codes(documented), (name, body)
    schema = documented["content"]["application/json"]["schema"]
    jsonschema.validate(body, as_json_schema(copy.deepcopy(schema), built["components"]["schemas"]))


@pytest.mark.django_db
def test_real_refusals_are_as_documented(built, api, project, make_issue, make_session):
    project.agent_wip_limit = 1
    project.save()
    held, other, closed = make_issue(), make_issue(), make_issue(status=Issue.Status.DONE)
    holder, claimer, dead = (make_session(f"coder-{n}") for n in (1, 2, 3))
    expire(dead)
    fence = post(api, f"/issues/{held.pk}/claim/", {"session": holder.pk}).json()["fence"]
    post(api, "/file-claims/", {"issue": held.pk, "paths": ["src/a.py"], "session": holder.pk})

    def claim(issue_id: int, body: dict[str, Any], code: str, client: Any = api) -> None:
        response = client.post(f"{V1}/issues/{issue_id}/claim/", body, format="json")
        refused_as_documented(built, "POST /api/v1/issues/{id}/claim/", response, code)

    claim(held.pk, {"session": claimer.pk}, "lease_held")
    claim(other.pk, {"session": claimer.pk}, "wip_limit_reached")
    claim(other.pk, {"session": dead.pk}, "session_not_live")
    claim(closed.pk, {"session": holder.pk}, "invalid_transition")
    claim(held.pk, {}, "invalid")
    claim(999, {"session": holder.pk}, "not_found")
    claim(held.pk, {"session": holder.pk}, "unauthenticated", client=APIClient())
    files, release = "POST /api/v1/file-claims/", "POST /api/v1/issues/{id}/release/"
    conflict = {"issue": other.pk, "paths": ["src/a.py"]}
    refused_as_documented(built, files, post(api, "/file-claims/", conflict), "file_conflict")
    absolute = {"issue": held.pk, "paths": ["/etc/passwd"]}
    refused_as_documented(built, files, post(api, "/file-claims/", absolute), "invalid")
    text = api.post(f"{V1}/file-claims/", "paths", content_type="text/plain")
    refused_as_documented(built, files, text, "unsupported_media_type")
    stale = {"session": holder.pk, "fence": fence + 1}
    refused_as_documented(
        built, release, post(api, f"/issues/{held.pk}/release/", stale), "stale_fence"
    )
    move = post(api, f"/issues/{held.pk}/transition/", {"to": "done"})
    refused_as_documented(built, "POST /api/v1/issues/{id}/transition/", move, "invalid_transition")
    for query, code in (("leased=maybe", "invalid"), ("page=9", "not_found")):
        listed = api.get(f"{V1}/issues/?{query}")
        refused_as_documented(built, "GET /api/v1/issues/", listed, code)


# --- the description: auth, errors, /mcp ------------------------------------------------


def snippet(description: str) -> str:
    [code] = re.findall(r"```python\n(.*?)```", description, re.DOTALL)
    return code


def test_the_description_tells_of_auth_errors_and_every_mcp_tool(built):
    description = built["info"]["description"]
    for said in ("Authorization: Bearer", '{"code": "...", "detail": "..."', "POST /mcp"):
        assert said in description
    for tool in TOOLS:
        assert f"| `{tool.name}` | `{tool.method} {tool.path}` |" in description
    assert "<id>" not in description.split("The tools, and the call")[1]  # escaped for Markdown


def test_operations_name_their_mcp_tools(built):
    ops = dict(operations(built))
    for tool in TOOLS:
        assert f"`{tool.name}`" in ops[f"{tool.method} {tool.path}"]["description"], tool.name


@pytest.mark.django_db(transaction=True)
def test_the_mcp_snippet_runs(built, live_server, workspace, capsys):
    code = snippet(built["info"]["description"])
    body, run = code.rsplit("asyncio.run(", 1)
    assert 'main("http://127.0.0.1:8000/mcp", "<key>")' in run
    namespace: dict[str, Any] = {}
    exec(compile(body, "snippet", "exec"), namespace)  # noqa: S102 - our own documentation
    _, key = ApiKey.issue(workspace, "snippet")
    asyncio.run(asyncio.wait_for(namespace["main"](f"{live_server.url}/mcp", key), 30))
    workflow, ready = capsys.readouterr().out.splitlines()
    assert "in_review" in json.loads(workflow)["states"]
    assert json.loads(ready)["results"] == []
