"""The MCP endpoint ``/mcp``: the REST API's agent operations as Model Context Protocol tools.

``tools`` is the table (tool name → REST call), ``schemas`` derives each tool's
input schema from the OpenAPI document, ``rest`` calls the REST view in-process,
``whoami`` is the one tool with a schema of its own (``GET /keys/me/``), ``server`` is the MCP SDK
server, ``views`` the Django view that serves it.
"""
