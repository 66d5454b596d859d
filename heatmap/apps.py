from django.apps import AppConfig


class HeatmapConfig(AppConfig):
    name = "heatmap"
    verbose_name = "Heatmap"

    def ready(self) -> None:
        from heatmap import paths  # noqa: F401  (registers the SQLite path function)
