"""orjson behind DRF's interfaces: every body byte for byte what DRF's own JSON
renderer writes, every parse what DRF's own parser returns or refuses."""

import datetime as dt
import decimal
import io
import uuid
from dataclasses import dataclass

import pytest
from django.utils.functional import lazy
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from coordination.api.renderers import FastContentNegotiation, FastJSONParser, FastJSONRenderer

UTC = dt.UTC
lazy_text = lazy(lambda: "lazily translated", str)


@dataclass
class Point:
    x: int


DOCUMENTS = [
    {},
    [],
    {"id": 7, "name": "Ünïcødé ✓ 日本", "ok": True, "none": None, "neg": -3},
    {"at": dt.datetime(2026, 12, 4, 19, 0, 1, 123456, tzinfo=UTC)},
    {"at": dt.datetime(2026, 12, 4, 19, 0, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))},
    {"naive": dt.datetime(2026, 12, 4, 19, 0, 1, 999)},
    {"day": dt.date(2026, 12, 4), "time": dt.time(19, 0, 1, 5000)},
    {"span": dt.timedelta(seconds=90.5)},
    {"decimal": decimal.Decimal("12.50"), "uuid": uuid.UUID(int=0x1234567890ABCDEF)},
    {"separators": "a\u2028b\u2029c", "controls": '\x00\x01\x1f\t\n\r"\\/\x7f'},
    {"floats": [0.1, 1.5, -2.25, 1e-7, 123456.789], "big": 2**63 - 1},
    # a float in every place a value stands: first, last, alone, before a brace
    1e-7,
    [1e16],
    {"last": 0.00001},
    {"a": [2e-9, {"b": -1e22}], "c": 1e-5},
    # strings that hold what a float looks like: the bytes are DRF's either way
    {"at": "2026-12-05T06:00:00.123456Z", "odd": "x:1.5,", "exp": "[1e5]"},
    {"too big": 2**70, "tiny": -(2**70)},
    {1: "int key", "2": "str key"},
    {"set": {3}, "tuple": (1, 2), "lazy": lazy_text(), "bytes": b"raw"},
    {"nested": [{"a": [{"b": [1, {"c": None}]}]}]},
]


@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_the_body_is_byte_for_byte_drfs(document):
    assert FastJSONRenderer().render(document) == JSONRenderer().render(document)


def test_answers_with_times_are_written_by_orjson(monkeypatch):
    """Every answer holds times with fractions of a second; they are strings, not
    floats, so DRF's slower encoder is not asked to write them."""
    document = {
        "id": 3,
        "last_heartbeat_at": "2026-12-05T06:00:00.123456Z",
        "claims": [{"claimed_at": "2026-12-05T06:00:01.5Z", "path": "v1.2/a.py"}],
        "note": "build 1.2e3 took 0.5 s",
    }
    expected = JSONRenderer().render(document)

    def refused(*args, **kwargs):
        raise AssertionError("written by DRF's encoder")

    monkeypatch.setattr(JSONRenderer, "render", refused)
    assert FastJSONRenderer().render(document) == expected


def test_an_indented_answer_and_none_are_drfs():
    document = {"a": [1, 2]}
    indented = "application/json; indent=4"
    assert FastJSONRenderer().render(document, indented) == JSONRenderer().render(
        document, indented
    )
    assert FastJSONRenderer().render(None) == JSONRenderer().render(None) == b""


def test_what_drfs_encoder_refuses_is_refused():
    with pytest.raises(TypeError):
        JSONRenderer().render({"point": Point(1)})
    with pytest.raises(TypeError):
        FastJSONRenderer().render({"point": Point(1)})


BODIES = [
    b'{"issue": 3, "session": 4, "paths": ["src/a.py", "src/b.py"]}',
    b'{"name": "\\u00fcber \xc3\xbc \\ud83d\\ude00", "n": -1.5e3, "x": null, "t": true}',
    b'{"dup": 1, "dup": 2}',
    b"[1, 2, 18446744073709551616]",
    b'{"lone surrogate": "\\ud800"}',
]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_a_parse_is_drfs(body):
    assert FastJSONParser().parse(io.BytesIO(body)) == JSONParser().parse(io.BytesIO(body))


REFUSED = [
    b"",
    b"{",
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b"\xef\xbb\xbf{}",
    b'{"a": "\xff"}',
    b"{'single': 1}",
    b'{"a": 1} trailing',
]


@pytest.mark.parametrize("body", REFUSED, ids=range(len(REFUSED)))
def test_a_refusal_reads_as_drfs(body):
    with pytest.raises(ParseError) as drfs:
        JSONParser().parse(io.BytesIO(body))
    with pytest.raises(ParseError) as ours:
        FastJSONParser().parse(io.BytesIO(body))
    assert str(ours.value.detail) == str(drfs.value.detail)


def test_a_body_in_another_charset_is_read_as_drf_reads_it():
    body = '{"name": "über"}'.encode("latin-1")
    context = {"encoding": "latin-1"}
    assert FastJSONParser().parse(io.BytesIO(body), None, context) == {"name": "über"}
    assert JSONParser().parse(io.BytesIO(body), None, context) == {"name": "über"}


def test_the_api_answers_through_them():
    from rest_framework.settings import api_settings

    renderers, parsers = api_settings.DEFAULT_RENDERER_CLASSES, api_settings.DEFAULT_PARSER_CLASSES
    assert renderers == [FastJSONRenderer]
    assert parsers == [FastJSONParser]
    assert api_settings.DEFAULT_CONTENT_NEGOTIATION_CLASS is FastContentNegotiation


@pytest.mark.parametrize(
    "number", [1e-7, 0.00001, -2.5e-5, 1e16, 1.5e300, 0.1, 3.0, -0.0, decimal.Decimal("1E-7")]
)
def test_floats_are_written_as_python_writes_them(number):
    document = {"value": number, "list": [number, {"inner": number}]}
    assert FastJSONRenderer().render(document) == JSONRenderer().render(document)


@pytest.mark.parametrize(
    ("accept", "query"),
    [
        (None, ""),
        ("*/*", ""),
        ("application/json", ""),
        ("application/json; indent=4", ""),
        ("text/html", ""),
        ("text/html, application/json;q=0.9", ""),
        ("application/*", ""),
        ("*/*", "format=json"),
        ("*/*", "format=yaml"),
        ("application/json", "workspace=acme"),
    ],
)
def test_the_negotiation_answers_as_drfs(rf, accept, query):
    class YAML(BaseRenderer):
        media_type, format = "application/yaml", "yaml"

    headers = {} if accept is None else {"Accept": accept}
    request = Request(rf.get(f"/api/v1/workflow/?{query}", headers=headers))

    def negotiated(negotiation, renderers, suffix):
        try:
            renderer, media_type = negotiation.select_renderer(request, renderers, suffix)
        except Exception as error:  # noqa: BLE001 - a refusal must be the same too
            return type(error)
        return type(renderer), media_type

    for renderers in ([FastJSONRenderer()], [FastJSONRenderer(), YAML()], [YAML()]):
        for suffix in (None, "json", "yaml"):
            fast = negotiated(FastContentNegotiation(), renderers, suffix)
            assert fast == negotiated(DefaultContentNegotiation(), renderers, suffix)
