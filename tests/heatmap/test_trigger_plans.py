"""The rollup triggers find a path's key by its index, however many keys there are
(invariant 14 (rollups); PostgreSQL, whose triggers plan their statements).

A claim's path is in the ``"C"`` collation (coordination 0011), a key's in the
database's: compared as they come, the key's unique index cannot answer, and every
claim read every key of every workspace (25 ms a claim over 80,000 keys)."""

import pytest
from django.db import connection, transaction

from coordination.models import ClaimConflict, FileClaim
from heatmap.rollups import triggers

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


KEYS = 500


def keys_read() -> int:
    """Rows of the keys' table read so far in this transaction, by scans or indexes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'heatmap_rollup_keys'"
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("mode", ["claims", "contention"])
def test_a_writer_reads_its_keys_by_index(workspace, make_issue, mode):
    issue = make_issue()

    def write(*paths: str) -> None:
        if mode == "claims":
            FileClaim.objects.bulk_create(
                FileClaim(workspace=workspace, issue=issue, path=path, release_reason="released")
                for path in paths
            )
            FileClaim.objects.filter(path__in=paths).delete()
        else:
            ClaimConflict.objects.bulk_create(
                ClaimConflict(
                    workspace=workspace, path=path, rejected_issue=issue, holding_issue=issue
                )
                for path in paths
            )

    write(*(f"src/m{n}.py" for n in range(KEYS)))  # keys of one workspace and project
    with transaction.atomic():
        with connection.cursor() as cursor:
            # A test's tables are small enough to scan; where an index can answer,
            # this makes the planner take it.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("ANALYZE heatmap_rollup_keys")
        triggers.install(connection)  # planned afresh, on these keys
        before = keys_read()
        write("src/m7.py")  # its key found (and, for a claim, found again to remove it)
        write("src/new.py")  # a new key made
        assert keys_read() - before < 20  # not KEYS per write
