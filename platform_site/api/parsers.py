"""JSON parsing that refuses, as a 400, what the database would refuse as a 500."""

import json
import math
import re
from typing import Any

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from platform_site.api.errors import InvalidPayload


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


MAX_DEPTH = 64
# orjson reads an integer beyond 64 bits as a float, losing digits: a body
# with that many digits in a row is read by the standard library, exactly.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def check_storable(value: Any) -> None:
    """Raise InvalidPayload for values the database or the JSON encoder would
    refuse later, as a 500: NUL characters and lone surrogates (PostgreSQL
    stores neither), non-finite numbers (a literal such as 1e400 parses to
    infinity) and nesting deep enough to exhaust recursion downstream."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidPayload("Strings must not contain the NUL character (\\u0000)")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidPayload("Strings must be valid Unicode (no lone surrogates)") from None
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidPayload("Numbers must be finite")
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidPayload(f"JSON is nested more than {MAX_DEPTH} levels deep")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Any = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        if encoding.lower() in ("utf-8", "utf8") and not _LONG_DIGITS.search(raw):
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                # What orjson refuses the standard library may take (an
                # integer beyond 64 bits, a lone surrogate that
                # check_storable names) or refuse in its own words: it
                # decides, as it always has.
                pass
            else:
                check_storable(data)
                return data
        try:
            data = json.loads(raw.decode(encoding), parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise ParseError(f"The request body is not valid JSON: {exc}") from exc
        except (ValueError, LookupError):
            # Undecodable bytes, a charset that is no text encoding, an
            # integer too long to read: Python's own words would mean nothing.
            raise ParseError(
                "The request body is not valid JSON in UTF-8 (or the charset it names)"
            ) from None
        except RecursionError as exc:
            raise ParseError("The request body is nested too deeply") from exc
        check_storable(data)
        return data
