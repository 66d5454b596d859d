"""The API reference at /api/v1/docs/ (the OpenAPI document at /api/v1/schema/):
drf-spectacular's settings (``spectacular``, read by projektor/settings.py), the
refusals each operation answers (``refusals``, ``shared``), the example bodies
(``examples``), and the public views and hooks that serve and finish the document
(``views``, ``hooks``). Nothing here is imported by settings but ``spectacular``,
which is plain data."""
