from typing import Any

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.core.management import call_command
from django.db.models.signals import post_migrate


def create_cache_tables(using: str = "default", **kwargs: Any) -> None:
    """The database caches' tables (the shared rate-limit counters live in one), made
    with the schema, so ``migrate`` is the only step; it skips tables that exist."""
    from coordination.services.rate_limits import prepare_counter_table

    call_command("createcachetable", database=using, verbosity=0)
    prepare_counter_table(using)


class CoordinationConfig(AppConfig):
    default = True  # this module holds two configs; this one is the app's
    name = "coordination"
    verbose_name = "Coordination"

    def ready(self) -> None:
        from coordination.api.reference import hooks  # noqa: F401  (registers the auth scheme)
        from coordination.db import columns

        columns.register()  # the statements' column lists, from the models

        post_migrate.connect(create_cache_tables, sender=self)


class ProjektorAdminConfig(admin_apps.AdminConfig):
    """The stock admin app with Projektor's site (branding and the dashboard)."""

    default = False
    default_site = "coordination.admin_site.ProjektorAdminSite"
