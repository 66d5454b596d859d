"""Each tool's input schema is derived from its REST route."""

import pytest

from coordination.mcp.schemas import derived_input_schema, openapi_document
from coordination.tools import TOOLS as TOOL_TABLE

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_tool_schema_comes_from_its_rest_route():
    document = openapi_document()
    for tool in TOOL_TABLE:
        schema = derived_input_schema(tool, document)  # MissingOperation if the route is gone
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        if tool.url_id_is_name:  # a resource's name, as the route's pattern
            url_id = schema["properties"][tool.url_id]
            assert url_id["type"] == "string" and url_id["pattern"].startswith("^")
            assert url_id["description"] == "The resource's name."
        elif tool.url_id:
            assert schema["properties"][tool.url_id]["type"] == "integer"
        if tool.url_id:
            assert tool.url_id in schema["required"]
