"""Debug annotations of a Perfetto TrackEvent to an event's ``args`` and typed columns.

The rule tracekit's writers share (``tracekit.fields``): a typed column of the event model
that a format has no place for is written as an annotation named exactly as the column
(``grid_x``, ``bytes``, ``copy_kind`` ...). Reading it back, an annotation with such a name
fills the column when its value fits the column's type, except where the event's track holds
the column (pid, tid and stream come from the track wherever it tells them), where the event
does (a slice's duration, a counter's value) and a slice's ``value`` (an args key "value",
such as an nsys memset's, stays).
Everything else goes into ``args`` as a JSON object, nested dictionaries and arrays as JSON
objects and lists.

Each annotation arrives as its encoded bytes; the same bytes on one packet sequence always
mean the same (name, value), so each distinct one is decoded once."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
from google.protobuf.message import DecodeError
from tracekit import EVENTS_SCHEMA
from tracekit.schemas import perfetto_subset_pb2 as pb
from tracekit.toolkit import SYNTHETIC_ID_MAX

# Columns an annotation never fills: they come from the event itself (its type, name,
# category, start) or are ids into other tables of the model.
_NOT_FROM_ANNOTATIONS = {"kind", "category", "name", "ts_ns", "source", "args", "stack_id"}
_INT_RANGES = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}
_CACHE_LIMIT = 300_000


def _accepts(type_: pa.DataType) -> Callable[[Any], bool]:
    if type_ in _INT_RANGES:
        lo, hi = _INT_RANGES[type_]
        return lambda v: type(v) is int and lo <= v <= hi
    if pa.types.is_floating(type_):
        return lambda v: type(v) in (int, float)
    return lambda v: type(v) is str  # dictionary<string> columns


#: Column name -> whether a value fits it, for every column an annotation may fill.
TYPED_COLUMNS: dict[str, Callable[[Any], bool]] = {
    f.name: _accepts(f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
    for f in EVENTS_SCHEMA if f.name not in _NOT_FROM_ANNOTATIONS}

#: Columns annotations fill on a slice; identity columns are decided per track (see
#: ``PacketReader._permits``), ``dur_ns`` comes from the slice's end, and ``value`` is left in
#: args (an nsys memset's fill value is an args key "value").
SLICES = frozenset(TYPED_COLUMNS) - {"pid", "tid", "device", "stream", "value", "dur_ns"}
#: On a counter value the value is the counter's own; an instant has neither.
COUNTERS = SLICES | {"dur_ns"}
INSTANTS = COUNTERS | {"value"}


def text(value: str | bytes) -> str:
    """A string field's value: proto2 string fields that are not valid UTF-8 arrive as bytes
    (a damaged trace); those are decoded with replacement characters."""
    return value if type(value) is str else value.decode("utf-8", "replace")


class Interned:
    """Interned strings of one packet sequence that annotations refer to, and the
    annotations decoded so far on it."""

    __slots__ = ("cache", "names", "strings")

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.strings: dict[int, bytes] = {}
        self.cache: dict[bytes, tuple[str, str, Any, str | None]] = {}


class AnnotationReader:
    """Converts debug annotations; counts what it could not resolve."""

    def __init__(self) -> None:
        self.unknown_names = 0
        self.unknown_strings = 0
        self.proto_values = 0
        self.damaged = 0
        self.renumbered = 0
        self._unresolved = False

    def read(self, annotations: Any, interned: Interned, allowed: frozenset[str],
             renumbered: frozenset[str] = frozenset(),
             ) -> tuple[str | None, list[tuple[str, Any]]]:
        """Return the ``args`` JSON of ``annotations`` (encoded DebugAnnotations; None if
        there is nothing left for args) and the (column, value) pairs that fill typed
        columns instead, of those ``allowed``. Synthetic ids of the ``renumbered`` columns
        are the track's own, which the reader numbers itself: they are only counted; a real
        tid on a named track of a real process (a thread's state beside the thread) fills
        the column."""
        cache = interned.cache
        fragments: list[str] = []
        keys: list[str] = []
        typed: list[tuple[str, Any]] = []
        for raw in annotations:
            hit = cache.get(raw)
            if hit is None:
                hit = self._decode(raw, interned)
                if not self._unresolved:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    cache[raw] = hit
            key, fragment, value, column = hit
            if column is not None:
                if column in allowed:
                    typed.append((column, value))
                    continue
                if column in renumbered and value <= SYNTHETIC_ID_MAX:
                    self.renumbered += 1
                    continue
                if column == "tid" and column in renumbered and "pid" not in renumbered:
                    # A real thread of the track's real process beats the id the reader
                    # makes up for a named track (a thread's state beside the thread).
                    typed.append((column, value))
                    continue
            fragments.append(fragment)
            keys.append(key)
        if not fragments:
            return None, typed
        args = "{" + ",".join(fragments) + "}"
        if len(keys) > 1 and len(set(keys)) < len(keys):  # a name twice: the last one wins
            args = orjson.dumps(orjson.loads(args)).decode()
        return args, typed

    def _decode(self, raw: bytes, interned: Interned) -> tuple[str, str, Any, str | None]:
        """(name, ``"name":value`` JSON text, value, the typed column it may fill)."""
        self._unresolved = False
        try:
            a = pb.DebugAnnotation.FromString(raw)
        except DecodeError:
            self.damaged += 1
            key, value = "(damaged annotation)", raw.hex()
        else:
            key = self._name(a, interned)
            value = self._value(a, interned)
        check = TYPED_COLUMNS.get(key)
        column = key if check is not None and check(value) else None
        fragment = orjson.dumps(key).decode() + ":" + orjson.dumps(value).decode()
        return key, fragment, value, column

    def _name(self, a: Any, interned: Interned) -> str:
        iid = a.name_iid
        if iid:
            name = interned.names.get(iid)
            if name is None:
                self.unknown_names += 1
                self._unresolved = True
                return f"(unknown name iid {iid})"
            return name
        return text(a.name)

    def _value(self, a: Any, interned: Interned) -> Any:
        kind = a.WhichOneof("value")
        if kind is None:
            if a.dict_entries:
                return {self._name(e, interned): self._value(e, interned)
                        for e in a.dict_entries}
            if a.array_values:
                return [self._value(e, interned) for e in a.array_values]
            if a.HasField("proto_value"):
                self.proto_values += 1
                type_name = text(a.proto_type_name) or f"iid {a.proto_type_name_iid}"
                return f"(protobuf message {type_name}, {len(a.proto_value)} bytes)"
            return None
        if kind == "string_value_iid":
            raw = interned.strings.get(a.string_value_iid)
            if raw is None:
                self.unknown_strings += 1
                self._unresolved = True
                return f"(unknown string iid {a.string_value_iid})"
            return raw.decode("utf-8", "replace")
        if kind == "pointer_value":
            return f"0x{a.pointer_value:x}"
        if kind == "nested_value":
            return _nested(a.nested_value)
        if kind == "legacy_json_value":
            try:
                return orjson.loads(a.legacy_json_value)
            except orjson.JSONDecodeError:
                return text(a.legacy_json_value)
        value = getattr(a, kind)
        if type(value) is float and not math.isfinite(value):  # JSON has no such number
            return str(value)
        return text(value) if type(value) is bytes else value


def _nested(v: Any) -> Any:
    """A legacy NestedValue as a JSON value."""
    if v.nested_type == 1:
        return {text(k): _nested(x) for k, x in zip(v.dict_keys, v.dict_values, strict=False)}
    if v.nested_type == 2:
        return [_nested(x) for x in v.array_values]
    for field in ("int_value", "double_value", "bool_value", "string_value"):
        if v.HasField(field):
            value = getattr(v, field)
            if type(value) is float and not math.isfinite(value):
                return str(value)
            return text(value) if type(value) is bytes else value
    return None
