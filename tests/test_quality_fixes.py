"""Wording and small-sample fixes found by reading real traces' reports as an expert would."""

from __future__ import annotations

import pytest
import tracekit
from helpers import shared_path
from tracekit.model import ReadLog, Trace, empty_table
from tracekit.overview import read_notice_lines


def test_a_skipped_notice_names_what_was_counted_once(registry):
    """rocprof v1 folder: the totals files left out (the lines ``analyze`` and ``convert``
    print); the empty object v1 writes first in results.json is counted, not warned of."""
    trace = tracekit.read(shared_path("rocprof-v1", "hgliu_mi300x_2025"), registry=registry)
    outcomes = {(k, o): n for (_, k, o), n in trace.log.outcomes.items()}
    assert outcomes[("empty records", "nothing in them")] == 1
    assert read_notice_lines(trace) == [
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


def test_gpu_work_is_timed_device_slices(registry):
    from tracekit.defaults import has_gpu_work

    perf = tracekit.read(shared_path("perf-script", "inferno", "go-stacks.txt"), registry=registry)
    gpu = tracekit.read(shared_path("rocprof-v1", "hgliu_mi300x_2025"), registry=registry)
    assert not has_gpu_work(perf) and has_gpu_work(gpu)
    assert not has_gpu_work(Trace(events=empty_table("events")))


def test_a_task_says_whether_its_input_holds_gpu_work():
    from tracekit.engine import _parts_of_input

    for parts, gpu in (
            (("perf-script", "inferno", "go-stacks.txt"), False),
            (("rocprof-v1", "hgliu_mi300x_2025"), True)):
        job = (str(shared_path(*parts)), parts[-1], "perf" if not gpu else "rocprof")
        parts_of, found = _parts_of_input(job, names=("ranks",), reader_options=(),
                                        analyzer_options=(), check_gpu=True)
        assert len(parts_of) == 1 and found is gpu
        assert _parts_of_input(job, names=("ranks",), reader_options=(),
                               analyzer_options=())[1] is False  # not asked


@pytest.mark.slow  # nine inputs read in spawned processes, then whole; then again
def test_a_large_cpu_only_run_gets_the_cpu_report(tmp_path, registry):
    """Nine perf scripts, more than ``MANY_INPUTS``: no input holds GPU work, so the run is read
    whole and gets the CPU defaults (the ``ranks`` report of per-input tasks said only "no GPU
    activity"); ``-a ranks`` still runs per input."""
    import shutil

    from tracekit.engine import MANY_INPUTS, analyze_planned
    from tracekit.frontend import analyze_report

    source = shared_path("perf-script", "speedscope", "simple-with-header.linux-perf.txt")
    paths = []
    for i in range(MANY_INPUTS + 1):
        paths.append(tmp_path / f"r{i}.perf")
        shutil.copy(source, paths[-1])
    done = analyze_report(paths, registry=registry)  # analyze_planned said None: read whole
    assert [r.analyzer for r in done.reports] == ["bottleneck", "cpu"]
    assert done.reports[0].findings[0].evidence["verdict"] == "none"
    cpu = done.reports[1].findings[0].evidence
    assert cpu["samples"] == 136 * (MANY_INPUTS + 1) and cpu["top_function"] == "beta()"
    [ranks] = analyze_planned(paths, ["ranks"], registry=registry)
    assert ranks.analyzer == "ranks"


def test_short_names_keep_apart_names_that_one_cut_would_merge():
    from tracekit.toolkit import short_names

    a = "void k<Op(bool, int), " + "x" * 40 + ", 1>(float*)"
    b = a.replace(", 1>", ", 2>")
    assert short_names([a, "short", b], 20) == ["void k<Op(…xx, 1>(f…", "short",
                                                "void k<Op(…xx, 2>(f…"]
    assert short_names([a, "short"], 20) == ["void k<Op(bool, int…", "short"]


def test_short_names_keep_apart_names_that_differ_in_two_places():
    """cuBLAS names that differ in the tile size and in split_k: no one stretch of 16
    characters tells each from all the others, their distinct words do."""
    from tracekit.toolkit import short_names

    def gemm(tile: str, split: bool) -> str:
        return (f"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize{tile}_stage3_warpsize2x2x1_ffma"
                f"_aligna4_alignc4_execute_{'split_k_' if split else ''}kernel__5x_cublas")

    names = [gemm("64x256x8", False), gemm("128x128x8", False), gemm("64x256x8", True),
             gemm("128x128x8", True)]
    assert short_names(names, 36) == [
        "sm80_xmma_gemm_f32f…tilesize64x256x8", "sm80_xmma_gemm_f32…tilesize128x128x8",
        "sm80_xmma_gem…tilesize64x256x8…split", "sm80_xmma_ge…tilesize128x128x8…split"]


def test_the_top_kernels_of_the_compute_finding_read_apart():
    """Cloverleaf's first and third kernels differ only at character 499 of 524 ('instance
    2' and 'instance 1' of a lambda); the finding shows them there, each checked against the
    export by SQL."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        top = [name for name, in db.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = k.demangledName GROUP BY s.value "
            "ORDER BY SUM(k.end - k.start) DESC LIMIT 3")]
    [report] = tracekit.analyze(tracekit.read(path), "bottleneck")
    compute = next(f for f in report.findings if f.title.startswith("compute:"))
    shown = [compute.evidence[f"top{i}"].rsplit(" (", 1)[0] for i in (1, 2, 3)]
    assert shown == ["void clover::par_ranged2… (instance 2)]>(clover…",
                     top[1][:47] + "…", "void clover::par_ranged2… (instance 1)]>(clover…"]
    assert top[0][:24] == top[2][:24] and "(instance 2)]>(clover" in top[0]
