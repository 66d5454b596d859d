"""File-claim paths compare byte for byte on PostgreSQL too (invariant 11 (overlap)).

A directory claim ``d/`` holds exactly the paths ``s`` with ``'d/' < s < 'd0'`` in
byte order, and the claim services find them with that range scan on the partial
unique index ``one_unreleased_claim_per_path``. A linguistic collation (``en_US.UTF-8``,
ICU) orders ``/`` and ``0`` by other rules, so the range would miss paths or take
strangers: the column gets the ``"C"`` collation, and the index is rebuilt with it.
Equality is unchanged (deterministic collations compare equal bytes equal). SQLite
compares text with ``BINARY``, byte order already, so it has nothing to do.
"""

from django.db import migrations

TABLE = "issue_file_claims"


def to_bytewise(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'ALTER TABLE {TABLE} ALTER COLUMN path TYPE varchar(1024) COLLATE "C"'
        )


def to_default(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'ALTER TABLE {TABLE} ALTER COLUMN path TYPE varchar(1024) COLLATE "default"'
        )


class Migration(migrations.Migration):
    dependencies = [("coordination", "0010_api_key_kinds")]

    operations = [migrations.RunPython(to_bytewise, to_default)]
