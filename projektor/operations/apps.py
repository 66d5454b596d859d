from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "projektor.operations"
    label = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from projektor.operations import checks  # noqa: F401 - registers the system check
