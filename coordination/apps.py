from django.apps import AppConfig


class CoordinationConfig(AppConfig):
    name = "coordination"
    verbose_name = "Coordination"

    def ready(self) -> None:
        from coordination.api import schema  # noqa: F401  (registers the auth scheme)
