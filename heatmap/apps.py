from django.apps import AppConfig


class HeatmapConfig(AppConfig):
    name = "heatmap"
    verbose_name = "Heatmap"
