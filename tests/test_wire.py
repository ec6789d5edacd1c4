"""The vectorized protobuf encoder against the protobuf runtime's own decoding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from tracekit.plugins.perfetto.wire import Blob, MessageColumns, encode_message

u64 = st.integers(min_value=0, max_value=2**64 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


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


@pytest.mark.slow
@given(st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.integers(1, 2**20), i64,
                                                              st.text(max_size=100)),
                                                    max_size=4)), min_size=1, max_size=25))
def test_nested_and_repeated_messages_are_written_in_place(rows):
    # TracePacket{timestamp, track_event{debug_annotations*{name_iid, int_value|bytes}}}: the
    # track event present on some packets only, each with 0..4 annotations.
    n = len(rows)
    has_event = np.array([r[0] for r in rows])
    counts = np.array([len(r[1]) if r[0] else 0 for r in rows])
    anns = [a for r in rows if r[0] for a in r[1]]
    iid = np.array([a[0] for a in anns], dtype=np.int64)
    value = np.array([a[1] for a in anns], dtype=np.int64)
    is_int = np.array([len(a[2]) % 2 == 0 for a in anns], dtype=bool)
    strings = Blob.from_list([a[2].encode() for a in anns])
    items = (MessageColumns(len(anns)).varint(1, iid).varint(4, value,
                                                             present=is_int)
             .message(6, strings, present=~is_int))
    te = MessageColumns(n).varint(11, np.arange(n)).repeated_message(4, counts, items) \
        .repeated_fixed64(47, counts, np.arange(int(counts.sum())))
    packets = MessageColumns(n).varint(8, np.arange(n) * 1000).message(11, te,
                                                                        present=has_event)
    trace = pb.Trace()
    trace.ParseFromString(MessageColumns(n).message(1, packets).encode().tobytes())
    assert len(trace.packet) == n
    k = 0
    for i, (p, (event, row_anns)) in enumerate(zip(trace.packet, rows, strict=True)):
        assert p.timestamp == i * 1000 and p.HasField("track_event") == event
        if not event:
            continue
        got = [(a.name_iid, a.int_value if a.HasField("int_value") else a.string_value)
               for a in p.track_event.debug_annotations]
        assert got == [(a[0], a[1] if len(a[2]) % 2 == 0 else a[2]) for a in row_anns]
        assert list(p.track_event.flow_ids) == list(range(k, k + len(row_anns)))
        k += len(row_anns)


def test_varints_of_one_length_and_of_many_decode_like_protobuf():
    # Every value one length (timestamps), lengths from 1 to 10 bytes, and lengths whose
    # shortest is over one byte: each takes another way through the varint writer.
    one_length = [2**49 + i * 7919 for i in range(5)]
    edges = [0, 1, 127, 128, 16383, 16384, 2**35, 2**56 - 1, 2**56, 2**63 - 1, 2**63, 2**64 - 1]
    long_only = [128, 2**20, 2**63, 300, 2**40]
    for values in (one_length, edges, long_only):
        v = np.array(values, dtype=np.uint64)
        te = MessageColumns(len(v)).varint(11, v.view(np.int64)).encode()
        packets = MessageColumns(len(v)).varint(8, v.view(np.int64)).message(11, te).encode()
        trace = pb.Trace()
        trace.ParseFromString(MessageColumns(len(v)).message(1, packets).encode().tobytes())
        assert [(p.timestamp, p.track_event.track_uuid) for p in trace.packet] == \
            [(x, x) for x in values]
