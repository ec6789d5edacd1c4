"""Per-input analysis of a run in parallel: local processes and Dask give the in-process
report (issue 16 item 3)."""

from __future__ import annotations

import pytest
import tracekit
from helpers import shared_path
from tracekit.engine import analyze_run, map_inputs

RANKS = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]


def test_map_inputs_keeps_input_order_in_processes():
    finished = []
    # a builtin: the spawned workers can import it (a test module's function they cannot)
    assert map_inputs(abs, [-3, 1, -2], jobs=2, done=finished.append) == [3, 1, 2]
    assert sorted(finished) == [1, 2, 3]


def test_an_unknown_engine_is_a_usage_error():
    with pytest.raises(tracekit.UsageError, match="unknown engine 'spark'"):
        map_inputs(abs, [1], engine="spark")


def test_an_analyzer_that_needs_the_whole_trace_is_refused(registry):
    with pytest.raises(tracekit.UsageError, match="analyzer 'gaps' reads the whole trace"):
        analyze_run(RANKS, ["gaps"], registry=registry)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_run_analyzed_per_input_equals_the_whole_run_read_at_once(engine, registry):
    if engine == "dask":
        pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    [parallel] = analyze_run(RANKS, ["ranks"], engine=engine, jobs=2)
    trace = tracekit.read(RANKS, registry=registry)
    [whole] = tracekit.analyze(trace, "ranks", registry=registry)
    for name in ("ranks", "skew"):
        assert parallel.tables[name].equals(whole.tables[name])
    assert parallel.tables["skew"].to_pydict()["lateness"] == [132_166_000, 381_329_000]
    assert parallel.notes == whole.notes
    assert [f.title for f in parallel.findings] == [f.title for f in whole.findings]


@pytest.mark.slow
def test_cli_engine_writes_the_ranks_report(tmp_path):
    import json

    from tracekit.cli import main

    out = tmp_path / "run.json"
    code = main(["analyze", "--engine", "local", "-j", "2", "--format", "json", "-o", str(out),
                 "-q", *map(str, RANKS)])
    assert code == 0
    [report] = json.loads(out.read_text())["reports"]
    assert report["analyzer"] == "ranks"
    skew = report["tables"]["skew"]
    lateness = [c["name"] for c in skew["columns"]].index("lateness")
    assert [row[lateness] for row in skew["rows"]] == [132_166_000, 381_329_000]


def test_cli_refuses_an_unknown_engine(capsys):
    from tracekit.cli import main

    assert main(["analyze", "--engine", "spark", str(RANKS[0])]) == 2
    assert "unknown engine 'spark'" in capsys.readouterr().err


def test_csv_writes_one_report_table_with_units_in_the_header(capsys):
    import csv
    import io

    from tracekit.cli import main

    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    assert main(["analyze", "-a", "summary", "--format", "csv", "--table", "kernels",
                 str(path)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][:3] == ["time_pct [%]", "total [ns]", "count"]
    assert rows[1][1:3] == ["536542", "4"]
    assert rows[1][-1] == "add_parallel(const float *, const float *, float *, int)"
    assert main(["analyze", "-a", "summary", "--format", "csv", str(path)]) == 2
    assert "pick it with --table NAME (here: api, kernels" in capsys.readouterr().err
