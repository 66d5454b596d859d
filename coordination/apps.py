from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class CoordinationConfig(AppConfig):
    default = True  # this module holds two configs; this one is the app's
    name = "coordination"
    verbose_name = "Coordination"

    def ready(self) -> None:
        from coordination.api import schema  # noqa: F401  (registers the auth scheme)


class ProjektorAdminConfig(admin_apps.AdminConfig):
    """The stock admin app with Projektor's site (branding and the dashboard)."""

    default = False
    default_site = "coordination.admin_site.ProjektorAdminSite"
