"""JSON parsing that refuses, as a 400, what the database would refuse as a 500."""

import json
import math
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from platform_site.api.errors import InvalidPayload


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_storable(value: Any) -> None:
    """Raise InvalidPayload for values PostgreSQL refuses: NUL characters and
    non-finite numbers (a literal such as 1e400 parses to infinity)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidPayload("Strings must not contain the NUL character (\\u0000)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidPayload("Numbers must be finite")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Any = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            raw = stream.read() if stream is not None else b""
            data = json.loads(raw.decode(encoding), parse_constant=_refuse_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"The request body is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise ParseError("The request body is nested too deeply") from exc
        check_storable(data)
        return data
