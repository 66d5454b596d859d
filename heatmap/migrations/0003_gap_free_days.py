from django.db import migrations, models


def fill_every_day(apps, schema_editor):
    """The triggers that keep a row for every day of a key, then those rows for the
    history so far."""
    from heatmap.rollups import triggers
    from heatmap.rollups.recount import recount

    triggers.install(schema_editor.connection)
    recount()


class Migration(migrations.Migration):
    dependencies = [
        ("heatmap", "0002_rollup_totals"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="rollupday",
            index=models.Index(fields=["day", "key", "before"], name="rollup_days_by_day"),
        ),
        # Back at 0002 the filled days read the same, and these triggers keep them.
        migrations.RunPython(fill_every_day, migrations.RunPython.noop),
    ]
