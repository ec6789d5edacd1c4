"""CPU samples as Perfetto PerfSample packets with interned call stacks, so that the UI shows
them per thread and as flame graphs of a selection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.perfetto.wire import MessageColumns, encode_message

SEQUENCE_ID = 2  # a sequence of its own: its interned frames never meet the events' names
_CLEARED, _NEEDS_STATE = 1, 2
_CHUNK = 20_000  # rows encoded at once: the encoder needs ~300 bytes a row
_INTERN_BATCH = 5_000
_DENSE_IDS = 1 << 26  # stack ids below this are looked up in a mask


def sample_packets(trace: Trace, samples: pa.Table) -> Iterator[bytes]:
    """Yield the encoded packets: interned strings, mappings, frames and call stacks first,
    then one PerfSample per row of ``samples`` (rows with a stack_id, sorted by time)."""
    stream = SampleStream()
    stream.add_table("frames", trace.frames)
    stream.add_table("stacks", trace.stacks)
    yield from stream.packets(samples)


class SampleStream:
    """PerfSample packets written a batch of samples at a time: before each batch, what it
    needs that was not interned yet (the frames and mappings added since, the call stacks
    it uses) is interned on the samples' own sequence, which is cleared only at its first
    packet. Given the whole trace's samples at once, it writes what a one-pass writer
    would."""

    def __init__(self) -> None:
        self._stacks: dict[int, tuple[int | None, int]] = {}  # stack_id: (parent, frame)
        self._new_frames: list[dict[str, Any]] = []
        self._frame_ids: set[int] = set()
        self._missing_frames: set[int] = set()  # named by stacks, not added yet
        self._module_iid: dict[str, int] = {}
        self._interned_stacks: set[int] = set()
        # Which ids are known, as a mask over ids (readers number stacks from 0).
        self._dense: np.ndarray | None = np.zeros(0, dtype=bool)
        self._started = False

    def add_table(self, name: str, rows: pa.Table) -> None:
        """Take rows of the ``frames`` or ``stacks`` table (others are not needed)."""
        if name == "frames":  # each frame once, however often it is given
            for f in rows.select(["frame_id", "name", "module"]).to_pylist():
                if f["frame_id"] not in self._frame_ids:
                    self._frame_ids.add(f["frame_id"])
                    self._new_frames.append(f)
            self._missing_frames -= self._frame_ids
        elif name == "stacks":
            self._missing_frames.update(
                f for f in pc.unique(rows["frame_id"]).to_pylist()
                if f is not None and f not in self._frame_ids)
            ids = rows["stack_id"].to_pylist()
            self._stacks.update(zip(ids, zip(rows["parent_id"].to_pylist(),
                                             rows["frame_id"].to_pylist(), strict=True),
                                    strict=True))
            if self._dense is not None and ids:
                top = max(ids)
                if min(ids) < 0 or top >= _DENSE_IDS:
                    self._dense = None  # ids too large for a mask: looked up one by one
                else:
                    if top >= len(self._dense):
                        self._dense = np.concatenate([self._dense, np.zeros(
                            max(top + 1 - len(self._dense), len(self._dense)), dtype=bool)])
                    self._dense[np.array(ids, dtype=np.int64)] = True

    def knows(self, stack_ids: np.ndarray) -> np.ndarray:
        """Per stack id: whether its call stack has been added (its frames too: while a
        stack added names a frame not added yet, none counts as known)."""
        ids = np.asarray(stack_ids, dtype=np.int64)
        if self._missing_frames:
            return np.zeros(len(ids), dtype=bool)
        if self._dense is not None:  # ids below the size of a mask of every id seen
            inside = (ids >= 0) & (ids < len(self._dense))
            out = np.zeros(len(ids), dtype=bool)
            out[inside] = self._dense[ids[inside]]
            return out
        known = self._stacks
        return np.fromiter((int(s) in known for s in ids), dtype=bool, count=len(ids))

    def packets(self, samples: pa.Table) -> Iterator[bytes]:
        """The packets of ``samples`` (ts_ns, pid, tid and stack_id; every stack known)."""
        used = np.sort(pc.unique(samples["stack_id"]).to_numpy()).tolist()
        # Callstack iid = stack_id + 1; frames listed root first ("bottom frame first").
        callstacks = []
        for stack_id in used:
            if stack_id in self._interned_stacks:
                continue
            self._interned_stacks.add(stack_id)
            path, node = [], stack_id
            while node is not None:
                parent, frame = self._stacks[node]
                path.append(frame + 1)
                node = parent
            callstacks.append((7, encode_message((1, stack_id + 1),
                                                 *[(2, f) for f in reversed(path)])))
        frames, self._new_frames = self._new_frames, []
        modules = sorted({f["module"] for f in frames if f["module"]} - set(self._module_iid))
        for m in modules:
            self._module_iid[m] = len(self._module_iid) + 1
        module_iid = self._module_iid
        entries = [(17, encode_message((1, module_iid[m]), (2, m.encode()))) for m in modules]
        entries += [(19, encode_message((1, module_iid[m]), (7, module_iid[m])))
                    for m in modules]
        entries += [(5, encode_message((1, f["frame_id"] + 1), (2, f["name"].encode())))
                    for f in frames]
        # A frame with a mapping needs rel_pc; the address within the module is not known here.
        entries += [(6, encode_message((1, f["frame_id"] + 1), (2, f["frame_id"] + 1),
                                       (3, module_iid.get(f["module"])),
                                       (4, 0 if f["module"] else None))) for f in frames]
        entries += callstacks
        ts0 = int(pc.min(samples["ts_ns"]).as_py() or 0)
        for k in range(0, max(len(entries), 0 if self._started else 1), _INTERN_BATCH):
            flags = _NEEDS_STATE if self._started else _CLEARED | _NEEDS_STATE
            self._started = True
            yield _packet((8, ts0), (10, SEQUENCE_ID), (13, flags),
                          (12, encode_message(*entries[k:k + _INTERN_BATCH])))
        order = np.argsort(samples["ts_ns"].to_numpy(), kind="stable")
        ts = samples["ts_ns"].to_numpy()[order]
        pid = samples["pid"].fill_null(0).to_numpy()[order]
        tid = samples["tid"].fill_null(0).to_numpy()[order]
        stack = samples["stack_id"].to_numpy()[order] + 1
        for lo in range(0, len(order), _CHUNK):
            hi = min(lo + _CHUNK, len(order))
            n = hi - lo
            # Nested messages are written in place: each byte once.
            sample = MessageColumns(n).varint(2, pid[lo:hi]).varint(3, tid[lo:hi]) \
                .varint(4, stack[lo:hi])
            packet = MessageColumns(n).varint(8, ts[lo:hi]).varint(10, SEQUENCE_ID) \
                .varint(13, _NEEDS_STATE).message(66, sample)
            yield MessageColumns(n).message(1, packet).encode().tobytes()


def _packet(*fields: tuple[int, object]) -> bytes:
    return encode_message((1, encode_message(*fields)))
