"""``args`` JSON objects to TrackEvent debug annotations, with interned top-level names.

This runs once per written slice, so it avoids per-field function calls: each key's
``name_iid`` bytes are computed once, small varints come from a table, and encoded
(key, value) pairs are cached (values such as ``cbid``, ``stream`` or a kernel's ``grid`` repeat
across millions of events).
"""

from __future__ import annotations

import struct
from typing import Any

import orjson
from tracekit.plugins.perfetto.wire import encode_message, encode_varint

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SMALL = [encode_varint(i) for i in range(1 << 14)]
_DOUBLE = struct.Struct("<d").pack
# DebugAnnotation tags: bool_value(2), int_value(4), double_value(5), string_value(6);
# TrackEvent.debug_annotations is field 4, length-delimited.
_BOOL, _INT, _DOUBLE_TAG, _STRING, _ANNOTATION = b"\x10", b"\x20", b"\x29", b"\x32", b"\x22"
_CACHE_LIMIT = 200_000


def _varint(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 16384 else encode_varint(n)


class AnnotationEncoder:
    """Encodes args objects; remembers which names it interned since the last ``new_names``."""

    def __init__(self) -> None:
        self.iids: dict[str, int] = {}
        self._heads: dict[str, bytes] = {}
        self._fresh: list[tuple[int, str]] = []
        self._pairs: dict[tuple[str, Any], bytes] = {}

    def encode(self, args_json: str | None) -> bytes:
        """Encoded TrackEvent.debug_annotations fields for one args object."""
        if not args_json:
            return b""
        try:
            obj = orjson.loads(args_json)
        except orjson.JSONDecodeError:
            obj = {"args": args_json}
        if type(obj) is not dict:
            obj = {"args": obj}
        pairs = self._pairs
        parts = []
        for k, v in obj.items():
            t = type(v)
            hashable = t is int or t is str or t is float or t is bool or v is None
            key = (k, t, v) if hashable else (k, t, orjson.dumps(v))
            enc = pairs.get(key)
            if enc is None:
                head = self._heads.get(k) or self._head(k)
                body = head + _value(v)
                enc = _ANNOTATION + _varint(len(body)) + body
                if len(pairs) < _CACHE_LIMIT:
                    pairs[key] = enc
            parts.append(enc)
        return b"".join(parts)

    def _head(self, name: str) -> bytes:
        iid = self.iids[name] = len(self.iids) + 1
        self._fresh.append((iid, name))
        head = self._heads[name] = b"\x08" + _varint(iid)
        return head

    def new_names(self) -> list[tuple[int, str]]:
        """Names interned since the previous call, to emit before their first use."""
        fresh, self._fresh = self._fresh, []
        return fresh


def _value(v: Any) -> bytes:
    """The value fields of a DebugAnnotation."""
    t = type(v)
    if t is int:
        if _INT64_MIN <= v <= _INT64_MAX:
            return _INT + _varint(v & 0xFFFFFFFFFFFFFFFF)
        return _string(str(v))
    if t is str:
        return _string(v)
    if t is float:
        return _DOUBLE_TAG + _DOUBLE(v)
    if t is bool:
        return _BOOL + (b"\x01" if v else b"\x00")
    if t is list:
        if not v:
            return _string("[]")
        return b"".join(encode_message((12, _value(item))) for item in v)
    if t is dict:
        if not v:
            return _string("{}")
        return b"".join(encode_message((11, encode_message((10, str(k))) + _value(item)))
                        for k, item in v.items())
    return _string("null" if v is None else str(v))


def _string(s: str) -> bytes:
    data = s.encode("utf-8", "surrogatepass")
    return _STRING + _varint(len(data)) + data
