from django.db import migrations


def reinstall(apps, schema_editor):
    """PostgreSQL's triggers again: a statement's missing days are made already
    counted, so a bulk load writes each day row once, and a claim's path is compared
    in the keys' collation, so its key is found by index, not by reading every key.
    The rows they keep are the same."""
    from heatmap.rollups import triggers

    triggers.install(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("heatmap", "0004_day_counts"),
    ]

    # Back at 0004 these triggers keep the same rows as its own.
    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop)]
