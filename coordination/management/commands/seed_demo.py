from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from coordination.models import ApiKey, Issue, Project, Workspace

DEMO_ISSUES = [
    ("Add rate limiting to the public API", "Limit per key; 429 with Retry-After.", True),
    ("Write the Q3 strategy memo", "Two pages: goals, bets, risks.", False),
    ("Fix flaky login test", "Reproduce, then make it deterministic.", True),
    ("Draft release notes", "", False),
]


class Command(BaseCommand):
    help = "Create the demo workspace, an admin login and a fresh API key, and print them."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--password", default="projektor-demo")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        workspace, _ = Workspace.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
        project, _ = Project.objects.get_or_create(
            workspace=workspace, key="core", defaults={"name": "Core platform"}
        )
        for title, description, filesystem in DEMO_ISSUES:
            Issue.objects.get_or_create(
                workspace=workspace,
                project=project,
                title=title,
                defaults={"description": description, "requires_filesystem": filesystem},
            )
        User = get_user_model()
        admin, created = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            admin.set_password(options["password"])
            admin.save()
        workspace.members.add(admin)
        _, raw = ApiKey.issue(workspace, "demo")
        password = options["password"] if created else "(unchanged)"
        self.stdout.write(
            "\nProjektor demo is ready.\n"
            f"  admin login : http://127.0.0.1:8000/admin/  user admin  password {password}\n"
            f"  API key     : {raw}\n"
            f"  try         : curl -H 'Authorization: Bearer {raw}' "
            "http://127.0.0.1:8000/api/v1/issues/\n"
            "  API docs    : http://127.0.0.1:8000/api/v1/docs/\n"
        )
