"""``args`` JSON objects to TrackEvent debug annotations, with interned top-level names.

This runs once per written slice, so it avoids per-field function calls: each key's
``name_iid`` bytes are computed once, small varints come from a table, and encoded
(key, value) pairs are cached (values such as ``cbid``, ``stream`` or a kernel's ``grid`` repeat
across millions of events).
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import fields
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


def annotated_args(events: pa.Table, native: dict[str, Any], keep_args: bool,
                   skipped: Counter[str]) -> pa.Array:
    """Each row's args with the typed columns its track and event do not hold added by the
    rule of ``tracekit.fields``; what cannot be written is counted in ``skipped``.

    ``native`` maps columns to the rows where the Perfetto event holds them. CPU samples are
    PerfSample packets, which carry no annotations: their other values are counted.
    """
    sample = pc.equal(events["kind"].cast(pa.string()), "sample").to_numpy(
        zero_copy_only=False)
    carried = fields.carry(events, native, allowed=~sample,
                           why_not="a CPU sample carries no annotations in Perfetto")
    stacks = events["stack_id"].is_valid().to_numpy(zero_copy_only=False) & ~sample
    if stacks.any():  # ids into the stacks table, which only samples' callstacks carry
        carried.keys.pop("stack_id", None)
        skipped[fields.field_skip("stack_id", "only CPU samples carry a call stack in "
                                              "Perfetto")] += int(stacks.sum())
    skipped.update(carried.skipped)
    args = events["args"].combine_chunks() if keep_args else pa.nulls(events.num_rows,
                                                                        pa.string())
    own = pc.fill_null(pc.greater(pc.utf8_length(args), 0), False).to_numpy(
        zero_copy_only=False) & sample
    if own.any():
        skipped[fields.field_skip("args", "a CPU sample carries no annotations in "
                                          "Perfetto")] += int(own.sum())
        args = pc.if_else(pa.array(sample), pa.scalar(None, pa.string()), args)
    merged = fields.merge(args, carried.keys)
    for key, n in merged.collisions.items():
        skipped[fields.field_skip(key, "args already has this key with another value "
                                       "(args kept)")] += n
    return merged.args


def sample_native(events: pa.Table) -> np.ndarray:
    """Rows whose category a PerfSample tells as it is (samples are cpu.sample)."""
    return pc.equal(events["category"].cast(pa.string()), "cpu.sample").to_numpy(
        zero_copy_only=False)
