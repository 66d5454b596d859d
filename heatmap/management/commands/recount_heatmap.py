"""Rebuild the heatmap's daily rollups and the day counts of the health page and the
board from the rows they count."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from coordination.models import Workspace
from heatmap.rollups.recount import recount


class Command(BaseCommand):
    help = (
        "Rebuild the heatmap's rollups and the day counts from the rows (after rows were"
        " written with the triggers off); the triggers keep them exact otherwise."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="a workspace slug (default: every workspace)")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["workspace"]
        workspace_id = None
        if slug:
            workspace = Workspace.objects.filter(slug=slug).first()
            if workspace is None:
                raise CommandError(f"No workspace {slug!r}.")
            workspace_id = workspace.pk
        recount(workspace_id)
        self.stdout.write("Rollups recounted" + (f" for {slug}" if slug else ""))
