"""The shortcuts of the Perfetto writer's column-wise annotations give what the long ways give.

Keys are trimmed once per spelling (not pair by pair), quote parity is a running XOR, nested
values are encoded once per encoder (not per chunk), only the pairs holding a nested value
are gathered, and the wire encoder gathers by indices: each is checked here against the way
it replaced, or against the protobuf runtime.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from tracekit.plugins.perfetto import writer_args
from tracekit.plugins.perfetto.annotations import AnnotationEncoder, ArgColumns
from tracekit.plugins.perfetto.wire import MessageColumns, encode_varint
from tracekit.plugins.perfetto.writer_args import split_objects, text_buffers

# Stray text around a key before the same key spelled cleanly (and the other way round):
# the names keep the order of their first trimmed spellings.
TEXTS = [
    '{x "b": 1, "a": 2}', '{"a": 1, "b": 2}', '{\n  "c": 1,\n  "b": [1, 2]\n}',
    '{ "d" : "x" , "a":3}', '{"e": 1, y "a": 2}', '{"a" z: 1}', "{}", "{ }", "",
    '{"b": {"a": 1}, "c": "a"}', '{"f":1,"f":2}', '{"a": [1] q}', '{"\t": 1}',
    '{"é": "ü", "a": 1}', '{\r\n\t"g"\t:\t1\r\n}', '{"a":1} ',
]


def _split(texts: list[str | None]) -> writer_args.Pairs:
    return split_objects(*text_buffers(pa.array(texts, pa.string())))


def _trimmed_keys(spelled: pa.LargeStringArray, length: np.ndarray):
    """The keys as they were found before: every pair's text trimmed by Arrow."""
    key_text = pc.ascii_trim(spelled, " \t\n\r")
    encoded = key_text.dictionary_encode()
    return ([k[1:-1] for k in encoded.dictionary.to_pylist()],
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
            np.diff(np.frombuffer(key_text.buffers()[1], dtype=np.int64)[
                key_text.offset:key_text.offset + len(key_text) + 1]) != length)


def _same(a: writer_args.Pairs, b: writer_args.Pairs) -> None:
    assert a.keys == b.keys
    assert a.row.tolist() == b.row.tolist() and a.key.tolist() == b.key.tolist()
    assert a.values.to_pylist() == b.values.to_pylist()
    assert a.slow.tolist() == b.slow.tolist()


def test_keys_trimmed_per_spelling_match_keys_trimmed_per_pair(monkeypatch):
    fast = _split(TEXTS)
    monkeypatch.setattr(writer_args, "_keys", _trimmed_keys)
    _same(fast, _split(TEXTS))
    # Stray text around a key sends the row the per-row way; the names keep their order.
    assert fast.keys[:3] == [' "b', "a", "b"]  # 'x "b"' less its first and last
    slow = {TEXTS[i] for i in np.flatnonzero(fast.slow)}
    assert slow == {'{x "b": 1, "a": 2}', '{"e": 1, y "a": 2}', '{"a" z: 1}',
                    '{"f":1,"f":2}', '{"a": [1] q}', '{"\t": 1}', '{"a":1} '}


def test_many_spellings_are_trimmed_by_arrow(monkeypatch):
    texts = [f'{{{" " * (i % 9)}"k{i % 5}"{" " * (i % 4)}: {i}}}' for i in range(60)]
    texts += ['{ z"k1": 1}', *TEXTS]
    want = _split(texts)
    monkeypatch.setattr(writer_args, "_SPELLINGS", 3)
    _same(want, _split(texts))


def test_quote_parity_declines_texts_with_open_strings():
    texts = ['{"a": "b}', '{"a": 1}', '{"a": "x""}', '{"a": "}"}', '{"a": 2}']
    pairs = _split(texts)
    assert pairs.slow.tolist() == [True, False, True, False, False]
    assert pairs.values.to_pylist() == ["1", '"}"', "2"]


def _encode(encoder: AnnotationEncoder, args: list[str | None]) -> bytes:
    found = encoder.columns(ArgColumns(pa.array(args, pa.string()), {})
                            .take(np.arange(len(args))), Counter())
    te = MessageColumns(len(args)).repeated_message(4, found.counts, found.items) \
        .raw(found.per_row).encode()
    return te.tobytes()


def test_nested_values_encoded_once_per_encoder_are_the_same():
    chunks = [['{"g": [1, 2], "n": {"a": [true, null]}}', '{"g": [1, 2]}', '{"x": 1}'],
              ['{"g": [1, 2]}', '{"g": [1, 2,]}', '{"n": {"a": [true, null]}, "m": []}',
               None, '{"g": [3]}'],
              ['{"g": [1, 2,]}', '{"g": [1, 2]}', '{"big": [' + "1," * 3000 + "1]}"]]
    shared = AnnotationEncoder()
    got = [_encode(shared, chunk) for chunk in chunks]
    # Fresh encoders intern names anew: compare with one that saw the same chunks before,
    # its nested texts cleared before each chunk.
    fresh = AnnotationEncoder()
    for chunk, g in zip(chunks, got, strict=True):
        fresh._nested.clear()
        assert _encode(fresh, chunk) == g
    assert '[1, 2,]' in shared._nested and shared._nested['[1, 2,]'] is None


def _decode_varints(data: bytes) -> list[int]:
    out, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            out.append(value)
            value, shift = 0, 0
    return out


@pytest.mark.parametrize("seed", range(3))
def test_varints_of_mixed_lengths_with_absent_fields(seed):
    rng = np.random.default_rng(seed)
    n = 500
    values = np.where(rng.random(n) < 0.5, rng.integers(0, 300, n),
                      rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64) >> rng.integers(
                          0, 63, n))
    present = rng.random(n) < 0.7
    inner = MessageColumns(n).varint(4, values, present=present).varint(1, values)
    outer = MessageColumns(n).message(2, inner, present=~present).varint(3, values,
                                                                         present=present)
    blob = outer.encode()
    for i in range(n):
        v = int(values[i]) & (2**64 - 1)
        if present[i]:
            want = b"\x18" + encode_varint(v)
        else:
            body = b"\x08" + encode_varint(v)
            want = b"\x12" + encode_varint(len(body)) + body
        assert blob.data[blob.offsets[i]:blob.offsets[i + 1]].tobytes() == want
    assert _decode_varints(encode_varint(2**64 - 1)) == [2**64 - 1]


def test_repeated_annotations_decode_like_protobuf():
    args = ['{"a": 1, "b": -5, "c": 1.5, "d": "x", "e": [1, {"f": null}], "g": true}',
            '{"a": 123456789012345678, "b": -9223372036854775808}', "", None]
    encoder = AnnotationEncoder()
    te = pb.TrackEvent()
    te.ParseFromString(_encode(encoder, args[:1]))
    names = {iid: name for name, iid in encoder.iids.items()}
    kinds = [(names[a.name_iid], a.WhichOneof("value")) for a in te.debug_annotations]
    assert kinds == [("a", "int_value"), ("b", "int_value"), ("c", "double_value"),
                     ("d", "string_value"), ("e", None), ("g", "bool_value")]
    assert te.debug_annotations[1].int_value == -5
    te.ParseFromString(_encode(encoder, args[1:2]))
    assert [a.int_value for a in te.debug_annotations] == [123456789012345678, -(2**63)]
