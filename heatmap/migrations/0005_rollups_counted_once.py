from django.db import migrations


def reinstall(apps, schema_editor):
    """The PostgreSQL insert trigger that makes a statement's missing days already
    counted, so a bulk load writes each day row once; the rows it keeps are the same."""
    from heatmap.rollups import triggers

    triggers.install(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("heatmap", "0004_day_counts"),
    ]

    # Back at 0004 these triggers keep the same rows as its own.
    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop)]
