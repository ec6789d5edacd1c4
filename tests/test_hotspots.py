"""The CPU verdict (analyzer ``cpu``) and the hotspots analyzer's idle, units and demangling,
against numbers computed here independently: plain Python passes over the perf script text,
the VTune CSV and the PyTorch trace JSON, one test per rule."""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections import Counter, defaultdict

import cxxfilt
import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.report import percent
from tracekit.stacks import demangle, is_kernel

HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?:(?P<pid>\d+)/)?(?P<tid>\d+)\s+(?:\[\d+\]\s+)?"
                    r"(?P<time>\d+\.\d+):\s+(?:(?P<period>\d+)\s+)?(?P<event>\S+?):")
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.*?)(?:\+0x[0-9a-f]+)?\s+\((?P<dso>[^()]*)\)\s*$")
KERNEL_DSO = re.compile(r"^\[kernel\.kallsyms\]|vmlinux|^/lib/modules/")


def perf_samples(path) -> list[dict]:
    """Every sample of a perf script text: comm, tid, time, period (None when not printed),
    event, and its frames leaf first as (symbol, dso)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    out: list[dict] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if not line[0].isspace():
            m = HEADER.match(line)
            if m:
                out.append({"comm": m["comm"].strip(), "tid": int(m["tid"]),
                            "time": float(m["time"]),
                            "period": int(m["period"]) if m["period"] else None,
                            "event": m["event"], "frames": []})
            continue
        f = FRAME.match(line)
        if f and out:
            out[-1]["frames"].append((f["sym"], f["dso"]))
    return out


def cpu_report(path, *options):
    [report] = tracekit.analyze(tracekit.read(path), "cpu", options=list(options))
    return report


def verdict(report):
    first = report.findings[0]
    assert first.evidence["verdict"] == "cpu-profile"
    return first.evidence


PERF = ("speedscope/system-wide.linux-perf.txt", "flamegraph/perf-cycles-instructions-01.txt",
        "flamegraph/perf-iperf-stacks-pidtid-01.txt", "haandfeng_aarch64/out.perf",
        "flamegraph/perf-java-faults-01.txt", "flamegraph/perf-rust-Yamakaky-dcpu.txt",
        "inferno/versioned-vmlinux.txt", "nishkp_unknown_syms/out.perf",
        "firefox-profiler/gzip.perf.gz")
VTUNE = ("inferno/vtune-topdown.csv", "utools/grappolo-friendster-t192-dram-hotspots-fn.csv",
         "utools/grappolo-friendster-t192-dram-hw-events-fn.csv",
         "vtune-plot/advanced-hotspots.csv")


@pytest.mark.parametrize("path", [("perf-script", p) for p in PERF]
                         + [("vtune-csv", p) for p in VTUNE])
def test_first_finding_is_a_cpu_verdict_and_no_fix_asks_for_gpu_data(path):
    report = cpu_report(shared_path(path[0], *path[1].split("/")))
    ev = verdict(report)
    assert ev["weight_unit"] and "busy" in ev and "user_pct" in ev and "kernel_pct" in ev
    assert "top_function" in ev and "top_module" in ev
    text = " ".join(f.title + " " + f.suggestion for f in report.findings)
    assert not re.search(r"CUDA|nsys|GPU|--trace=cuda", text)


def test_idle_is_the_swapper_share_and_left_out_of_the_ranking():
    path = shared_path("perf-script", "speedscope", "system-wide.linux-perf.txt")
    samples = perf_samples(path)
    total = sum(s["period"] for s in samples)
    idle = sum(s["period"] for s in samples if s["comm"] == "swapper")
    busy_leaf: Counter = Counter()
    for s in samples:
        if s["comm"] != "swapper":
            busy_leaf[s["frames"][0][0]] += s["period"]
    ev = verdict(cpu_report(path))
    assert ev["idle_pct"] == percent(idle, total) == 75.2
    raw_top, top_w = busy_leaf.most_common(1)[0]
    assert ev["top_function"] == cxxfilt.demangle(raw_top) == "beta()"
    assert ev["top_function_pct"] == percent(top_w, total - idle)
    # hotspots leaves idle out too, unless asked.
    [hot] = tracekit.analyze(tracekit.read(path), "hotspots")
    assert hot.tables["functions"].to_pylist()[0]["function"] == "beta()"
    assert any("75.2% of the weight" in n for n in hot.notes)
    [hot_all] = tracekit.analyze(tracekit.read(path), "hotspots", options=["idle=include"])
    selfs = sum(r["self"] for r in hot_all.tables["modules"].to_pylist())
    assert selfs == total


def test_interrupt_work_on_the_idle_loop_is_busy_and_cycles_idle_is_a_lower_bound():
    # swapper, but net_rx_action (softirq) on top of cpuidle_enter: not idle.
    ev = verdict(cpu_report(shared_path("perf-script", "inferno", "versioned-vmlinux.txt")))
    assert ev["idle_pct"] == 0 and ev["kernel_pct"] == 100
    # cycles and instructions: ranked by cycles; idle = cycles samples in poll_idle/do_idle.
    path = shared_path("perf-script", "flamegraph", "perf-cycles-instructions-01.txt")
    cycles = [s for s in perf_samples(path) if s["event"] == "cycles"]
    idle = [s for s in cycles if any(f[0] in ("poll_idle", "do_idle") for f in s["frames"])]
    report = cpu_report(path)
    ev = verdict(report)
    assert ev["event"] == "cycles"
    assert ev["idle_pct"] == percent(len(idle), len(cycles))
    assert any("lower bound" in f.title for f in report.findings)


@pytest.mark.slow  # six real profiles, each read and analyzed whole
def test_weight_units():
    def unit(*parts):
        return verdict(cpu_report(shared_path(*parts)))["weight_unit"]

    # cpu-clock with a period: ns of CPU time; without one (iperf): samples, never ns.
    assert unit("perf-script", "speedscope", "system-wide.linux-perf.txt") == "ns of CPU time"
    assert unit("perf-script", "flamegraph", "perf-iperf-stacks-pidtid-01.txt") == "samples"
    assert unit("perf-script", "haandfeng_aarch64", "out.perf") == "cycles"
    assert unit("vtune-csv", "vtune-plot", "advanced-hotspots.csv") == "CPU seconds"
    assert unit("vtune-csv", "utools", "grappolo-friendster-t192-dram-hw-events-fn.csv") == \
        "cycles"
    report = cpu_report(shared_path("perf-script", "flamegraph", "perf-java-faults-01.txt"))
    assert verdict(report)["weight_unit"] == "page-faults"
    assert verdict(report)["idle_pct"] is None
    assert any("not CPU time" in f.title for f in report.findings)
    # VTune CPU Time in seconds: the busy total is the CSV's sum.
    path = shared_path("vtune-csv", "vtune-plot", "advanced-hotspots.csv")
    seconds = sum(float(r["CPU Time"]) for r in csv.DictReader(path.open()))
    fns = cpu_report(path, "top=0").tables["functions"].to_pylist()
    assert sum(r["self"] for r in fns) == pytest.approx(seconds * 1e9, abs=len(fns))


def test_user_and_kernel_share_by_leaf_module():
    path = shared_path("perf-script", "flamegraph", "perf-iperf-stacks-pidtid-01.txt")
    samples = [s for s in perf_samples(path) if s["frames"]]
    kernel = sum(1 for s in samples if KERNEL_DSO.search(s["frames"][0][1]))
    report = cpu_report(path)
    ev = verdict(report)
    assert ev["kernel_pct"] == percent(kernel, len(samples))
    kernel_finding = next(f for f in report.findings if f.title.startswith("Kernel code"))
    assert "copying data" in kernel_finding.suggestion  # copy_user_enhanced_fast_string
    # Addresses: the kernel half on x86-64 and arm64, stored as int64 (negative).
    assert is_kernel(None, 0xFFFF_8000_0845_A024 - (1 << 64))
    assert is_kernel(None, 0xFFFF_0000_1000_0000)
    assert not is_kernel(None, 0x7F2E_E6E0_AA60)
    assert is_kernel("/usr/lib/debug/boot/vmlinux-5.4.14") and not is_kernel("/usr/bin/perf")


def test_demangling_with_libstdcxx_and_raw_fallback():
    assert demangle("_Z5alphav") == "alpha()"
    assert demangle("_ZNSt6vectorIiSaIiEEixEm") == \
        "std::vector<int, std::allocator<int> >::operator[](unsigned long)"
    assert demangle("_ZN4core3ptr13drop_in_place17h1234567890abcdefE") == \
        "core::ptr::drop_in_place"
    assert demangle("_Zbad") == "_Zbad" and demangle("_Rb_tree") == "_Rb_tree"
    assert demangle("core::ptr::write::haabbb39ab969e5ac") == "core::ptr::write"
    # Legacy Rust escapes, undone as rustc-demangle does.
    assert demangle("_ZN4core3cmp5impls57_$LT$impl$u20$core..cmp..PartialOrd$u20$for$u20$"
                    "usize$GT$2lt17h8ab8e1f0a3b7cd2eE") == \
        "core::cmp::impls::<impl core::cmp::PartialOrd for usize>::lt"
    rust = shared_path("perf-script", "flamegraph", "perf-rust-Yamakaky-dcpu.txt")
    assert "$LT$" in rust.read_text()
    names = {r["function"] for r in cpu_report(rust, "top=0").tables["functions"].to_pylist()}
    assert not {n for n in names if "$LT$" in n or "$u20$" in n or ".." in n}
    assert "core::cmp::impls::<impl core::cmp::PartialOrd for usize>::lt" in names
    # Demangled, the trivial functions of a debug build are still told apart: the share of
    # samples whose leaf, as perf printed it, is in core's cmp, ptr, iter ... modules.
    samples = perf_samples(rust)
    core = re.compile(r"core(::|\.\.)(cmp|ptr|iter|ops|num|slice|clone|mem|option|result"
                      r"|convert|cell|hint|array)(::|\.\.)")
    weight = [s["period"] or 1 for s in samples if s["frames"]]
    trivial = sum(w for s, w in zip([s for s in samples if s["frames"]], weight, strict=True)
                  if core.search(s["frames"][0][0]))
    [debug] = [f for f in cpu_report(rust).findings if f.title.startswith("Unoptimized")]
    assert debug.evidence["trivial_std_pct"] == round(100 * trivial / sum(weight), 1) == 67.3
    path = shared_path("perf-script", "speedscope", "simple-with-header.linux-perf.txt")
    leaves = {s["frames"][0][0] for s in perf_samples(path) if s["frames"]}
    mangled = {n for n in leaves if n.startswith("_Z")}
    assert mangled
    names = {r["function"] for r in cpu_report(path, "top=0").tables["functions"].to_pylist()}
    assert {cxxfilt.demangle(n) for n in mangled} <= names
    assert not {n for n in names if n.startswith("_Z")}


def test_top_function_and_module_shares():
    path = shared_path("perf-script", "haandfeng_aarch64", "out.perf")
    samples = perf_samples(path)
    total = sum(s["period"] for s in samples)
    by_fn: Counter = Counter()
    by_mod: Counter = Counter()
    for s in samples:
        by_fn[s["frames"][0][0]] += s["period"]
        by_mod[s["frames"][0][1]] += s["period"]
    ev = verdict(cpu_report(path))
    (fn, w), (mod, mw) = by_fn.most_common(1)[0], by_mod.most_common(1)[0]
    assert (ev["top_function"], ev["top_function_pct"]) == (fn, percent(w, total))
    assert (ev["top_module"], ev["top_module_pct"]) == (mod, percent(mw, total))


def test_ipc_per_function_from_cycles_and_instructions():
    path = shared_path("perf-script", "flamegraph", "perf-cycles-instructions-01.txt")
    counts: dict[str, Counter] = defaultdict(Counter)
    for s in perf_samples(path):
        counts[s["event"]][s["frames"][0] if s["frames"] else None] += 1
    main = ("main", "/root/noploop")
    # One fixed period (-c 100000000) for both: IPC is the ratio of the sample counts.
    want = counts["instructions"][main] / counts["cycles"][main]
    rows = cpu_report(path).tables["functions"].to_pylist()
    got = next(r for r in rows if (r["function"], r["module"]) == main)["ipc"]
    assert got == round(want, 2)


def test_unoptimized_build_signature():
    path = shared_path("perf-script", "flamegraph", "perf-rust-Yamakaky-dcpu.txt")
    samples = perf_samples(path)
    total = sum(s["period"] for s in samples)
    trivial = sum(s["period"] for s in samples if s["frames"] and re.match(
        r"core::(cmp|ptr|iter::range)::", s["frames"][0][0]))
    report = cpu_report(path)
    finding = next(f for f in report.findings if f.title.startswith("Unoptimized build"))
    assert finding.evidence["trivial_std_pct"] >= percent(trivial, total) > 10
    assert "--release" in finding.suggestion and "core::cmp" in finding.evidence["functions"]
    optimized = cpu_report(shared_path("perf-script", "haandfeng_aarch64", "out.perf"))
    assert not any(f.title.startswith("Unoptimized") for f in optimized.findings)


def test_serial_critical_path():
    path = shared_path("perf-script", "haandfeng_aarch64", "out.perf")
    spans: dict[int, list[float]] = defaultdict(list)
    for s in perf_samples(path):
        if s["comm"] == "multi":
            spans[s["tid"]].append(s["time"])
    length = {t: max(v) - min(v) for t, v in spans.items()}
    main = max(length, key=length.get)
    workers = [t for t in length if t != main]
    finding = next(f for f in cpu_report(path).findings if f.title.startswith("Serial"))
    assert finding.evidence["thread"] == main and finding.evidence["workers"] == len(workers)
    mean = sum(length[t] for t in workers) / len(workers)
    assert finding.evidence["worker_span_pct"] == pytest.approx(
        percent(mean, length[main]), abs=0.2)


def test_vtune_utilization_openmp_waits_and_memory_bound():
    path = shared_path("vtune-csv", "vtune-plot", "advanced-hotspots.csv")
    rows = list(csv.DictReader(path.open()))
    levels = {lv: sum(float(r[f"CPU Time:Effective Time:{lv}"]) for r in rows)
              for lv in ("Idle", "Poor", "Ok", "Ideal", "Over")}
    poor = next(f for f in cpu_report(path).findings if f.title.startswith("Poor CPU"))
    shares = {lv: percent(levels[lv], sum(levels.values())) for lv in levels}
    assert poor.evidence["utilization_poor_pct"] == shares["Poor"]
    slow = percent(levels["Idle"] + levels["Poor"], sum(levels.values()))
    assert poor.title == (f"Poor CPU utilization: {slow}% of effective time ran with few CPUs "
                          f"busy (VTune's utilization levels Idle {shares['Idle']}% and Poor "
                          f"{shares['Poor']}%)")
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-fn.csv")
    rows = list(csv.DictReader(path.open()))
    cpu = sum(float(r["CPU Time"]) for r in rows)
    waits = ("__kmp_wait_template", "barrier", "kmp_flag_native", "kmp_basic_flag_native",
             "__kmp_x86_pause", "__kmp_yield")
    kmp = sum(float(r["CPU Time"]) for r in rows if any(w in r["Function"] for w in waits))
    mem = sum(float(r["CPU Time"]) * float(r["Memory Bound(%)"]) for r in rows
              if r["Memory Bound(%)"]) / cpu
    findings = {f.title.split(":")[0]: f for f in cpu_report(path).findings}
    assert findings["OpenMP barrier waits"].evidence["openmp_wait_pct"] == percent(kmp, cpu)
    assert findings["Memory bound"].evidence["memory_bound_pct"] == round(mem, 1)
    assert "NUMA" in findings["Memory bound"].suggestion


def test_cpu_only_torch_trace_host_ops_by_self_time():
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    with gzip.open(path) as f:
        doc = json.load(f)
    ops = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    self_us: Counter = Counter()
    stack: list[dict] = []
    for e in ops:
        while stack and (stack[-1]["tid"] != e["tid"]
                         or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]):
            stack.pop()
        self_us[e["name"]] += e["dur"]
        if stack:
            self_us[stack[-1]["name"]] -= e["dur"]
        stack.append(e)
    report = cpu_report(path, "top=0")
    ev = verdict(report)
    top, top_us = self_us.most_common(1)[0]
    assert ev["top_op"] == top == "aten::addmm"
    assert ev["top_op_self_ns"] == pytest.approx(top_us * 1000, abs=10)
    got = {r["op"]: r["self"] for r in report.tables["ops"].to_pylist()}
    assert set(got) == set(self_us)
    for name, us in self_us.items():
        assert got[name] == pytest.approx(us * 1000, abs=50), name
    assert not any("GPU" in f.suggestion or "CUDA" in f.suggestion for f in report.findings)


def test_few_samples_give_the_margin_of_the_top_share():
    """111 samples: the top function's share is ±1.96·√(p(1−p)/n) points at 95 % confidence."""
    path = shared_path("perf-script", "nishkp_unknown_syms", "out.perf")
    samples = perf_samples(path)
    leaf: Counter = Counter()
    for s in samples:
        leaf[s["frames"][0][0]] += s["period"]
    total = sum(leaf.values())
    p = leaf["next"] / total
    margin = round(196 * (p * (1 - p) / len(samples)) ** 0.5, 1)
    assert (len(samples), percent(leaf["next"], total), margin) == (111, 97.3, 3.0)
    report = cpu_report(path)
    few = next(f for f in report.findings if f.title.startswith("Only "))
    assert report.findings[1] is few
    assert few.title == "Only 111 samples: shares are rough"
    assert few.evidence == {"samples": 111, "top_function_pct": 97.3,
                            "top_function_margin_points": 3.0, "margin_points_at_50": 9.3}
    assert few.suggestion.startswith("At 95% confidence a share p of n samples is "
                                     "±1.96·√(p(1−p)/n): next's 97.3% is ±3.0 points, a 50% "
                                     "share ±9.3. Record longer or sample at a higher rate, "
                                     "to 1,000 samples or more")
    [hot] = tracekit.analyze(tracekit.read(path), "hotspots")
    assert hot.notes[-1] == ("only 111 samples: shares are rough (a share p is ±1.96·√(p(1−p)/n) "
                             "at 95% confidence: next's 97.3% is ±3.0 points, a 50% share ±9.3)")


@pytest.mark.parametrize("parts", [
    ("perf-script", "haandfeng_aarch64", "out.perf"),  # 3,570 samples
    ("vtune-csv", "vtune-plot", "advanced-hotspots.csv"),  # 148 aggregate rows, not samples
])
def test_enough_samples_or_aggregate_rows_give_no_margin(parts):
    path = shared_path(*parts)
    assert not any(f.title.startswith("Only ") for f in cpu_report(path).findings)
    [hot] = tracekit.analyze(tracekit.read(path), "hotspots")
    assert not any(n.startswith("only ") for n in hot.notes)


def test_share_margin():
    from tracekit.toolkit import FEW_SAMPLES, few_samples_note, share_margin

    assert FEW_SAMPLES == 1000
    assert share_margin(0.5, 1000) == 3.1 and share_margin(0.5, 111) == 9.3
    assert share_margin(1.0, 10) == 0.0 and share_margin(0.3, 0) == 0.0
    assert few_samples_note(1000, "f", 0.5) is None and few_samples_note(0, "f", 0.5) is None
    assert few_samples_note(999, "f", 0.5) == (
        "only 999 samples: shares are rough (a share p is ±1.96·√(p(1−p)/n) at 95% "
        "confidence: f's 50.0% is ±3.1 points, a 50% share ±3.1)")
    # one sample: all of it in one function, whose ±0 would say nothing
    assert few_samples_note(1, "f", 1.0) == (
        "only 1 sample: shares are rough (a share p is ±1.96·√(p(1−p)/n) at 95% "
        "confidence: a 50% share ±98.0)")


def test_one_sample_gives_no_margin_of_its_single_function():
    path = shared_path("perf-script", "inferno", "versioned-vmlinux.txt")
    report = cpu_report(path)
    # Under 100 busy samples the report says no function can be ranked, which says more
    # plainly what the margin would: one finding, not both.
    assert [f.title for f in report.findings if f.title.startswith(("Only ", "Too few"))] == [
        "Too few samples to rank functions: 1 busy sample, under 100"]
    [hot] = tracekit.analyze(tracekit.read(path), "hotspots")
    assert hot.notes[0] == "1 sample, total weight 2.08348e+07"
    assert ("only 1 sample: shares are rough (a share p is ±1.96·√(p(1−p)/n) at 95% "
            "confidence: a 50% share ±98.0)") in hot.notes


def test_a_recording_of_one_program_that_mostly_sleeps_is_said_to_wait():
    """naps: 150 rounds of 1 ms of work and a 9 ms nap, recorded alone (no idle task): idle
    is not measured, and its CPU time over the sampled span says it was off CPU."""
    path = FIXTURES / "perf-recorded" / "naps.perf"
    headers = [line.split() for line in path.read_text().splitlines()
               if line.startswith("naps ")]
    times = [float(h[2].rstrip(":")) for h in headers]
    busy = sum(int(h[3]) for h in headers)  # the cpu-clock period: ns on the CPU
    span = round((max(times) - min(times)) * 1e9)
    report = cpu_report(path)
    ev = verdict(report)
    assert ev["idle_pct"] is None and ev["samples"] == len(headers) == 264
    assert abs(ev["sampled_span_ns"] - span) <= 1000  # perf prints µs
    assert ev["cpus_used"] == round(busy / span, 2) == 0.16
    [waits] = [f for f in report.findings if f.title.endswith("it mostly waits")]
    assert waits.evidence["busy_ns"] == busy
    assert "off-CPU time" in waits.suggestion


def _perf_records(path):
    """(period, frame lines leaf first) of each record of a perf script text with periods,
    read with a split on blank lines (the header block skipped)."""
    for block in path.read_text().split("\n\n"):
        lines = [line for line in block.strip().splitlines() if not line.startswith("#")]
        if len(lines) >= 2:
            yield int(lines[0].split()[3]), lines[1:]


def test_a_pure_python_loop_is_said_to_be_the_interpreter_not_a_function_to_optimize():
    """pyloop: a Python loop under perf on Python 3.11 (no -X perf): libpython's C functions
    hold most of the samples; the finding points at a Python profiler, not at optimizing
    _PyObject_Malloc."""
    path = FIXTURES / "perf-recorded" / "pyloop.perf"
    total = interpreter = 0
    for period, frames in _perf_records(path):
        total += period
        interpreter += period * ("/libpython3.11.so" in frames[0])
    report = cpu_report(path)
    [finding] = [f for f in report.findings if f.title.startswith("The Python interpreter")]
    assert finding.evidence["interpreter_pct"] == percent(interpreter, total) == 86.5
    assert "python -X perf" in finding.suggestion
    assert not any(f.title.startswith("One function takes") for f in report.findings)


def test_stacks_that_do_not_reach_a_threads_start_are_said_to_be_cut_short():
    """pyloop: libpython built without frame pointers, so most stacks stop after a frame or
    two (then perf's unnamed garbage); burn, built with them, reaches main every time."""
    def cut_share(path):
        total = cut = 0
        for period, frames in _perf_records(path):
            names = [line.split()[1] for line in frames if len(line.split()) > 1]  # leaf 1st
            while names and names[-1] == "[unknown]":
                names.pop()
            total += period
            cut += period * (bool(names) and names[-1].split("+")[0] not in (
                "main", "_start", "__libc_start_main", "__libc_start_call_main", "_dl_start_user"))
        return percent(cut, total)

    pyloop = FIXTURES / "perf-recorded" / "pyloop.perf"
    [finding] = [f for f in cpu_report(pyloop).findings if "cut short" in f.title]
    assert finding.evidence["cut_stacks_pct"] == cut_share(pyloop) == 97.1
    assert "--call-graph dwarf" in finding.suggestion
    burn = FIXTURES / "perf-recorded" / "burn.perf"
    assert cut_share(burn) == 0.3  # a few kernel samples
    assert not any("cut short" in f.title for f in cpu_report(burn).findings)


def test_stacks_cut_under_dwarf_unwinding_are_told_a_larger_copy():
    """graphviz was recorded with --call-graph dwarf (the header's cmdline and its event's
    sample_stack_user = 8192): telling it to record with --call-graph dwarf would be no fix;
    the copy of the stack is what ran out."""
    import gzip

    path = shared_path("perf-script", "firefox-profiler", "graphviz.perf.gz")
    header = [line for line in gzip.decompress(path.read_bytes()).decode().splitlines()[:60]
              if line.startswith("#")]
    assert any("--call-graph dwarf" in line for line in header)
    assert any("sample_stack_user = 8192" in line for line in header)
    [finding] = [f for f in cpu_report(path).findings if "cut short" in f.title]
    assert finding.evidence["unwinding"] == "dwarf, 8192 bytes"
    assert finding.suggestion.startswith("The DWARF unwinder stops where the copy of the user "
                                         "stack ends (8,192 bytes a sample): record with a "
                                         "larger copy, `perf record --call-graph dwarf,65528`")


def test_threads_contending_for_one_mutex_are_said_to_serialize_on_a_lock():
    """locks: four threads increment one counter under one mutex; the leaf functions of a
    third of the samples are glibc's mutex and lll lock functions."""
    import re as regex

    path = FIXTURES / "perf-recorded" / "locks.perf"
    total = locked = 0
    for period, frames in _perf_records(path):
        leaf = frames[0].split()[1].split("+0x")[0].split("@")[0]
        total += period
        locked += period * bool(regex.fullmatch(
            r"(__GI___)?pthread_mutex_\w+|(__GI_)?__lll_\w*lock\w*", leaf))
    [finding] = [f for f in cpu_report(path).findings if f.title.startswith("Lock contention")]
    assert finding.evidence["lock_pct"] == percent(locked, total) == 33.9
    assert "critical section" in finding.suggestion


def test_a_system_wide_recording_of_busy_cpus_has_no_idle_not_unmeasured_idle():
    """saturated_system: perf record -a while three `yes` keep both CPUs busy. No sample of
    the idle task, but not because perf recorded chosen processes: no CPU idled."""
    path = FIXTURES / "perf-recorded" / "saturated_system.perf"
    headers = [line.split() for line in path.read_text().splitlines() if line.strip()]
    cpus = {h[2] for h in headers}
    times = [float(h[3].rstrip(":")) for h in headers]
    busy = sum(int(h[4]) for h in headers)
    assert cpus == {"[000]", "[001]"} and not any(h[0] == "swapper" for h in headers)
    ev = verdict(cpu_report(path))
    assert ev["idle_pct"] == 0.0
    assert ev["cpus_used"] == round(busy / round((max(times) - min(times)) * 1e9), 2) >= 1.9
    assert ev["idle"] == f"none: {ev['cpus_used']:g} CPUs busy on average of the 2 sampled, " \
        "which never idled"


def test_perf_samples_without_timestamps_are_samples_not_a_reports_aggregates():
    # perf script without -F time: no timestamps, but each row is one sample, not a VTune
    # total; idle is what the samples say, not "not in the report": no sample of the idle
    # task, so a recording of chosen processes, whose idle time it did not measure.
    path = shared_path("perf-script/flamegraph/perf-js-stacks-01.txt")
    trace = tracekit.read(path)
    assert trace.events["ts_ns"].null_count == trace.events.num_rows == 2
    [report] = tracekit.analyze(trace, "cpu")
    evidence = report.findings[0].evidence
    assert evidence["samples"] == 2
    assert evidence["idle_pct"] is None
    assert evidence["idle"].startswith("not measured: no sample of the idle task")
    assert "cpus_used" not in evidence  # no timestamps: no span
    assert evidence["weight_unit"] == "samples"


def test_the_top_function_is_one_perf_could_name():
    """graphviz: [unknown] frames (no symbols) hold 3.1% of the cycles, more than any named
    function: no function to optimize; the verdict names the top named one."""
    report = cpu_report(shared_path("perf-script", "firefox-profiler", "graphviz.perf.gz"))
    rows = report.tables["functions"].to_pylist()
    assert rows[0]["function"] == "[unknown]"
    named = next(r for r in rows if r["function"] != "[unknown]")
    verdict = report.findings[0]
    assert (verdict.evidence["top_function"], verdict.evidence["top_function_pct"]) == (
        named["function"], named["self_pct"]) == ("FcStrBufChar", 2.3)


def test_unresolved_kernel_addresses_count_as_kernel_time():
    """nishkp: perf could not read kallsyms, so its kernel frames print as '[unknown]
    ([unknown])' at addresses above 0xffff000000000000: kernel time all the same, not user
    time (an expert re-read found 0% kernel)."""
    text = shared_path("perf-script", "nishkp_unknown_syms", "out.perf").read_text()
    leaves, header = [], False
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            header = True
        elif header and line.strip():
            leaves.append(line.split()[0])
            header = False
    kernel = sum(1 for a in leaves if len(a) == 16 and int(a, 16) >= 0xFFFF_0000_0000_0000)
    # perf's -1 end-of-stack marker ('ffffffffffffffff [unknown]') is no kernel frame:
    # graphviz's kernel module totals what its kernel leaves do (an expert re-read caught
    # 54.2% against 24.0%).
    [report] = tracekit.analyze(tracekit.read(shared_path(
        "perf-script", "firefox-profiler", "graphviz.perf.gz")), "hotspots")
    [kallsyms] = [r for r in report.tables["modules"].to_pylist()
                  if r["module"] == "[kernel.kallsyms]"]
    assert kallsyms["self"] == kallsyms["total"]
    verdict = cpu_report(shared_path("perf-script", "nishkp_unknown_syms", "out.perf")).findings[0]
    assert kernel == 2 and len(leaves) == verdict.evidence["samples"] == 111
    assert verdict.evidence["kernel_pct"] == round(100 * kernel / len(leaves), 1)
