"""What the migrations' own functions need to run inside a test."""

import pytest
from django.db import connection


class Editor:
    """Enough of a schema editor for the migration's functions, inside a test
    transaction (SQLite's real one refuses to open inside a transaction)."""

    def __init__(self):
        self.connection = connection

    def execute(self, sql, params=None):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


@pytest.fixture
def editor() -> Editor:
    return Editor()
