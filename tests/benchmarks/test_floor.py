"""The server's floor answers what Projektor's ``GET /healthz`` answers, byte for byte
but the request id, so that the reference calls' floor is measured on the same bytes."""

from typing import Any

from django.test import Client

from benchmarks import floor_wsgi


def floor_answer() -> tuple[str, list[tuple[str, str]], bytes]:
    started: list[Any] = []
    body = b"".join(
        floor_wsgi.application(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz"},
            lambda status, headers: started.append((status, headers)),
        )
    )
    status, headers = started[0]
    return status, headers, body


def test_the_floor_answers_healthz_s_status_headers_and_body():
    real = Client().get("/healthz")
    status, headers, body = floor_answer()

    assert status == f"{real.status_code} {real.reason_phrase}"
    assert body == real.content
    real_headers = dict(real.items())
    floor_headers = dict(headers)
    assert floor_headers.keys() == real_headers.keys()
    for name, value in floor_headers.items():
        if name == "X-Request-ID":  # a fresh one on each real answer: its length only
            assert len(value) == len(real_headers[name])
        else:
            assert value == real_headers[name], name
