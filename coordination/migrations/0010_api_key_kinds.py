"""Key kinds (invariant 13 (the key is the actor)): every existing key becomes a ``fleet`` key that may force,
as it behaved before; agent keys name their agent, of their own workspace.

The agent link is guarded like the links of 0003 (invariant 9 (workspace isolation)), with 0003's own
triggers: a key may name only an agent of its workspace, and an agent named by a key
cannot move to another workspace. They are installed last, after SQLite has rebuilt
the key table for the new NOT NULL columns; a later migration that rebuilds
``coordination_apikey`` on SQLite must take them down around the rebuild, as 0005
does for the issue table.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

guards = importlib.import_module("coordination.migrations.0003_workspace_links")

LINKS = [("api_key_agent", "coordination_apikey", "agent_id", "coordination_agent")]


def install_guards(apps, schema_editor) -> None:
    install, _ = guards.builders(schema_editor.connection.vendor)
    guards.execute(schema_editor, [sql for link in LINKS for sql in install(*link)])


def remove_guards(apps, schema_editor) -> None:
    _, remove = guards.builders(schema_editor.connection.vendor)
    guards.execute(schema_editor, [sql for link in LINKS for sql in remove(*link)])


class Migration(migrations.Migration):

    dependencies = [
        ('coordination', '0009_webhooks'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentsession',
            name='api_key',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='coordination.apikey'),
        ),
        migrations.AddField(
            model_name='apikey',
            name='agent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='coordination.agent'),
        ),
        migrations.AddField(
            model_name='apikey',
            name='can_force',
            field=models.BooleanField(default=True, help_text='May take file claims from their holders (force).'),
        ),
        migrations.AddField(
            model_name='apikey',
            name='expires_at',
            field=models.DateTimeField(blank=True, help_text='From then on the key is refused, as if revoked.', null=True),
        ),
        migrations.AddField(
            model_name='apikey',
            name='kind',
            field=models.CharField(choices=[('fleet', 'Fleet'), ('agent', 'Agent'), ('read', 'Read')], default='fleet', max_length=10),
        ),
        migrations.AddConstraint(
            model_name='apikey',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('agent__isnull', False), ('kind', 'agent')), models.Q(('agent__isnull', True), ('kind', 'fleet')), models.Q(('agent__isnull', True), ('can_force', False), ('kind', 'read')), _connector='OR'), name='api_key_kind_agent'),
        ),
        migrations.RunPython(install_guards, remove_guards, elidable=False),
    ]
