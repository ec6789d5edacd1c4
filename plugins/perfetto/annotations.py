"""``args`` JSON objects to TrackEvent debug annotations, with interned top-level names."""

from __future__ import annotations

from typing import Any

import orjson
from tracekit.plugins.perfetto.wire import encode_message

_DEBUG_ANNOTATIONS = 4  # TrackEvent.debug_annotations
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class AnnotationEncoder:
    """Encodes args objects; remembers which names it interned since the last ``new_names``."""

    def __init__(self) -> None:
        self.iids: dict[str, int] = {}
        self._fresh: list[tuple[int, str]] = []
        self._cache: dict[str, bytes] = {}

    def encode(self, args_json: str | None) -> bytes:
        """Encoded TrackEvent.debug_annotations fields for one args object."""
        if not args_json:
            return b""
        cached = self._cache.get(args_json)
        if cached is not None:
            return cached
        try:
            obj = orjson.loads(args_json)
        except orjson.JSONDecodeError:
            obj = {"args": args_json}
        if not isinstance(obj, dict):
            obj = {"args": obj}
        out = b"".join(
            encode_message((_DEBUG_ANNOTATIONS, encode_message((1, self._iid(str(k))),
                                                               *_value(v))))
            for k, v in obj.items())
        if len(self._cache) < 100_000:
            self._cache[args_json] = out
        return out

    def _iid(self, name: str) -> int:
        iid = self.iids.get(name)
        if iid is None:
            iid = self.iids[name] = len(self.iids) + 1
            self._fresh.append((iid, name))
        return iid

    def new_names(self) -> list[tuple[int, str]]:
        """Names interned since the previous call, to emit before their first use."""
        fresh, self._fresh = self._fresh, []
        return fresh


def _value(v: Any) -> list[tuple[int, object]]:
    if isinstance(v, bool):
        return [(2, int(v))]
    if isinstance(v, int):
        return [(4, v)] if _INT64_MIN <= v <= _INT64_MAX else [(6, str(v))]
    if isinstance(v, float):
        return [(5, v)]
    if isinstance(v, str):
        return [(6, v)]
    if isinstance(v, list):
        return [(12, encode_message(*_value(item))) for item in v] or [(6, "[]")]
    if isinstance(v, dict):
        return [(11, encode_message((10, str(k)), *_value(item))) for k, item in v.items()] \
            or [(6, "{}")]
    return [(6, "null" if v is None else str(v))]
