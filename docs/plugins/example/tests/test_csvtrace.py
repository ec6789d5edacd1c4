"""Tests of the example plugin, as its author would write them (run by tracekit's own tests)."""

from pathlib import Path

import pytest
import tracekit
from tracekit import TraceReadError
from tracekit.testing import check_reader
from tracekit_csvtrace import CsvTraceReader

HERE = Path(__file__).resolve().parent.parent


def test_reads_spans():
    trace = check_reader(CsvTraceReader, HERE / "spans.csv")
    assert trace.events["name"].cast("string").to_pylist() == ["load", "train"]
    assert trace.events["ts_ns"].to_pylist() == [0, 12500]


def test_bad_number_reports_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,start_us,dur_us,tid\nload,zero,1,1\n")
    with pytest.raises(TraceReadError, match=r"bad\.csv: line 2: could not convert"):
        tracekit.read(bad, format=CsvTraceReader)
