from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from coordination.models import ApiKey, Workspace


class Command(BaseCommand):
    help = "Create an API key for a workspace (created if missing); prints only the key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace", help="workspace slug")
        parser.add_argument("--name", default="", help="a label for the key")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["workspace"]
        workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
        _, raw = ApiKey.issue(workspace, options["name"])
        self.stdout.write(raw)
