"""Every registered admin changelist fits its box at a laptop's width and a desktop's,
over the demo's data, a crowded second workspace (everything long that can be) and
ids as a database of a year's fleets has them. Screenshots are saved beside the test
(``PROJEKTOR_SCREENSHOTS`` chooses the folder)."""

from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection, models
from django.urls import reverse

from coordination.models import Workspace
from tests.conftest import BROWSER_WAIT
from tests.coordination.admin_helpers import crowd
from tests.coordination.test_admin_site import save_page, screenshots

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1280, 1400)  # px: a laptop's window and a desktop's
LONG_IDS = 1_000_000
PASSWORD = "demo-admin-pw"
# The table against the box that holds it, and the page against the window.
MEASURE = """
const table = document.getElementById('result_list'), page = document.documentElement;
return {table: [table.scrollWidth, table.parentElement.clientWidth],
        page: [page.scrollWidth, page.clientWidth], window: window.innerWidth};
"""


def changelists() -> list[str]:
    return [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]


@contextmanager
def ids_from(start: int) -> Iterator[None]:
    """Every coordination table's next id at least ``start``, then as it was: ids as
    long as a long-lived database's, without lengthening the other tests' ones."""
    tables = [
        model._meta.db_table
        for model in apps.get_app_config("coordination").get_models()
        if isinstance(model._meta.pk, models.AutoField | models.BigAutoField)  # numbered rows
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            undo = []
            for table in tables:
                cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
                (sequence,) = cursor.fetchone()
                if sequence is None:
                    continue
                cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
                undo.append(("SELECT setval(%s, %s, %s)", [sequence, *cursor.fetchone()]))
                cursor.execute("SELECT setval(%s, %s)", [sequence, start])
        else:
            cursor.execute("SELECT name, seq FROM sqlite_sequence")
            undo = [("DELETE FROM sqlite_sequence", [])] + [
                ("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", list(row))
                for row in cursor.fetchall()
            ]
            for table in tables:
                cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [table])
                cursor.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, start]
                )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for statement, params in undo:
                cursor.execute(statement, params)


def test_every_changelist_fits_its_box(browser, live_server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with ids_from(LONG_IDS):
        call_command(
            "seed_demo", "--agents", "6", "--days", "4", "--password", PASSWORD, stdout=StringIO()
        )
        # A second workspace, long named: every list's workspace column and filter show.
        crowd(Workspace.objects.create(slug="acme-corporation-platform", name="Acme Corporation"))
        Group.objects.create(name="release managers of the platform services")
    folder = screenshots(tmp_path)

    browser.get(f"{live_server.url}/admin/")
    wait = WebDriverWait(browser, BROWSER_WAIT)
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("admin")
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait.until(ec.presence_of_element_located((By.ID, "dashboard")))

    too_wide = {}
    for width in WIDTHS:
        browser.set_window_size(width, 900)
        for address in changelists():
            browser.get(live_server.url + address)
            rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
            assert rows, f"{address} lists nothing to measure"
            widths = browser.execute_script(MEASURE)
            assert widths["window"] == width
            name = address.strip("/").replace("/", "-")
            save_page(browser, folder / f"{width}-{name}.png")
            (table, box), (page, window) = widths["table"], widths["page"]
            if table > box or page > window:
                too_wide[f"{address} at {width} px"] = widths
    assert too_wide == {}
