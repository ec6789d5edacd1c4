"""The vectorized protobuf encoder against the protobuf runtime's own decoding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from tracekit.plugins.perfetto.wire import Blob, MessageColumns, encode_message

u64 = st.integers(min_value=0, max_value=2**64 - 1)


@pytest.mark.slow
@given(st.lists(st.tuples(u64, u64, st.booleans(), st.floats(allow_nan=False),
                          st.text(max_size=20)), min_size=1, max_size=30))
def test_columns_decode_like_protobuf(rows):
    n = len(rows)
    ts = np.array([r[0] for r in rows], dtype=np.uint64)
    uuid = np.array([r[1] for r in rows], dtype=np.uint64)
    has = np.array([r[2] for r in rows])
    value = np.array([r[3] for r in rows])
    names = Blob.from_list([r[4].encode() for r in rows])
    te = (MessageColumns(n).varint(11, uuid.view(np.int64)).fixed64(47, uuid, present=has)
          .double(44, value).message(23, names))
    packets = MessageColumns(n).varint(8, ts.view(np.int64)).message(11, te.encode()).encode()
    trace = pb.Trace()
    trace.ParseFromString(MessageColumns(n).message(1, packets).encode().tobytes())
    assert len(trace.packet) == n
    for p, (t, u, h, v, s) in zip(trace.packet, rows, strict=True):
        assert p.timestamp == t and p.track_event.track_uuid == u
        assert list(p.track_event.flow_ids) == ([u] if h else [])
        assert p.track_event.double_counter_value == v and p.track_event.name == s


def test_encode_message_matches_protobuf():
    data = encode_message((1, 42), (2, "GPU 0"), (5, 7))
    d = pb.TrackDescriptor()
    d.ParseFromString(data)
    assert (d.uuid, d.name, d.parent_uuid) == (42, "GPU 0", 7)
    assert encode_message((4, -1)) == pb.DebugAnnotation(int_value=-1).SerializeToString()
