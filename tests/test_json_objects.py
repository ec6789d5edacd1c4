"""json_objects.merge_objects: fields.merge(validate=True, compact=True) column-wise, the same
texts, collisions and wrapped counts for every row, the odd rows left to fields.merge."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracekit import fields, json_objects


def _both(args: list[str | None], keys: dict[str, list[str | None]],
          monkeypatch: pytest.MonkeyPatch | None = None):
    """(column-wise, per-row) results, and the rows the column-wise way left to fields.merge."""
    arrays = {k: pa.array(v, pa.string()) for k, v in keys.items()}
    column = pa.array(args, pa.string())
    per_row = fields.merge(column, arrays, validate=True, compact=True)
    handed: list[str | None] = []
    if monkeypatch is not None:
        def spy(a, k, **kw):
            handed.extend(a.to_pylist())
            return per_row_merge(a, k, **kw)
        per_row_merge = fields.merge
        monkeypatch.setattr(json_objects.fields, "merge", spy)
    got = json_objects.merge_objects(column, arrays)
    if monkeypatch is not None:
        monkeypatch.undo()
    return got, per_row, handed


def _same(got: fields.Merged, want: fields.Merged) -> None:
    assert got.args.type == pa.string()
    assert got.args.to_pylist() == want.args.to_pylist()
    assert got.collisions == want.collisions
    assert got.wrapped == want.wrapped


KINETO = '{\n      "External id": 7, "device": 0, "stream": 7, "grid": [4, 2, 1]\n    }'


def test_kineto_args_are_compacted_and_keys_spliced_column_wise(monkeypatch):
    args = [KINETO, KINETO.replace('"device": 0', '"device": 3'), '{"cbid": 211}',
            None, "", '  {"a": 1}  ', "{ }", '{"x": {"device": 0}}', '{"s": "device"}',
            '{\r\n  "a": "x y",\r\n  "b": [1, {"c": null}]\r\n}\r\n']
    keys = {"device": ["0", "0", None, "0", None, None, "0", "0", "0", "0"],
            "grid": ["[4,2,1]", "[4,2,2]", None, None, None, None, None, None, None, None],
            "correlation": [None, None, "42", None, None, None, None, None, None, "5"]}
    got, want, handed = _both(args, keys, monkeypatch)
    _same(got, want)
    assert handed == []  # none of them needed a step per row
    assert got.args.to_pylist() == [
        '{"External id": 7, "device": 0, "stream": 7, "grid": [4, 2, 1]}',
        '{"External id": 7, "device": 3, "stream": 7, "grid": [4, 2, 1]}',
        '{"cbid": 211,"correlation":42}',
        '{"device":0}', "", '  {"a": 1}  ', '{"device":0}',
        # The piece is in the text, if not at its top level: left out, as fields._holds does.
        '{"x": {"device": 0}}',
        '{"s": "device","device":0}',
        '{"a": "x y","b": [1, {"c": null}],"device":0,"correlation":5}']
    assert got.collisions == {"device": 1, "grid": 1}
    assert got.wrapped == 0


ODD = [
    '{"a":"\\u0041"}',  # an escape
    '{"a":"x\ny"}',  # a raw line break in a string: not JSON
    '{"a":"x\ty"}',
    "[1, 2]",
    '"device"',
    "  ",
    '{"a":1',
    '{"a":1}}',
    '{"a": 1 2}',
    '{"a":01}',
    '{"a":1e400}',  # infinite for orjson
    '{"a":1' + "0" * 400 + "}",
    '{"a":[[[[[1]]]]]}',  # deeper than the expression goes
    '{"device":1,"device":0}',
    '{"device": 0.0}',  # equal to 0 for Python: no collision
    '{"device": true}',  # True == 1
    '{"device": "0"}',
    '{"device": [0]}',
    '{\x0b"a":1}',
    '{"a":1}\x00',
    '{"a":\n1\n,\n"b":2}',
    '{"a":tr\nue}',
    '{"é": "ü", "device": 1}',
    '{"device": -0}',
    '{"device": 123456789012345678901}',
]


@pytest.mark.parametrize("text", ODD)
@pytest.mark.parametrize("device", ["0", "1", "true", '"0"', "[0]", "123456789012345678901"])
def test_odd_texts_as_fields_merge(text, device):
    got, want, _ = _both([text, KINETO], {"device": [device, device]})
    _same(got, want)


def test_only_the_odd_rows_take_a_step_each(monkeypatch):
    got, want, handed = _both([KINETO, *ODD, KINETO], {"device": ["1"] * (len(ODD) + 2)},
                              monkeypatch)
    _same(got, want)
    # Valid, with the piece there as it is, or a value of another kind than 1.
    decided = {'{"a":\n1\n,\n"b":2}', '{"é": "ü", "device": 1}', '{"device": "0"}',
               '{"device": [0]}'}
    assert sorted(handed) == sorted(t for t in ODD if t not in decided)


def test_keys_the_column_wise_way_cannot_search_for_go_to_fields_merge(monkeypatch):
    got, want, handed = _both([KINETO, '{"a:b": 1}'], {"a:b": ["2", "1"]}, monkeypatch)
    _same(got, want)
    assert handed == [KINETO, '{"a:b": 1}']
    assert got.args.to_pylist()[0].endswith('"a:b":2}')


def test_rows_without_args():
    for args in ([], [None], [""]):
        got, want, _ = _both(args, {"device": [None] * len(args)})
        _same(got, want)
    got, want, _ = _both(["", None, ""], {"device": ["1", "2", None]})
    _same(got, want)
    assert got.args.to_pylist() == ['{"device":1}', '{"device":2}', ""]


_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.sampled_from(["", "device", "a b", "x\ny", 'q"', "é"]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["a", "device", "b"]), inner,
                                         max_size=3), max_leaves=8)
_layouts = st.sampled_from(["compact", "spaced", "indent", "kineto", "cut", "ascii",
                            "crlf", "tabs"])


def _text(obj, layout: str) -> str:
    if layout == "compact":
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if layout == "indent":
        return json.dumps(obj, indent=2, ensure_ascii=False)
    if layout == "kineto":
        inner = json.dumps(obj, ensure_ascii=False)
        return "{\n      " + inner[1:-1] + "\n    }" if isinstance(obj, dict) else inner
    if layout == "cut":
        return json.dumps(obj, ensure_ascii=False)[:-1]
    if layout == "ascii":
        return json.dumps(obj)
    if layout == "crlf":
        return json.dumps(obj, indent=1, ensure_ascii=False).replace("\n", "\r\n") + " \r\n"
    if layout == "tabs":
        return "\t" + json.dumps(obj, indent="\t", ensure_ascii=False)
    return json.dumps(obj, ensure_ascii=False)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(["device", "grid", "a", "External id"]),
                                          _values, max_size=4) | _values,
                          _layouts,
                          st.sampled_from([None, "0", "1", "-7", '"x"', '"device"', "1.5",
                                           "true", "null"]),
                          st.sampled_from([None, "[4,2,1]", "[1,1,1]"])),
                min_size=1, max_size=10))
def test_generated_args_as_fields_merge(rows):
    args = [None if layout == "cut" and not i % 3 else _text(obj, layout)
            for i, (obj, layout, _, _) in enumerate(rows)]
    got, want, _ = _both(args, {"device": [r[2] for r in rows], "grid": [r[3] for r in rows]})
    _same(got, want)
