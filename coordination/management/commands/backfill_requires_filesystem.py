from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from coordination.models import Workspace
from coordination.services import backfill


class Command(BaseCommand):
    help = (
        "Set requires_filesystem on imported issues with positive evidence: a live lease, "
        "or a backlog/todo issue whose assignee's role contains cto, engineer, developer, "
        "devops or sre (any case) or whose department is exactly 'engineering'. "
        "Prints one line per issue with its evidence, then the count."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="print, change nothing")
        parser.add_argument("--workspace", help="only this workspace (slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = None
        if options["workspace"]:
            workspace = Workspace.objects.filter(slug=options["workspace"]).first()
            if workspace is None:
                raise CommandError(f"No workspace {options['workspace']!r}.")
        dry_run = options["dry_run"]
        found = backfill.backfill_requires_filesystem(dry_run=dry_run, workspace=workspace)
        for item in found:
            issue = item.issue
            self.stdout.write(
                f"issue {issue.pk} ({issue.workspace.slug}/{issue.project.key}, {issue.status}) "
                f"{issue.title!r}: {'; '.join(item.reasons)}"
            )
        verb = "would set" if dry_run else "set"
        prefix = "dry run: " if dry_run else ""
        self.stdout.write(f"{prefix}{verb} requires_filesystem on {len(found)} issue(s)")
