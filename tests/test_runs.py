"""A run folder (or a quoted glob pattern) is expanded to the traces inside it (issue 16 item 1);
an nsys or rocprof output folder stays one input."""

from __future__ import annotations

import gzip
import shutil

import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.engine import MANY_INPUTS, plan
from tracekit.pipeline import expand_inputs

SCENARIO = FIXTURES / "scenarios" / "unoverlapped_allreduce.pt.trace.json.gz"


@pytest.fixture
def run(tmp_path):
    """run/ with rank-0, rank-2 and rank-10 (in a sub-folder), a README, an empty file and
    a hidden folder."""
    top = tmp_path / "run"
    (top / "late").mkdir(parents=True)
    (top / ".cache").mkdir()
    shutil.copy(SCENARIO, top / "rank-10.pt.trace.json.gz")
    shutil.copy(SCENARIO, top / "rank-2.pt.trace.json.gz")
    shutil.copy(SCENARIO, top / "late" / "rank-0.pt.trace.json.gz")
    (top / "README.txt").write_text("two ranks of a test run\n")
    (top / "empty.json").write_bytes(b"")
    return top


def test_a_run_folder_expands_to_its_traces_in_natural_order(run, registry):
    expanded = expand_inputs(run, registry=registry)
    assert [p.removeprefix(f"{run}/") for p in expanded.paths] == [
        "late/rank-0.pt.trace.json.gz", "rank-2.pt.trace.json.gz", "rank-10.pt.trace.json.gz"]
    assert expanded.skipped == {str(run): [
        (".cache", "hidden"), ("README.txt", "no reader recognises it"),
        ("empty.json", "file is empty")]}
    assert expanded.notes() == [f"{run}: 3 files not read: .cache (hidden), README.txt (no "
                                "reader recognises it), empty.json (file is empty)"]


def test_a_quoted_glob_pattern_is_expanded_unless_a_file_has_that_name(run, registry):
    pattern = f"{run}/**/rank-*.json.gz"
    assert len(expand_inputs([pattern], registry=registry).paths) == 3
    literal = run / "rank-[1].json.gz"
    shutil.copy(SCENARIO, literal)
    assert expand_inputs([literal], registry=registry).paths == [str(literal)]
    with pytest.raises(tracekit.TraceReadError,
                       match=r"rank-\*\.csv: no such file, and no file matches it as a pattern"):
        expand_inputs([f"{run}/rank-*.csv"], registry=registry)


def test_a_folder_of_nothing_readable_is_one_clear_error(tmp_path, registry):
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    with pytest.raises(tracekit.FormatDetectionError,
                       match="no reader recognises this directory; pass --from FORMAT"):
        tracekit.read(tmp_path, registry=registry)
    with pytest.raises(tracekit.TraceReadError, match="is a directory, not an Nsight Systems"):
        tracekit.read(tmp_path, format="nsys", registry=registry)


def test_with_from_only_the_named_readers_files_are_inputs(run, registry):
    expanded = expand_inputs(run, format="kineto", registry=registry)
    assert len(expanded.paths) == 3
    assert ("README.txt", "no reader recognises it") in expanded.skipped[str(run)]


def test_a_rocprof_output_folder_stays_one_input(registry):
    folder = shared_path("rocprof-v1", "kokkos_2021_gfx906")
    assert expand_inputs(folder, registry=registry).paths == [str(folder)]


@pytest.mark.slow  # reads and analyzes three traces
def test_a_run_reads_as_ranks_named_by_their_files_and_reports_what_it_left_out(run,
                                                                               registry):
    trace = tracekit.read(run, registry=registry)
    assert trace.sources == ["rank-0.pt.trace.json.gz", "rank-2.pt.trace.json.gz",
                             "rank-10.pt.trace.json.gz"]
    assert trace.log.skipped()[(str(run), "file", "skipped: README.txt (no reader recognises "
                                "it)")] == 1
    [report] = tracekit.analyze(trace, "ranks", registry=registry)
    assert report.tables["ranks"].to_pydict()["rank"] == [0, 2, 10]
    assert "rank numbers from the file name" in report.notes
    assert report.notes[-1].startswith(f"{run}: 3 files not read: .cache (hidden)")


def test_same_file_names_in_rank_folders_are_told_apart(tmp_path, registry):
    for rank in (0, 1):
        (tmp_path / f"rank{rank}").mkdir()
        shutil.copy(SCENARIO, tmp_path / f"rank{rank}" / "trace.json.gz")
    trace = tracekit.read(tmp_path, registry=registry)
    assert trace.sources == ["rank0/trace.json.gz", "rank1/trace.json.gz"]


def test_a_gzip_that_is_not_a_trace_is_counted(run, registry):
    (run / "notes.gz").write_bytes(gzip.compress(b"plain words, not a trace\n"))
    assert ("notes.gz", "no reader recognises it") in \
        expand_inputs(run, registry=registry).skipped[str(run)]


def test_plan_takes_a_large_run_per_input_unless_told_otherwise(registry):
    many = [f"rank-{i}.json" for i in range(MANY_INPUTS + 1)]
    assert plan(many[:MANY_INPUTS], registry=registry) is None
    assert plan(many, registry=registry) == "local"
    assert plan(many, ["ranks"], registry=registry) == "local"
    assert plan(many, ["bottleneck", "ranks"], registry=registry) is None
    assert plan(many[:2], engine="dask") == "dask"
    assert plan(many[:2], scheduler="tcp://host:8786") == "local"
    assert plan(many[:2], jobs=2) == "local"
