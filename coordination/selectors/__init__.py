"""Read-only queries, scoped by workspace, one module per concern.

``lookups`` resolves the references a request names and raises the right domain error:
a URL id (or the ``issue`` of a body) that is not in the workspace is 404; any other
unknown reference in a body is 400 (docs/design.md, error shape). Each list the API
filters is a ``*_list(*, workspace, filters)`` that reads ``filters`` (the query
parameters) through its FilterSet (``filtering``). ``dashboard`` is what the managers'
pages and the admin dashboard show of each workspace.
"""
