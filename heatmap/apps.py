from django.apps import AppConfig


class HeatmapConfig(AppConfig):
    name = "heatmap"
    verbose_name = "Heatmap"

    def ready(self) -> None:
        from coordination.services import bulk
        from heatmap import paths  # noqa: F401  (registers the SQLite path function)
        from heatmap.rollups.bulk import loading

        bulk.register(loading)
