"""Per-input analysis of a run in parallel: local processes and Dask give the in-process
report (issue 16 item 3)."""

from __future__ import annotations

import pytest
import tracekit
from helpers import shared_path
from tracekit.engine import analyze_run, map_inputs


def ranks() -> list:
    """Two ranks of HTA's sampled run (the test skips where ../shared is absent)."""
    return [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]


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
        analyze_run(ranks(), ["gaps"], registry=registry)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_run_analyzed_per_input_equals_the_whole_run_read_at_once(engine, registry):
    if engine == "dask":
        pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    [parallel] = analyze_run(ranks(), ["ranks"], engine=engine, jobs=2)
    trace = tracekit.read(ranks(), registry=registry)
    [whole] = tracekit.analyze(trace, "ranks", registry=registry)
    for name in ("ranks", "skew"):
        assert parallel.tables[name].equals(whole.tables[name])
    assert parallel.tables["skew"].to_pydict()["lateness"] == [0, 27_006_000]
    assert parallel.notes == whole.notes
    assert [f.title for f in parallel.findings] == [f.title for f in whole.findings]


@pytest.mark.slow
def test_cli_engine_writes_the_ranks_report(tmp_path):
    import json

    from tracekit.cli import main

    out = tmp_path / "run.json"
    code = main(["analyze", "--engine", "local", "-j", "2", "--format", "json", "-o", str(out),
                 "-q", *map(str, ranks())])
    assert code == 0
    [report] = json.loads(out.read_text())["reports"]
    assert report["analyzer"] == "ranks"
    skew = report["tables"]["skew"]
    lateness = [c["name"] for c in skew["columns"]].index("lateness")
    assert [row[lateness] for row in skew["rows"]] == [0, 27_006_000]


def test_cli_refuses_an_unknown_engine(capsys):
    from tracekit.cli import main

    assert main(["analyze", "--engine", "spark", str(ranks()[0])]) == 2
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


def _scale_ranks():
    """bench/scale_ranks.py, which plants the straggler, as a module."""
    import importlib.util

    from helpers import ROOT

    spec = importlib.util.spec_from_file_location("scale_ranks", ROOT / "bench" / "scale_ranks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A run of 8 copies of a real rank, rank 5's compute slowed 1.3x (see the bench)."""
    scale = _scale_ranks()
    base = shared_path("torch-trace", "hta", "sampled_rank-0.json.gz")
    return scale.make_run(base, 8, tmp_path_factory.mktemp("runs"), factor=1.3)


@pytest.mark.slow
def test_the_planted_straggler_and_its_factor_are_found(planted):
    import numpy as np

    [report] = analyze_run([planted], ["ranks"], jobs=2)
    ranks = report.tables["ranks"].to_pydict()
    assert ranks["rank"] == list(range(8))
    assert report.tables["skew"].to_pydict()["last_at"] == [0, 0, 0, 0, 0, 10, 0, 0]
    [straggler, spread] = report.findings
    assert spread.title.startswith("collective arrival spread:")
    assert straggler.title.startswith("straggler: rank 5 arrives last at 10 of 10 collectives")
    assert straggler.evidence["rank"] == 5
    assert "its GPU work takes longer than the others'" in straggler.suggestion
    compute = np.array(ranks["compute_pct"]) * np.array(ranks["span"]) / 100
    # compute_pct is rounded to 0.1 %: the factor comes back to within that
    assert compute[5] / np.median(np.delete(compute, 5)) == pytest.approx(1.3, rel=0.005)
    # ... and exactly in the finding's evidence: each compute kernel was stretched 1.3x.
    assert straggler.evidence["compute_vs_others"] == pytest.approx(1.3, abs=0.002)
    assert report.notes == ["rank numbers from the trace's distributed info"]


@pytest.mark.slow
def test_a_dask_cluster_gives_the_numbers_of_local_processes(planted):
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    import logging

    from dask.distributed import LocalCluster
    from tracekit.pipeline import default_registry

    default_registry()  # loaded once before the cluster's threads use it
    [local] = analyze_run([planted], ["ranks"], engine="local", jobs=2)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        [dask] = analyze_run([planted], ["ranks"], scheduler=cluster.scheduler_address)
    for name in ("ranks", "skew"):
        assert dask.tables[name].equals(local.tables[name])
    assert [(f.title, f.evidence) for f in dask.findings] == \
        [(f.title, f.evidence) for f in local.findings]
    assert dask.notes == local.notes


@pytest.mark.slow
def test_a_plain_analyze_of_a_large_run_takes_it_per_input(planted, tmp_path):
    import shutil

    from tracekit.engine import MANY_INPUTS, analyze_planned, planned_note

    assert analyze_planned([planted]) is None  # 8 ranks: read whole, with the verdict
    (tmp_path / "notes.txt").write_text("not a trace\n")
    shutil.copy(planted / "rank-0.pt.trace.json.gz", tmp_path / f"rank-{MANY_INPUTS}.json.gz")
    [report] = analyze_planned([planted, tmp_path])
    assert report.analyzer == "ranks"
    assert report.tables["ranks"].num_rows == MANY_INPUTS + 1
    assert report.notes[-2:] == [
        f"{tmp_path}: 1 file not read: notes.txt (no reader recognises it)",
        planned_note(MANY_INPUTS + 1)]


@pytest.mark.slow
def test_a_run_dataset_is_one_task_per_rank_reading_only_the_columns_needed(tmp_path,
                                                                             registry):
    """Issue 16: a run converted to Parquet (rank=N folders) is analyzed one rank per task,
    each reading only the event columns the analyzers declare, with the numbers of the
    run read whole."""
    import pyarrow.compute as pc
    from tracekit.engine import _split_parts

    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    whole = tracekit.read(paths, registry=registry)
    out = tmp_path / "run.parquet"
    tracekit.write(whole, out, registry=registry)
    assert [p.name for p in _split_parts([out], None, registry)] == ["rank=0", "rank=1"]
    [per_rank] = analyze_run([out], ["ranks"], jobs=1)
    [together] = tracekit.analyze(whole, "ranks", registry=registry)
    for table in ("ranks", "skew"):
        assert per_rank.tables[table].equals(together.tables[table]), table
    projected = tracekit.read(out / "rank=0", options=["columns=kind,name,ts_ns"],
                              registry=registry)
    full = tracekit.read(out / "rank=0", registry=registry)
    assert projected.events.num_rows == full.events.num_rows == 4811
    assert pc.all(pc.is_null(projected.events["args"])).as_py()
    assert projected.events["name"].equals(full.events["name"])
    assert projected.log.notices() == full.log.notices()
