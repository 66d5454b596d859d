"""JSON in and out of the API through orjson, byte for byte what DRF's own JSON
renderer and parser give.

The request path spends more on encoding and decoding than its small bodies warrant;
orjson does the same work in C. What keeps the bytes identical:

- datetimes, dates and times go through DRF's encoder (``OPT_PASSTHROUGH_DATETIME``):
  ISO 8601 with ``Z`` and milliseconds, as DRF writes them; decimals, lazy strings,
  sets and querysets likewise (orjson calls ``default`` for what it does not know);
  dataclasses too (``OPT_PASSTHROUGH_DATACLASS``), which DRF's encoder refuses;
- U+2028 and U+2029 escaped as DRF escapes them;
- a body with a number that has a fraction or an exponent is written by DRF: orjson
  writes some floats differently from Python (``1e-7``, ``0.00001``); the check is a
  scan of the bytes for such a number standing as a value (between ``:``, ``,`` or
  ``[`` and ``,``, ``]`` or ``}``), so a time inside a string (``"…T06:00:00.123Z"``)
  is not one, and a string that merely looks like one costs only the slow path;
- anything orjson refuses (keys that are not strings, integers beyond 64 bits, an
  indented answer, a non-UTF-8 body, a document it cannot parse) goes to DRF's
  renderer or parser itself, so an error reads exactly as before.
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterable, Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

ENCODE_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
LINE_SEPARATOR, PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()
UTF_8 = codecs.lookup("utf-8").name
JSON = "application/json"
# A number with a fraction or an exponent, whole, as a value: orjson writes no spaces,
# so a value starts the body or follows a colon, comma or bracket, and ends it or meets
# a comma or a closing bracket. Every answer's times ("2026-12-05T06:00:00.123456Z")
# hold ":00.123456", which a scan for digits then "." alone took for a float.
FLOAT = re.compile(
    rb"(?:^|[:,\[])-?[0-9]+(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)(?:[,\]}]|$)"
)


class FastJSONRenderer(JSONRenderer):
    """DRF's ``JSONRenderer`` (compact, not ASCII-only: DRF's defaults), through orjson."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        context = renderer_context or {}
        if (
            data is None
            or not self.compact
            or self.ensure_ascii
            or self.get_indent(accepted_media_type or "", context) is not None
        ):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            body = orjson.dumps(data, default=self.encoder_class().default, option=ENCODE_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if FLOAT.search(body):
            return super().render(data, accepted_media_type, renderer_context)
        if LINE_SEPARATOR in body or PARAGRAPH_SEPARATOR in body:
            body = body.replace(LINE_SEPARATOR, b"\\u2028").replace(PARAGRAPH_SEPARATOR, b"\\u2029")
        return body


class FastJSONParser(JSONParser):
    """DRF's ``JSONParser`` through orjson; DRF's own parser for anything orjson
    refuses, so that a malformed body is answered with DRF's message."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        if codecs.lookup(encoding).name != UTF_8:
            return super().parse(stream, media_type, parser_context)
        raw = stream.read()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return super().parse(io.BytesIO(raw), media_type, parser_context)


class FastContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with its answer for the Accept headers agents send written
    down: no Accept, ``*/*`` or ``application/json``, no ``?format=`` and no format
    suffix, and a JSON renderer first. DRF parses the header into media types and
    ranks them on every request; for these headers it always picks the first renderer
    with ``application/json``. Anything else is DRF's own negotiation."""

    PLAIN_ACCEPT = frozenset({"", "*/*", "application/json"})

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)  # DRF passes a list; the base class takes any iterable
        if (
            format_suffix is None
            and renderers
            and renderers[0].media_type == JSON
            and request.META.get("HTTP_ACCEPT", "") in self.PLAIN_ACCEPT
            and not request.META.get("QUERY_STRING")
        ):
            return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)
