"""The MCP endpoint ``/mcp``: the REST API's agent operations as Model Context Protocol tools.

``tools`` is the table (tool name → REST call), ``schemas`` derives each tool's
input schema from the OpenAPI document, ``rest`` calls the REST view in-process,
``whoami`` answers the one tool that is no REST call, ``server`` is the MCP SDK
server, ``views`` the Django view that serves it.
"""
