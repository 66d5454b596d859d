"""The site's own answers around the pages: a favicon for every page, with DEBUG on
and off (WhiteNoise serves it, from the finders or from ``collectstatic``'s copy),
and a login page that links to nothing that leads back to it."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client, override_settings

from projektor.urls import FAVICON

pytestmark = pytest.mark.django_db
ICON_URL = f"/static/{FAVICON}"
ICO_MAGIC = b"\x00\x00\x01\x00"  # reserved 0, type 1 (icon)


def favicon_bytes() -> bytes:
    found = finders.find(FAVICON)
    assert found, FAVICON
    return Path(found).read_bytes()


def fetch_favicon(client: Client) -> bytes:
    """``/favicon.ico`` as a browser fetches it: the redirect, then the file."""
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == ICON_URL
    icon = client.get(ICON_URL)
    assert icon.status_code == 200, icon
    assert icon["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")
    return b"".join(icon.streaming_content)


def test_the_favicon_is_an_icon_of_two_sizes():
    data = favicon_bytes()
    assert data.startswith(ICO_MAGIC) and int.from_bytes(data[4:6], "little") == 2


def test_the_favicon_is_served_with_debug_on():
    with override_settings(DEBUG=True):  # WhiteNoise reads it when a client first asks
        assert fetch_favicon(Client()) == favicon_bytes()


def test_the_favicon_is_served_with_debug_off_after_collectstatic(tmp_path):
    assert not settings.DEBUG
    with override_settings(STATIC_ROOT=tmp_path):
        # The large packaged files are left out of this copy: only ours matter here.
        skip = ["plotly", "drf_spectacular_sidecar", "admin", "rest_framework"]
        call_command("collectstatic", interactive=False, verbosity=0, ignore_patterns=skip)
        assert (tmp_path / FAVICON).read_bytes() == favicon_bytes()
        assert fetch_favicon(Client()) == favicon_bytes()


def test_the_pages_name_the_favicon(client, django_user_model):
    login = client.get("/login/").content.decode()
    assert f'<link rel="icon" href="{ICON_URL}"' in login
    django_user_model.objects.create_superuser("root", password="root-pw")
    client.login(username="root", password="root-pw")
    workspaces = client.get("/workspaces/").content.decode()
    assert f'<link rel="icon" href="{ICON_URL}"' in workspaces


def links(html: str) -> list[str]:
    return re.findall(r'<a\b[^>]*\bhref="([^"]*)"', html)


@pytest.mark.parametrize("query", ["", "?next=/workspaces/"])
def test_the_login_page_links_neither_to_itself_nor_home(client, query):
    response = client.get(f"/login/{query}")
    assert response.status_code == 200
    # Logged out, home ("/") sends you back to the login page.
    assert client.get("/")["Location"].startswith("/login/")
    hrefs = links(response.content.decode())
    assert "/api/v1/docs/" in hrefs
    assert not [href for href in hrefs if href == "/" or href.startswith("/login/")], hrefs
    assert '<span class="brand">Projektor</span>' in response.content.decode()
