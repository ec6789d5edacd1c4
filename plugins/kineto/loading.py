"""Parse a Chrome-trace JSON document: fast with orjson, exact or lenient when it must be."""

from __future__ import annotations

import codecs
import json
import re
from decimal import Decimal
from typing import Any

import orjson
from tracekit import TraceReadError

# Kineto before 2026-07 did not escape '"' inside names (pytorch#146900). Such a name is
# followed by one of the keys Kineto writes after "name"; everything up to that is the name.
_UNESCAPED_NAME = re.compile(
    rb'"name": "((?:[^"\\\n]|\\.)*"(?:[^\n])*?)"(?=, "(?:pid|tid|ts|ph|cat|id|s|args|dur)")')
# NaN and Infinity are not JSON, but Python's json.dump writes them (allow_nan is its
# default), so traces made or edited in Python can hold them where a number belongs.
_NON_FINITE = re.compile(rb"[\[:,]\s*-?(?:NaN|Infinity)\s*[,\]}]")
# A UTF-16 surrogate escape without its partner: Python's json accepts it, Arrow cannot.
LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
    rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_JSON_ERRORS = (orjson.JSONDecodeError, json.JSONDecodeError, UnicodeDecodeError, RecursionError)


def parse_document(data: bytes, path: str, *, exact: bool = False) -> tuple[Any, list[str]]:
    """Return the parsed JSON and notes on any repair that was needed.

    ``exact=True`` parses every float as a Decimal, for timestamps that a float cannot hold.
    A UTF-8 byte-order mark is skipped; ``NaN``/``Infinity`` tokens are read as the floats
    they name (the converter then counts them as unusable numbers), and noted.
    """
    notes: list[str] = []
    if not data.strip():
        raise TraceReadError("no JSON: the file holds only white space", path=path)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
        notes.append("skipped a UTF-8 byte-order mark")
    try:
        return _loads(data, exact, notes), notes
    except _JSON_ERRORS as first:
        repaired, count = _UNESCAPED_NAME.subn(_escape_name, data)
        if count:
            try:
                doc = _loads(repaired, exact, notes)
                notes.append(f"repaired {count} names with unescaped quotes")
                return doc, notes
            except _JSON_ERRORS:
                pass
        raise _describe(first, data, path) from None


def _loads(data: bytes, exact: bool, notes: list[str]) -> Any:
    if not exact:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if "infinity" not in str(exc) and not _NON_FINITE.search(data):
                raise
    if LONE_SURROGATE.search(data):
        raise UnicodeDecodeError("utf-8", data, 0, 1, "a lone UTF-16 surrogate escape")
    constants = []

    def constant(name: str) -> float:
        constants.append(name)
        return float(name)

    doc = json.loads(data.decode("utf-8"), parse_float=Decimal if exact else float,
                     parse_constant=constant)
    if constants and not exact:
        notes.append(f"read {len(constants)} NaN/Infinity tokens (not JSON) as numbers")
    return doc


def _escape_name(match: re.Match[bytes]) -> bytes:
    inner = re.sub(rb'(?<!\\)"', rb'\\"', match.group(1))
    return b'"name": "' + inner + b'"'


def _describe(exc: Exception, data: bytes, path: str) -> TraceReadError:
    if isinstance(exc, RecursionError) or "depth limit" in str(exc):
        return TraceReadError("the JSON is nested too deeply to be a trace", path=path)
    if isinstance(exc, UnicodeDecodeError) or "utf-8" in str(exc).lower():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            hint = " (UTF-16, or binary data?)" if b"\0" in data[:4096] else ""
            return TraceReadError(f"not valid UTF-8 text{hint}", path=path,
                                  location=f"line {line}")
        if LONE_SURROGATE.search(data):
            return TraceReadError("invalid JSON: a string holds a lone UTF-16 surrogate "
                                  "escape (\\ud800-\\udfff)", path=path)
        return TraceReadError("not valid UTF-8 text", path=path)
    pos = getattr(exc, "pos", None)
    lineno = getattr(exc, "lineno", None)
    colno = getattr(exc, "colno", None)
    msg = getattr(exc, "msg", str(exc))
    # orjson's pos counts characters, not bytes: its message says when the data ran out.
    if "end of data" in msg or (pos is not None and len(data.rstrip()) - pos <= 1):
        return TraceReadError(
            "the JSON ends early (a truncated trace, e.g. a .tmp file of a profiler "
            "that did not finish)", path=path, location=f"line {lineno}")
    return TraceReadError(f"invalid JSON: {msg}", path=path,
                          location=f"line {lineno} column {colno}")
