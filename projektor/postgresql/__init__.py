"""Django's PostgreSQL backend, with cursors whose statements are prepared (``base``)."""
