"""The ``cpu`` analyzer's choice of what to fix first: the serial stretch as the wall-clock
lever, no function ranked from fewer than 100 samples, and PyTorch advice for the trace's mode
(training or inference) with "many small ops" judged on top-level ops. Expected values are
computed here from the fixtures' text or from synthetic inputs."""

from __future__ import annotations

import csv
import gzip
import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest
import tracekit
from helpers import FIXTURES, shared_path
from test_hotspots import cpu_report, perf_samples
from tracekit.plugins.cpu_profile import MIN_RANK_SAMPLES, SERIAL_LEVER_PCT
from tracekit.report import format_ns, percent, render_text


def _titled(report, start):
    return [f for f in report.findings if f.title.startswith(start)]


def _perf_text(samples: list[tuple[int, float, str]]) -> str:
    """perf script text of cpu-clock samples (tid, time in s, leaf function), pid 1, 1 ms."""
    return "".join(f"app 1/{tid} {t:.6f}:    1000000 cpu-clock:\n"
                   f"\t 1 {fn} (/app)\n\t 2 main (/app)\n\n" for tid, t, fn in samples)


# --- the serial stretch ---------------------------------------------------------------------

def test_the_serial_stretch_names_func2_and_comes_before_cpu_share():
    """haandfeng aarch64: 16 workers run func1 for the first ~20% of the run, then the main
    thread runs func2 alone to the end: func2 is the lever though func1 has 79% of CPU time."""
    path = shared_path("perf-script", "haandfeng_aarch64", "out.perf")
    samples = perf_samples(path)
    assert {s["event"] for s in samples} == {"cycles"}
    spans: dict[int, list[float]] = {}
    for s in samples:  # perf-exec before the exec is another process of the same tid
        if s["comm"] == "multi":
            spans.setdefault(s["tid"], []).append(s["time"])
    main = max(spans, key=lambda t: max(spans[t]) - min(spans[t]))
    first = min(min(v) for t, v in spans.items() if t != main)
    last = max(max(v) for t, v in spans.items() if t != main)
    times = [s["time"] for s in samples]
    alone = (first - min(spans[main])) + (max(spans[main]) - last)
    stretch: Counter = Counter()
    for s in samples:
        if s["comm"] == "multi" and s["tid"] == main and not first <= s["time"] <= last:
            stretch[s["frames"][0][0]] += s["period"]
    assert stretch.most_common(1)[0][0] == "func2"

    report = cpu_report(path)
    titles = [f.title for f in report.findings]
    [serial] = _titled(report, "Serial critical path")
    [top] = _titled(report, "One function")
    assert titles.index(serial.title) < titles.index(top.title)
    assert serial.evidence["serial_pct"] == pytest.approx(
        percent(alone, max(times) - min(times)), abs=0.1)
    assert serial.evidence["serial_pct"] == 78.5 >= SERIAL_LEVER_PCT
    assert serial.evidence["serial_function"] == "func2"
    assert serial.evidence["serial_functions"] == (
        f"func2 {percent(stretch['func2'], sum(stretch.values()))}%")
    assert serial.title == ("Serial critical path: thread 1504868 runs alone for 78.5% of the "
                            "profile (self time there: func2 99.1%) while 16 worker threads "
                            "run only 19.5% of its span")
    assert "parallelize func2 first" in serial.suggestion
    assert top.evidence["function"] == "func1" and top.evidence["wall_clock_lever"] == "func2"
    assert top.suggestion.startswith("Not the wall-clock lever: thread 1504868 runs alone for "
                                     "78.5% of the profile, so optimize its top function there, "
                                     "func2, first")
    assert not any("Optimize func1 first" in f.suggestion for f in report.findings)


def _workers_then_serial(tmp_path, worker_windows: list[tuple[int, int]]):
    """Main thread (tid 10) busy 0..100 ms, in ``setup`` while workers run and ``reduce``
    after; each worker (tid 11...) runs ``work`` once a ms in its window [a, b] ms."""
    last = max(b for _, b in worker_windows)
    samples = [(10, 1 + ms / 1000, "setup" if ms <= last else "reduce") for ms in range(101)]
    for i, (a, b) in enumerate(worker_windows):
        samples += [(11 + i, 1 + ms / 1000, "work") for ms in range(a, b + 1)]
    path = tmp_path / "serial.perf"
    path.write_text(_perf_text(sorted(samples, key=lambda s: s[1])))
    return cpu_report(path)


def test_a_serial_stretch_over_half_the_run_is_the_lever(tmp_path):
    # 8 workers over 0..20 ms: 168 samples of work, 80 of reduce alone after them.
    report = _workers_then_serial(tmp_path, [(0, 20)] * 8)
    [serial] = _titled(report, "Serial critical path")
    [top] = _titled(report, "One function")
    assert serial.evidence == {"thread": 10, "workers": 8, "worker_span_pct": 20.0,
                               "serial_pct": 80.0, "serial_function": "reduce",
                               "serial_functions": "reduce 100.0%"}
    assert report.findings.index(serial) < report.findings.index(top)
    assert top.evidence == {"function": "work", "module": "/app",
                            "self_pct": percent(8 * 21, 8 * 21 + 101),
                            "wall_clock_lever": "reduce"}
    assert "optimize its top function there, reduce, first" in top.suggestion


def test_a_serial_stretch_under_half_the_run_stays_after_cpu_share(tmp_path):
    # Two waves of workers, 0..30 and 25..55 ms: the main thread is alone for 45 ms of 100.
    report = _workers_then_serial(tmp_path, [(0, 30)] * 4 + [(25, 55)] * 4)
    [serial] = _titled(report, "Serial critical path")
    [top] = _titled(report, "One function")
    assert serial.evidence["serial_pct"] == 45.0 < SERIAL_LEVER_PCT
    assert serial.evidence["serial_function"] == "reduce"
    assert report.findings[-1] is serial
    assert top.evidence == {"function": "work", "module": "/app",
                            "self_pct": percent(8 * 31, 8 * 31 + 101)}
    assert top.suggestion.startswith("Optimize work first (/app)")


# --- too few samples to rank ------------------------------------------------------------------

@pytest.mark.parametrize("parts,n,fn,pct", [
    (("perf-script", "inferno", "single-line-stacks.txt"), 1, "_dl_start", 100.0),
    (("perf-script", "inferno", "versioned-vmlinux.txt"), 1,
     "bpf_prog_2b956549c660136a_uni_l4lb", 100.0),
    (("perf-script", "inferno", "go-stacks.txt"), 5, "runtime.growslice", 40.0),
])
def test_too_few_samples_rank_no_function(parts, n, fn, pct):
    report = cpu_report(shared_path(*parts))
    assert not _titled(report, "One function")
    assert not any(" first (" in f.suggestion for f in report.findings)
    [few] = _titled(report, "Too few samples to rank functions")
    assert few.title == (f"Too few samples to rank functions: {n} busy "
                         f"sample{'s' if n > 1 else ''}, under 100")
    assert few.evidence == {"samples": n, "min_samples": 100, "top_function": fn,
                            "top_function_pct": pct}


@pytest.mark.parametrize("n,ranked", [(MIN_RANK_SAMPLES - 1, False), (MIN_RANK_SAMPLES, True)])
def test_the_minimum_sample_count_to_rank(tmp_path, n, ranked):
    path = tmp_path / "few.perf"
    path.write_text(_perf_text([(1, 1 + i / 1000, "hot" if i % 2 else "cold")
                                for i in range(n)]))
    report = cpu_report(path)
    # hot and cold take turns: ranked, they tie.
    assert bool(_titled(report, "Two functions take about the same")) is ranked
    assert bool(_titled(report, "Too few samples")) is not ranked


def test_two_functions_within_the_sampling_margin_are_not_ranked():
    """funcab: func_b 88 samples, func_a 81 of 169; the difference (4.1 points) is well
    within its 95% margin, so neither is 'the one to optimize first'."""
    import re

    text = shared_path("perf-script", "flamegraph", "perf-funcab-cmd-01.txt").read_text()
    leaves: Counter = Counter()
    header = False  # the line before is a sample's header: this one is its leaf frame
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            header = True
        elif header and line.strip():
            leaves[re.match(r"\s*[0-9a-f]+ (\S+?)(\+0x|\s|$)", line).group(1)] += 1
            header = False
    n = sum(leaves.values())
    (top, a), (second, b) = leaves.most_common(2)
    pa_, pb = a / n, b / n
    margin = round(196 * ((pa_ + pb - (pa_ - pb) ** 2) / n) ** 0.5, 1)
    assert (top, a, second, b, n) == ("func_b", 88, "func_a", 81, 169)
    [tie] = _titled(cpu_report(shared_path("perf-script", "flamegraph",
                                           "perf-funcab-cmd-01.txt")), "Two functions")
    assert tie.evidence["difference_margin_points"] == margin
    assert tie.title == (f"Two functions take about the same busy time: func_b "
                         f"{round(100 * pa_, 1)}%, func_a {round(100 * pb, 1)}%")
    assert "Optimize func_b first" not in tie.suggestion


def test_aggregate_rows_are_ranked_whatever_their_count():
    report = cpu_report(shared_path("vtune-csv", "vtune-plot", "advanced-hotspots.csv"))
    assert [f.evidence["function"] for f in _titled(report, "One function")] == [
        "[Loop at line 4015 in gwce_new]"]


def _hw_event_sums(path: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Sums of the hw-events CSV's columns over every row, and its top function's row, by
    event name (``Hardware Event Count:`` and ``_PS`` dropped)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    def events(row):
        return {k.removeprefix("Hardware Event Count:").removesuffix("_PS"): float(v)
                for k, v in row.items() if k.startswith("Hardware Event Count:")}
    total: Counter = Counter()
    for row in rows:
        total.update(events(row))
    top = max(rows, key=lambda r: float(r["Hardware Event Count:CPU_CLK_UNHALTED.THREAD"]))
    return dict(total), events(top) | {"Function": top["Function"]}


def test_a_report_of_hardware_event_counts_is_rows_not_samples_and_says_where_cycles_stall():
    """VTune's hw-events report: 573 function rows of event counts, no CPU Time. Its rows are
    totals (no sampling margin), and the counts give IPC, memory stall cycles and the share
    of DRAM reads from the other socket, computed here from the CSV."""
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hw-events-fn.csv")
    total, top = _hw_event_sums(path)
    report = cpu_report(path)
    ev = report.findings[0].evidence
    assert ev["rows"] == 573 and "samples" not in ev
    assert ev["ipc"] == round(total["INST_RETIRED.ANY"] / total["CPU_CLK_UNHALTED.THREAD"], 2)
    assert not _titled(report, "Only ")  # no sampling margin on a report's totals
    assert [f.evidence["function"] for f in _titled(report, "One function")] == [
        "buildLocalMapCounter"]
    [stalls] = _titled(report, "Memory stalls")
    cycles = total["CPU_CLK_UNHALTED.THREAD"]
    dram = total["MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM"] + \
        total["MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"]
    assert stalls.evidence == {
        "memory_stall_pct": percent(total["CYCLE_ACTIVITY.STALLS_MEM_ANY"], cycles),
        "l3_miss_stall_pct": percent(total["CYCLE_ACTIVITY.STALLS_L3_MISS"], cycles),
        "ipc": ev["ipc"],
        "top_function": top["Function"],
        "top_function_cycles_pct": percent(top["CPU_CLK_UNHALTED.THREAD"], cycles),
        "top_function_memory_stall_pct": percent(top["CYCLE_ACTIVITY.STALLS_MEM_ANY"],
                                                 top["CPU_CLK_UNHALTED.THREAD"]),
        "top_function_ipc": round(top["INST_RETIRED.ANY"] / top["CPU_CLK_UNHALTED.THREAD"], 2),
        "remote_dram_pct": percent(total["MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"], dram)}
    assert (stalls.evidence["memory_stall_pct"], stalls.evidence["remote_dram_pct"]) == \
        (57.1, 52.5)
    assert "another socket" in stalls.suggestion
    # The table gives each function with 2% of the cycles or more its IPC.
    fns = report.tables["functions"].to_pylist()
    assert fns[0]["function"] == "buildLocalMapCounter"
    assert fns[0]["ipc"] == stalls.evidence["top_function_ipc"] == 0.38
    assert [r["ipc"] is None for r in fns[:10]] == [False] * 7 + [True] * 3


def test_a_xen_guests_hypercall_is_not_code_to_optimize():
    """iperf in a Xen guest: a third of the samples land on xen_hypercall_xen_version, a
    hypercall stub (the hypervisor's time), and a fifth in copy_user_enhanced_fast_string.
    The kernel finding names both kinds of work (each a fifth of kernel time or more), and the
    top function's fix does not ask to optimize the stub's algorithm."""
    path = shared_path("perf-script", "flamegraph", "perf-iperf-stacks-pidtid-01.txt")
    leaves = Counter(s["frames"][0][0] for s in perf_samples(path))
    total = sum(leaves.values())
    assert (leaves["xen_hypercall_xen_version"], leaves["copy_user_enhanced_fast_string"],
            total) == (67, 44, 201)
    report = cpu_report(path)
    [kernel] = _titled(report, "Kernel code takes")
    assert kernel.suggestion.startswith(
        "The top kernel functions point at a virtual machine's calls into its hypervisor")
    assert "; and at copying data between kernel and user space" in kernel.suggestion
    [top] = _titled(report, "One function")
    assert top.evidence["function"] == "xen_hypercall_xen_version"
    assert top.suggestion.startswith("xen_hypercall_xen_version is a call into the hypervisor")
    assert "algorithm" not in top.suggestion


# --- PyTorch host ops: mode and top-level ops -------------------------------------------------

def test_training_trace_gets_no_inference_advice():
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        ops = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]
    # Top-level: no op on the same thread starts at or before it and ends at or after its end.
    top = [e for e in ops if not any(
        o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"]
        and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and (o["ts"], -o["dur"]) < (e["ts"], -e["dur"])
        for o in ops)]
    mean_ns = sum(e["dur"] for e in top) / len(top) * 1000
    median_ns = statistics.median(round(e["dur"] * 1000) for e in top)
    small = [e for e in top if e["dur"] < 20]
    assert (len(top), round(mean_ns), median_ns, len(small)) == (60, 16809, 9137, 43)
    report = cpu_report(path)
    span = report.findings[0].evidence["span_ns"]
    share = round(100 * sum(round(e["dur"] * 1000) for e in small) / span, 1)
    [small] = _titled(report, "Many small ops")
    assert small.title == ("Many small ops: 43 of 60 top-level op calls take under 20µs (median "
                           f"9.14µs), {share}% of the span")
    assert small.evidence == {"top_level_calls": 60, "median_ns": median_ns,
                              "mean_ns": int(mean_ns), "under_20us_pct": 71.7,
                              "under_20us_pct_of_span": share, "mode": "training",
                              "mode_from": small.evidence["mode_from"]}
    assert small.evidence["mode_from"].startswith(("Optimizer.", "autograd::engine"))
    assert not any("inference_mode" in f.suggestion for f in report.findings)
    assert "torch.compile" in small.suggestion


def _ops_trace(tmp_path, nested_us: float, top_us: int, names=("aten::linear",)):
    """3 top-level ops per name, each holding 50 nested ``as_strided`` of ``nested_us``."""
    events = []
    for k, name in enumerate(names):
        for i in range(3):
            ts = (k * 3 + i) * (top_us + 10)
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                           "ts": ts, "dur": top_us})
            events += [{"ph": "X", "cat": "cpu_op", "name": "aten::as_strided", "pid": 1,
                        "tid": 1, "ts": ts + 1 + j * nested_us, "dur": nested_us / 2}
                       for j in range(50)]
    path = tmp_path / "ops.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return cpu_report(path)


def test_many_small_ops_judges_top_level_ops(tmp_path):
    # 153 ops averaging 1.8 µs of self time, but the 3 calls made take 90 µs each: not small.
    report = _ops_trace(tmp_path, 1.0, 90)
    assert report.findings[0].evidence["ops"] == 153
    assert not _titled(report, "Many small ops")
    # 3 top-level calls of 10 µs: small, and an inference trace gets inference_mode.
    report = _ops_trace(tmp_path, 0.1, 10)
    [small] = _titled(report, "Many small ops")
    # 3 calls of 10 µs in a 50 µs span.
    assert small.evidence == {"top_level_calls": 3, "median_ns": 10_000, "mean_ns": 10_000,
                              "under_20us_pct": 100.0, "under_20us_pct_of_span": 60.0,
                              "mode": "inference",
                              "mode_from": "no backward pass or optimizer step"}
    assert small.suggestion.endswith("and run inference under torch.inference_mode().")


@pytest.mark.parametrize("hosts, apart", [(("node1", "node1"), False),
                                          (("node1", "node2"), False),
                                          (("node1", "node1"), True)])
def test_matrix_math_thread_advice_counts_the_processes_sharing_a_host(tmp_path, hosts, apart):
    """Two ranks of back-to-back matmuls: on one host at once the threads per process are the
    host's cores shared out, not all of them each; on two hosts, or one after the other on
    one host (two runs), the cores of each."""
    paths = []
    for rank, host in enumerate(hosts):
        offset = rank * 1_000_000 if apart else 0
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100 + rank,
                   "tid": 1, "ts": offset + i * 1_000, "dur": 990} for i in range(20)]
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps({"traceEvents": events, "host_name": host,
                                    "distributedInfo": {"rank": rank, "world_size": 2}}))
        paths.append(path)
    [math] = _titled(cpu_report_of(paths), "Matrix math")
    if hosts[0] == hosts[1] and not apart:
        assert math.evidence["processes_per_host"] == 2
        assert "2 processes share one host here: give each torch.set_num_threads(physical " \
            "cores / 2)" in math.suggestion
    else:
        assert "processes_per_host" not in math.evidence
        assert "use torch.set_num_threads() up to the physical cores" in math.suggestion


def test_a_backward_op_makes_the_trace_training(tmp_path):
    report = _ops_trace(tmp_path, 0.1, 10, names=("aten::linear", "AddmmBackward0"))
    [small] = _titled(report, "Many small ops")
    assert small.evidence["mode"] == "training"
    assert small.evidence["mode_from"] == "AddmmBackward0"
    assert "inference_mode" not in small.suggestion


def test_small_ops_that_run_in_the_optimizer_step_get_the_optimizer_fix():
    """adamw_cpu (record_adamw_cpu.py): AdamW over 40 small tensors. Of the top-level op
    calls under 20 µs, most start inside an ``Optimizer.step#AdamW.step`` range, by the JSON:
    larger batches would not cut them, a fused optimizer does."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "adamw_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    ops = sorted(((ns(e["ts"]), ns(e["dur"]), e["tid"]) for e in events
                  if e.get("cat") == "cpu_op"), key=lambda o: (o[2], o[0], -o[1]))
    top, open_end = [], {}
    for ts, dur, tid in ops:  # an op is top-level where no op of its thread is still open
        if ts >= open_end.get(tid, -1):
            top.append((ts, dur))
            open_end[tid] = ts + dur
    steps = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
             if e["name"] == "Optimizer.step#AdamW.step"]
    small = [ts for ts, dur in top if dur < 20_000]
    stepping = sum(any(a <= ts < b for a, b in steps) for ts in small)
    assert stepping * 2 > len(small)
    [finding] = _titled(cpu_report(path), "Many small ops")
    assert finding.title.startswith(f"Many small ops: {len(small):,} of {len(top):,} top-level")
    assert finding.suggestion.startswith(
        f"{stepping:,} of them ({percent(stepping, len(small))}%) run in the optimizer step "
        "(Optimizer.step#AdamW.step), which larger batches do not shorten: use a fused "
        "optimizer (torch.optim.AdamW(..., fused=True)")


# --- event specs with terms -----------------------------------------------------------------

@pytest.mark.parametrize(("spec", "base"), [
    ("cycles:ppp", "cycles"), ("cpu_core/cycles/u", "cycles"),
    ("cpu/cycles,period=9/", "cycles"), ("cpu-clock/period=1000000/", "cpu-clock"),
    ("page-faults/period=10/", "page-faults"), ("cpu/event=0x3c,name=loops/", "loops"),
    ("armv8_pmuv3_0/cpu_cycles/", "cpu_cycles"), ("task-clock", "task-clock"),
])
def test_event_base_reads_perf_event_specs(spec, base):
    from tracekit.toolkit import event_base

    assert event_base(spec) == base


def test_time_event_with_terms_ranks_cpu_time(tmp_path):
    """``perf record -e cpu-clock/period=1000000/ -e page-faults/period=10/``: the profile
    is ranked by the cpu-clock samples, in ns, not by page faults."""
    text = "".join(f"app 1/1 {1 + i / 1000:.6f}:    1000000 cpu-clock/period=1000000/:\n"
                   f"\t 1 {'hot' if i % 4 else 'cold'} (/app)\n\t 2 main (/app)\n\n"
                   for i in range(8))
    text += "".join(f"app 1/1 {1 + i / 1000:.6f}:         10 page-faults/period=10/:\n"
                    f"\t 1 faulty (/app)\n\t 2 main (/app)\n\n" for i in range(20))
    path = tmp_path / "terms.perf"
    path.write_text(text)
    evidence = cpu_report(path).findings[0].evidence
    assert (evidence["event"], evidence["weight_unit"], evidence["samples"]) == (
        "cpu-clock/period=1000000/", "ns of CPU time", 8)
    assert (evidence["top_function"], evidence["top_function_pct"]) == ("hot", 75.0)


# --- PyTorch host ops: input-bound ------------------------------------------------------------

def _union_within(ranges, lo, hi):
    """Length of the union of (start, duration) ranges, each cut to [lo, hi]."""
    covered, end = 0, None
    for a, b in sorted((max(t, lo), min(t + d, hi)) for t, d in ranges):
        if b <= a:
            continue
        if end is None or a > end:
            covered, end = covered + b - a, b
        elif b > end:
            covered, end = covered + b - end, b
    return covered


def _range_share(path, test):
    """Independently: the union of the ranges whose name passes ``test`` in the process that
    has the most of them (over its threads), its pid, the span of the program's ops and
    ranges, and that process's ranges (start, duration, name), in ns."""
    from decimal import Decimal

    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") not in ("M", "s", "f")]
    ns = [(int(Decimal(str(e["ts"])) * 1000), int(Decimal(str(e.get("dur", 0))) * 1000), e)
          for e in events if "ts" in e]
    # The program's ops and ranges, not the profiler's own span and markers.
    program = [(t, d) for t, d, e in ns if e.get("cat") in (
        "cpu_op", "user_annotation", "python_function", "[memory]")]
    span = max(t + d for t, d in program) - min(t for t, _ in program)
    per_process: dict[int, list[tuple[int, int]]] = {}
    for t, d, e in ns:
        if e.get("ph") == "X" and test(e.get("name", "")):
            per_process.setdefault(e["pid"], []).append((t, d, e["name"]))
    best = (0, None)
    for pid, ranges in per_process.items():
        best = max(best, (_union_within([(t, d) for t, d, _ in ranges], 0, 2**62), pid))
    return best[0], best[1], span, sorted(per_process.get(best[1], []))


@pytest.mark.parametrize(("workers", "fix"), [
    (0, "Give the DataLoader worker processes: with num_workers=0"),
    (2, "The DataLoader's workers cannot keep up"),
])
def test_input_bound_cpu_training_gets_the_fix_of_its_loader(workers, fix):
    """Recorded here (fixtures/torch-cpu/record_loader_cpu.py): 10 ms a sample, loaded in the
    training process or by two workers that cannot keep up."""
    path = FIXTURES / "torch-cpu" / f"loader_workers{workers}.pt.trace.json.gz"
    loading_ns, pid, span, _ = _range_share(path, lambda name: "DataLoader" in name)
    report = cpu_report(path)
    [finding] = _titled(report, "Input-bound")
    pct = percent(loading_ns, span)
    assert pct >= 20
    assert finding.title == (f"Input-bound: the training loop spends {pct}% of the traced "
                             f"span loading data ({format_ns(loading_ns)})")
    assert finding.evidence == {
        "data_loading_ns": loading_ns, "data_loading_pct_of_span": pct, "pid": pid,
        "loader": ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" if workers == 0
                   else "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")}
    assert finding.suggestion.startswith(fix)
    [cover] = _titled(report, "Ops cover")
    assert cover.suggestion.startswith(f"Of the span, data loading {pct}% (the findings above)")
    # Loading and ops leave under 5% of the span (98% + 1.3%) or not (84.7% + 1.0%).
    explained = pct + cover.evidence["op_cover_pct"] >= 95
    assert explained == (workers == 0)
    assert cover.suggestion.endswith(": that accounts for the time outside ops." if explained
                                     else "with_stack=True to see its frames.")
    assert f"pid: {pid}," in render_text([report], width=200)  # an id, not a quantity


def test_no_loader_advice_without_a_loader():
    """A training loop with no DataLoader range: no input-bound finding, and nothing tells it
    to move data loading to DataLoader workers."""
    report = cpu_report(FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz")
    assert not _titled(report, "Input-bound")
    assert not any("DataLoader" in (f.suggestion or "") for f in report.findings)


# --- PyTorch host ops: collectives ------------------------------------------------------------

def _exposed(path, collective):
    """Independently: the union of the ``collective`` events (by name) minus the time of the
    process's other ops, leaving out ops that hold a collective op of their thread (they
    wait in it), by the JSON."""
    from decimal import Decimal

    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    spans = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e) for e in events
             if e.get("cat") in ("cpu_op", "user_annotation")]
    calls = [(a, e["tid"]) for a, _, e in spans if collective(e["name"])
             and e["cat"] == "cpu_op"]
    busy = [(a, b) for a, b, e in spans if e["cat"] == "cpu_op" and not collective(e["name"])
            and not any(t == e["tid"] and a <= c < b for c, t in calls)]
    exchange = sorted((a, b) for a, b, e in spans if collective(e["name"]))
    exposed = 0
    for a, b in _merged(exchange):
        exposed += b - a - sum(max(0, min(b, d) - max(a, c)) for c, d in _merged(busy))
    return exposed


def _merged(intervals):
    """Sorted, disjoint unions of [start, end) intervals."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_collectives_on_a_cpu_training_loop(rank):
    """Recorded here (fixtures/torch-cpu/record_gloo_cpu.py): two gloo ranks all-reduce each
    gradient by hand; rank 0's first all-reduce waits for rank 1 to start."""
    path = FIXTURES / "torch-cpu" / f"gloo_rank{rank}.pt.trace.json.gz"
    comm_ns, pid, span, ranges = _range_share(path, lambda name: (
        name == "record_param_comms" or name.startswith(("c10d::", "gloo:"))))
    longest = max(ranges, key=lambda r: r[1])[2]
    assert longest == "gloo:all_reduce"
    ranges = [r for r in ranges if r[2] == longest]
    first_ns = ranges[0][1]
    report = cpu_report(path)
    [finding] = _titled(report, "Communication")
    pct = percent(comm_ns, span)
    skew = first_ns * 2 >= comm_ns  # rank 0's first call waited for rank 1 to start
    steady = percent(comm_ns - first_ns, span - first_ns)
    after = f"; {steady}% after the first call, which holds the start-up skew" if skew else ""
    exposed = _exposed(path, lambda name: name == "record_param_comms"
                       or name.startswith(("c10d::", "gloo:")))
    assert 0 < exposed <= comm_ns
    assert finding.title == (f"Communication: process {pid}'s training loop spends {pct}% of "
                             f"the traced span in collectives ({format_ns(comm_ns)}; "
                             f"{len(ranges)} × gloo:all_reduce{after}; "
                             + ("all of it exposed)" if exposed == comm_ns else
                                f"{format_ns(exposed)} of it exposed, the rest beside the "
                                "process's compute)"))
    assert finding.evidence == {
        "communication_ns": comm_ns, "communication_pct_of_span": pct, "pid": pid,
        "collective": "gloo:all_reduce", "calls": len(ranges), "first_call_ns": first_ns,
        **({"after_first_call_pct": steady} if skew else {}),
        "exposed_ns": exposed, "exposed_pct_of_span": percent(exposed, span)}
    assert finding.suggestion.startswith(f"The first gloo:all_reduce alone takes "
                                         f"{format_ns(first_ns)} of {format_ns(comm_ns)}") \
        is skew
    assert "DistributedDataParallel" in finding.suggestion
    assert finding.suggestion.endswith("(the input holds 1 of the run's 2 ranks).")


def test_both_ranks_each_get_a_finding_and_the_late_one_is_named():
    """Given both ranks, each is measured over its own span and neither is asked for the
    other's trace; the rank whose first collective started last is named as the late one."""
    paths = [FIXTURES / "torch-cpu" / f"gloo_rank{rank}.pt.trace.json.gz" for rank in (0, 1)]
    report = cpu_report_of(paths)
    findings = _titled(report, "Communication")
    firsts = {}
    for path in paths:
        _, pid, _, ranges = _range_share(path, lambda name: name == "gloo:all_reduce")
        firsts[pid] = ranges[0]  # (start, duration, name) of the first all-reduce
    assert sorted(f.evidence["pid"] for f in findings) == sorted(firsts)
    assert not any("analyze every rank" in f.suggestion for f in findings)
    late = max(firsts, key=lambda pid: firsts[pid][0])
    waited = max(d for _, d, _ in firsts.values())
    [arrival] = _titled(report, "Process")
    assert arrival.title == (f"Process {late} reached the first collective last: the others "
                             f"waited up to {format_ns(waited)} in it")


def cpu_report_of(paths):
    [report] = tracekit.analyze(tracekit.read([str(p) for p in paths]), "cpu")
    return report


@pytest.mark.parametrize("step", [2, 3, 4])
def test_steps_option_cuts_the_cpu_report_to_one_step(step):
    """``-O steps=N`` keeps the host ops that overlap ProfilerStep#N, as in the diagnosis."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    [rng] = [e for e in events if e.get("name") == f"ProfilerStep#{step}"]
    lo, hi = ns(rng["ts"]), ns(rng["ts"]) + ns(rng["dur"])
    inside = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
              and ns(e["ts"]) < hi and (ns(e["ts"]) + ns(e["dur"]) > lo or ns(e["ts"]) >= lo)]
    whole = cpu_report(path).findings[0].evidence["ops"]
    evidence = cpu_report(path, f"steps={step}").findings[0].evidence
    assert evidence["ops"] == len(inside) < whole


def _trace_span(path):
    """From the first timed event (metadata and flows aside) to the end of the last, in ns;
    not the profiler's own span (cat Trace) and instant markers (Record Window End), which
    outlast the program."""
    from decimal import Decimal

    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") not in ("M", "s", "f", "i") and "ts" in e
                  and e.get("cat") != "Trace"]
    ns = [(int(Decimal(str(e["ts"])) * 1000), int(Decimal(str(e.get("dur", 0))) * 1000))
          for e in events]
    return max(t + d for t, d in ns) - min(t for t, _ in ns)


def test_diff_of_two_cpu_runs_says_the_wall_clock_and_loading_change():
    """``-a diff`` of the num_workers=0 and =2 runs (recorded by one process, so otherwise read
    as two captures of it: diff keeps its inputs apart): the traced span and the host time in
    data loading of each, by an independent reading of the JSON."""
    from tracekit.frontend import analyze_report

    paths = [FIXTURES / "torch-cpu" / f"loader_workers{w}.pt.trace.json.gz" for w in (0, 2)]
    want = [_range_share(p, lambda name: "DataLoader" in name) for p in paths]
    spans = [_trace_span(p) for p in paths]
    [report] = analyze_report([str(p) for p in paths], ["diff"]).reports
    totals = {r["metric"]: r for r in report.tables["totals"].to_pylist()}
    assert [totals["traced span"][k] for k in ("baseline", "candidate")] == spans
    assert [totals["host time in data loading"][k] for k in ("baseline", "candidate")] == [
        loading for loading, _, _, _ in want]
    assert "host time in collectives" not in totals
    assert "kernel time" not in totals  # neither run has GPU work: no rows of zeros
    change = spans[1] - spans[0]
    assert report.findings[0].title == (
        f"Traced span {format_ns(change)} ({percent(change, spans[0])}%)")
    assert report.findings[0].evidence["data_loading_change_ns"] == want[1][0] - want[0][0]
    # Read for any other analysis, the two files are captures of one process.
    assert len(tracekit.read([str(p) for p in paths]).sources) == 1


def test_the_html_report_of_a_diff_keeps_captures_of_one_process_apart(tmp_path):
    """``tracekit report A B -a diff`` reads its inputs as ``analyze -a diff`` does: two
    inputs, even where they are captures of one process, and the same totals."""
    from tracekit.cli import main
    from tracekit.frontend import analyze_report

    paths = [str(FIXTURES / "torch-cpu" / f"loader_workers{w}.pt.trace.json.gz") for w in (0, 2)]
    out = tmp_path / "diff.html"
    assert main(["report", *paths, "-a", "diff", "-o", str(out), "-q"]) == 0
    [report] = analyze_report(paths, ["diff"]).reports
    spans = [format_ns(_trace_span(Path(p))) for p in paths]
    page = out.read_text()
    assert "Traced span" in page and all(s in page for s in spans)
    assert report.findings[0].title in page


def _program_window(path, lo_ns, hi_ns):
    """Independently: the program's ops and ranges (cpu_op, user_annotation) of a trace,
    a µs-text-to-ns converter, and the window [first timed event + lo_ns, + hi_ns] cut to
    their span, as ``-O window=`` bounds the CPU report's span."""
    from decimal import Decimal

    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") not in ("M", "s", "f") and "ts" in e]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    origin = min(ns(e["ts"]) for e in events)
    program = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    start = max(min(ns(e["ts"]) for e in program), origin + lo_ns)
    end = min(max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in program), origin + hi_ns)
    return program, ns, start, end


def test_window_is_shared_by_the_verdict_and_the_cpu_report_and_bounds_the_span():
    """``-O window=0:1ms`` on a CPU-only trace goes to both default analyzers (one meaning,
    one help: the toolkit's restrict), each report says so, and the CPU report's span is
    the program's within the window: from the first timed event of the trace + 0 to + 1 ms."""
    path = FIXTURES / "torch-cpu" / "sched_cycle1.pt.trace.json.gz"
    _, _, start, end = _program_window(path, 0, 1_000_000)
    reports = tracekit.analyze(tracekit.read(path), options=["window=0:1ms"])
    assert [r.analyzer for r in reports] == ["bottleneck", "cpu"]
    note = "analyzed only window=0:1ms: the events that overlap it, kept whole"
    assert all(note in r.notes for r in reports)
    assert reports[1].findings[0].evidence["span_ns"] == end - start


@pytest.mark.slow  # reads a real trace
def test_a_window_counts_each_op_by_its_part_within_it():
    """mlp_cpu's ops run on one thread: within a window their self time is the union of
    their parts in it (nested ops share their parent's time), never more than the span."""
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    program, ns, lo, hi = _program_window(path, 1_000_000, 2_000_000)
    ops = [(ns(e["ts"]), ns(e["dur"])) for e in program if e["cat"] == "cpu_op"]
    assert len({(e["pid"], e["tid"]) for e in program if e["cat"] == "cpu_op"}) == 1
    inside = _union_within(ops, lo, hi)
    cut = [(a, d) for a, d in ops if a < lo < a + d or a < hi < a + d]
    assert cut  # ops that cross the window's edges
    report = tracekit.analyze(tracekit.read(path), "cpu", options=["window=1ms:2ms"])[0]
    verdict = report.findings[0].evidence
    assert verdict["span_ns"] == hi - lo
    assert verdict["op_self_ns"] == inside
    assert verdict["op_time_pct_of_span"] == percent(inside, hi - lo) <= 100


def test_a_window_counts_each_range_of_an_annotation_trace_by_its_part_in_it(tmp_path):
    """Ranges only (an NVTX-like trace): two 10 ms ranges back to back; the window 5 ms to
    12 ms holds 5 ms of the first and 2 ms of the second, over a 7 ms span."""
    events = [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1,
               "ts": ts, "dur": 10_000} for name, ts in (("load", 0), ("compute", 10_000))]
    path = tmp_path / "ranges.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = tracekit.analyze(tracekit.read(path), "cpu", options=["window=5ms:12ms"])[0]
    verdict = report.findings[0].evidence
    assert (verdict["span_ns"], verdict["range_self_ns"]) == (7_000_000, 7_000_000)
    rows = {r["range"]: r["self"] for r in report.tables["ranges"].to_pylist()}
    assert rows == {"load": 5_000_000, "compute": 2_000_000}


def test_a_window_that_selects_nothing_is_an_error_not_an_empty_verdict():
    """A window that ends before it starts, or starts after the trace's last event, would
    leave no event: 'no GPU activity' would be said of a GPU trace. Both are one-line option
    errors; the trace's span (first start to last end) is computed here from the JSON."""
    import gzip
    import json

    from tracekit.errors import OptionError

    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    timed = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
             if isinstance(e.get("ts"), (int, float))]
    span_us = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)
    trace = tracekit.read(path)
    with pytest.raises(OptionError, match=r"^option 'window': '5s:1s' ends before it starts$"):
        tracekit.analyze(trace, options=["window=5s:1s"])
    with pytest.raises(OptionError) as caught:
        tracekit.analyze(trace, options=["window=100s:200s"])
    assert str(caught.value) == (f"option 'window': '100s:200s' starts after the trace ends "
                                 f"(it spans {span_us / 1e3:g}ms from its first event)")


def test_an_option_of_two_meanings_stays_ambiguous():
    from dataclasses import dataclass, field

    from tracekit.errors import OptionError
    from tracekit.pipeline import split_options

    def component(name, help_text):
        @dataclass(frozen=True)
        class Options:
            top: int = field(default=1, metadata={"help": help_text})
        return type(name, (), {"name": name, "Options": Options})

    same = [component("a", "rows"), component("b", "rows")]
    assert split_options(["top=3"], same) == [["top=3"], ["top=3"]]
    with pytest.raises(OptionError, match=r"option 'top' is ambiguous; write a\.top or b\.top"):
        split_options(["top=3"], [component("a", "rows"), component("b", "columns")])


def test_host_ops_that_are_not_pytorchs_are_not_called_pytorch(tmp_path):
    """Host ops named by another program (an MPI code's calls) are a CPU-only trace of host
    ops, not a PyTorch one; aten:: ops make it PyTorch's."""
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
               "ts": i * 10, "dur": 5} for i, name in enumerate(["MPI_Send", "MPI_Recv"])]
    path = tmp_path / "mpi.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = cpu_report(path)
    first = report.findings[0]
    assert first.title.startswith("CPU-only trace: 2 host ops")
    assert first.evidence["input"] == "host ops (no GPU work)"
    assert not _titled(report, "Many small ops")  # 5 µs calls, but its fixes are PyTorch's
    first = _ops_trace(tmp_path, 1.0, 90).findings[0]
    assert first.title.startswith("CPU-only PyTorch trace: 153 host ops")
    assert first.evidence["input"] == "PyTorch host ops (no GPU work)"


@pytest.mark.parametrize("name", ["forks_no_event.perf", "burn_flat_no_event.perf"])
def test_samples_of_no_named_event_say_why_idle_is_not_measured(name):
    """``perf script -F`` without the event field: no event to call CPU time (the evidence
    said 'not measured: None')."""
    evidence = cpu_report(FIXTURES / "perf-recorded" / name).findings[0].evidence
    assert "event" not in evidence and evidence["idle_pct"] is None
    assert evidence["idle"] == ("not measured: the samples name no event, so their weights "
                                "are not known to be CPU time")


# --- PyTorch host ops: time outside ops, compilation -------------------------------------------

def _self_outside_ops(path, names):
    """Independently, per name: the summed duration of those Python frames or ranges minus
    the ops, frames and ranges directly nested in them (ProfilerStep ranges aside), in ns."""
    from decimal import Decimal

    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat")
                  in ("cpu_op", "user_annotation", "python_function")
                  and not e["name"].startswith("ProfilerStep#")]
    spans = [(int(Decimal(str(e["ts"])) * 1000), int(Decimal(str(e["dur"])) * 1000), e["name"])
             for e in events]
    out = Counter()
    for t, d, name in spans:
        if name not in names:
            continue
        inside = [(u, u + w) for u, w, _ in spans if t <= u and u + w <= t + d
                  and (u, w) != (t, d)]
        direct = [(a, b) for a, b in inside
                  if not any(c <= a and b <= e and (c, e) != (a, b) for c, e in inside)]
        out[name] += d - sum(b - a for a, b in direct)
    return out


@pytest.mark.parametrize(("variant", "names"), [
    ("stack", ["<built-in function sleep>", "<built-in function urandom>"]),
    ("ranges", ["data_load", "checkpoint_write"]),
])
def test_time_outside_ops_is_named_from_frames_and_ranges(variant, names):
    """Recorded here (fixtures/torch-cpu/record_hostwait_cpu.py): each step sleeps 40 ms and
    writes a checkpoint around one small matmul. The ops cover under 1% of the span; the
    Python frames (with_stack) or record_function ranges that hold the waits are named, and
    the op table's matrix math is not offered as the lever."""
    path = FIXTURES / "torch-cpu" / f"hostwait_{variant}.pt.trace.json.gz"
    _, _, span, _ = _range_share(path, lambda name: False)
    own = _self_outside_ops(path, names)
    report = cpu_report(path)
    [cover] = _titled(report, "Ops cover")
    named = ", ".join(f"{n} ({format_ns(own[n])}, {percent(own[n], span)}%)" for n in names)
    assert percent(own[names[0]], span) > 80
    assert cover.evidence["outside_ops"] == named
    assert cover.suggestion.startswith(f"Outside any op the time is in {named}: ")
    # A sleep is waiting by design: removed, not made cheaper.
    assert ("the program sleeps there" in cover.suggestion) == (variant == "stack")
    assert not _titled(report, "Matrix math")


@pytest.mark.parametrize("frame", ["<built-in function print>",
                                   "/usr/lib/python3.11/logging/__init__.py(1489): info"])
def test_time_outside_ops_in_printing_or_logging_gets_the_logging_fix(tmp_path, frame):
    """Each 10 ms step prints (or logs) for 9 ms around a 0.1 ms op (with_stack frames):
    the fix is to log less and lighter, not to move 'that code' off the loop."""
    events = []
    for n in range(5):
        at = n * 10_000
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": at, "dur": 100},
                   {"ph": "X", "cat": "python_function", "name": frame, "pid": 1, "tid": 1,
                    "ts": at + 500, "dur": 9_000}]
    path = tmp_path / "printing.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [cover] = _titled(cpu_report(path), "Ops cover")
    assert cover.evidence["outside_ops"].startswith(frame[:40])
    assert "the program prints or logs in its loop: log every N steps" in cover.suggestion
    assert "move off the loop" not in cover.suggestion


def test_time_between_small_ops_is_named_by_the_ranges_that_hold_it():
    """The small MLP's steps (fixtures/torch-cpu/record_mlp_cpu.py): Python and dispatch
    between tiny ops, inside its record_function ranges, which are named largest first."""
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    names = ["backward", "forward", "Optimizer.step#SGD.step"]
    _, _, span, _ = _range_share(path, lambda name: False)
    own = _self_outside_ops(path, names)
    [cover] = _titled(cpu_report(path), "Ops cover")
    assert cover.evidence["outside_ops"] == ", ".join(
        f"{n} ({format_ns(own[n])}, {percent(own[n], span)}%)" for n in names)
    assert [own[n] for n in names] == sorted(own.values(), reverse=True)
    # The step's own parts: their time outside ops is between small ops, nothing to move.
    assert "the step's own parts, so it is the time between their ops" in cover.suggestion
    assert "background thread" not in cover.suggestion


def test_a_trace_of_torch_compile_compiling_says_so():
    """Recorded here (fixtures/torch-cpu/record_compile_cpu.py): the first of six steps
    compiles (TorchDynamo, Inductor); the fix names the steps after it."""
    path = FIXTURES / "torch-cpu" / "compile_steps.pt.trace.json.gz"
    # The compile phases as PyTorch names them: its dynamo_timed phases and outermost ranges.
    compile_ns, pid, span, ranges = _range_share(
        path, lambda name: name.endswith("(dynamo_timed)") or name in (
            "dynamo", "entire_frame_compile", "backend_compile", "inductor_compile",
            "async_compile.wait") or name.startswith("compile_fx"))
    with gzip.open(path) as f:
        steps = sorted((e["ts"], e["name"]) for e in json.load(f)["traceEvents"]
                       if e.get("name", "").startswith("ProfilerStep#"))
    assert [n for _, n in steps] == [f"ProfilerStep#{i}" for i in range(6)]
    report = cpu_report(path)
    [finding] = _titled(report, "Compilation")
    assert finding.title == (f"Compilation: {percent(compile_ns, span)}% of the traced span is "
                             f"torch.compile compiling ({format_ns(compile_ns)})")
    assert percent(compile_ns, span) > 90
    assert finding.evidence == {"compile_ns": compile_ns,
                                "compile_pct_of_span": percent(compile_ns, span), "pid": pid,
                                "longest": max(ranges, key=lambda r: r[1])[2],
                                "steady_steps": "1:5"}
    assert "(-O steps=1:5)" in finding.suggestion
    steady = tracekit.analyze(tracekit.read(path), "cpu", options=["steps=1:5"])[0]
    assert not _titled(steady, "Compilation")


def test_diff_of_runs_with_different_step_counts_compares_per_step_and_ranges_by_name():
    """The small MLP (3 profiler steps, forward/backward ranges) against the waiting loop (4
    steps, data_load/checkpoint_write ranges): the totals are not comparable, the mean steps
    are; user ranges are compared by name (step ranges, numbered, are not)."""
    from decimal import Decimal

    from tracekit.frontend import analyze_report

    paths = [FIXTURES / "torch-cpu" / name for name in
             ("mlp_cpu.pt.trace.json.gz", "hostwait_ranges.pt.trace.json.gz")]
    means, counts = [], []
    for path in paths:
        with gzip.open(path) as f:
            steps = [int(Decimal(str(e["dur"])) * 1000) for e in json.load(f)["traceEvents"]
                     if e.get("name", "").startswith("ProfilerStep#")]
        counts.append(len(steps))
        means.append(sum(steps) // len(steps))
    assert counts == [3, 4]
    [report] = analyze_report([str(p) for p in paths], ["diff"]).reports
    [steps] = _titled(report, "The inputs hold")
    change = means[1] - means[0]
    assert steps.title == (
        f"The inputs hold 3 and 4 profiler steps: compare per step (mean step "
        f"{format_ns(means[0])} → {format_ns(means[1])}, +{percent(change, means[0])}%), "
        "not the totals")
    assert steps.evidence == {"steps_a": 3, "steps_b": 4, "mean_step_a_ns": means[0],
                              "mean_step_b_ns": means[1]}
    ranges = {r["name"]: r["status"] for r in report.tables["ranges"].to_pylist()}
    assert ranges["data_load"] == ranges["checkpoint_write"] == "new"
    assert ranges["forward"] == ranges["backward"] == "gone"
    assert not any(n.startswith("ProfilerStep#") for n in ranges)


def test_a_training_loop_in_optimizer_steps_is_told_to_fuse_them():
    """Recorded here (fixtures/torch-cpu/record_adamw_cpu.py): AdamW(foreach=True) over 40
    small parameter tensors; on the CPU only fused=True makes the step one pass."""
    path = FIXTURES / "torch-cpu" / "adamw_cpu.pt.trace.json.gz"
    step_ns, pid, span, ranges = _range_share(
        path, lambda name: name.startswith("Optimizer.step#"))
    assert [n for _, _, n in ranges] == ["Optimizer.step#AdamW.step"] * 4
    first = ranges[0][1]
    assert first <= 2 * (step_ns - first) / 3  # no state-creation note for this run
    [finding] = _titled(cpu_report(path), "Optimizer")
    pct = percent(step_ns, span)
    assert finding.title == (f"Optimizer: the training loop spends {pct}% of the traced span in "
                             f"optimizer steps ({format_ns(step_ns)}; 4 × "
                             "Optimizer.step#AdamW.step)")
    assert finding.evidence == {"optimizer_ns": step_ns, "optimizer_pct_of_span": pct,
                                "pid": pid, "optimizer": "Optimizer.step#AdamW.step",
                                "calls": 4, "first_call_ns": first,
                                "median_call_ns": int(statistics.median(
                                    d for _, d, _ in ranges))}
    assert finding.suggestion.startswith(
        "Use a fused optimizer (torch.optim.AdamW(..., fused=True), on the CPU since")
    # Below the line, or not training: no finding (the MLP's SGD steps).
    assert not _titled(cpu_report(FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"),
                       "Optimizer")


@pytest.mark.parametrize("calls_ms, named", [((0.5, 0.5, 8.5, 0.5, 10.3), False),
                                              ((5, 5, 5, 5, 5), True)])
def test_optimizer_steps_are_judged_by_the_median_step(tmp_path, calls_ms, named):
    """Five 17 ms training steps whose SGD steps take 0.5 ms but for two stalled ones (20.3 ms
    in all, 23.9% of the span): no optimizer to fix. Five of 5 ms are one (29.4%)."""
    events = []
    for n, ms in enumerate(calls_ms):
        at = n * 17_000
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + 1}", "pid": 1,
             "tid": 1, "ts": at, "dur": 17_000},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": at + 10, "dur": 1_000},
            {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: "
             "MmBackward0", "pid": 1, "tid": 1, "ts": at + 1_100, "dur": 1_000},
            {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1,
             "tid": 1, "ts": at + 2_200, "dur": int(ms * 1000)}]
    path = tmp_path / "sgd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    found = _titled(cpu_report(path), "Optimizer")
    assert bool(found) == named
    if named:
        assert found[0].evidence["median_call_ns"] == 5_000_000


def test_ranges_recorded_with_stacks_do_not_move_op_time_outside_ops():
    """Stacks and ranges together (record_hostwait_cpu.py, ``both``): each record_function
    range begins inside its ``__enter__`` frame and outlives it. The wait is the sleep frame
    (a leaf: its time is its duration); the range around the matmul, and the frames that
    enclose the ranges, hold no time outside ops."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "hostwait_both.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    sleep = sum(int(Decimal(str(e["dur"])) * 1000) for e in events
                if e.get("name") == "<built-in function sleep>")
    _, _, span, _ = _range_share(path, lambda name: False)
    [cover] = _titled(cpu_report(path), "Ops cover")
    named = cover.evidence["outside_ops"]
    assert named.startswith(f"<built-in function sleep> ({format_ns(sleep)}, "
                            f"{percent(sleep, span)}%)")
    shares = [float(part.rsplit(", ", 1)[1].rstrip("%)")) for part in named.split("), ")]
    assert sum(shares) + cover.evidence["op_cover_pct"] <= 100
    assert "compute" not in named and "data_load" not in named


def test_op_cover_is_the_processs_ops_on_any_thread():
    """Two threads run ops (record_hostwait_cpu.py, ``threads``): the main thread multiplies
    matrices for about a third of each step, a monitor thread runs a tiny op every 2 ms. The
    cover is the process' (the union of the top-level ops of all its threads over the span),
    not an average over threads: a thread waiting while another runs ops is not outside
    ops (autograd's device threads run a CUDA backward while the main thread waits)."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "hostwait_threads.pt.trace.json.gz"
    with gzip.open(path) as f:
        doc = json.load(f)
    ops = [(e["pid"], e["tid"], int(Decimal(str(e["ts"])) * 1000),
            int(Decimal(str(e["dur"])) * 1000)) for e in doc["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    top_level = [(pid, tid, t, d) for pid, tid, t, d in ops
                 if not any(p == pid and q == tid and u <= t and t + d <= u + w
                            and (u, w) != (t, d) for p, q, u, w in ops)]
    assert len({(pid, tid) for pid, tid, _, _ in top_level}) == 2
    (pid,) = {pid for pid, _, _, _ in top_level}
    busy = _union_within([(t, d) for _, _, t, d in top_level], 0, 2**62)
    _, _, span, _ = _range_share(path, lambda name: False)
    [cover] = _titled(cpu_report(path), "Ops cover")
    assert cover.title == (f"Ops cover {percent(busy, span)}% of the traced span of process "
                           f"{pid} (its ops on any thread)")
    assert cover.evidence == {"op_cover_pct": percent(busy, span), "threads_with_ops": 2}
    assert 20 < percent(busy, span) < 50


def test_diff_groups_ranges_named_with_per_call_counters():
    """emit_nvtx names each op's range with its counters (``aten::mm, seq = 3, op_id = 17``):
    a name per call. The diff's ranges table compares them without the counters, as if each
    range had its plain name; ProfilerStep ranges are left out."""
    import dataclasses

    import pyarrow as pa

    paths = [str(FIXTURES / "torch-cpu" / f"hostwait_{v}.pt.trace.json.gz")
             for v in ("ranges", "both")]
    plain = tracekit.analyze(tracekit.read(paths, join_captures=False), "diff")[0]
    trace = tracekit.read(paths, join_captures=False)
    ev = trace.events
    names = ev["name"].cast(pa.string()).to_pylist()
    categories = ev["category"].cast(pa.string()).to_pylist()
    counted = [f"{n}, seq = {i}, op_id = {i + 7}" if c == "host.annotation"
               and not n.startswith("ProfilerStep#") else n
               for i, (n, c) in enumerate(zip(names, categories, strict=True))]
    events = ev.set_column(ev.schema.get_field_index("name"), "name",
                           pa.array(counted).dictionary_encode())
    report = tracekit.analyze(dataclasses.replace(trace, events=events), "diff")[0]
    assert report.tables["ranges"].equals(plain.tables["ranges"])
    assert sorted(report.tables["ranges"]["name"].to_pylist()) == [
        "checkpoint_write", "compute", "data_load"]


def test_diff_span_keeps_tracepoint_instants(tmp_path):
    """Only the profiler's own markers leave the traced span: perf tracepoints (instants)
    are the program's events. A sched_switch recorded here, and a copy with a second one
    half a second later."""
    from tracekit.frontend import analyze_report

    one = FIXTURES / "perf-recorded" / "sched_switch.perf"
    text = one.read_text()
    later = tmp_path / "two_switches.perf"
    later.write_text(text + "\n" + text.replace("2538.023599:", "2538.523599:"))
    [report] = analyze_report([str(one), str(later)], ["diff"]).reports
    totals = {r["metric"]: r for r in report.tables["totals"].to_pylist()}
    assert [totals["traced span"][k] for k in ("baseline", "candidate")] == [0, 500_000_000]


def test_empty_tables_are_named_by_what_they_list():
    """A diff of two CPU runs has no GPU kernels: the text says so in the table's own words,
    without its ordering and with its acronym kept."""
    from tracekit.frontend import analyze_report

    paths = [str(FIXTURES / "torch-cpu" / f"loader_workers{w}.pt.trace.json.gz") for w in (0, 2)]
    [report] = analyze_report(paths, ["diff"]).reports
    assert report.table_titles["kernels"] == "GPU kernels, largest time change first"
    assert "(nothing in this trace for: GPU kernels)" in render_text([report], width=200)


def test_with_stack_frames_inside_the_loaders_ranges_are_not_named_again():
    """loader_stack: num_workers=0 recorded with with_stack=True. Every Python frame of the
    samples' sleep lies inside a DataLoader range, which the input-bound finding counts;
    the loader is named by PyTorch's range (num_workers=0), not by the frame around it."""
    path = FIXTURES / "torch-cpu" / "loader_stack.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    loads = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "user_annotation" and "DataLoader" in e["name"]]
    sleeps = [e for e in events if e.get("cat") == "python_function"
              and "sleep" in e["name"]]
    assert sleeps and all(any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in loads)
                          for e in sleeps)
    report = cpu_report(path)
    [loading] = _titled(report, "Input-bound")
    assert loading.evidence["loader"] == \
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert "num_workers=0" in loading.suggestion
    # Inside the loader: the sleep frames (leaves: their self time is their duration).
    from decimal import Decimal

    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    slept = sum(ns(e["dur"]) for e in sleeps)
    loader = re.compile(r"(?i)dataloader|_next_data|collate|\bdataset\b")  # frames too
    loading_ns, _, _, _ = _range_share(path, lambda name: bool(loader.search(name)))
    assert loading.evidence["data_loading_ns"] == loading_ns
    assert loading.evidence["inside_loader"] == (
        f"<built-in function sleep> ({format_ns(slept)}, {percent(slept, loading_ns)}%)")
    assert "it waits there (a sleep, or the I/O it stands for)" in loading.suggestion
    [cover] = _titled(report, "Ops cover")
    assert "outside_ops" not in cover.evidence
    assert "with_stack=True" not in cover.suggestion  # it was recorded with it


def test_the_cpu_report_tables_each_processes_steps():
    """slow_step (six steps): the step table gives the first step apart (warm-up) and the
    median, shortest and longest of the others, by the JSON; a pid is printed as its digits."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "slow_step_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    steps = sorted((int(e["name"].split("#")[1]), ns(e["dur"]), e["pid"]) for e in events
                   if e["name"].startswith("ProfilerStep#"))
    rest = [d for _, d, _ in steps[1:]]
    report = cpu_report(path)
    assert report.tables["steps"].to_pylist() == [{
        "pid": steps[0][2], "steps": len(steps), "first": steps[0][1],
        "median": int(statistics.median(rest)), "min": min(rest), "max": max(rest)}]
    text = render_text([report], width=100)
    assert f"\n  {steps[0][2]}      {len(steps)}  " in text  # no thousands separator


def test_a_step_far_slower_than_the_others_is_named_with_what_ran_in_it():
    """slow_step: six steps of about 15 ms; step 4 also sleeps 100 ms in save_checkpoint."""
    from decimal import Decimal

    path = FIXTURES / "torch-cpu" / "slow_step_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    steps = {int(e["name"].split("#")[1]): ns(e["dur"]) for e in events
             if e["name"].startswith("ProfilerStep#")}
    median = statistics.median(steps.values())
    [checkpoint] = [e for e in events if e["name"] == "save_checkpoint"]
    [slow] = _titled(cpu_report(path), "step ")
    assert (slow.evidence["step"], slow.evidence["step_ns"]) == (4, steps[4])
    assert slow.evidence["median_step_ns"] == int(median)
    assert slow.evidence["ratio"] == round(steps[4] / median, 1) >= 5
    assert slow.evidence["in_it"] == "save_checkpoint"
    assert slow.evidence["in_it_ns"] == ns(checkpoint["dur"])  # in no other step
    assert "-O steps=4" in slow.suggestion


def _op(name, ts, dur, tid=1):
    """One complete PyTorch op event of process 1 (µs)."""
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur}


def _steps_trace(tmp_path, per_pid):
    """Processes' steps (µs), each with a 2 ms op: ``per_pid`` maps a pid to its step
    lengths and to ranges ``(step, name, tid, start within the step, dur)``."""
    events = []
    for pid, (lengths, ranges) in per_pid.items():
        at, starts = 0, []
        for n, length in enumerate(lengths, 1):
            starts.append(at)
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                           "pid": pid, "tid": 1, "ts": at, "dur": length})
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid,
                           "tid": 1, "ts": at + 1, "dur": 2_000})
            at += length
        for step, name, tid, start, dur in ranges:
            events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid,
                           "tid": tid, "ts": starts[step - 1] + start, "dur": dur})
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_slow_step_names_what_ran_once_per_instant_and_whose_step_it_is(tmp_path):
    """Process 7's step 4 is 100 ms against 40: an all_reduce on two worker threads at once
    (50 ms more, counted once, not 100) explains it. Process 8's step 3 is 70 ms against
    40, with a tiny op the only range more than usual: the cause is not named."""
    usual = [("gloo:all_reduce", t, 5_000, 10_000) for t in (2, 3)]
    path = _steps_trace(tmp_path, {
        7: ([40_000, 40_000, 40_000, 100_000, 40_000],
            [(n, *r) for n in (1, 2, 3, 5) for r in usual]
            + [(4, "gloo:all_reduce", t, 5_000, 60_000) for t in (2, 3)]),
        8: ([40_000, 40_000, 70_000, 40_000, 40_000], [(3, "aten::resolve_neg", 1, 10, 1)]),
    })
    [slow] = _titled(cpu_report(path), "step ")
    assert slow.title.startswith("step 4 of process 7 takes 2.5× the median step")
    assert (slow.evidence["pid"], slow.evidence["in_it"], slow.evidence["in_it_ns"]) == \
        (7, "gloo:all_reduce", 50_000_000)
    path = _steps_trace(tmp_path, {
        8: ([40_000, 40_000, 70_000, 40_000, 40_000], [(3, "aten::resolve_neg", 1, 10, 1)])})
    [slow] = _titled(cpu_report(path), "step ")
    assert slow.evidence["in_it"] == "no traced op or range" and "pid" not in slow.evidence
    assert "no traced op or range took much of the 30ms more" in slow.title


def test_compiled_graphs_self_time_is_said_to_be_inductors_code(tmp_path):
    """Five steps of a compiled model on the CPU: CompiledFunction holds 3 ms of self time
    around a 1 ms aten::mm, CompiledFunctionBackward 2 ms around 1 ms, in a region of 1 ms of
    its own: 5 of each step's 8 ms of op self time (62.5%) is the generated code, which the
    profiler records as one op per graph (the region's own time is Dynamo's, not counted)."""
    events = []
    for n in range(5):
        at = n * 10_000
        events += [_op("Torch-Compiled Region: 0/0", at, 8_000),
                   _op("CompiledFunction", at + 10, 4_000), _op("aten::mm", at + 100, 1_000),
                   _op("CompiledFunctionBackward", at + 4_100, 3_000),
                   _op("aten::mm", at + 4_200, 1_000)]
    path = tmp_path / "compiled.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [finding] = _titled(cpu_report(path), "Compiled code")
    total = 5 * 8_000_000  # the region's own 1 ms, the graphs' 5 ms, the two mm's 2 ms
    assert finding.evidence == {"compiled_pct": percent(5 * 5_000_000, total),
                                "compiled_ns": 5 * 5_000_000}
    assert "CompiledFunction 37.5%, CompiledFunctionBackward 25.0%" in finding.title
    assert "enable_kernel_profile" in finding.suggestion


def test_steps_that_grow_are_an_accumulation_not_one_slow_step(tmp_path):
    """Steps of 20, 24, 27, 33, 45 ms after a warm-up step: no one step ran something else;
    something grows from step to step (step 6 is 1.9x step 2)."""
    path = _steps_trace(tmp_path, {7: ([60_000, 20_000, 24_000, 27_000, 33_000, 45_000], [])})
    report = cpu_report(path)
    assert not _titled(report, "step ")  # no slow-step finding beside it
    [growth] = _titled(report, "steps grow")
    assert growth.evidence == {"first_step": 2, "first_step_ns": 20_000_000, "last_step": 6,
                               "last_step_ns": 45_000_000, "steps": 5}
    assert growth.title == ("steps grow: step 2 takes 20ms, step 6 45ms (2.2×), longer almost "
                            "every step")
    assert "something accumulates from step to step" in growth.suggestion


def test_a_slow_step_in_a_collective_on_every_rank_is_a_wait_on_something_shared(tmp_path):
    """Two ranks, whose step 4 is 100 ms against 40 on both, all of it more in their
    all-reduce: each waited in the collective, and what the ranks share is the suspect."""
    usual = [("gloo:all_reduce", 2, 5_000, 10_000)]
    slow = [("gloo:all_reduce", 2, 5_000, 70_000)]
    lengths = [40_000, 40_000, 40_000, 100_000, 40_000]
    per_step = lambda n: slow if n == 4 else usual  # noqa: E731
    path = _steps_trace(tmp_path, {
        pid: (lengths, [(n, *r) for n in range(1, 6) for r in per_step(n)]) for pid in (7, 8)})
    [step] = _titled(cpu_report(path), "step ")
    assert step.evidence["slow_on_every_process"] is True
    assert step.evidence["in_it"] == "gloo:all_reduce"
    assert step.suggestion.startswith("the extra time is in a collective: this process waited "
                                      "in it for a slower one")
    assert "step 4 is slow on every process, so look at what they share" in step.suggestion


def test_a_compile_range_is_named_by_the_long_op_not_a_short_annotation_in_it(tmp_path):
    """torch 2.14 writes torch.compile's long ranges as ops ("dynamo", 1 s here) and a short
    annotation inside ("compile_fx.<locals>.fw_compiler_base_data", 0.3 ms): the long one
    names the compile."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "dynamo", "pid": 1, "tid": 1, "ts": 0,
               "dur": 1_000_000},
              {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 10, "dur": 300,
               "name": "compile_fx.<locals>.fw_compiler_base_data: compile_id=0/0"},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
               "ts": 1_000_100, "dur": 50}]
    path = tmp_path / "compile.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [finding] = _titled(cpu_report(path), "Compilation")
    assert finding.evidence["longest"] == "dynamo"


def test_a_window_counts_the_part_of_each_range_within_it():
    """``-O window=`` keeps the ranges that overlap it whole, but their shares are of their
    part within it: num_workers=0 loading in 100 ms to 300 ms, by the JSON."""
    path = FIXTURES / "torch-cpu" / "loader_workers0.pt.trace.json.gz"
    program, ns, lo, hi = _program_window(path, 100_000_000, 300_000_000)
    loading = _union_within([(ns(e["ts"]), ns(e["dur"])) for e in program
                             if "DataLoader" in e["name"]], lo, hi)
    report = tracekit.analyze(tracekit.read(path), "cpu", options=["window=100ms:300ms"])[0]
    [finding] = _titled(report, "Input-bound")
    assert report.findings[0].evidence["span_ns"] == hi - lo
    assert finding.evidence["data_loading_ns"] == loading
    assert finding.evidence["data_loading_pct_of_span"] == percent(loading, hi - lo) <= 100


def _collective_shares(path, with_ns=False):
    """Independently: pid, rank, and the share of the process' program span in collective
    ranges (their union), by the JSON; ``with_ns``: that union's ns and the union of the
    ``slow_rank_extra`` ranges as well."""
    from decimal import Decimal

    with gzip.open(path) as f:
        doc = json.load(f)
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    program = [e for e in doc["traceEvents"] if e.get("ph") == "X"
               and e.get("cat") in ("cpu_op", "user_annotation")]
    lo = min(ns(e["ts"]) for e in program)
    hi = max(ns(e["ts"]) + ns(e["dur"]) for e in program)
    comm = [(ns(e["ts"]), ns(e["dur"])) for e in program if e["name"] == "record_param_comms"
            or e["name"].startswith(("c10d::", "gloo:"))]
    found = program[0]["pid"], doc["distributedInfo"]["rank"], percent(
        _union_within(comm, lo, hi), hi - lo)
    if not with_ns:
        return found
    extra = [(ns(e["ts"]), ns(e["dur"])) for e in program if e["name"] == "slow_rank_extra"]
    return (*found, _union_within(comm, lo, hi), _union_within(extra, lo, hi))


def test_a_cpu_ddp_run_names_its_straggler_and_does_not_advise_ddp(tmp_path):
    """Recorded here (fixtures/torch-cpu/record_ddp_cpu.py): gloo DDP, rank 1 sleeps 80 ms a
    step before its forward. Rank 0 spends most of its span in all-reduce waiting for it;
    rank 1 little. Alone, rank 0 is told DDP is in use, not to use it."""
    paths = [FIXTURES / "torch-cpu" / f"ddp_rank{r}.pt.trace.json.gz" for r in (0, 1)]
    (pid0, rank0, pct0, comm0, none), (pid1, rank1, pct1, comm1, extra) = (
        _collective_shares(p, with_ns=True) for p in paths)
    assert (rank0, rank1) == (0, 1) and pct1 * 3 <= pct0 and none == 0
    report = cpu_report_of(paths)
    [late] = _titled(report, "Straggler")
    # The others' wait: their collective time over its; what it does more: slow_rank_extra.
    assert late.title == (f"Straggler: process {pid1} (rank 1) spends {pct1}% of its span in "
                          f"collectives against {pct0}% on process {pid0}: the others wait for "
                          f"it ({format_ns(comm0 - comm1)} more in collectives); it spends "
                          f"{format_ns(extra)} more than process {pid0} in slow_rank_extra")
    assert late.evidence == {"late_pid": pid1, "late_collectives_pct": pct1, "waiting_pid": pid0,
                             "waiting_collectives_pct": pct0, "late_rank": 1,
                             "wait_ns": comm0 - comm1, "late_extra": "slow_rank_extra",
                             "late_extra_ns": extra}
    assert "What makes it late is slow_rank_extra" in late.suggestion
    # Through tracekit's Perfetto output (one input, its processes "python (rank N)"), the
    # straggler keeps its rank.
    pftrace = tmp_path / "ddp.pftrace"
    tracekit.convert([str(p) for p in paths], pftrace)
    [back] = _titled(cpu_report(pftrace), "Straggler")
    assert back.title.startswith(f"Straggler: process {pid1} (rank 1) spends {pct1}%")
    [waits] = _titled(report, "Communication")
    assert waits.suggestion.startswith(f"The collectives wait for process {pid1} (rank 1)")
    # The ranks analyzer tables CPU-only ranks (tests/test_ranks.py) and points here.
    [ranks] = tracekit.analyze(tracekit.read([str(p) for p in paths]), "ranks")
    assert "cpu_ranks" in ranks.tables
    assert ranks.notes[-1] == "-a cpu says whom the others wait for, and why"
    [alone] = _titled(cpu_report(paths[0]), "Communication")
    assert alone.suggestion.startswith("DistributedDataParallel is in use")
    assert "use DistributedDataParallel" not in alone.suggestion


def test_collectives_the_program_calls_itself_are_not_told_to_tune_ddp(tmp_path):
    """A DDP loop whose backward issues one all-reduce a step (inside autograd's
    evaluate_function) while the program all-reduces two tensors of its own each step: 8 of
    the 12 calls are its own, which DDP's bucket_cap_mb cannot help."""
    events = []
    for n in range(4):
        at = n * 10_000
        events += [
            {"ph": "X", "cat": "user_annotation", "name": "DistributedDataParallel.forward",
             "pid": 1, "tid": 1, "ts": at, "dur": 1_000},
            _op("aten::mm", at + 10, 900),
            _op("autograd::engine::evaluate_function: MmBackward0", at + 1_000, 1_000),
            _op("c10d::allreduce_", at + 1_500, 100),
            _op("c10d::allreduce_", at + 2_100, 100), _op("c10d::allreduce_", at + 2_300, 100),
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1,
             "tid": 2, "ts": at + 2_100, "dur": 7_000}]
    path = tmp_path / "explicit.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [comm] = _titled(cpu_report(path), "Communication")
    assert comm.suggestion.startswith("8 of the 12 collective calls are the program's own, "
                                      "outside backward")
    assert "bucket_cap_mb" not in comm.suggestion


def test_steps_of_several_ranks_are_each_ranks_own(tmp_path):
    """Two ranks whose clocks differ by 1 s, five 10 ms steps each with one all-reduce:
    -O steps=2:3 is each rank's own steps 2 and 3 (two all-reduces), not everything between
    the first rank's step 2 and the last rank's step 3 (all five of each)."""
    paths = []
    for rank in (0, 1):
        base = rank * 1_000_000
        events = []
        for n in range(5):
            at = base + n * 10_000
            events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + 1}",
                        "pid": 10 + rank, "tid": 1, "ts": at, "dur": 10_000},
                       {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10 + rank,
                        "tid": 1, "ts": at + 10, "dur": 1_000},
                       {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce",
                        "pid": 10 + rank, "tid": 2, "ts": at + 2_000, "dur": 7_000}]
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps({"traceEvents": events,
                                    "distributedInfo": {"rank": rank, "world_size": 2}}))
        paths.append(path)
    report = tracekit.analyze(tracekit.read([str(p) for p in paths]), "cpu",
                              options=["steps=2:3"])[0]
    comms = _titled(report, "Communication")
    assert sorted(c.evidence["pid"] for c in comms) == [10, 11]
    assert [c.evidence["calls"] for c in comms] == [2, 2]
    # Two processes' op time over one span: said to be of two threads.
    assert " op self time over " in report.findings[0].title
    assert report.findings[0].title.split(";")[0].endswith(" on 2 threads")


def test_collectives_beside_compute_are_not_exposed(tmp_path):
    """Each 10 ms step: gloo's worker runs a 6 ms all-reduce while backward computes for
    4 ms of it (a MmBackward0 op); then the main thread blocks 2 ms in c10d::allreduce_ inside
    autograd's evaluate_function (which waits, it does not compute) beside a 2 ms all-reduce.
    Exposed: 2 + 2 ms of the 8 ms of all-reduce a step."""
    events = []
    for n in range(5):
        at = n * 10_000
        events += [
            _op("autograd::engine::evaluate_function: MmBackward0", at, 4_000),
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1,
             "tid": 2, "ts": at, "dur": 6_000},
            _op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
               at + 7_000, 2_000),
            _op("c10d::allreduce_", at + 7_000, 2_000),
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1,
             "tid": 2, "ts": at + 7_000, "dur": 2_000}]
    path = tmp_path / "ddp.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [comm] = _titled(cpu_report(path), "Communication")
    span = 4 * 10_000_000 + 9_000_000  # the last step ends at 9 ms
    assert comm.evidence["communication_ns"] == 5 * 8_000_000
    assert comm.evidence["exposed_ns"] == 5 * (2_000_000 + 2_000_000)
    assert comm.evidence["exposed_pct_of_span"] == percent(20_000_000, span)
    assert "20ms of it exposed, the rest beside the process's compute" in comm.title


@pytest.mark.parametrize("options, skew", [([], True), (["steps=3:5"], False)])
def test_start_up_skew_is_read_from_a_whole_trace_only(tmp_path, options, skew):
    """The first all-reduce of a run takes 80 ms (ranks starting at different times), half
    of all: start-up skew in the whole trace. Steps 3 to 5 start mid-run: their first call is
    no start-up, whatever its share (step 3's 50 ms of their 70)."""
    events = []
    for n, ms in enumerate((80, 10, 50, 10, 10)):
        at = n * 100_000
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + 1}",
                    "pid": 1, "tid": 1, "ts": at, "dur": 100_000},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": at + 10, "dur": 1_000},
                   {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1,
                    "tid": 2, "ts": at + 2_000, "dur": ms * 1000}]
    path = tmp_path / "skew.json"
    path.write_text(json.dumps({"traceEvents": events}))
    [comm] = _titled(tracekit.analyze(tracekit.read(path), "cpu", options=options)[0],
                     "Communication")
    assert ("which holds the start-up skew" in comm.title) is skew
    assert ("after_first_call_pct" in comm.evidence) is skew


def test_ranks_of_two_runs_get_a_warning_and_no_straggler_across_runs():
    """The DDP run and the gloo run recorded here each declare ranks 0 and 1 of a world of
    2: read together they cannot be one run, so no process of one is said to wait for a
    process of the other."""
    paths = [FIXTURES / "torch-cpu" / f"{run}_rank{r}.pt.trace.json.gz"
             for run in ("ddp", "gloo") for r in (0, 1)]
    declared = []
    for path in paths:
        with gzip.open(path) as f:
            info = json.load(f)["distributedInfo"]
        declared.append((info["rank"], info["world_size"]))
    assert sorted(declared) == [(0, 2), (0, 2), (1, 2), (1, 2)]
    report = cpu_report_of(paths)
    [odd] = _titled(report, "these inputs may not be ranks of one run")
    assert odd.title.endswith(": ranks 0, 1 are each declared by more than one input")
    assert odd.evidence == {"inputs": 4}
    assert not _titled(report, "Straggler")
    assert not any("wait for process" in f.suggestion for f in report.findings)
    assert _titled(cpu_report_of(paths[:2]), "Straggler")  # one run: named as before


def _autograd_ops(path) -> tuple[int, int, int]:
    """Independently: host ops with autograd's sequence number, the distinct numbers, and
    host ops, by the JSON."""
    with gzip.open(path) as f:
        ops = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"
               and e.get("cat") in ("cpu_op", "Operator")]
    numbers = [(e.get("args") or {})["Sequence number"] for e in ops
               if "Sequence number" in (e.get("args") or {})]
    return len(numbers), len(set(numbers)), len(ops)


@pytest.mark.parametrize("rel", [("fixtures", "torch-cpu", "inference_grad.pt.trace.json.gz"),
                                 ("fixtures", "torch-cpu",
                                  "inference_grad_off.pt.trace.json.gz"),
                                 ("fixtures", "torch-cpu", "hostwait_both.pt.trace.json.gz"),
                                 ("shared", "torch-trace", "hta", "alexnet_a100_trace.json.gz"),
                                 ("shared", "torch-trace", "tracelens", "h100_bert-small.json.gz"),
                                 ("shared", "torch-trace", "tracelens",
                                  "vllm_hipgraph_capture_rank0_rocm7.pt.trace.json.gz")],
                         ids=lambda r: r[-1].split(".")[0])
def test_inference_with_grad_mode_on_is_named(rel):
    """PyTorch numbers an op for autograd (args "Sequence number") only with grad mode on,
    and gives the ops that record a node distinct numbers: inference_grad (an eval-mode MLP
    without no_grad) and alexnet's inference (132 ops, model.to(device) and the forward
    passes) recorded graphs; inference_grad_off (inference_mode) and bert-small did not;
    hostwait's loop ran with grad mode on but on tensors that require no grad (every number
    0: no node); vLLM's capture pass numbered its custom TopK and SortTokens ops only (48
    of 3,819: under 10%)."""
    path = FIXTURES.joinpath(*rel[1:]) if rel[0] == "fixtures" else shared_path(*rel[1:])
    recorded, distinct, ops = _autograd_ops(path)
    # The verdict of a GPU trace, the CPU report of a CPU-only one.
    report = cpu_report(path) if rel[0] == "fixtures" else \
        tracekit.analyze(tracekit.read(path), "bottleneck")[0]
    found = _titled(report, "autograd records the inference")
    if recorded * 10 < ops or distinct < 2:
        assert found == []
        assert (recorded, distinct) == ((48, 48) if "vllm" in path.name else (16, 1)
                                        if "hostwait" in path.name else (0, 0))
        return
    [finding] = found
    assert finding.evidence == {"autograd_ops": recorded, "autograd_nodes": distinct,
                                "host_ops": ops,
                                "mode_from": "no backward pass or optimizer step"}
    assert finding.title.startswith(f"autograd records the inference ({recorded:,} of {ops:,} "
                                    f"host ops carry an autograd sequence number, {distinct:,} "
                                    "distinct)")
    assert "torch.inference_mode()" in finding.suggestion
    assert recorded == (132 if "alexnet" in path.name else 45)


def test_diff_of_runs_recorded_with_different_settings_says_so():
    """One run recorded with with_stack=True, the other without (record_hostwait_cpu.py): a
    warning says so, and the totals give each run's host op time (the union of its ops), so
    that a span change outside ops is not put on the ops."""
    from decimal import Decimal

    from tracekit.frontend import analyze_report

    paths = [FIXTURES / "torch-cpu" / f"hostwait_{v}.pt.trace.json.gz" for v in ("ranges", "stack")]
    op_time = []
    for path in paths:
        with gzip.open(path) as f:
            ops = [(int(Decimal(str(e["ts"])) * 1000), int(Decimal(str(e["dur"])) * 1000))
                   for e in json.load(f)["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        op_time.append(_union_within(ops, 0, 2**62))
    [report] = analyze_report([str(p) for p in paths], ["diff"]).reports
    totals = {r["metric"]: r for r in report.tables["totals"].to_pylist()}
    assert [totals["host op time"][k] for k in ("baseline", "candidate")] == op_time
    [settings] = _titled(report, "Only ")
    assert settings.title == (f"Only {paths[1].name} has Python frames (recorded with "
                              "with_stack=True): the two were recorded with different settings")
    assert settings.evidence == {"with_python_frames": paths[1].name}


def test_a_memory_profile_gives_the_peak_and_the_largest_allocation():
    """profile_memory=True (the MLP, record_mlp_cpu.py): the allocator's peak, the largest
    allocation and the innermost op on its thread at that moment, by the JSON."""
    from decimal import Decimal

    from tracekit.toolkit import format_bytes

    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    peak = max(e["args"]["Total Allocated"] for e in memory)
    largest = max(memory, key=lambda e: e["args"]["Bytes"])
    at = Decimal(str(largest["ts"]))
    around = [e for e in events if e.get("cat") == "cpu_op" and e["tid"] == largest["tid"]
              and Decimal(str(e["ts"])) <= at <= Decimal(str(e["ts"])) + Decimal(str(e["dur"]))]
    by = max(around, key=lambda e: Decimal(str(e["ts"])))["name"]
    [finding] = _titled(cpu_report(path), "Memory")
    size = largest["args"]["Bytes"]
    assert finding.title == (f"Memory: host allocations peak at {format_bytes(peak)}; the "
                             f"largest allocation is {format_bytes(size)}, by {by}")
    assert finding.evidence == {"peak_allocated_bytes": peak, "largest_allocation_bytes": size,
                                "largest_by": by}


def test_column_wise_nesting_agrees_with_the_stack_loop():
    """The CPU report's op self times: column-wise where a thread's ops nest, the stack loop
    where they do not (or last no time). On random ops (nested ones, and ones that overlap
    without nesting, touch or repeat) both give the loop's self times and top-level ops."""
    import numpy as np
    import pyarrow as pa
    from tracekit.plugins.cpu_profile import _nested_loop, _nested_thread, _nesting

    rng = np.random.default_rng(7)

    def nested(lo, hi, depth, out):
        for _ in range(int(rng.integers(0, 4)) if depth < 4 and hi - lo > 4 else 0):
            a = int(rng.integers(lo, hi - 2))
            b = int(rng.integers(a + 1, hi))
            out.append((a, b - a))
            nested(a, b, depth + 1, out)
            lo = b
            if lo >= hi - 2:
                break
        return out

    for trial in range(400):
        spans = nested(0, 10_000, 0, []) if trial % 2 else [
            (int(a), int(d)) for a, d in zip(rng.integers(0, 200, 30), rng.integers(0, 40, 30),
                                             strict=True)]
        if not spans:
            continue
        n = len(spans)
        ops = pa.table({"ts_ns": [a for a, _ in spans], "dur_ns": [d for _, d in spans],
                        "pid": rng.integers(0, 2, n), "tid": rng.integers(0, 2, n)})
        self_ns, top = _nesting(ops)
        ts, dur = ops["ts_ns"].to_numpy(), ops["dur_ns"].to_numpy()
        order = np.lexsort((-dur, ts, ops["tid"].to_numpy(), ops["pid"].to_numpy()))
        want, want_top = dur.astype(np.float64), np.ones(n, dtype=bool)
        for key in {(int(p), int(t)) for p, t in zip(ops["pid"].to_numpy(),
                                                     ops["tid"].to_numpy(), strict=True)}:
            mine = order[(ops["pid"].to_numpy()[order] == key[0])
                         & (ops["tid"].to_numpy()[order] == key[1])]
            _nested_loop(mine, ts, dur, want, want_top)
            if trial % 2:  # nested ops of positive length: the column-wise path takes them
                assert _nested_thread(mine, ts, dur, dur.astype(np.float64), np.ones(n, bool))
        assert np.array_equal(self_ns, np.maximum(want, 0.0)), spans
        assert np.array_equal(top, want_top), spans


@pytest.mark.slow
def test_the_cpu_report_of_a_gpu_trace_says_it_is_the_host_side():
    """``-a cpu`` on a GPU training trace (HTA's trace_diff control rank): its title and
    input say the trace has GPU work; the main thread waiting in backward while autograd's
    device thread runs the ops is not 'outside ops'."""
    path = shared_path("torch-trace", "hta", "trace_diff_control_rank3_a100.json.gz")
    with gzip.open(path) as f:
        ops = sum(1 for e in json.load(f)["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    [report] = tracekit.analyze(tracekit.read(path), "cpu")
    first = report.findings[0]
    assert first.title.startswith(f"Host side of a GPU PyTorch trace: {ops:,} host ops")
    assert first.evidence["input"] == ("PyTorch host ops (the trace has GPU work too: the "
                                       "bottleneck verdict weighs it)")
    assert not _titled(report, "Ops cover")


def test_memory_bound_rows_of_packages_name_no_hot_code_and_bpf_is_packet_work(tmp_path):
    """grappolo's per-package report: the memory finding names the top package, not 'the hot
    code (package_0)'. versioned-vmlinux's one sample is an XDP BPF program under the network
    receive path: one sample ranks nothing; the same sample 150 times over is packet
    processing, not system calls."""
    report = cpu_report(shared_path("vtune-csv", "utools",
                                    "grappolo-friendster-t192-dram-hotspots-pkg.csv"))
    [memory] = _titled(report, "Memory bound")
    assert memory.evidence["top_package"] == "package_0" and "top_function" not in memory.evidence
    # Rows of packages say nothing of user and kernel code: the title does not split it.
    assert report.findings[0].title == ("CPU profile: busy 56,143s CPU time; top package "
                                        "package_0 53.6%")
    assert memory.suggestion.startswith("The work waits on memory")
    path = shared_path("perf-script", "inferno", "versioned-vmlinux.txt")
    report = cpu_report(path)
    assert not _titled(report, "Kernel code takes")
    assert _titled(report, "Too few samples to rank functions: 1 busy sample")
    text = path.read_text()
    many = tmp_path / "vmlinux-150.txt"
    many.write_text("\n".join(text.strip() + "\n" for _ in range(150)))
    [kernel] = _titled(cpu_report(many), "Kernel code takes")
    assert kernel.suggestion.startswith("The top kernel functions point at packet processing "
                                        "in the kernel (network receive, XDP/BPF programs)")
