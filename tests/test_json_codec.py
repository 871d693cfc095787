"""The API's JSON parser and renderer (orjson, with the standard library where
orjson declines): same values in and out as before, same refusals."""

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from rest_framework.exceptions import ParseError

from platform_site.api.errors import InvalidPayload
from platform_site.api.parsers import StrictJSONParser
from platform_site.api.renderers import FastJSONRenderer


def parse(raw: bytes, encoding: str = "utf-8") -> object:
    return StrictJSONParser().parse(io.BytesIO(raw), parser_context={"encoding": encoding})


def render(data: object) -> bytes:
    return FastJSONRenderer().render(data)


def test_parses_what_it_always_did():
    assert parse(b'{"a": [1, 2.5, "\\u00e9", null, true]}') == {"a": [1, 2.5, "é", None, True]}


def test_an_integer_beyond_64_bits_is_read_by_the_standard_library():
    assert parse(b'{"n": 123456789012345678901234567890}') == {"n": 123456789012345678901234567890}


@pytest.mark.parametrize(
    ("raw", "error", "words"),
    [
        (b'{"a": NaN}', ParseError, "not valid JSON"),
        (b'{"a": Infinity}', ParseError, "not valid JSON"),
        (b'{"a": 1e400}', InvalidPayload, "finite"),
        (b'{"a": "\\ud800"}', InvalidPayload, "lone surrogates"),
        (b'{"a": "\\u0000"}', InvalidPayload, "NUL"),
        (b"\xff\xfe", ParseError, "UTF-8"),
        (b"", ParseError, "not valid JSON"),
        (b'{"a": 1,}', ParseError, "not valid JSON"),
        (b"[" * 65 + b"]" * 65, InvalidPayload, "nested more than 64"),
    ],
)
def test_refuses_what_it_always_refused_in_the_same_words(raw, error, words):
    with pytest.raises(error, match=words):
        parse(raw)


def test_another_charset_is_read_by_the_standard_library():
    assert parse('{"a": "é"}'.encode("latin-1"), encoding="latin-1") == {"a": "é"}


def test_renders_compact_utf8():
    assert render({"a": [1, "é", None]}) == '{"a":[1,"é",null]}'.encode()


def test_line_separators_are_escaped_as_drf_did():
    assert render({"t": "a\u2028b\u2029c"}) == b'{"t":"a\\u2028b\\u2029c"}'


def test_datetimes_and_decimals_as_drf_writes_them():
    moment = datetime(2026, 11, 24, 9, 30, 1, 123456, tzinfo=UTC)
    assert render({"at": moment, "d": Decimal("1.50")}) == (
        b'{"at":"2026-11-24T09:30:01.123456Z","d":1.5}'
    )


def test_what_orjson_cannot_write_the_standard_encoder_does():
    assert render({"n": 2**70, 1: "int key"}) == (b'{"n":1180591620717411303424,"1":"int key"}')


def test_nothing_renders_as_an_empty_body():
    assert render(None) == b""
