"""Parse a Chrome-trace JSON document: fast with orjson, exact or lenient when it must be."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import orjson
from tracekit.errors import TraceReadError

# Kineto before 2026-07 did not escape '"' inside names (pytorch#146900). Such a name is
# followed by one of the keys Kineto writes after "name"; everything up to that is the name.
_UNESCAPED_NAME = re.compile(
    rb'"name": "((?:[^"\\\n]|\\.)*"(?:[^\n])*?)"(?=, "(?:pid|tid|ts|ph|cat|id|s|args|dur)")')


def parse_document(data: bytes, path: str, *, exact: bool = False) -> tuple[Any, list[str]]:
    """Return the parsed JSON and notes on any repair that was needed.

    ``exact=True`` parses every float as a Decimal, for timestamps that a float cannot hold.
    """
    notes: list[str] = []
    try:
        return _loads(data, exact), notes
    except (orjson.JSONDecodeError, json.JSONDecodeError, UnicodeDecodeError) as first:
        repaired, count = _UNESCAPED_NAME.subn(_escape_name, data)
        if count:
            try:
                doc = _loads(repaired, exact)
                notes.append(f"repaired {count} names with unescaped quotes")
                return doc, notes
            except (orjson.JSONDecodeError, json.JSONDecodeError, UnicodeDecodeError):
                pass
        raise _describe(first, data, path) from first


def _loads(data: bytes, exact: bool) -> Any:
    if exact:
        return json.loads(data.decode("utf-8"), parse_float=Decimal)
    return orjson.loads(data)


def _escape_name(match: re.Match[bytes]) -> bytes:
    inner = re.sub(rb'(?<!\\)"', rb'\\"', match.group(1))
    return b'"name": "' + inner + b'"'


def _describe(exc: Exception, data: bytes, path: str) -> TraceReadError:
    if isinstance(exc, UnicodeDecodeError) or "utf-8" in str(exc).lower():
        return TraceReadError("not valid UTF-8 text", path=path)
    pos = getattr(exc, "pos", None)
    lineno = getattr(exc, "lineno", None)
    colno = getattr(exc, "colno", None)
    msg = getattr(exc, "msg", str(exc))
    if pos is not None and len(data.rstrip()) - pos <= 1:
        return TraceReadError(
            "the JSON ends early (a truncated trace, e.g. a .tmp file of a profiler "
            "that did not finish)", path=path, location=f"line {lineno}")
    return TraceReadError(f"invalid JSON: {msg}", path=path,
                          location=f"line {lineno} column {colno}")
