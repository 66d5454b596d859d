"""The statements' column lists (``sql.COLUMNS``), derived from the models.

``sql`` imports nothing from Django (the bench's direct ceiling sends its statements
without it), so it cannot read the models itself: ``register`` fills its lists when
the app is ready (``CoordinationConfig.ready``).
"""

from django.apps import apps

from coordination.db import sql


def model_columns() -> dict[str, tuple[str, ...]]:
    """Each coordination model's table and its concrete columns, in the model's field
    order: the order of the ORM's own SELECT and of ``Model.from_db``."""
    return {
        model._meta.db_table: tuple(str(field.column) for field in model._meta.concrete_fields)
        for model in apps.get_app_config("coordination").get_models()
    }


def register() -> None:
    sql.set_columns(model_columns())
