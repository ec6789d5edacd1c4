"""Analyzers that declare the event columns they read (``Analyzer.event_columns``) give the
same report without the others, and ``tracekit analyze`` drops the others before analysis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tracekit
from helpers import FIXTURES, SHARED
from tracekit.frontend import _only_columns_read, report_format_for
from tracekit.pipeline import default_registry

DECLARED = sorted(n for n, c in default_registry().analyzers.items()
                  if c.event_columns is not None)
GPU_INPUTS = sorted(
    [*(FIXTURES / "scenarios").glob("*.json.gz"),
     *(SHARED / "torch-trace").rglob("*.json.gz"),
     *(SHARED / "nsys-sqlite").glob("*.sqlite"),
     *(p for p in (SHARED / "rocprof-v3").glob("*") if p.is_dir()),
     *(p for p in (SHARED / "rocprof-v1").glob("*") if p.is_dir())],
    key=str)


def test_the_diagnosis_analyzers_declare_their_columns() -> None:
    assert {"bottleneck", "gaps", "breakdown", "sync", "launch", "overlap", "ranks",
            "kernels"} <= \
        set(DECLARED)
    for name in DECLARED:
        columns = default_registry().analyzers[name].event_columns
        assert "args" not in columns and "stack_id" not in columns, name


def test_analyze_drops_what_no_analyzer_or_format_reads() -> None:
    registry = default_registry()
    trace = tracekit.read(FIXTURES / "scenarios" / "tiny_kernels.pt.trace.json.gz")
    text = report_format_for("text", registry=registry)
    pruned = _only_columns_read(trace, ["bottleneck"], text, registry)
    assert "args" in trace.events.column_names
    assert set(pruned.events.column_names) == \
        set(trace.events.column_names) - {"args", "stack_id"}
    assert pruned.events.num_rows == trace.events.num_rows
    # An analyzer or a format that reads any column (None) keeps them all.
    assert _only_columns_read(trace, ["bottleneck", "summary"], text, registry) is trace
    html = report_format_for("html", registry=registry)
    assert _only_columns_read(trace, ["bottleneck"], html, registry) is trace


@pytest.mark.slow
@pytest.mark.parametrize("path", GPU_INPUTS, ids=lambda p: Path(p).name)
def test_declared_columns_give_the_same_report(path: Path) -> None:
    trace = tracekit.read(path)
    for name in DECLARED:
        keep = default_registry().analyzers[name].event_columns
        narrow = dataclasses.replace(trace, events=trace.events.select(
            [c for c in trace.events.column_names if c in keep]))
        full = [r.to_json() for r in tracekit.analyze(trace, name)]
        assert [r.to_json() for r in tracekit.analyze(narrow, name)] == full, name
