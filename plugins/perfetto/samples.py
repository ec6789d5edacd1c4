"""CPU samples as Perfetto PerfSample packets with interned call stacks, so that the UI shows
them per thread and as flame graphs of a selection."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Trace
from tracekit.plugins.perfetto.wire import MessageColumns, encode_message

SEQUENCE_ID = 2  # a sequence of its own: its interned frames never meet the events' names
_CLEARED, _NEEDS_STATE = 1, 2
_CHUNK = 20_000  # rows encoded at once: the encoder needs ~300 bytes a row
_INTERN_BATCH = 5_000


def sample_packets(trace: Trace, samples: pa.Table) -> Iterator[bytes]:
    """Yield the encoded packets: interned strings, mappings, frames and call stacks first,
    then one PerfSample per row of ``samples`` (rows with a stack_id, sorted by time)."""
    stacks = {r["stack_id"]: (r["parent_id"], r["frame_id"]) for r in trace.stacks.to_pylist()}
    frames = trace.frames.to_pylist()
    # Sorted distinct ids by hashing (np.unique without an inverse is slow on many values).
    used = np.sort(pc.unique(samples["stack_id"]).to_numpy()).tolist()
    # Callstack iid = stack_id + 1; frames listed root first ("bottom frame first").
    callstacks = []
    for stack_id in used:
        path, node = [], stack_id
        while node is not None:
            parent, frame = stacks[node]
            path.append(frame + 1)
            node = parent
        callstacks.append((7, encode_message((1, stack_id + 1),
                                             *[(2, f) for f in reversed(path)])))
    modules = sorted({f["module"] for f in frames if f["module"]})
    module_iid = {m: i + 1 for i, m in enumerate(modules)}
    entries = [(17, encode_message((1, i), (2, m.encode()))) for m, i in module_iid.items()]
    entries += [(19, encode_message((1, i), (7, i))) for i in module_iid.values()]
    entries += [(5, encode_message((1, f["frame_id"] + 1), (2, f["name"].encode())))
                for f in frames]
    # A frame with a mapping needs rel_pc; the address within the module is not known here.
    entries += [(6, encode_message((1, f["frame_id"] + 1), (2, f["frame_id"] + 1),
                                   (3, module_iid.get(f["module"])),
                                   (4, 0 if f["module"] else None))) for f in frames]
    entries += callstacks
    ts0 = int(pc.min(samples["ts_ns"]).as_py() or 0)
    for k in range(0, len(entries), _INTERN_BATCH):
        flags = _CLEARED | _NEEDS_STATE if k == 0 else _NEEDS_STATE
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
