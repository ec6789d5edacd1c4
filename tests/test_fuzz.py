"""Property-based fuzzing of every reader: real inputs, mutated, must be read or refused
cleanly (the rules of tests/badinput.py: no catch-all, no traceback, no hang, no memory
blow-up, one-line errors naming the file, the input untouched).

Each reader has seeds (small real files from ../shared/fixtures and this project's fixtures)
and mutations drawn by hypothesis: byte-level (truncate, flip, insert, delete, splice,
repeat, and the same on the compressed bytes of gzip inputs) and structure-aware (a JSON
value replaced by a wrong type, NaN, a huge number or deep nesting; an SQLite column set to
text/blob/real/NULL, a table or column dropped or renamed, rows deleted or repeated; CSV
cells, rows and columns damaged; text lines cut, repeated or given odd numbers; a Parquet
dataset's manifest or table files damaged). Every example is read in the harness worker
(4 GiB, 10 s of CPU time), written to Perfetto and analyzed.

The seed is fixed (``TRACEKIT_FUZZ_SEED``, default 0) and the run is bounded: per reader at
most ``TRACEKIT_FUZZ_EXAMPLES`` examples (default 200) within ``TRACEKIT_FUZZ_SECONDS``
(default 6; unlimited when only the example count is given). A longer run, for contributors:

    TRACEKIT_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -p no:cacheprovider \\
        tests/test_fuzz.py -m slow

A run does not stop at the first failure: every distinct failure (by stage, exception and
place) is saved with its input under ``TRACEKIT_FUZZ_SAVE`` (default
``$TMPDIR/tracekit-fuzz/<reader>/``) and listed when the test fails.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from badinput import BAD, TIMEOUT_S, WALL_FACTOR, check
from helpers import FIXTURES, SHARED
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

SEED = int(os.environ.get("TRACEKIT_FUZZ_SEED", "0"))
_EXAMPLES = os.environ.get("TRACEKIT_FUZZ_EXAMPLES")
EXAMPLES = int(_EXAMPLES or "200")
SECONDS = float(os.environ.get("TRACEKIT_FUZZ_SECONDS") or ("inf" if _EXAMPLES else "6"))
SAVE = Path(os.environ.get("TRACEKIT_FUZZ_SAVE")
            or Path(tempfile.gettempdir()) / "tracekit-fuzz")
READERS = ("kineto", "nsys", "perf", "vtune", "rocprof", "rocprof-db", "rocprofv3-json",
           "parquet")

# (where, path): "shared" is ../shared/fixtures, "fixtures" this project's, "bad" the corpus.
SEEDS: dict[str, list[tuple[str, str]]] = {
    "kineto": [("fixtures", "torch-cpu/mlp_cpu.pt.trace.json.gz"),
               ("fixtures", "scenarios/pageable_h2d.pt.trace.json.gz"),
               ("shared", "torch-trace/hta/triton_example_cuda12.json.gz"),
               ("shared", "torch-trace/hta/amd_mi250_rocm6.2_kineto.json.gz"),
               ("shared", "torch-trace/tracelens/mi300x_rocm7_torch_compile_triton.json.gz"),
               ("bad", "kineto/ok_minimal.pt.trace.json")],
    "nsys": [("shared", "nsys-sqlite/testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"),
             ("shared", "nsys-sqlite/mordred_nsys2021_quadro-rtx6000_report1.sqlite"),
             ("bad", "nsys/ok_minimal.sqlite")],
    "perf": [("shared", "perf-script/inferno/go-stacks.txt"),
             ("shared", "perf-script/flamegraph/perf-js-stacks-01.txt"),
             ("shared", "perf-script/inferno/versioned-vmlinux.txt"),
             ("fixtures", "perf-recorded/sched_switch.perf"),
             ("fixtures", "perf-recorded/burn.perf.gz"),
             ("bad", "perf/ok_minimal.perf")],
    "vtune": [("shared", "vtune-csv/inferno/vtune-topdown.csv"),
              ("shared", "vtune-csv/utools/grappolo-friendster-t192-dram-hotspots-pkg.csv"),
              ("shared", "vtune-csv/vtune-plot/progression_1696.csv"),
              ("bad", "vtune/ok_timeline.csv"), ("bad", "vtune/ok_summary.csv"),
              ("bad", "vtune/ok_hotspots.csv")],
    "rocprof": [("shared", "rocprof-v3/rocprofiler-sdk-docs/kernel_trace_2024-08.csv"),
                ("shared", "rocprof-v3/rocprofiler-sdk-docs/memory_copy_trace_2024-10.csv"),
                ("shared", "rocprof-v3/rocprofiler-sdk-docs/hip_api_stats.csv"),
                ("shared", "rocprof-v3/rocprofiler-sdk-docs/counter_collection.csv"),
                ("shared", "rocprof-v3/rocprofiler-sdk-docs/marker_api_trace.csv"),
                ("shared", "rocprof-v1/shashank_mi300a/output_vec_add_gpu.csv"),
                ("shared", "rocprof-v1/hgliu_mi300x_2025/results.hip_stats.csv"),
                ("shared", "rocprof-v1/hgliu_mi300x_2025/results.json"),
                ("bad", "rocprof/ok_results.csv")],
    "rocprof-db": [("shared", "rocprof-v1/kokkos_2021_gfx906/results.db"),
                   ("shared", "bonus/rocpd-sqlite/hgliu_15_results.db"),
                   ("bad", "rocprof-db/ok_rocpd.db"), ("bad", "rocprof-db/ok_v1_results.db")],
    "rocprofv3-json": [("derived", "bonus/rocprofv3-json/tracelens_908_results.json.gz"),
                       ("bad", "rocprofv3-json/ok_minimal_results.json")],
    "parquet": [("dataset", "torch-cpu/mlp_cpu.pt.trace.json.gz"),
                ("bad", "parquet/ok_dataset.parquet")],
}
# Seeds small enough for the quick, not-slow run.
SMOKE = {reader: [s for s in seeds if s[0] == "bad"] for reader, seeds in SEEDS.items()}


@dataclass(frozen=True)
class Seed:
    """One input to mutate: its file name, its bytes (a folder's files for a dataset), the
    kind of content, and whether it is gzipped."""

    name: str
    raw: bytes | tuple[tuple[str, bytes], ...]
    kind: str  # json, csv, text, sqlite, dataset
    gz: bool

    @property
    def content(self) -> bytes:
        assert isinstance(self.raw, bytes)
        return gzip.decompress(self.raw) if self.gz else self.raw


def _kind(name: str, content: bytes) -> str:
    if content.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if content.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "csv" if name.removesuffix(".gz").endswith(".csv") else "text"


@cache
def _derived_rocprofv3(path: Path) -> bytes:
    """A small rocprofv3 JSON cut from a real one: 20 records of each kind, the kernel
    symbols they use, the agents' fields the reader uses (cached beside the saved failures:
    parsing the 40 MB original takes seconds)."""
    raw = path.read_bytes()
    cached = SAVE / "seeds" / f"{hashlib.sha256(raw).hexdigest()[:16]}-{path.name}"
    if cached.exists():
        return cached.read_bytes()
    doc = json.loads(gzip.decompress(raw))
    for proc in doc["rocprofiler-sdk-tool"]:
        records = proc.get("buffer_records") or {}
        for kind in records:
            records[kind] = records[kind][:20]
        used = {r.get("dispatch_info", {}).get("kernel_id") for r in
                records.get("kernel_dispatch", [])}
        proc["kernel_symbols"] = [s for s in proc.get("kernel_symbols", [])
                                  if s.get("kernel_id") in used or s.get("kernel_id") == 0]
        keep = ("id", "type", "node_id", "name", "product_name", "cu_count", "size")
        proc["agents"] = [{k: a[k] for k in keep if k in a} for a in proc.get("agents", [])]
        strings = proc.get("strings") or {}
        for key in ("att_filenames", "code_object_snapshot_filenames"):
            strings[key] = strings.get(key, [])[:2]
        proc["code_objects"] = proc.get("code_objects", [])[:2]
    data = json.dumps(doc).encode()
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + f".{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, cached)
    return data


@cache
def _dataset(trace_path: Path) -> tuple[tuple[str, bytes], ...]:
    """The files of a Parquet dataset written from a real trace."""
    import tracekit
    from tracekit.registry import load_registry

    registry = load_registry(dists={"tracekit"}, environ={})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "mlp_cpu.parquet"
        tracekit.write(tracekit.read(trace_path, registry=registry), out, format="parquet",
                       registry=registry)
        return tuple((p.name, p.read_bytes()) for p in sorted(out.iterdir()))


def load_seeds(reader: str, which: dict[str, list[tuple[str, str]]] = SEEDS) -> list[Seed]:
    """The seeds of ``reader`` that are here (shared ones may be absent)."""
    seeds = []
    for where, rel in which[reader]:
        base = {"shared": SHARED, "derived": SHARED, "fixtures": FIXTURES, "bad": BAD,
                "dataset": FIXTURES}[where]
        path = base / rel
        if not path.exists():
            if where in ("shared", "derived") and \
                    os.environ.get("TRACEKIT_REQUIRE_SHARED") == "1":
                pytest.fail(f"{path} is missing and TRACEKIT_REQUIRE_SHARED=1")
            continue
        if where == "dataset":
            seeds.append(Seed("mlp_cpu.parquet", _dataset(path), "dataset", False))
        elif path.is_dir():
            files = tuple((p.name, p.read_bytes()) for p in sorted(path.iterdir()))
            seeds.append(Seed(path.name, files, "dataset", False))
        else:
            raw = _derived_rocprofv3(path) if where == "derived" else path.read_bytes()
            name = path.name.removesuffix(".gz") if where == "derived" else path.name
            gz = raw[:2] == b"\x1f\x8b"
            content = gzip.decompress(raw) if gz else raw
            seeds.append(Seed(name, raw, _kind(name, content), gz))
    return seeds


# -- mutations: each takes hypothesis' draw and returns (new bytes, what was done) -------------

Draw = Callable[..., Any]
TOKENS = [b"\x00", b"\xff\xfe", b'"', b"{", b"[", b"]", b"}", b",", b"\n", b"\\", b"-",
          b"9" * 25, b"NaN", b"1e400", b"\xc3\x28", b"\r\n", b"\t", b"'", b";", b" ",
          b"\xef\xbb\xbf", b":", b"(", b")", b"0x"]
NUMBERS = ["-1", "0", "99999999999999999999999", "1e400", "nan", "inf", "-0.000001",
           "18446744073709551616", "9223372036854775808", "-9223372036854775809", "0x10", "",
           "1.5", "1e-400", "00000000000000000000001"]


def mutate_bytes(draw: Draw, data: bytes) -> tuple[bytes, str]:
    """One byte-level change."""
    n = len(data)
    op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "splice", "repeat"]),
              label="byte op")
    pos = draw(st.integers(0, max(n, 1) - 1), label="position") if n else 0
    if op == "truncate":
        return data[:pos], f"cut at byte {pos} of {n}"
    if op == "flip":
        count = draw(st.integers(1, 8), label="bytes flipped")
        out = bytearray(data)
        for k in range(count):
            i = (pos + k * 7919) % max(n, 1)
            if n:
                out[i] ^= draw(st.integers(1, 255), label="mask")
        return bytes(out), f"{count} bytes flipped from byte {pos}"
    if op == "insert":
        token = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=8),
                     label="token")
        return data[:pos] + token + data[pos:], f"{token!r} inserted at byte {pos}"
    if op == "delete":
        size = draw(st.integers(1, 64), label="size")
        return data[:pos] + data[pos + size:], f"{size} bytes deleted at byte {pos}"
    start = draw(st.integers(0, max(n, 1) - 1), label="source") if n else 0
    size = draw(st.integers(1, 256), label="size")
    chunk = data[start:start + size]
    if op == "splice":
        return data[:pos] + chunk + data[pos:], f"bytes {start}+{size} copied to byte {pos}"
    times = draw(st.sampled_from([2, 10, 1000]), label="times")
    return data[:pos] + chunk * times + data[pos:], \
        f"bytes {start}+{size} repeated {times} times at byte {pos}"


# JSON values that readers meet in damaged files; RAW ones are spliced in as text.
RAW = {"<NaN>": "NaN", "<Infinity>": "Infinity", "<-Infinity>": "-Infinity",
       "<1e400>": "1e400", "<-0>": "-0", "<deep>": "[" * 3000 + "]" * 3000}
JSON_VALUES: list[Any] = [
    "<NaN>", "<Infinity>", "<-Infinity>", "<1e400>", "<-0>", "<deep>", 1e308, -1e308,
    2**63, 2**64, -(2**63) - 1, 10**30, -1, 0, 1.5, "", "x", "\x00", "\ud800", "NaN", "12",
    "1e400", None, True, False, [], {}, [1, "a", None], {"a": {"b": [1]}}, "é" * 50_000,
    list(range(5000))]


@cache
def _json_paths(content: bytes) -> tuple[Any, tuple[tuple[Any, ...], ...]]:
    """A parsed document and the paths of (up to 20,000 of) its values, breadth first."""
    doc = json.loads(content)
    paths: list[tuple[Any, ...]] = []
    queue: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while queue and len(paths) < 20_000:
        value, path = queue.pop(0)
        if path:
            paths.append(path)
        if isinstance(value, dict):
            queue.extend((v, (*path, k)) for k, v in value.items())
        elif isinstance(value, list):
            queue.extend((v, (*path, i)) for i, v in enumerate(value[:200]))
    return doc, tuple(paths)


def _dump(doc: Any) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    for marker, raw in RAW.items():
        text = text.replace(json.dumps(marker), raw)
    return text.encode()


def mutate_json(draw: Draw, content: bytes) -> tuple[bytes, str]:
    """One value of the document replaced, deleted or repeated."""
    try:
        doc, paths = _json_paths(content)
    except (ValueError, RecursionError):
        return mutate_bytes(draw, content)
    if not paths:
        return mutate_bytes(draw, content)
    path = paths[draw(st.integers(0, len(paths) - 1), label="json path")]
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "repeat"]),
              label="json op")
    where = "$" + "".join(f"[{k!r}]" for k in path)
    # The parsed document is shared between examples: every change is undone after dumping.
    if op == "delete":
        del parent[key]
        try:
            return _dump(doc), f"{where} deleted"
        finally:
            if isinstance(parent, list):
                parent.insert(key, old)
            else:
                parent[key] = old
    if op == "repeat" and isinstance(parent, list):
        times = draw(st.sampled_from([2, 100, 3000]), label="times")
        parent[key:key + 1] = [old] * times
        try:
            return _dump(doc), f"{where} repeated {times} times"
        finally:
            parent[key:key + times] = [old]
    value = draw(st.sampled_from(JSON_VALUES), label="json value")
    parent[key] = value
    try:
        shown = value if not isinstance(value, (str, list)) or len(value) < 40 \
            else f"<{type(value).__name__} of {len(value)}>"
        return _dump(doc), f"{where} = {shown!r}"
    finally:
        parent[key] = old


SQL_VALUES = ["'abc'", "X'00FFFE'", "1.5", "NULL", "9223372036854775807",
              "-9223372036854775808", "-1", "0", "'NaN'", "1e308", "''", "'12'",
              "CAST(X'FFFE41' AS TEXT)", "'" + "x" * 5000 + "'"]


def _sql(con: sqlite3.Connection, *statements: str) -> None:
    for s in statements:
        con.execute(s)


def _loose(table: str, columns: str = "*") -> tuple[str, ...]:
    return (f'CREATE TABLE "tk_tmp" AS SELECT {columns} FROM "{table}"', f'DROP TABLE "{table}"',
            f'ALTER TABLE "tk_tmp" RENAME TO "{table}"')


def mutate_sqlite(draw: Draw, content: bytes) -> tuple[bytes, str]:
    """One schema or value change made with SQL (views may be left dangling, as in damage)."""
    con = sqlite3.connect(":memory:")
    try:
        con.deserialize(content)
        con.execute("PRAGMA legacy_alter_table=ON")
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        views = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name")]
    except sqlite3.DatabaseError:
        con.close()
        return mutate_bytes(draw, content)
    if not tables:
        con.close()
        return mutate_bytes(draw, content)
    with_rows = [t for t in tables if con.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()]
    table = draw(st.sampled_from(with_rows or tables), label="table")
    columns = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    ops = ["update", "update", "update", "drop_table", "drop_column", "rename_column",
           "delete_rows", "repeat_rows"] + (["drop_view"] if views else [])
    op = draw(st.sampled_from(ops), label="sql op")
    column = draw(st.sampled_from(columns), label="column") if columns else None
    try:
        if op == "update" and column:
            value = draw(st.sampled_from(SQL_VALUES), label="sql value")
            limit = draw(st.sampled_from([1, 3, None]), label="rows")
            where = "" if limit is None else \
                f' WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT {limit})'
            update = f'UPDATE "{table}" SET "{column}" = {value}{where}'
            try:
                _sql(con, update)
            except sqlite3.DatabaseError:
                _sql(con, *_loose(table), update.replace(where, "") if where else update)
            what = f"{table}.{column} = {value[:30]} in {limit or 'all'} rows"
        elif op == "drop_table":
            _sql(con, f'DROP TABLE "{table}"')
            what = f"table {table} dropped"
        elif op == "drop_column" and column:
            keep = ", ".join(f'"{c}"' for c in columns if c != column) or "NULL AS nothing"
            _sql(con, *_loose(table, keep))
            what = f"column {table}.{column} dropped"
        elif op == "rename_column" and column:
            cols = ", ".join(f'"{c}"' + (f' AS "{c}_x"' if c == column else "")
                             for c in columns)
            _sql(con, *_loose(table, cols))
            what = f"column {table}.{column} renamed {column}_x"
        elif op == "delete_rows":
            _sql(con, f'DELETE FROM "{table}"')
            what = f"every row of {table} deleted"
        elif op == "repeat_rows":
            _sql(con, *_loose(table), *[f'INSERT INTO "{table}" SELECT * FROM "{table}"'] * 4)
            what = f"rows of {table} repeated 16 times"
        elif op == "drop_view":
            view = draw(st.sampled_from(views), label="view")
            _sql(con, f'DROP VIEW "{view}"')
            what = f"view {view} dropped"
        else:
            return mutate_bytes(draw, content)
        con.commit()
        return con.serialize(), what
    except sqlite3.DatabaseError as exc:
        return content, f"({op} on {table} refused by SQLite: {exc}; input unchanged)"
    finally:
        con.close()


def mutate_csv(draw: Draw, content: bytes) -> tuple[bytes, str]:
    """One cell, row or column damaged; the rest written back as CSV."""
    import csv

    text = content.decode("utf-8", "surrogateescape")
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        return mutate_lines(draw, content)
    op = draw(st.sampled_from(["cell", "cell", "short_row", "long_row", "drop_column",
                               "header", "repeat_rows", "no_rows"]), label="csv op")
    r = draw(st.integers(1, len(rows) - 1), label="row")
    width = max(len(rows[0]), 1)
    c = draw(st.integers(0, width - 1), label="column")
    if op == "cell" and c < len(rows[r]):
        value = draw(st.sampled_from([*NUMBERS, "abc", "\x00", "\udcff\udcfe", "é" * 20_000]),
                     label="cell")
        rows[r][c] = value
        what = f"line {r + 1} column {c + 1} = {value[:30]!r}"
    elif op == "short_row":
        rows[r] = rows[r][:c]
        what = f"line {r + 1} cut to {c} fields"
    elif op == "long_row":
        rows[r] = rows[r] + ["extra"] * draw(st.integers(1, 3), label="extra")
        what = f"line {r + 1} given extra fields"
    elif op == "drop_column":
        rows = [row[:c] + row[c + 1:] for row in rows]
        what = f"column {c + 1} dropped"
    elif op == "header" and c < len(rows[0]):
        value = draw(st.sampled_from(["", "Name", rows[0][0], "x" * 500, "\x00"]),
                     label="header")
        rows[0][c] = value
        what = f"header cell {c + 1} = {value[:30]!r}"
    elif op == "repeat_rows":
        rows = rows[:1] + rows[1:] * 50
        what = "rows repeated 50 times"
    else:
        rows = rows[:1]
        what = "every row removed"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8", "surrogateescape"), what


NUMBER = re.compile(rb"\d+(?:\.\d+)?")


def mutate_lines(draw: Draw, content: bytes) -> tuple[bytes, str]:
    """One line deleted, repeated, swapped, cut, re-indented or given an odd number."""
    lines = content.splitlines(keepends=True)
    if not lines:
        return mutate_bytes(draw, content)
    i = draw(st.integers(0, len(lines) - 1), label="line")
    line = lines[i]
    op = draw(st.sampled_from(["number", "number", "delete", "repeat", "swap", "cut",
                               "indent", "garbage"]), label="line op")
    numbers = list(NUMBER.finditer(line))
    if op == "number" and numbers:
        m = numbers[draw(st.integers(0, len(numbers) - 1), label="which number")]
        value = draw(st.sampled_from(NUMBERS), label="number").encode()
        lines[i] = line[:m.start()] + value + line[m.end():]
        what = f"line {i + 1}: {m.group().decode()} -> {value.decode()!r}"
    elif op == "delete":
        del lines[i]
        what = f"line {i + 1} deleted"
    elif op == "repeat":
        times = draw(st.sampled_from([2, 100, 5000]), label="times")
        lines[i:i + 1] = [line] * times
        what = f"line {i + 1} repeated {times} times"
    elif op == "swap":
        j = draw(st.integers(0, len(lines) - 1), label="other line")
        lines[i], lines[j] = lines[j], lines[i]
        what = f"lines {i + 1} and {j + 1} swapped"
    elif op == "cut":
        at = draw(st.integers(0, max(len(line) - 1, 0)), label="at")
        lines[i] = line[:at] + b"\n"
        what = f"line {i + 1} cut at {at}"
    elif op == "indent":
        lines[i] = line.lstrip() if line[:1] in b" \t" else b"\t    " + line
        what = f"line {i + 1} re-indented"
    else:
        junk = draw(st.sampled_from([b"garbage line\n", b"\n", b"# comment\n", b"\x00\n",
                                     b"\xff\xfe\xfd\n", b":" * 1000 + b"\n"]), label="junk")
        lines.insert(i, junk)
        what = f"{junk[:20]!r} inserted before line {i + 1}"
    return b"".join(lines), what


def mutate_dataset(draw: Draw, files: tuple[tuple[str, bytes], ...]
                   ) -> tuple[dict[str, bytes], str]:
    """One file of a Parquet dataset damaged, removed or replaced by another."""
    out = dict(files)
    name = draw(st.sampled_from(sorted(out)), label="file")
    op = draw(st.sampled_from(["content", "content", "content", "remove", "swap"]),
              label="dataset op")
    if op == "remove":
        del out[name]
        return out, f"{name} removed"
    if op == "swap":
        other = draw(st.sampled_from(sorted(out)), label="other file")
        out[name] = out[other]
        return out, f"{name} replaced by {other}"
    if name.endswith(".json"):
        mutate = draw(st.sampled_from([mutate_json, mutate_json, mutate_bytes]),
                      label="manifest mutation")
        out[name], what = mutate(draw, out[name])
    else:
        out[name], what = mutate_bytes(draw, out[name])
    return out, f"{name}: {what}"


MUTATIONS = {"json": [mutate_json, mutate_json, mutate_bytes, mutate_lines],
             "csv": [mutate_csv, mutate_csv, mutate_lines, mutate_bytes],
             "text": [mutate_lines, mutate_lines, mutate_bytes],
             "sqlite": [mutate_sqlite, mutate_sqlite, mutate_sqlite, mutate_bytes]}


def mutate(draw: Draw, s: Seed) -> tuple[bytes | dict[str, bytes], str]:
    """A mutated copy of seed ``s`` and what was done to it."""
    if s.kind == "dataset":
        assert isinstance(s.raw, tuple)
        return mutate_dataset(draw, s.raw)
    assert isinstance(s.raw, bytes)
    if s.gz and draw(st.integers(0, 4), label="gzip bytes") == 0:
        data, what = mutate_bytes(draw, s.raw)
        return data, f"gzip stream: {what}"
    how = draw(st.sampled_from(MUTATIONS[s.kind]), label="mutation")
    data, what = how(draw, s.content)
    if s.gz:
        data = gzip.compress(data, mtime=0)
    return data, what


# -- running an example -------------------------------------------------------------------------

@dataclass
class Failure:
    signature: str
    seed: str
    mutation: str
    problems: list[str]
    saved: Path


def _write(folder: Path, name: str, payload: bytes | dict[str, bytes]) -> Path:
    path = folder / name
    if isinstance(payload, dict):
        path.mkdir()
        for file, data in payload.items():
            (path / file).write_bytes(data)
    else:
        path.write_bytes(payload)
    return path


def _signature(outcome_sig: str, found: list[str]) -> str:
    first = re.sub(r"\d+", "N", found[0].split(":")[0])
    return f"{outcome_sig} | {first}"


def attempt(reader: str, s: Seed, payload: bytes | dict[str, bytes], what: str,
            forced: bool) -> Failure | None:
    """Read one mutated input; a Failure (its input saved) when something is wrong."""
    folder = Path(tempfile.mkdtemp(prefix="tkfuzz-"))
    try:
        path = _write(folder, s.name, payload)
        outcome, found = check(path, reader if forced else None)
        if not found:
            return None
        signature = _signature(outcome.signature, found)
        key = hashlib.sha1(signature.encode()).hexdigest()[:10]
        target = SAVE / reader / f"{key}-{s.name}"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                shutil.copytree(path, target)
            else:
                shutil.copyfile(path, target)
            target.with_name(target.name + ".txt").write_text(
                f"reader: {reader} ({'--from ' + reader if forced else 'detected'})\n"
                f"seed: {s.name}\nmutation: {what}\nsignature: {signature}\n"
                + "".join(f"problem: {p}\n" for p in found))
        return Failure(signature, s.name, what, found, target)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


BATCH = 5  # examples per hypothesis run; the time bound is checked between runs


def fuzz(reader: str, seeds: list[Seed], examples: int, seconds: float
         ) -> tuple[dict[str, Failure], int]:
    """Run up to ``examples`` examples (within ``seconds``); the distinct failures found and
    the number of examples run.

    Hypothesis has no time bound of its own, and a test that stops drawing when time is up
    makes its generation inconsistent: the examples run in batches of ``BATCH``, each a
    hypothesis run with its own fixed seed, and the clock is read only between batches.
    """
    failures: dict[str, Failure] = {}
    stop_at = time.monotonic() + seconds

    def one(data: st.DataObject) -> None:
        s = data.draw(st.sampled_from(seeds), label="seed")
        payload, what = mutate(data.draw, s)
        forced = data.draw(st.integers(0, 4), label="detect") != 0
        failure = attempt(reader, s, payload, what, forced)
        if failure is not None and failure.signature not in failures:
            failures[failure.signature] = failure

    done, batch = 0, 0
    while done < examples and time.monotonic() < stop_at:
        size = min(BATCH, examples - done)
        run = seed(SEED * 100_003 + batch)(settings(
            max_examples=size, database=None, derandomize=False,
            deadline=(TIMEOUT_S * WALL_FACTOR + 10) * 1000, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck))(given(st.data())(one)))
        run()
        done, batch = done + size, batch + 1
    return failures, done


def _report(reader: str, failures: dict[str, Failure], done: int) -> str:
    lines = [f"{len(failures)} distinct failures in {done} examples fuzzing the {reader} "
             f"reader (seed {SEED}); inputs saved under {SAVE / reader}:"]
    for f in failures.values():
        lines.append(f"- {f.problems[0][:300]}\n    seed {f.seed}, {f.mutation[:150]}\n"
                     f"    input: {f.saved}")
    return "\n".join(lines)


@pytest.mark.parametrize("reader", READERS)
def test_fuzz_smoke(reader):
    """A few examples per reader from the corpus' valid files, in every run."""
    seeds = load_seeds(reader, SMOKE)
    assert seeds, f"no smoke seeds for {reader}"
    failures, done = fuzz(reader, seeds, examples=4, seconds=math.inf)
    if failures:
        pytest.fail(_report(reader, failures, done), pytrace=False)


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_fuzz(reader):
    seeds = load_seeds(reader)
    if not seeds:
        pytest.skip(f"no seeds for {reader} here")
    failures, done = fuzz(reader, seeds, examples=EXAMPLES, seconds=SECONDS)
    print(f"{reader}: {done} examples, {len(failures)} distinct failures")
    if failures:
        pytest.fail(_report(reader, failures, done), pytrace=False)


def test_mutations_are_deterministic_and_change_the_input():
    """The same draws give the same mutant, and a mutant differs from its seed."""
    s = load_seeds("kineto", SMOKE)[0]
    made: list[bytes] = []

    @seed(7)
    @settings(max_examples=15, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def record(data: st.DataObject) -> None:
        payload, _ = mutate(data.draw, s)
        assert isinstance(payload, bytes)
        made.append(hashlib.sha256(payload).digest())

    record()
    first = list(made)
    made.clear()
    record()
    assert made == first
    assert sum(h != hashlib.sha256(s.content).digest() for h in first) >= 12

