"""Wording and small-sample fixes found by reading real traces' reports as an expert would."""

from __future__ import annotations

import pytest
import tracekit
from helpers import shared_path
from tracekit.model import ReadLog, Trace, empty_table
from tracekit.overview import read_notice_lines


def test_a_skipped_notice_names_what_was_counted_once(registry):
    """rocprof v1 folder: the count of empty records, and the totals files left out (the
    lines ``analyze`` and ``convert`` print)."""
    trace = tracekit.read(shared_path("rocprof-v1", "hgliu_mi300x_2025"), registry=registry)
    assert read_notice_lines(trace) == [
        "warning: hgliu_mi300x_2025: 1 empty or unknown records skipped: no event in it",
        "warning: hgliu_mi300x_2025: 2 results.copy_stats.csv records skipped: aggregate "
        "totals of the run results.json records",
        "warning: hgliu_mi300x_2025: 6 results.hip_stats.csv records skipped: aggregate "
        "totals of the run results.json records"]


@pytest.mark.parametrize("kind,line", [
    ("empty or unknown records", "3 empty or unknown records skipped: why"),
    ("PERF_RECORD side-band lines", "3 PERF_RECORD side-band lines skipped: why"),
    ("non-object entries", "3 non-object entries skipped: why"),
    ("*.txt files", "3 *.txt files skipped: why"),
    ("trace events (X)", "3 trace events (X) skipped: why"),
    ("samples", "3 samples skipped: why"),
    ("results.stats.csv", "3 results.stats.csv records skipped: why"),
    ("KERNEL", "3 KERNEL records skipped: why"),
    ("NVTX_EVENTS", "3 NVTX_EVENTS records skipped: why"),
    ("M:process_labels", "3 M:process_labels records skipped: why"),
])
def test_every_skipped_notice_reads_naturally(kind, line):
    log = ReadLog()
    log.note("src", kind, "skipped: why", 3)
    trace = Trace(events=empty_table("events"), log=log)
    assert read_notice_lines(trace) == [f"warning: src: {line}"]
