"""The ``cpu`` analyzer: a verdict for CPU-only profiles, and fixes chosen from what they show.

For perf script, Nsight Systems CPU sampling and VTune CSV reports: idle (the kernel's idle
loop, the ``swapper`` task) apart from busy time, busy time split into user and kernel code,
the top busy function and module, the weight's unit (ns of CPU time, cycles, samples, an
event count), IPC per function where cycles and instructions were both sampled, and VTune's
own metrics (utilization, spin and overhead time, memory bound). For a PyTorch trace with
no GPU work: host ops by self time (duration minus the ops nested in them on the thread);
for annotation ranges alone (an NVTX range trace), the ranges by self and total time.
Names are demangled (C++ and legacy Rust, by libstdc++'s demangler through ``cxxfilt``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.cpu_profile.event_counts import (
    event_counts,
    memory_stall_finding,
    report_values,
)
from tracekit.plugins.diagnosis import (
    autograd_finding,
    classify,
    dropout_finding,
    slow_step_finding,
)
from tracekit.toolkit import (
    COLLECTIVE_RANGE,
    COMPILE_RANGE,
    DATA_LOADING_RANGE,
    FEW_SAMPLES,
    OPTIMIZER_STEP_RANGE,
    STEP_RANGE,
    STEPS_HELP,
    SYNTHETIC_ID_MAX,
    WINDOW_HELP,
    StackTree,
    aggregate_rows,
    any_true,
    base_function,
    demangle,
    equals,
    event_base,
    factorize,
    format_bytes,
    format_ns,
    idle_comm_rows,
    idle_rows,
    in_optimizer_steps,
    inputs_not_one_run,
    is_in,
    is_kernel,
    matches,
    optimizer_fix,
    percent,
    plural,
    process_ranks,
    report_table,
    restrict,
    sample_events,
    sample_weights,
    sampled_events,
    share_margin,
    share_margins,
    short_name,
    starts_with,
    step_ranges,
    thread_names,
    time_event,
    time_span,
    untraced_ns,
    weight_unit,
    window_of,
    world_size,
)
from tracekit.toolkit import intervals as iv

# Trivial standard-library functions an optimized build inlines: self time in them is the
# signature of an unoptimized (debug) build.
_CORE_TRIVIAL = r"(cmp|ptr|iter|ops|num|slice|clone|mem|option|result|convert|cell|hint|array)"
TRIVIAL_RUST = re.compile(
    rf"^(<|_\$LT\$)?[\w$.]*?core(::|\.\.){_CORE_TRIVIAL}(::|\.\.)"
    # Demangled trait impls: <u8 as core::clone::Clone>::clone, <&'a mut T as core::ops::Deref>
    rf"|^<.+ as core::{_CORE_TRIVIAL}::[\w:]+>::")
TRIVIAL_CXX = re.compile(
    r"^(std::(__1::)?(vector|array|unique_ptr|shared_ptr|__shared_ptr|_Vector_base|forward"
    r"|move|get|min|max|pair|tuple|_Head_base|_Tuple_impl|__get_helper|_Rb_tree_iterator)\b"
    r"|__gnu_cxx::__normal_iterator|std::(__1::)?__wrap_iter)")
TRIVIAL_CXX_CALLS = re.compile(
    r"operator\[\]|operator\*|operator->|operator\+\+|operator!=|operator==|::size\(\)"
    r"|::begin\(\)|::end\(\)|::get\(|::forward<|::move<|::min<|::max<|::_M_\w+\(")
TIME_BASES = ("cpu-clock", "task-clock", "cycles", "cpu-cycles", "ref-cycles")
UNKNOWN = ("[unknown]", "[Unknown]", "")
# Under this many busy samples no function is named the one to optimize first: a share of
# fewer samples is too rough to rank (±10 points at 50%).
MIN_RANK_SAMPLES = 100
# A serial stretch (one thread running while its process's workers do not) over this share
# of the profile's wall time is the wall-clock lever: its finding comes before CPU share.
SERIAL_LEVER_PCT = 50.0
# OpenMP runtimes waiting: barriers, flag polling, pause/yield loops (Intel/LLVM and GNU).
OPENMP_WAIT = re.compile(r"__kmp_(wait|barrier|fork_barrier|join_barrier|yield|hyper_barrier"
                         r"|x86_pause|execute_tasks|suspend)|kmp_(basic_)?flag|GOMP_barrier"
                         r"|gomp_(barrier|team_barrier)_wait|do_spin|gomp_mutex_lock_slow")
# Training: autograd's backward pass or an optimizer step (as diagnosis/program.py's rule).
TRAINING = re.compile(r"autograd::engine|Backward\d*$|^Optimizer\.(step|zero_grad)|"
                      r"^## backward ##$|reducer::|\.backward$|^torch\.optim\.")
# A loop that spends this share of the traced span loading input is input-bound: TensorFlow's
# input-pipeline analyzer's "highly input-bound" line, the diagnosis' INPUT_BOUND_PCT.
INPUT_BOUND_PCT = 20.0
# torch.compile compiling over this share of the traced span: the trace is mostly start-up.
COMPILE_PCT = 10.0
# A training loop spending this share of its span in optimizer steps is told how to cut them.
OPTIMIZER_PCT = 20.0
# Ops covering less of their busiest thread's span than this: the time is outside ops.
OP_COVER_PCT = 50.0
# Outside ops, a frame or range named when its self time is at least this share of the span.
OUTSIDE_NAMED_PCT = 5.0
# What a CPU-only PyTorch trace's span is measured over: the program's ops and ranges.
PROGRAM_CATEGORIES = ("host.op", "host.annotation", "host.python", "host.memory")
#: Python's sleep frames (with_stack=True): time.sleep, asyncio.sleep.
SLEEP_FRAME = re.compile(r"<built-in function sleep>|\bsleep\b.*\(|time\.sleep|asyncio.*sleep")
#: Ranges that are a training or inference step's own parts (record_function names and
#: PyTorch's): time outside ops in them is the gaps between the step's ops.
STEP_PART = re.compile(r"(?i)^(## )?(forward|backward|loss|zero_grad)( ##)?$|"
                       r"^Optimizer\.(step|zero_grad)#")
#: Python's output frames (with_stack=True): print, and the logging module's handlers.
OUTPUT_FRAME = re.compile(r"<built-in function print>|<method 'write' of '_io\.|"
                          r"logging/__init__\.py\(\d+\): (emit|handle|_log|info|debug|warning)"
                          r"\b|<method 'flush' of '_io\.")
#: A recording of chosen processes whose CPU time over the sampled span is under this many
#: CPUs spent most of it off CPU: waiting.
WAITS_BELOW_CPUS = 0.5
# A loop that spends this share of its span in collectives is told how to take them off it.
COMMUNICATION_PCT = 20.0
SMALL_OP_NS = 20_000  # top-level ops mostly shorter: per-op dispatch overhead dominates ...
SMALL_OP_SPAN_PCT = 10.0  # ... where such calls take this share of the span or more
MATMUL_OPS = re.compile(r"aten::(addmm|mm|bmm|matmul|linear|conv\w*|_convolution|baddbmm"
                        r"|mkldnn_\w+|einsum)$")
# DistributedDataParallel's own ranges and ops: DDP is in use.
DDP_RANGE = r"^DistributedDataParallel\.forward|reducer::|^torch\.distributed\.ddp"
CONV_OPS = re.compile(r"aten::(conv\w*|_convolution|mkldnn_convolution)$")
# A virtual machine's calls into its hypervisor (Xen, Hyper-V, KVM): samples land on the
# call's stub while the hypervisor works for the guest (event delivery, I/O, scheduling).
#: CPython's interpreter: its shared library or a statically linked binary.
PYTHON_INTERPRETER = re.compile(r"libpython3(\.\d+)?\w*\.so(\.[\d.]+)?|python3(\.\d+)?")
INTERPRETER_MIN_PCT = 50.0
#: CPUs busy on average over the sampled span, as a share of the CPUs sampled, that says
#: none of them idled.
SATURATED = 0.95
#: User-space locking functions (glibc's pthread and lll locks, futex calls, semaphores).
LOCK_FUNCTIONS = re.compile(
    r"(__GI___)?pthread_(mutex|rwlock|spin)_\w+|(__GI_)?__lll_\w*lock\w*|"
    r"(__GI_)?__(new_)?sem_(wait|post|timedwait)\w*|futex_(wait|wake)\w*|__futex\w*|"
    r"std::mutex::(lock|unlock)|std::__1::mutex::(lock|unlock)")
LOCK_MIN_PCT = 5.0
CUT_STACKS_MIN_PCT = 30.0
#: Where a thread's stack begins: a stack of one of these alone is whole.
ENTRY_POINTS = frozenset({
    "main", "_start", "__libc_start_main", "__libc_start_call_main", "_dl_start_user",
    "_dl_start", "start_thread", "clone", "clone3", "__clone", "__clone3", "__GI___clone",
    "__GI___clone3", "thread_start", "runtime.main", "runtime.goexit", "runtime.mstart",
    "runtime.rt0_go", "ret_from_fork", "ret_from_fork_asm", "secondary_startup_64",
    "secondary_startup_64_no_verify", "common_startup_64", "start_kernel",
    "cpu_startup_entry", "start_secondary", "x86_64_start_kernel", "entry_SYSCALL_64",
    "entry_SYSCALL_64_after_hwframe"})
HYPERCALL = re.compile(r"xen_hypercall_\w*|hypercall_page|xen_\w*_callback\w*|"
                       r"\w*hv_do_\w*hypercall\w*|kvm_hypercall\w*")
KERNEL_HINTS = (
    (re.compile(r"bpf_prog_\w+|\w*napi_poll|net_rx_action|__netif_receive_skb\w*|ip_rcv\w*"
                r"|tcp_v[46]_rcv|mlx5e_\w+|ixgbe_\w+|i40e_\w+|\w*xdp\w*"),
     "packet processing in the kernel (network receive, XDP/BPF programs): spread it over "
     "more queues and CPUs (RSS, RPS/RFS), batch with GRO, or look at the BPF program's own "
     "cost (bpftool prog profile)"),
    (HYPERCALL,
     "a virtual machine's calls into its hypervisor (Xen, Hyper-V, KVM): that time is the "
     "hypervisor's, spent for the guest (event delivery, I/O, scheduling), not the code's; "
     "measure it from the host (xentrace, perf kvm) or cut the virtualization overhead "
     "(HVM/PVH guests, paravirtual or SR-IOV network and disk)"),
    (re.compile(r"copy_user\w*|copy_to_user|copy_from_user|\w*memcpy\w*|skb_copy\w*"),
     "copying data between kernel and user space (read/recv/send): use larger buffers, fewer "
     "calls, or zero-copy (sendfile, splice, io_uring, mmap)"),
    (re.compile(r"\w*page_fault\w*|clear_page\w*|handle_mm_fault|do_anonymous_page|\w*_fault"),
     "page faults: memory is touched for the first time or re-mapped; reuse buffers, "
     "preallocate, or use huge pages (THP, MAP_HUGETLB)"),
    (re.compile(r"\w*futex\w*|\w*spin_lock\w*|_raw_spin\w*|queued_spin\w*|osq_lock"),
     "lock contention (futex, spinlocks): fewer shared locks, sharded or lock-free "
     "structures"),
    (re.compile(r"schedule\w*|__schedule|finish_task_switch\w*|\w*context_switch"),
     "context switches: threads block and wake often; fewer threads or less blocking"),
)


class CpuAnalyzer(tracekit.Analyzer):
    """A CPU-only input's verdict: idle, user/kernel, top function and module, and fixes."""

    name = "cpu"
    description = ("CPU-only profiles: idle vs busy, user vs kernel, top functions and "
                   "modules (demangled), host ops by self time; fixes from what they show")
    # The report beside the verdict for traces without GPU work, in place of summary and
    # hotspots.
    default_for = (tracekit.DefaultFor((tracekit.TraceKind.CPU_SAMPLES,
                                        tracekit.TraceKind.HOST_ONLY), slot=1, rank=1),)

    @dataclass(frozen=True)
    class Options:
        top: int = field(default=15, metadata={"help": "rows per table (0 = all)"})
        event: str = field(default="", metadata={
            "help": "the sampled event to rank by (default: cpu-clock, task-clock or cycles)"})
        window: str = field(default="", metadata={"help": WINDOW_HELP})
        steps: str = field(default="", metadata={"help": STEPS_HELP})

    def analyze(self, trace: Trace) -> Report:
        trace = restrict(trace, self.options.window, self.options.steps)
        report = Report(analyzer=self.name, title="CPU profile")
        is_sample = equals(trace.events["category"], "cpu.sample")
        if trace.events.num_rows and pc.any(is_sample).as_py():
            self._samples(trace, report)
        elif trace.events.num_rows and pc.any(equals(trace.events["category"],
                                                     "host.op")).as_py():
            self._host_ops(trace, report)
        elif trace.events.num_rows and pc.any(equals(trace.events["category"],
                                                     "host.annotation")).as_py():
            self._ranges(trace, report)
        else:
            report.findings.append(Finding(
                "info", "No CPU samples or host ops: nothing for a CPU verdict",
                {"verdict": "none"}))
        return report

    # --- sampled profiles (perf, nsys CPU sampling, VTune) ---------------------------------

    def _samples(self, trace: Trace, report: Report) -> None:
        seen = sampled_events(trace)
        event = self.options.event or time_event(seen)
        rows, _ = sample_events(trace, event if seen else None)
        aggregate = aggregate_rows(rows, trace)
        counted, left_out = rows, []
        tree = StackTree(trace)
        if aggregate:
            rows, counted, left_out = _one_report(trace, rows, tree)
        weights = sample_weights(rows, "value")[0].to_numpy(zero_copy_only=False)
        unit = weight_unit(trace, rows, event)
        idle = idle_rows(trace, rows, tree)
        prof = _Profile.build(rows, weights, idle, tree)
        grand, busy = prof.grand, prof.busy
        evidence: dict[str, Any] = {"verdict": "cpu-profile",
                                    "weight_unit": _unit_words(unit, aggregate)}
        if event:
            evidence["event"] = event
        # A report's rows are totals per function (VTune's CSV), not samples.
        evidence["rows" if aggregate else "samples"] = rows.num_rows
        time_weight = aggregate or event_base(event or "") in TIME_BASES
        if aggregate:
            evidence["idle_pct"] = None
            evidence["idle"] = ("not in the report: CPU Time counts running threads only"
                                if unit == "ns" else "not in the report: event counts "
                                "cover running threads only")
        elif not time_weight:
            evidence["idle_pct"] = None
            evidence["idle"] = (f"not measured: {event} samples are not CPU time" if event
                                else "not measured: the samples name no event, so their "
                                "weights are not known to be CPU time")
        elif idle.any() or idle_comm_rows(trace, rows).any():
            evidence["idle_pct"] = percent(grand - busy, grand)
        else:
            # No sample of the idle task: perf recorded chosen processes (-p, a command),
            # not every CPU, so their samples cover only their time on a CPU.
            evidence["idle_pct"] = None
            evidence["idle"] = ("not measured: no sample of the idle task (a recording of "
                                "chosen processes, not of every CPU)")
            span = time_span(rows) if unit == "ns" else None
            samples = int(prof.rows_busy.sum()) if prof.rows_busy is not None else 0
            # Of user code only (cpu-clock:u), the samples miss the time in the kernel.
            user_only = ":" in (event or "") and "u" in event.rsplit(":", 1)[1] and \
                "k" not in event.rsplit(":", 1)[1]
            if span and span[1] > span[0] and samples >= MIN_RANK_SAMPLES and not user_only:
                evidence["sampled_span_ns"] = span[1] - span[0]
                evidence["cpus_used"] = round(busy / (span[1] - span[0]), 2)
                cpus = _sampled_cpus(rows)
                if cpus and evidence["cpus_used"] >= SATURATED * cpus:
                    # As many CPUs busy as were sampled: a recording of every CPU (-a) in
                    # which the idle task never ran, not one of chosen processes.
                    evidence["idle_pct"] = 0.0
                    evidence["idle"] = (f"none: {evidence['cpus_used']:g} CPUs busy on average "
                                        f"of the {cpus} sampled, which never idled")
        evidence["busy"] = _amount(busy, unit)
        evidence["user_pct"] = percent(prof.user, busy)
        evidence["kernel_pct"] = percent(prof.kernel, busy)
        if prof.unknown_side:
            evidence["unattributed_pct"] = percent(prof.unknown_side, busy)
        top_fn = _top_named(prof.self_w)
        top_mod = max(prof.mod_self.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        if _group_by(rows, aggregate) not in (None, "Function", "Function Stack"):
            evidence["grouped_by"] = _group_by(rows, aggregate)
        if top_fn:
            evidence["top_function"] = top_fn[0][0]
            evidence["top_function_module"] = top_fn[0][1] or None
            evidence["top_function_pct"] = percent(top_fn[1], busy)
        if top_mod:
            evidence["top_module"] = top_mod[0] or None
            evidence["top_module_pct"] = percent(top_mod[1], busy)
        values = report_values(rows) if aggregate else []
        # The hardware event counts may be those of another report of the run.
        counts = event_counts(counted, tree, values if counted is rows
                              else report_values(counted))
        ipc = counts.ipc() if counts else (self._ipc(trace, seen, event, tree)
                                           if not aggregate else None)
        if ipc is not None:
            evidence["ipc"] = round(ipc[0], 2)
        title = _verdict_title(evidence, busy, grand, unit)
        report.findings.append(Finding("info", title, evidence))
        report.findings.extend(self._sample_findings(trace, rows, prof, unit, event, evidence,
                                                     aggregate, values))
        cut = _cut_stacks_finding(rows, weights, ~idle, tree, _unwinding(trace)) \
            if not aggregate else None
        if cut:
            report.findings.append(cut)
        stalls = memory_stall_finding(counts) if counts else None
        if stalls and not any(f.title.startswith("Memory bound") for f in report.findings):
            report.findings.append(stalls)
        self._sample_tables(trace, report, prof, unit, ipc[1] if ipc else None,
                            _group_by(rows, aggregate))
        if left_out:
            report.findings.append(_reports_finding(rows, left_out, counted is not rows))
        packages = _package_balance(trace) if aggregate else None
        if packages is not None:
            report.findings.append(packages)
        if len(seen) > 1:
            report.notes.append(f"events sampled: {', '.join(seen)}; ranked by '{event}' "
                                "(-O event=NAME)")
        group = _group_by(rows, aggregate)
        what = f"{plural(rows.num_rows, 'row')} grouped by {group}" if group else \
            plural(rows.num_rows, "sample")
        note = f"{what}, weight in {_unit_words(unit, aggregate)}"
        if not aggregate and grand - busy > 0:
            note += (f"; idle {percent(grand - busy, grand)}% left out of the tables "
                     "(the idle loop, swapper)")
        report.notes.append(note)

    def _ipc(self, trace: Trace, seen: list[str], event: str | None,
             tree: StackTree) -> tuple[float, dict[tuple[str, str], float]] | None:
        """Instructions per cycle, overall and per busy leaf function, where both were
        sampled: periods summed, or counts times the fixed period perf was given (-c)."""
        cycles = next((e for e in seen if event_base(e) in ("cycles", "cpu-cycles")), None)
        instr = next((e for e in seen if event_base(e) == "instructions"), None)
        if not cycles or not instr:
            return None
        per: dict[str, dict[tuple[str, str], float]] = {}
        totals = {}
        fixed = _fixed_periods(trace)
        for ev in (cycles, instr):
            rows, _ = sample_events(trace, ev)
            w = sample_weights(rows, "value")[0].to_numpy(zero_copy_only=False)
            if weight_unit(trace, rows, ev) == "samples":
                if ev not in fixed:
                    return None  # no period, and none fixed: counts of what cannot compare
                w = w * fixed[ev]
            prof = _Profile.build(rows, w, idle_rows(trace, rows, tree), tree)
            per[ev], totals[ev] = prof.self_w, prof.busy
        if not totals[cycles]:
            return None
        # Per function only where it has 2% of the cycles or more: fewer samples are noise.
        by_fn = {k: per[instr].get(k, 0.0) / c for k, c in per[cycles].items()
                 if c and c >= 0.02 * totals[cycles]}
        return totals[instr] / totals[cycles], by_fn

    def _sample_findings(self, trace: Trace, rows: pa.Table, prof: _Profile, unit: str,
                         event: str | None, ev: dict[str, Any],
                         aggregate: bool, report: list[dict[str, Any]]) -> list[Finding]:
        out: list[Finding] = []
        busy = prof.busy
        base = event_base(event or "")
        few = _few_samples(rows, prof, aggregate)
        if few:
            out.append(few)
        if event and base not in TIME_BASES and not aggregate:
            out.append(Finding(
                "warning", f"The samples are '{event}' events, not CPU time",
                {"event": event, "weight_unit": unit},
                f"This ranks code by {event}, not by where CPU time goes; for CPU time record "
                "`perf record -F 999 -g` (cpu-clock) or `-e cycles`."))
        idle_pct = ev.get("idle_pct")
        if idle_pct is not None and idle_pct >= 50:
            caveat = (" cycles stop on halted CPUs, so this is a lower bound."
                      if base in ("cycles", "cpu-cycles", "ref-cycles") else "")
            out.append(Finding(
                "warning", f"CPUs idle {idle_pct}% of the sampled time",
                {"idle_pct": idle_pct},
                "The workload leaves CPUs idle: it waits (I/O, locks, sleeps, another "
                "process) or runs fewer busy threads than there are CPUs; look at what it "
                f"waits for (off-CPU time: `perf sched`, `offcputime`).{caveat}"))
        elif ev.get("cpus_used") is not None and ev["cpus_used"] < WAITS_BELOW_CPUS:
            span = ev["sampled_span_ns"]
            out.append(Finding(
                "warning", f"The program was on a CPU {format_ns(busy)} of the "
                f"{format_ns(span)} sampled ({ev['cpus_used']:g} CPUs on average): it mostly "
                "waits", {"busy_ns": int(busy), "sampled_span_ns": span,
                          "cpus_used": ev["cpus_used"]},
                "Its samples say where it runs, not what it waits for (sleep, I/O, locks, a "
                "device, a CPU other processes hold): look at its off-CPU time with `perf "
                "sched record` then `perf sched timehist` (waits per thread, and time waiting "
                "for a CPU), bcc's `offcputime -f` (blocking stacks), or its system calls "
                "(`perf trace -s`)."))
        elif idle_pct is not None and base in ("cycles", "cpu-cycles", "ref-cycles") and idle_pct:
            out.append(Finding(
                "info", f"Idle {idle_pct}% is a lower bound: cycles do not count on halted "
                "CPUs", {"idle_pct": idle_pct, "event": event}, ""))
        # A share of a handful of samples says nothing of where the time goes.
        rankable = aggregate or (prof.rows_busy is not None
                                 and int(prof.rows_busy.sum()) >= MIN_RANK_SAMPLES)
        if busy and prof.unknown_fn / busy >= 0.3 and rankable:
            out.append(Finding(
                "warning", f"{percent(prof.unknown_fn, busy)}% of busy time has no symbol",
                {"unknown_pct": percent(prof.unknown_fn, busy)},
                "Install debug symbols (-dbgsym/-debuginfo packages), keep symbols in the "
                "binary, run perf as a user allowed to read kallsyms, or for JIT code "
                "write a perf map (e.g. --perf-basic-prof, -XX:+PreserveFramePointer)."))
        kernel_pct = ev.get("kernel_pct") or 0.0
        if kernel_pct >= 30 and rankable:
            hint = _kernel_hint(prof)
            top_k = _top(prof.self_w, prof.kernel_keys, 3)
            out.append(Finding(
                "warning", f"Kernel code takes {kernel_pct}% of busy time",
                {"kernel_pct": kernel_pct, "top_kernel_functions":
                 ", ".join(f"{k[0]} ({percent(w, busy)}%)" for k, w in top_k)},
                hint or "The program spends its time in system calls and kernel work: fewer, "
                "larger system calls; see the top kernel functions for which."))
        debug = _debug_signature(prof)
        if debug:
            share, names = debug
            out.append(Finding(
                "warning", f"Unoptimized build: {share}% of busy time is self time in "
                "trivial standard-library functions",
                {"trivial_std_pct": share, "functions": ", ".join(names[:4])},
                "Build with optimizations first (cargo build --release, -O2/-O3 with "
                "-fno-omit-frame-pointer to keep stacks): these functions are inlined away in "
                "an optimized build, so this profile does not show the real hotspots."))
        top = _top_named(prof.self_w)
        function_rows = _group_by(rows, aggregate) in (None, "Function", "Function Stack",
                                             "Source Function", "Function / Call Stack")
        serial = _serial_thread(rows, prof, aggregate)
        # A serial stretch over most of the wall time is the lever: it comes before CPU share.
        lever = serial if serial and serial.evidence["serial_pct"] >= SERIAL_LEVER_PCT else None
        if lever:
            out.append(lever)
        n_busy = int(prof.rows_busy.sum()) if prof.rows_busy is not None else 0
        locks = _lock_finding(prof)
        if locks:
            out.append(locks)
        interpreter = _interpreter_finding(prof)
        if interpreter:
            out.append(interpreter)  # its C functions are no code of the program to optimize
        elif top and busy and top[1] / busy >= 0.2 and not debug and function_rows and (
                aggregate or base in TIME_BASES):
            runner_up = None if aggregate else _runner_up(prof.self_w, top, busy, n_busy)
            out.append(_too_few_to_rank(top, busy, n_busy) if not aggregate
                       and n_busy < MIN_RANK_SAMPLES else _top_function(
                           top, busy, lever, prof.has_call_paths(), runner_up))
        out.extend(_vtune_findings(rows, prof, report))
        if serial and not lever:
            out.append(serial)
        if few and any(f.title.startswith("Too few samples") for f in out):
            out.remove(few)  # says the same, more plainly
        return out

    def _sample_tables(self, trace: Trace, report: Report, prof: _Profile, unit: str,
                       ipc: dict[tuple[str, str], float] | None,
                       grouped_by: str | None = None) -> None:
        busy = prof.busy
        integral = prof.integral
        wkind, cast = ("int", int) if integral else ("float", float)
        tunit = unit if unit in ("ns",) else _unit_words(unit)
        rows = sorted(prof.total_w.items(), key=lambda kv: (-prof.self_w.get(kv[0], 0.0),
                                                            -kv[1], kv[0]))
        rows = rows[: self.options.top] if self.options.top else rows
        columns: list[tuple[str, str, str | None, Any]] = [
            ("self_pct", "float", "%", [percent(prof.self_w.get(k, 0.0), busy) for k, _ in rows]),
            ("self", wkind, tunit, [cast(prof.self_w.get(k, 0.0)) for k, _ in rows]),
            ("total_pct", "float", "%", [percent(t, busy) for _, t in rows]),
            ("space", "str", None, [prof.space.get(k, "-") for k, _ in rows]),
        ]
        if ipc is not None:
            columns.append(("ipc", "float", None,
                            [round(ipc[k], 2) if k in ipc else None for k, _ in rows]))
        columns += [("module", "str", None, [k[1] or "-" for k, _ in rows]),
                    ("function", "str", None, [k[0] for k, _ in rows])]
        report.tables["functions"] = report_table(columns)
        # A report by package or thread holds no functions: its rows are named for what they are.
        rows_are = "functions" if grouped_by in (None, "Function", "Function Stack",
                                                 "Source Function", "Function / Call Stack") \
            else f"{grouped_by.lower()}s"
        report.table_titles["functions"] = f"Busy {rows_are} by self time (idle left out)"
        # Rows of packages or threads have no module: no table of modules to give.
        if rows_are == "functions" or prof.mod_self.keys() - set(UNKNOWN):
            self._modules_table(report, prof, wkind, tunit, cast)
        threads = sorted(prof.thread_w.items(), key=lambda kv: (-kv[1], str(kv[0])))
        names = thread_names(trace)
        if len(threads) > 1:
            threads = threads[: self.options.top] if self.options.top else threads
            report.tables["threads"] = report_table([
                ("busy_pct", "float", "%", [percent(w, busy) for _, w in threads]),
                ("busy", wkind, tunit, [cast(w) for _, w in threads]),
                ("tid", "str", None, [str(k[1]) for k, _ in threads]),
                ("thread", "str", None, [names.get(k) or "-" for k, _ in threads])])
            report.table_titles["threads"] = "Threads by busy time"
        if not prof.has_call_paths():
            return
        paths = sorted(prof.paths.items(), key=lambda kv: (-kv[1], kv[0]))[: self.options.top
                                                                          or None]
        report.tables["paths"] = report_table([
            ("pct", "float", "%", [percent(w, busy) for _, w in paths]),
            ("weight", wkind, tunit, [cast(w) for _, w in paths]),
            ("path", "str", None, [" > ".join(_leafward([demangle(n) for n in
                                                         prof.tree.names_of(s)]))
                                   for s, _ in paths])])
        report.table_titles["paths"] = "Heaviest busy call paths (root ... leaf)"

    def _modules_table(self, report: Report, prof: _Profile, wkind: str, tunit: str,
                       cast: Any) -> None:
        busy = prof.busy
        mods = sorted(prof.mod_self.items(), key=lambda kv: (-kv[1], kv[0]))
        mods = mods[: self.options.top] if self.options.top else mods
        report.tables["modules"] = report_table([
            ("self_pct", "float", "%", [percent(w, busy) for _, w in mods]),
            ("self", wkind, tunit, [cast(w) for _, w in mods]),
            ("space", "str", None, ["kernel" if is_kernel(m) else
                                    "user" if m not in UNKNOWN else "-" for m, _ in mods]),
            ("module", "str", None, [m or "(none)" for m, _ in mods])])
        report.table_titles["modules"] = "Busy modules by self time"

    # --- PyTorch host ops -------------------------------------------------------------------

    def _host_ops(self, trace: Trace, report: Report) -> None:
        ev = trace.events
        ops = ev.filter(equals(ev["category"], "host.op")).select(
            ["name", "ts_ns", "dur_ns", "pid", "tid", "source"])
        ops = ops.filter(pc.and_(pc.is_valid(ops["ts_ns"]), pc.is_valid(ops["dur_ns"])))
        lo, hi = window_of(trace) or (None, None)
        if lo is not None or hi is not None:
            # The window keeps the ops that overlap it whole: their time within it only, as
            # the span is within it (nested ops stay nested when all are cut alike).
            ops = _within(ops, lo, hi)
        self_ns, top_level = _nesting(ops)
        by = _by_name(ops, self_ns)
        ranked = by.ranked
        total_self = float(self_ns.sum())
        # The span of the program's ops and ranges: not the profiler's own recording span and
        # markers, and within the window asked for (the ranges that overlap it are whole).
        start, end = time_span(ev.filter(is_in(ev["category"], PROGRAM_CATEGORIES))) or (0, 0)
        start = start if lo is None else max(start, lo)
        end = end if hi is None else min(end, hi)
        span = max(end - start, 0)
        # Captures of one process at different times: the time between them is not traced.
        untraced = untraced_ns(trace, start, end) if span else 0
        span -= untraced
        threads = _threads(ops)
        # PyTorch's ops (aten::, c10d::) or a PyTorch profiler trace; other host ops (an MPI
        # program's calls in an nsys export) are not told they are PyTorch's.
        torch = bool(pc.any(matches(ops["name"], r"^(aten|c10d|torch)::")).as_py()) \
            if ops.num_rows else False
        # Asked for (-a cpu) on a trace with GPU work: its host side, not a CPU-only trace.
        gpu = bool(pc.any(starts_with(ev["category"], "gpu.")).as_py()) if ev.num_rows else False
        evidence: dict[str, Any] = {
            "verdict": "cpu-profile",
            "input": f"{'PyTorch ' if torch else ''}host ops " + (
                "(the trace has GPU work too: the bottleneck verdict weighs it)" if gpu
                else "(no GPU work)"),
            "weight_unit": "ns of host op self time", "ops": ops.num_rows,
            "op_self_ns": int(total_self), "span_ns": int(span), "threads": threads}
        if untraced:
            evidence["untraced_ns"] = int(untraced)
        if span:
            evidence["op_time_pct_of_span"] = percent(total_self, span * max(1, threads))
        if ranked:
            evidence["top_op"], evidence["top_op_pct"] = ranked[0][0], percent(
                ranked[0][1], total_self)
            evidence["top_op_self_ns"] = int(ranked[0][1])
        title = ((f"Host side of a GPU {'PyTorch ' if torch else ''}trace" if gpu else
                  f"CPU-only {'PyTorch ' if torch else ''}trace") + f": {ops.num_rows:,} host ops, "
                 f"{format_ns(total_self)} op self time over {format_ns(span)}"
                 + (" traced" if untraced else "")
                 # Threads add up their op time: it may exceed the span.
                 + (f" on {threads} threads" if threads > 1 else ""))
        if ranked:
            title += f"; top op {ranked[0][0]} ({evidence['top_op_pct']}% of op time)"
        report.findings.append(Finding("info", title, evidence))
        durations = ops["dur_ns"].to_numpy(zero_copy_only=False)[top_level]
        training = _training(ev)
        # Ranges, frames and ops that overlap a window are kept whole: their shares are of
        # their part within it.
        bounds = (start, end)
        compiling = next(iter(_range_shares(ev, span, COMPILE_RANGE, bounds)), None)
        if compiling is not None and compiling.pct >= COMPILE_PCT:
            report.findings.append(_compile_finding(trace, compiling))
        loading = next(iter(_range_shares(ev, span, DATA_LOADING_RANGE, bounds)), None)
        if loading is not None and loading.pct < INPUT_BOUND_PCT:
            loading = None
        if loading is not None:
            report.findings.append(loading.loading_finding(
                training, _inside_loader(ev, loading, bounds)))
        every_comm = _range_shares(ev, span, COLLECTIVE_RANGE, bounds)
        comms = [c for c in every_comm if c.pct >= COMMUNICATION_PCT]
        missing = _ranks_missing(trace)
        odd = inputs_not_one_run(trace) if len(every_comm) > 1 else ""
        # Who waits for whom holds within one run only.
        straggler = _straggler(trace, every_comm) if not odd else None
        if odd:
            report.findings.append(Finding(
                "warning", f"these inputs may not be ranks of one run: {odd}",
                {"inputs": len(trace.sources)},
                "give the ranks of one run (the same world size, each rank once): no "
                "straggler is named across runs; to compare two runs, use -a diff"))
        ddp = bool(pc.any(matches(ev["name"], DDP_RANGE)).as_py()) if ev.num_rows else False
        report.findings.extend(c.communication_finding(
            training, missing, straggler, ddp, _explicit_collectives(ev, c.source, c.pid),
            _exposed_collectives(ev, c, bounds), windowed=lo is not None or hi is not None)
            for c in comms)
        if straggler is not None:
            report.findings.append(straggler.finding)
        late = _last_to_arrive(comms)
        if late is not None:
            report.findings.append(late)
        optimizer = next(iter(_range_shares(ev, span, OPTIMIZER_STEP_RANGE, bounds)), None)
        if not training or optimizer is None or optimizer.pct < OPTIMIZER_PCT or \
                optimizer.typical_pct < OPTIMIZER_PCT:
            optimizer = None  # a few slow steps among quick ones are no optimizer to fix
        if optimizer is not None:
            report.findings.append(optimizer.optimizer_finding())
        memory = _memory_finding(ev, ops)
        if memory is not None:
            report.findings.append(memory)
        explained = [DATA_LOADING_RANGE, COLLECTIVE_RANGE] + (
            [OPTIMIZER_STEP_RANGE] if optimizer else [])
        cover = _busiest_thread(ev, ops, top_level, span, explained, bounds) if span else None
        # What the findings above say of the busiest thread's process, not of another one.
        shares = {what: found.pct for what, found in (
            ("data loading", loading), *(("collectives", c) for c in comms),
            ("optimizer steps", optimizer))
            if found is not None and cover is not None
            and (found.source, found.pid) == (cover.source, cover.thread[0])}
        in_step = in_optimizer_steps(ev, ops.take(pa.array(np.flatnonzero(top_level)))) \
            if training else None
        report.findings.extend(_op_findings(ranked, durations, total_self, span, threads,
                                            training, shares, torch, cover, in_step,
                                            _processes_per_host(trace), gpu))
        compiled = _compiled_code_finding(ranked, total_self) if torch and not gpu else None
        if compiled is not None:
            report.findings.append(compiled)
        if torch and not training:
            program = classify(trace)
            report.findings.extend(f for f in (dropout_finding(program),
                                               autograd_finding(program)) if f is not None)
        if (slow := slow_step_finding(trace)) is not None:
            report.findings.append(slow)
        report.tables["ops"] = by.table(total_self, self.options.top, "op")
        report.table_titles["ops"] = "Host ops by self time (duration minus nested ops)"
        steps = _step_table(trace)
        if steps is not None:
            report.tables["steps"] = steps
            report.table_titles["steps"] = ("Steps (ProfilerStep#N) per process: the first "
                                            "apart, as warm-up")

    # --- annotation ranges only (an NVTX range trace) -----------------------------------------

    def _ranges(self, trace: Trace, report: Report) -> None:
        """Ranges by self time: where an annotated program's time went, range by range. No
        verdict: ranges alone do not say whether the CPU or a device was the limit."""
        ev = trace.events
        ranges = ev.filter(pc.and_(equals(ev["category"], "host.annotation"),
                                   equals(ev["kind"], "slice"))).select(
            ["name", "ts_ns", "dur_ns", "pid", "tid"])
        ranges = ranges.filter(pc.and_(pc.is_valid(ranges["ts_ns"]),
                                       pc.is_valid(ranges["dur_ns"])))
        lo, hi = window_of(trace) or (None, None)
        if (lo is not None or hi is not None) and ranges.num_rows:
            ranges = _within(ranges, lo, hi)  # their part within the window, as for ops
        self_ns = op_self_times(ranges)
        by = _by_name(ranges, self_ns)
        ranked = by.ranked
        total_self = float(self_ns.sum())
        start = pc.min(ranges["ts_ns"]).as_py()
        end = pc.max(pc.add(ranges["ts_ns"], ranges["dur_ns"])).as_py()
        span = end - start if start is not None else 0
        threads = _threads(ranges)
        evidence: dict[str, Any] = {
            "verdict": "none", "input": "annotation ranges (no CPU samples, no GPU work)",
            "weight_unit": "ns of range self time", "ranges": ranges.num_rows,
            "range_self_ns": int(total_self), "span_ns": int(span), "threads": threads}
        title = (f"Annotation ranges only: {ranges.num_rows:,} ranges on {threads} "
                 f"thread(s) over {format_ns(span)}")
        if ranked:
            evidence["top_range"], evidence["top_range_pct"] = ranked[0][0], percent(
                ranked[0][1], total_self)
            title += f"; most self time in {ranked[0][0]} ({evidence['top_range_pct']}%)"
        report.findings.append(Finding("info", title, evidence))
        waits = _gpu_waits(ranges["name"], self_ns,
                           ranges["ts_ns"].to_numpy(zero_copy_only=False))
        if waits is not None and total_self:
            report.findings.append(waits)
        report.tables["ranges"] = by.table(total_self, self.options.top, "range")
        report.table_titles["ranges"] = "Ranges by self time (duration minus nested ranges)"


# Ranges an annotated GPU program names after its runtime calls (NVTX wrappers of CUDA/HIP calls).
GPU_SYNC_RANGE = r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy)$"
GPU_ALLOC_RANGE = r"^(cuda|hip)(Malloc|MallocManaged|MallocHost|HostAlloc|Free)$"
FIRST_ALLOC_MS = 10  # a first allocation this long created the context (as in the diagnosis)


def _gpu_waits(names: pa.ChunkedArray, self_ns: np.ndarray, ts: np.ndarray) -> Finding | None:
    """What ranges named after GPU runtime calls say though the trace holds no GPU work: time
    the host blocked on the device, and a first allocation that created the context."""
    sync = matches(names, GPU_SYNC_RANGE).to_numpy(zero_copy_only=False)
    alloc = np.flatnonzero(matches(names, GPU_ALLOC_RANGE).to_numpy(zero_copy_only=False))
    first = int(alloc[np.argmin(ts[alloc])]) if len(alloc) else -1
    startup_ns = int(self_ns[first]) if first >= 0 and self_ns[first] >= FIRST_ALLOC_MS * 1e6 \
        else 0
    sync_ns = int(self_ns[sync].sum())
    if not sync_ns and not startup_ns:
        return None
    total = float(self_ns.sum())
    said = []
    if sync_ns:
        said.append(f"the host waits for the GPU {format_ns(sync_ns)} "
                    f"({percent(sync_ns, total)}% of range time) in synchronizing calls")
    if startup_ns:
        said.append(f"the first {names[first].as_py()} takes {format_ns(startup_ns)}: "
                    "context creation, start-up")
    calls = np.flatnonzero(sync) if sync_ns else alloc
    hip = bool(len(calls)) and bool(pc.all(starts_with(names.take(pa.array(calls)), "hip"))
                                    .as_py())
    record = ("rocprofv3 --marker-trace --kernel-trace --memory-copy-trace --hip-runtime-trace"
              if hip else "nsys profile --trace=cuda,nvtx")
    return Finding(
        "warning" if percent(sync_ns, total) >= 20 else "info",
        "ranges named after GPU calls: " + "; ".join(said),
        {"sync_ns": sync_ns, "sync_pct": percent(sync_ns, total),
         **({"startup_alloc_ns": startup_ns} if startup_ns else {})},
        suggestion="the GPU work sets the pace where the host waits, but this trace holds no "
                   f"GPU activity: record it with the ranges ({record}) for a verdict on the "
                   "GPU side")


@dataclass
class _ByName:
    """Self time, total time and calls per op or range name."""

    ranked: list[tuple[str, float]]  # (name, self ns), most self time first, then by name
    calls: dict[str, int]
    total: dict[str, int]

    def table(self, total_self: float, top: int, what: str) -> pa.Table:
        """The ``top`` names (0: all) by self time, as the report's table."""
        rows = self.ranked[:top] if top else self.ranked
        return report_table([
            ("self_pct", "float", "%", [percent(s, total_self) for _, s in rows]),
            ("self", "int", "ns", [int(s) for _, s in rows]),
            ("total", "int", "ns", [self.total[n] for n, _ in rows]),
            ("calls", "int", None, [self.calls[n] for n, _ in rows]),
            ("mean_self", "int", "ns", [int(s / self.calls[n]) for n, s in rows]),
            (what, "str", None, [n for n, _ in rows])])


def _by_name(rows: pa.Table, self_ns: np.ndarray) -> _ByName:
    """Group ``rows`` (name, dur_ns) and their self times by name, column-wise."""
    grouped = pa.table({"name": rows["name"].cast(pa.string()), "self": self_ns,
                        "dur": rows["dur_ns"]}).group_by("name", use_threads=False).aggregate(
        [("self", "sum"), ("dur", "sum"), ("self", "count")]).to_pydict()
    names = grouped["name"]
    ranked = sorted(zip(names, grouped["self_sum"], strict=True), key=lambda kv: (-kv[1], kv[0]))
    return _ByName(ranked, dict(zip(names, grouped["self_count"], strict=True)),
                   dict(zip(names, grouped["dur_sum"], strict=True)))


def _threads(rows: pa.Table) -> int:
    """How many (pid, tid) threads ``rows`` fall on."""
    return rows.select(["pid", "tid"]).group_by(["pid", "tid"],
                                                use_threads=False).aggregate([]).num_rows


def op_self_times(ops: pa.Table) -> np.ndarray:
    """Per op: its duration minus the durations of the ops directly nested in it on the same
    thread (an op inside another starts at or after it and ends at or before its end)."""
    return _nesting(ops)[0]


def _within(ops: pa.Table, lo: int | None, hi: int | None) -> pa.Table:
    """``ops`` cut to their part within ``[lo, hi)`` (None: open)."""
    ts = ops["ts_ns"].to_numpy(zero_copy_only=False)
    end = ts + ops["dur_ns"].to_numpy(zero_copy_only=False)
    if lo is not None:
        ts, end = np.maximum(ts, lo), np.maximum(end, lo)
    if hi is not None:
        ts, end = np.minimum(ts, hi), np.minimum(end, hi)
    ops = ops.set_column(ops.schema.get_field_index("ts_ns"), "ts_ns", pa.array(ts))
    return ops.set_column(ops.schema.get_field_index("dur_ns"), "dur_ns", pa.array(end - ts))


def _nesting(ops: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per op: its self time (``op_self_times``), and whether it is top-level: no op on the
    same thread encloses it. Thread by thread: where the thread's ops nest (each within the
    one it is found under), column-wise (``_nested_thread``); else, and where an op lasts no
    time (two at one instant nest by the loop's rule), by the loop over a stack."""
    n = ops.num_rows
    out = ops["dur_ns"].to_numpy(zero_copy_only=False).astype(np.float64)
    top = np.ones(n, dtype=bool)
    if not n:
        return out, top
    ts = ops["ts_ns"].to_numpy(zero_copy_only=False)
    dur = ops["dur_ns"].to_numpy(zero_copy_only=False)
    pid = pc.fill_null(ops["pid"], -1).to_numpy(zero_copy_only=False)
    tid = pc.fill_null(ops["tid"], -1).to_numpy(zero_copy_only=False)
    order = np.lexsort((-dur, ts, tid, pid))
    p, q = pid[order], tid[order]
    cuts = np.flatnonzero(np.r_[True, (p[1:] != p[:-1]) | (q[1:] != q[:-1]), True]).tolist()
    for a, b in pairwise(cuts):
        rows = order[a:b]
        if not _nested_thread(rows, ts, dur, out, top):
            _nested_loop(rows, ts, dur, out, top)
    return np.maximum(out, 0.0), top


def _nested_thread(rows: np.ndarray, ts: np.ndarray, dur: np.ndarray, out: np.ndarray,
                   top: np.ndarray) -> bool:
    """One thread's ``rows`` (by start, longer first), column-wise: an op's depth is the ops
    before it still open when it starts; its parent the last op one level up. False (nothing
    written) where an op lasts no time or is not within its parent (ops that overlap without
    nesting): the loop's rules decide those."""
    t, d = ts[rows], dur[rows]
    if not len(rows) or (d <= 0).any():
        return False
    e = t + d
    m = len(rows)
    depth = np.arange(m) - np.searchsorted(np.sort(e), t, side="right")
    inner = np.flatnonzero(depth > 0)
    if len(inner):
        keys = np.sort(depth.astype(np.int64) * m + np.arange(m))
        at = np.searchsorted(keys, (depth[inner] - 1).astype(np.int64) * m + inner) - 1
        parent = keys[np.maximum(at, 0)] % m
        if not ((at >= 0) & (keys[np.maximum(at, 0)] // m == depth[inner] - 1)
                & (e[parent] >= e[inner]) & (e[parent] > t[inner])).all():
            return False
        children = np.zeros(m, dtype=np.float64)
        np.add.at(children, parent, d[inner])
        out[rows] -= children
        top[rows[inner]] = False
    return True


def _nested_loop(rows: np.ndarray, ts: np.ndarray, dur: np.ndarray, out: np.ndarray,
                 top: np.ndarray) -> None:
    """One thread's ``rows`` (by start, longer first) over a stack: an op ended by the next
    one's start is popped (two that last no time at one instant nest), and an op that ends
    within the top one is its child."""
    stack: list[int] = []
    for i in rows.tolist():
        end = ts[i] + dur[i]
        while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i] and not (
                dur[i] == 0 and ts[stack[-1]] + dur[stack[-1]] == ts[i] and dur[stack[-1]] == 0):
            stack.pop()
        if stack and end <= ts[stack[-1]] + dur[stack[-1]]:
            out[stack[-1]] -= dur[i]
            top[i] = False
        stack.append(i)


def _training(events: pa.Table) -> str | None:
    """The first host op or range that shows training (autograd's backward pass, an
    optimizer step: the diagnosis' rule, diagnosis/program.py), else None: inference."""
    host = events.filter(is_in(events["category"], ["host.op", "host.annotation",
                                                    "host.python"]))["name"]
    hit = pc.index(matches(host, TRAINING.pattern), True).as_py() if len(host) else -1
    return None if hit < 0 else str(host[hit].as_py())


@dataclass
class _Share:
    """The process that spent the most time in host ranges of one kind (data loading,
    collectives): that time (the union of its ranges, over its threads), its share of the
    traced span, the longest range's name, how many ranges of that name the process ran and
    the first one's duration."""

    ns: int
    pct: float
    pid: int | None
    name: str
    calls: int
    first_start: int  # the first range of that name: its start and end (ns)
    first_end: int
    end: int  # where the process' last range of the kind ends (ns)
    span: int  # the traced span the shares are of
    source: str
    median_ns: int = 0  # the median range of that name
    first_alone: bool = True  # the first range of that name ends before the next one starts

    @property
    def typical_pct(self) -> float:
        """The share of the span that ``calls`` ranges of the median length would take: what
        the share is without a few outliers (a scheduler stall in one step)."""
        return percent(self.median_ns * self.calls, self.span)

    @property
    def first_ns(self) -> int:
        """How long the first range of that name lasted."""
        return self.first_end - self.first_start

    def loading_finding(self, training: str | None,
                        inside: list[tuple[str, int]] | None = None) -> Finding:
        """Input-bound: the fix follows the iterator the ranges name (PyTorch's
        ``_SingleProcessDataLoaderIter``: ``num_workers=0``; ``_MultiProcessing…``: workers
        that cannot keep up). ``inside``: the Python frames and ops that hold the loading
        time (with_stack), named first."""
        cheaper = "pre-processed, cached or memory-mapped data, cheaper transforms"
        if "_SingleProcessDataLoaderIter" in self.name:
            fix = ("Give the DataLoader worker processes: with num_workers=0 it loads each "
                   "batch in the main process, between steps. DataLoader(num_workers>0, "
                   "persistent_workers=True, prefetch_factor) loads the next batches while "
                   "the model computes; leave the model's intra-op threads their cores "
                   f"(torch.set_num_threads). If workers cannot keep up either: {cheaper}.")
        elif "_MultiProcessingDataLoaderIter" in self.name:
            fix = ("The DataLoader's workers cannot keep up: more workers (the cores the "
                   "model's threads leave free), a larger prefetch_factor, "
                   f"persistent_workers=True, or cheaper samples: {cheaper}.")
        else:
            fix = ("Load the next batch while the model computes (DataLoader workers, or a "
                   f"loader thread with a queue), or make each sample cheaper: {cheaper}.")
        loop = "training loop" if training else "loop"
        evidence: dict[str, Any] = {
            "data_loading_ns": self.ns, "data_loading_pct_of_span": self.pct, "pid": self.pid,
            "loader": short_name(self.name, 80)}
        if inside:
            named = ", ".join(f"{short_name(n, 60)} ({format_ns(ns)}, {percent(ns, self.ns)}%)"
                              for n, ns in inside)
            evidence["inside_loader"] = named
            if SLEEP_FRAME.search(inside[0][0]):
                fix = (f"Inside the loader the time is in {named}: it waits there (a sleep, or "
                       "the I/O it stands for), which loading in workers hides. " + fix)
            else:
                fix = (f"Inside the loader the time is in {named}: that per-sample code is "
                       "what to make cheaper (tensor ops over whole samples instead of Python "
                       "loops, no tensors built from Python lists) or to move off the loop. "
                       + fix)
        return Finding(
            "warning", f"Input-bound: the {loop} spends {self.pct}% of the traced span "
            f"loading data ({format_ns(self.ns)})", evidence, fix)

    def optimizer_finding(self) -> Finding:
        """A training loop's optimizer steps: the fix by the optimizer's class (fused on the
        CPU); a first step that takes twice the mean of the others created its state."""
        evidence: dict[str, Any] = {
            "optimizer_ns": self.ns, "optimizer_pct_of_span": self.pct, "pid": self.pid,
            "optimizer": short_name(self.name, 80), "calls": self.calls,
            "first_call_ns": self.first_ns, "median_call_ns": self.median_ns}
        first = ""
        if self.calls > 1 and self.first_ns > 2 * (self.ns - self.first_ns) / (self.calls - 1):
            # The steady state: the span and the steps' time without the first step.
            steady = percent(self.ns - self.first_ns, self.span - self.first_ns)
            evidence["after_first_call_pct"] = steady
            first = (f"; the first took {format_ns(self.first_ns)}: it creates the optimizer's "
                     f"state; {steady}% after it")
        fix = optimizer_fix(self.name, cpu=True)
        return Finding(
            "warning", f"Optimizer: the training loop spends {self.pct}% of the traced span in "
            f"optimizer steps ({format_ns(self.ns)}; {self.calls:,} × "
            f"{short_name(self.name)}{first})", evidence, fix[0].upper() + fix[1:] + ".")

    def communication_finding(self, training: str | None, missing: str | None,
                              straggler: _Straggler | None = None,
                              ddp: bool = False,
                              explicit: tuple[int, int] | None = None,
                              exposed: int | None = None, windowed: bool = False) -> Finding:
        """Collectives on the loop's path. A first call that is half of all their time is
        the ranks arriving at different times (start-up skew), not the transfer; a trace
        holding fewer ranks than the run's world size cannot tell waiting from sending; where
        another process is the straggler, this one waits for it; DistributedDataParallel in
        use is not told to use it; where most collective calls are the program's own
        (``explicit``: calls outside backward, and all calls), DDP's knobs are not the fix.
        ``exposed``: the collective time no compute of the process runs beside; where it is
        under ``COMMUNICATION_PCT`` of the span the finding is a note: the rest is hidden.
        The start-up skew is read only from a whole trace (``windowed``: a part of it starts
        mid-run) and a first call that runs alone (not beside another on a second thread)."""
        own = explicit is not None and explicit[0] * 2 > explicit[1]
        if straggler is not None and straggler.late.pid != self.pid:
            fix = (f"The collectives wait for process {straggler.late.pid}"
                   f"{straggler.rank_words} (the straggler finding): make its work per step "
                   "match the others', not the exchange.")
        elif own and explicit is not None:
            fix = (f"{explicit[0]:,} of the {explicit[1]:,} collective calls are the program's "
                   "own, outside backward (not DistributedDataParallel's gradient buckets): "
                   "send less (smaller or lower-precision tensors), less often (every N steps), "
                   "or start them with async_op=True and wait only where the result is needed.")
        elif training and ddp:
            fix = ("DistributedDataParallel is in use: its gradient buckets already overlap "
                   "backward; tune bucket_cap_mb, and check that the ranks reach each "
                   "collective together: a late rank makes the others wait here.")
        elif training:
            fix = ("Overlap gradient communication with backward: DistributedDataParallel "
                   "all-reduces gradient buckets while backward runs (bucket_cap_mb); fewer, "
                   "larger collectives (one all-reduce of a flattened buffer, not one per "
                   "parameter).")
        else:
            fix = ("Collectives sit on each step's path: fewer, larger collectives, or fewer "
                   "processes sharing a model this size.")
        skew = self.first_ns * 2 >= self.ns and self.first_alone and not windowed
        evidence: dict[str, Any] = {
            "communication_ns": self.ns, "communication_pct_of_span": self.pct,
            "pid": self.pid, "collective": short_name(self.name, 80), "calls": self.calls,
            "first_call_ns": self.first_ns}
        after = ""
        if skew:
            # The steady state: the span and collective time without the first call.
            steady = percent(self.ns - self.first_ns, self.span - self.first_ns)
            evidence["after_first_call_pct"] = steady
            after = f"; {steady}% after the first call, which holds the start-up skew"
            fix = (f"The first {self.name} alone takes {format_ns(self.first_ns)} of "
                   f"{format_ns(self.ns)}: the ranks reached their first collective at "
                   "different times (start-up skew), not the transfer; judge the steady state "
                   "by the later steps. " + fix)
        if missing:
            fix += (" A collective ends when the last rank arrives: analyze every rank's trace "
                    f"together (tracekit analyze r0.json r1.json …) to tell waiting for a "
                    f"slower rank from sending ({missing}).")
        loop = "training loop" if training else "loop"
        who = f"process {self.pid}'s " if self.pid is not None else "the "
        hidden = ""
        severity = "warning"
        if exposed is not None:
            evidence["exposed_ns"] = exposed
            evidence["exposed_pct_of_span"] = percent(exposed, self.span)
            hidden = ("; all of it exposed" if exposed >= self.ns else
                      f"; {format_ns(exposed)} of it exposed, the rest beside the process's "
                      "compute")
            if percent(exposed, self.span) < COMMUNICATION_PCT:
                severity = "info"
        return Finding(
            severity, f"Communication: {who}{loop} spends {self.pct}% of the traced span in "
            f"collectives ({format_ns(self.ns)}; {self.calls:,} × {short_name(self.name)}"
            f"{after}{hidden})", evidence, fix)


#: The collective calls of PyTorch's c10d on the calling thread.
C10D_COLLECTIVE = r"^c10d::(allreduce|allgather|all_gather|reduce_scatter|_reduce_scatter|" \
    r"broadcast|reduce|alltoall|all_to_all|_allgather)\w*_?$"
#: The ops under which autograd runs backward (and DDP's gradient hooks issue their buckets).
BACKWARD_OP = r"^autograd::engine::evaluate_function"


#: A frame or op inside the loader is named where it holds this share of the loading time.
LOADER_PART_PCT = 10.0


def _process_host_rows(events: pa.Table, source: str, pid: int | None) -> pa.Table:
    """The host rows (ops, ranges, frames) of one process of one input that have a start
    and a duration."""
    mine = pc.and_(equals(events["source"], source),
                   pc.equal(events["pid"].fill_null(-1), -1 if pid is None else pid))
    rows = events.filter(pc.and_(mine, pc.and_(starts_with(events["category"], "host."),
                                               pc.is_valid(events["dur_ns"]))))
    return rows.filter(pc.is_valid(rows["ts_ns"]))


def _inside_loader(events: pa.Table, share: _Share,
                   bounds: tuple[int, int] | None = None) -> list[tuple[str, int]]:
    """The Python frames and ops (with_stack) that hold a process's data-loading time: self
    time per name of those that start inside its loading ranges, at most three, each
    ``LOADER_PART_PCT`` of the loading time or more; none without frames."""
    rows = _process_host_rows(events, share.source, share.pid)
    if not rows.num_rows or not any_true(equals(rows["category"], "host.python")):
        return []
    loading = matches(rows["name"], DATA_LOADING_RANGE).to_numpy(zero_copy_only=False)
    start = rows["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + rows["dur_ns"].to_numpy(zero_copy_only=False)
    if bounds is not None:
        start, end = np.clip(start, *bounds), np.clip(end, *bounds)
    windows = iv.union(start[loading], end[loading])
    parts = is_in(rows["category"], ["host.python", "host.op"]).to_numpy(
        zero_copy_only=False) & ~loading & iv.covered(start, windows)
    if not parts.any():
        return []
    inner = rows.filter(pa.array(parts)).select(["name", "ts_ns", "dur_ns", "pid", "tid"])
    ranked = _by_name(inner, op_self_times(inner)).ranked[:3]
    return [(name, int(ns)) for name, ns in ranked if percent(ns, share.ns) >= LOADER_PART_PCT]


def _exposed_collectives(events: pa.Table, share: _Share,
                         bounds: tuple[int, int] | None = None) -> int | None:
    """Of a process's time in collectives (the union of its collective ranges), the part no
    compute of it runs beside: minus the union of its host ops that are neither collectives
    nor around one (autograd's evaluate_function holding a blocking ``c10d::allreduce_``
    waits, it does not compute). None where the process traced no op beside them: gloo's
    worker threads run the exchange while backward goes on, which the union alone counts
    as communication."""
    rows = _process_host_rows(events, share.source, share.pid)
    start = rows["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + rows["dur_ns"].to_numpy(zero_copy_only=False)
    if bounds is not None:
        start, end = np.clip(start, *bounds), np.clip(end, *bounds)
    collective = matches(rows["name"], COLLECTIVE_RANGE).to_numpy(zero_copy_only=False)
    is_op = equals(rows["category"], "host.op").to_numpy(zero_copy_only=False)
    if not collective.any() or not (is_op & ~collective).any():
        return None
    # Ops around a collective call of their thread (one starts within them) wait with it.
    tid = rows["tid"].fill_null(-1).to_numpy(zero_copy_only=False)
    around = np.zeros(len(start), dtype=bool)
    calls = collective & is_op
    for t in np.unique(tid[calls]).tolist():
        at = np.sort(start[calls & (tid == t)])
        here = np.flatnonzero((tid == t) & is_op & ~collective)
        around[here] = np.searchsorted(at, end[here], side="left") > \
            np.searchsorted(at, start[here], side="left")
    busy = is_op & ~collective & ~around
    exchange = iv.union(start[collective], end[collective])
    return iv.total(iv.minus(exchange, iv.union(start[busy], end[busy])))


def _explicit_collectives(events: pa.Table, source: str, pid: int | None
                          ) -> tuple[int, int] | None:
    """Of one process's c10d collective calls, those outside backward and DDP's own ranges
    (the program's ``dist.all_reduce``, not DDP's gradient hooks, which run inside autograd's
    evaluate_function, nor its buffer broadcast in ``DistributedDataParallel.forward``), and
    all of them; None where it made none."""
    rows = _process_host_rows(events, source, pid)
    calls = rows.filter(pc.and_(matches(rows["name"], C10D_COLLECTIVE),
                                equals(rows["category"], "host.op")))
    if not calls.num_rows:
        return None
    backward = rows.filter(pc.or_(matches(rows["name"], BACKWARD_OP),
                                  matches(rows["name"], DDP_RANGE)))
    tid = calls["tid"].fill_null(-1).to_numpy(zero_copy_only=False)
    at = calls["ts_ns"].to_numpy(zero_copy_only=False)
    inside = np.zeros(len(at), dtype=bool)
    if backward.num_rows:
        b_tid = backward["tid"].fill_null(-1).to_numpy(zero_copy_only=False)
        b_start = backward["ts_ns"].to_numpy(zero_copy_only=False)
        b_end = b_start + backward["dur_ns"].to_numpy(zero_copy_only=False)
        for t in np.unique(tid).tolist():
            here, theirs = tid == t, b_tid == t
            inside[here] = iv.covered(at[here], iv.union(b_start[theirs], b_end[theirs]))
    return int((~inside).sum()), len(at)


def _range_shares(events: pa.Table, span: int, pattern: str,
                  bounds: tuple[int, int] | None = None) -> list[_Share]:
    """Time in host ranges whose name matches ``pattern``, per process, most first (ranges
    nest, and a process may run them on several threads: their union per process); none
    where no range matches. Shares are of ``span``, or where several processes hold such
    ranges (ranks, which start at different times) of each one's own span."""
    rows = events.filter(pc.and_(matches(events["name"], pattern),
                                 pc.and_(starts_with(events["category"], "host."),
                                         pc.is_valid(events["dur_ns"]))))
    rows = rows.filter(pc.is_valid(rows["ts_ns"]))
    if not rows.num_rows or span <= 0:
        return []
    start = rows["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + rows["dur_ns"].to_numpy(zero_copy_only=False)
    if bounds is not None:  # each range's part within them
        start, end = np.clip(start, *bounds), np.clip(end, *bounds)
    keys, (sources, pids) = factorize(
        rows["source"].cast(pa.string()).to_numpy(zero_copy_only=False),
        rows["pid"].fill_null(-1).to_numpy(zero_copy_only=False))
    first_row = np.full(len(pids), len(keys))
    np.minimum.at(first_row, keys, np.arange(len(keys)))
    names = rows["name"].cast(pa.string()).to_numpy(zero_copy_only=False)
    annotation = equals(rows["category"], "host.annotation").to_numpy(zero_copy_only=False)
    own = _process_spans(events, bounds) if len(pids) > 1 else {}
    shares = []
    for key in np.argsort(first_row).tolist():  # processes in order of first appearance
        source, pid = str(sources[key]), int(pids[key])
        mine = keys == key
        loaded = iv.total(iv.union(start[mine], end[mine]))
        if (source, pid) in own:
            span = own[(source, pid)][1] - own[(source, pid)][0]
        # Named by the longest range the program or framework annotated (PyTorch's
        # "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" says num_workers=0),
        # not by a with_stack Python frame ("dataloader.py(720): __next__") around it.
        longest = int(np.argmax(np.where(mine, end - start, -1)))
        ranged = mine & annotation
        if ranged.any():
            # ... where one is about as long (torch.compile's long ranges are ops, and a
            # short annotation of it is no name for the whole).
            best = int(np.argmax(np.where(ranged, end - start, -1)))
            if (end - start)[best] * 2 >= (end - start)[longest]:
                longest = best
        same = np.flatnonzero(mine & (names == names[longest]))
        first = same[np.argmin(start[same])]
        later = start[same][start[same] > start[first]]
        shares.append(_Share(ns=int(loaded), pct=percent(loaded, span),
                             pid=None if pid < 0 else pid, name=str(names[longest]),
                             calls=len(same), first_start=int(start[first]),
                             first_end=int(end[first]), end=int(end[mine].max()), span=span,
                             source=source,
                             median_ns=int(np.median(end[same] - start[same])),
                             first_alone=int((start[same] == start[first]).sum()) == 1 and (
                                 not len(later) or int(later.min()) >= int(end[first]))))
    return sorted(shares, key=lambda sh: -sh.ns)


def _process_spans(events: pa.Table, bounds: tuple[int, int] | None = None
                   ) -> dict[tuple[str, int], tuple[int, int]]:
    """Per (input, pid): the first start and last end of its program's ops and ranges
    (within ``bounds``)."""
    rows = events.filter(pc.and_(is_in(events["category"], PROGRAM_CATEGORIES),
                                 pc.is_valid(events["ts_ns"])))
    start = rows["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + rows["dur_ns"].fill_null(0).to_numpy(zero_copy_only=False)
    if bounds is not None:
        start, end = np.clip(start, *bounds), np.clip(end, *bounds)
    source = rows["source"].cast(pa.string()).to_numpy(zero_copy_only=False)
    code, (sources, pids) = factorize(source, rows["pid"].fill_null(-1).to_numpy(
        zero_copy_only=False))
    lo = np.full(len(sources), np.iinfo(np.int64).max)
    hi = np.full(len(sources), np.iinfo(np.int64).min)
    np.minimum.at(lo, code, start)
    np.maximum.at(hi, code, end)
    return {(str(s), int(p)): (int(a), int(b)) for s, p, a, b in zip(
        sources.tolist(), pids.tolist(), lo.tolist(), hi.tolist(), strict=True)}


def _last_to_arrive(comms: list[_Share]) -> Finding | None:
    """The process that reached its first collective last, where the others waited for it:
    the first calls end together (a collective ends when the last rank arrives, here within
    5 % of the longest wait) and one of them holds half its process' collective time."""
    if len(comms) < 2:
        return None
    waited = max(comms, key=lambda c: c.first_ns)
    ends = [c.first_end for c in comms]
    if waited.first_ns * 2 < waited.ns or max(ends) - min(ends) > 0.05 * waited.first_ns:
        return None
    late = max(comms, key=lambda c: c.first_start)
    return Finding(
        "info", f"Process {late.pid} reached the first collective last: the others waited up to "
        f"{format_ns(waited.first_ns)} in it",
        {"late_pid": late.pid, "late_source": late.source, "waited_ns": waited.first_ns},
        "Start-up skew, not the exchange: the late process started (or set up) later; judge the "
        "collectives by the later steps, and look at that process' start-up if every run "
        "shows it.")


@dataclass
class _Straggler:
    """The process the others wait for in their collectives, and what says so."""

    late: _Share
    waiting: _Share
    rank_words: str  # " (rank N)" where the inputs name their ranks
    finding: Finding


def _straggler(trace: Trace, every: list[_Share]) -> _Straggler | None:
    """Of processes that run collectives, the one the others wait for: a collective ends
    when the last rank arrives, so the ranks that arrive early spend their time in it. Where
    one process spends the most of its span in collectives (at least COMMUNICATION_PCT) and
    another at most a third of that, the latter is the straggler."""
    if len(every) < 2:
        return None
    waiting = max(every, key=lambda c: c.pct)
    late = min(every, key=lambda c: c.pct)
    if waiting.pct < COMMUNICATION_PCT or late.pct * 3 > waiting.pct:
        return None
    rank = process_ranks(trace).get((late.source, late.pid))
    words = f" (rank {rank})" if rank is not None else ""
    wait = max(waiting.ns - late.ns, 0)
    evidence: dict[str, Any] = {
        "late_pid": late.pid, "late_collectives_pct": late.pct, "waiting_pid": waiting.pid,
        "waiting_collectives_pct": waiting.pct, **({"late_rank": rank} if words else {}),
        "wait_ns": wait}
    extra = _late_extra(trace.events, late, waiting)
    said = ""
    if extra is not None and extra[1] * 4 >= wait:
        evidence["late_extra"], evidence["late_extra_ns"] = extra
        said = (f"; it spends {format_ns(extra[1])} more than process {waiting.pid} in "
                f"{short_name(extra[0])}")
    where = (f"what makes it late is {short_name(extra[0])} ({format_ns(extra[1])} more than "
             f"process {waiting.pid}): balance or remove that work" if said else
             f"see where process {late.pid}'s time goes (tracekit analyze its trace -a cpu)")
    finding = Finding(
        "warning", f"Straggler: process {late.pid}{words} spends {late.pct}% of its span in "
        f"collectives against {waiting.pct}% on process {waiting.pid}: the others wait for it "
        f"({format_ns(wait)} more in collectives){said}", evidence,
        f"A collective ends when the last rank arrives: process {late.pid} arrives late and "
        f"the others wait. {where[0].upper()}{where[1:]}; balance the work per rank (data "
        "shards, sequence lengths), and check its host too (CPU affinity, other processes).")
    return _Straggler(late, waiting, words, finding)


def _late_extra(events: pa.Table, late: _Share, waiting: _Share) -> tuple[str, int] | None:
    """The host range or op the late process spends the most time in more than the waiting
    one (its ranges' union per name; steps and collectives left out), if any."""
    parts = []
    for share in (late, waiting):
        rows = _process_host_rows(events, share.source, share.pid)
        parts.append(rows.filter(pc.and_(
            is_in(rows["category"], ["host.annotation", "host.op"]),
            pc.invert(pc.or_(matches(rows["name"], COLLECTIVE_RANGE),
                             starts_with(rows["name"], "ProfilerStep#"))))))
    text = np.concatenate([p["name"].cast(pa.string()).to_numpy(zero_copy_only=False)
                           for p in parts]).astype(str)
    if not len(text):
        return None
    # Name codes in order of first appearance (ties go to the name seen first).
    names, first, code = np.unique(text, return_index=True, return_inverse=True)
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(names))
    code, names = rank[code.reshape(-1)], names[np.argsort(first, kind="stable")]
    split = parts[0].num_rows
    times = []
    for part, codes in ((parts[0], code[:split]), (parts[1], code[split:])):
        start = part["ts_ns"].to_numpy(zero_copy_only=False)
        end = start + part["dur_ns"].to_numpy(zero_copy_only=False)
        times.append(iv.total_by_group(codes, start, end, len(names)))
    more = times[0] - times[1]
    best = int(np.argmax(more))
    return (str(names[best]), int(more[best])) if more[best] > 0 else None


def _ranks_missing(trace: Trace) -> str | None:
    """"the input holds N of the run's M ranks" where the traces name a larger world size
    (Kineto ``distributedInfo``) than the processes they hold; else None."""
    world = world_size(trace) or 1
    ev = trace.events
    host = ev.filter(pc.and_(starts_with(ev["category"], "host."),
                             pc.greater(ev["pid"], SYNTHETIC_ID_MAX)))
    held = host.select(["source", "pid"]).group_by(
        ["source", "pid"], use_threads=False).aggregate([]).num_rows
    return f"the input holds {held} of the run's {world} ranks" if world > held else None


@dataclass
class _Cover:
    """How much of ``span`` the ops of the thread with the most op time cover, and what its
    Python frames and ranges outside ops take (name, self ns), most first."""

    source: str
    thread: tuple[int | None, int | None]
    threads: int
    span: int
    pct: float
    outside: list[tuple[str, int]]
    python_frames: bool = False  # the trace holds Python frames (with_stack=True)
    processes: int = 1  # processes that ran ops


def _busiest_thread(events: pa.Table, ops: pa.Table, top_level: np.ndarray,
                    span: int, explained: list[str],
                    bounds: tuple[int, int] | None = None) -> _Cover:
    """The thread whose top-level ops take the most time, and the share of its process' span
    (``span`` where one process ran ops) that the process' top-level ops, on any thread,
    cover (their union). Under ``OP_COVER_PCT``, where that thread's time outside ops went:
    the time each of its Python frames and host ranges is the innermost open event
    (``innermost_times``), by name. Step ranges (``ProfilerStep#N``) and ranges matching a
    pattern of ``explained`` (data loading, collectives, optimizer steps: their own findings)
    are not named; those and the ops of the process' other threads count as the thread's, so
    that their time is not named as outside ops. Everything is cut to ``bounds`` (a
    window)."""
    source = ops["source"].cast(pa.string()).to_numpy(zero_copy_only=False)
    pid = ops["pid"].fill_null(-1).to_numpy(zero_copy_only=False)
    tid = ops["tid"].fill_null(-1).to_numpy(zero_copy_only=False)
    start = ops["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + ops["dur_ns"].to_numpy(zero_copy_only=False)
    if bounds is not None:
        start, end = np.clip(start, *bounds), np.clip(end, *bounds)
    code, (sources, pids, tids) = factorize(source[top_level], pid[top_level], tid[top_level])
    busy = np.bincount(code, weights=(end - start)[top_level], minlength=len(pids))
    if not len(busy):
        return _Cover("", (None, None), 0, span, 0.0, [])
    best = int(np.argmax(busy))
    where = (str(sources[best]), int(pids[best]), int(tids[best]))
    # Framework work of the process on any thread: a thread that waits while another runs
    # ops (autograd's device threads run a CUDA backward) is not waiting outside ops.
    mine = top_level & (source == where[0]) & (pid == where[1])
    processes = len(set(zip(sources.tolist(), pids.tolist(), strict=True)))
    if processes > 1:  # processes start at different times: its own span
        lo, hi = _process_spans(events, bounds).get(where[:2], (0, span))
        span = hi - lo
    threads = int(((sources == where[0]) & (pids == where[1])).sum())  # of that process
    cover = _Cover(where[0], (None if where[1] < 0 else where[1],
                              None if where[2] < 0 else where[2]),
                   threads, span, percent(iv.total(iv.union(start[mine], end[mine])), span),
                   [], processes=processes)
    if cover.pct >= OP_COVER_PCT or not span:
        return cover
    rows = events.select(["category", "name", "ts_ns", "dur_ns", "source", "pid", "tid"])
    rows = rows.filter(pc.and_(
        pc.and_(is_in(rows["category"], ["host.op", "host.python", "host.annotation"]),
                pc.and_(pc.is_valid(rows["ts_ns"]), pc.is_valid(rows["dur_ns"]))),
        pc.and_(equals(rows["source"], where[0]),
                pc.and_(pc.equal(rows["pid"].fill_null(-1), where[1]),
                        pc.or_(pc.or_(pc.equal(rows["tid"].fill_null(-1), where[2]),
                                      equals(rows["category"], "host.op")),
                               matches(rows["name"], "|".join(explained)))))))
    first = rows["ts_ns"].to_numpy(zero_copy_only=False)
    last = first + rows["dur_ns"].to_numpy(zero_copy_only=False)
    if bounds is not None:
        first, last = np.clip(first, *bounds), np.clip(last, *bounds)
    inner = innermost_times(first, last)
    named = pc.and_(pc.invert(equals(rows["category"], "host.op")), pc.invert(matches(
        rows["name"], "|".join([STEP_RANGE, *explained])))).to_numpy(zero_copy_only=False)
    # A frame wholly inside an explained range (the sleep in a Dataset's __getitem__ under
    # the DataLoader's range) is time its finding already counts.
    said = matches(rows["name"], "|".join(explained)).to_numpy(zero_copy_only=False)
    if said.any():
        union = iv.union(first[said], last[said])
        named &= iv.covered_within(first, last, union) < last - first
    ranked = _by_name(rows.filter(named), inner[named]).ranked
    cover.outside = [(n, int(ns)) for n, ns in ranked
                     if percent(ns, span) >= OUTSIDE_NAMED_PCT][:3]
    cover.python_frames = bool(pc.any(equals(rows["category"], "host.python")).as_py())
    return cover


def innermost_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event: how long it is the innermost open event, the latest started of those open
    (a flame chart's self time). Unlike nesting by containment, this holds where events
    overlap without nesting: a ``record_function`` range begins inside its ``__enter__``
    frame and outlives it, a ``ProfilerStep`` range spans two ``step()`` calls."""
    n = len(start)
    out = np.zeros(n, dtype=np.float64)
    if not n:
        return out
    times = np.concatenate([end, start])
    is_start = np.repeat([0, 1], n)  # at one time, ends before starts
    # Starts at one time: the longer first, so that the shorter is the innermost.
    order = np.lexsort((np.concatenate([np.zeros(n), -(end - start)]), is_start, times))
    rows = np.concatenate([np.arange(n), np.arange(n)])[order].tolist()
    starts = is_start[order].tolist()
    at = times[order].tolist()
    closed = [False] * n
    stack: list[int] = []
    before = at[0]
    for row, opens, t in zip(rows, starts, at, strict=True):
        while stack and closed[stack[-1]]:
            stack.pop()
        if stack and t > before:
            out[stack[-1]] += t - before
        before = t
        if opens:
            stack.append(row)
        else:
            closed[row] = True
    return out


def _memory_finding(events: pa.Table, ops: pa.Table) -> Finding | None:
    """What a profile_memory=True trace says of host memory: the peak of the allocator's
    "CPU memory allocated" counter, and the largest single host allocation with the
    innermost op on its thread at that moment (the op that asked for it); and, where the
    trace has GPU allocations too, each GPU's peak allocated and reserved memory."""
    peak = events.filter(pc.and_(equals(events["name"], "CPU memory allocated"),
                                 equals(events["kind"], "counter")))
    if not peak.num_rows:
        return None
    top = pc.max(peak["value"]).as_py()
    evidence: dict[str, Any] = {"peak_allocated_bytes": int(top or 0)}
    title = f"Memory: host allocations peak at {format_bytes(top or 0)}"
    allocs = events.filter(pc.and_(equals(events["category"], "host.memory"),
                                   pc.greater(pc.fill_null(events["bytes"], 0), 0)))
    # Kineto's [memory] events of GPU memory are recorded on the host too: "Device Type"
    # 0 is the CPU, any other an accelerator.
    device_type = pc.struct_field(pc.extract_regex(
        allocs["args"].cast(pa.string()), r'"Device Type"\s*:\s*(?P<v>-?\d+)'), "v")
    allocs = allocs.filter(pc.fill_null(pc.equal(device_type, "0"), True))
    gpu = events.filter(pc.and_(equals(events["kind"], "counter"),
                                matches(events["name"], r"^GPU \S+ memory (allocated|reserved)$")))
    if allocs.num_rows:
        row = allocs.slice(pc.index(allocs["bytes"], pc.max(allocs["bytes"])).as_py(), 1)
        size, at = row["bytes"][0].as_py(), row["ts_ns"][0].as_py()
        evidence["largest_allocation_bytes"] = size
        title += f"; the largest allocation is {format_bytes(size)}"
        mine = ops.filter(pc.and_(
            pc.and_(pc.equal(ops["pid"], row["pid"][0]), pc.equal(ops["tid"], row["tid"][0])),
            pc.and_(pc.less_equal(ops["ts_ns"], at),
                    pc.greater_equal(pc.add(ops["ts_ns"], ops["dur_ns"]), at))))
        if mine.num_rows:
            by = str(mine["name"][int(np.argmax(mine["ts_ns"].to_numpy()))].as_py())
            evidence["largest_by"] = short_name(by, 60)
            title += f", by {short_name(by, 60)}"
    if gpu.num_rows:
        peaks = gpu.group_by("name", use_threads=False).aggregate([("value", "max")])
        most = dict(zip(peaks["name"].cast(pa.string()).to_pylist(),
                        peaks["value_max"].to_pylist(), strict=True))
        for name in sorted(n for n in most if n.endswith(" allocated")):
            where = name.removesuffix(" memory allocated")
            reserved = most.get(f"{where} memory reserved")
            key = where.lower().replace(" ", "")
            evidence[f"{key}_peak_allocated_bytes"] = int(most[name])
            title += f"; {where} allocations peak at {format_bytes(most[name])}"
            if reserved is not None:
                evidence[f"{key}_peak_reserved_bytes"] = int(reserved)
                title += f" ({format_bytes(reserved)} reserved)"
    return Finding("info", title, evidence)


def _compile_finding(trace: Trace, compiling: _Share) -> Finding:
    """torch.compile compiling in the traced span: start-up, not the steady state. Where the
    trace has ``ProfilerStep`` ranges after the compilation, the fix names them."""
    steps = step_ranges(trace)
    if compiling.pid is not None and steps.num_rows:
        steps = steps.filter(pc.equal(steps["pid"], compiling.pid))
    after = steps.filter(pc.greater_equal(steps["start"], compiling.end)) if steps.num_rows \
        else steps
    evidence: dict[str, Any] = {
        "compile_ns": compiling.ns, "compile_pct_of_span": compiling.pct, "pid": compiling.pid,
        "longest": short_name(compiling.name, 80)}
    fix = ("The first calls of a torch.compile'd model compile it (TorchDynamo, AOTAutograd, "
           "Inductor): start-up, paid once per input shape, not the steady state. ")
    if after.num_rows:
        first, last = pc.min(after["step"]).as_py(), pc.max(after["step"]).as_py()
        evidence["steady_steps"] = f"{first}:{last}"
        fix += (f"Judge the program by the steps after it (-O steps={first}:{last}) and "
                "record after warm-up (torch.profiler.schedule(wait=…, warmup=…)).")
    else:
        fix += ("Record after warm-up (torch.profiler.schedule(wait=…, warmup=…), or run the "
                "model once before profiling) so that the trace shows the steady state.")
    return Finding(
        "warning", f"Compilation: {compiling.pct}% of the traced span is torch.compile "
        f"compiling ({format_ns(compiling.ns)})", evidence, fix)


def _step_table(trace: Trace) -> pa.Table | None:
    """Per process with ``ProfilerStep#N`` ranges: how many, the first step's length (warm-up:
    compilation, optimizer state) and the median, shortest and longest of the others."""
    steps = step_ranges(trace)
    if not steps.num_rows:
        return None
    source = steps["source"].to_numpy(zero_copy_only=False)
    pid = steps["pid"].fill_null(-1).to_numpy(zero_copy_only=False)
    number = steps["step"].to_numpy()
    dur = steps["end"].to_numpy() - steps["start"].to_numpy()
    cols: dict[str, list[Any]] = {k: [] for k in (
        "pid", "steps", "first", "median", "min", "max")}
    for s, p in dict.fromkeys(zip(source.tolist(), pid.tolist(), strict=True)):
        mine = np.flatnonzero((source == s) & (pid == p))
        mine = mine[np.argsort(number[mine], kind="stable")]
        rest = dur[mine[1:]] if len(mine) > 1 else dur[mine]
        cols["pid"].append(None if p < 0 else p)
        cols["steps"].append(len(mine))
        cols["first"].append(int(dur[mine[0]]))
        cols["median"].append(int(np.median(rest)))
        cols["min"].append(int(rest.min()))
        cols["max"].append(int(rest.max()))
    return report_table([("pid", "int", None, cols["pid"]), ("steps", "int", None, cols["steps"]),
                         *((k, "int", "ns", cols[k]) for k in ("first", "median", "min",
                                                                "max"))])


def _processes_per_host(trace: Trace) -> int:
    """The most processes (real pids) that the inputs say ran on one host (Kineto's
    ``host_name``) at once: ranks of a run on one machine, which share its cores (not two
    runs one after the other)."""
    procs = trace.processes
    if not procs.num_rows or "host" not in procs.column_names:
        return 1
    rows = procs.filter(pc.and_(pc.is_valid(procs["host"]),
                                pc.greater(procs["pid"], SYNTHETIC_ID_MAX)))
    if rows.num_rows < 2:
        return 1
    spans = _process_spans(trace.events)
    most = 1
    for host in set(rows["host"].to_pylist()):
        mine = rows.filter(pc.equal(rows["host"], host))
        times = [spans[key] for key in zip(mine["source"].to_pylist(), mine["pid"].to_pylist(),
                                           strict=True) if key in spans]
        # A sweep over the processes' starts (+1) and ends (-1), ends first at a tie.
        edges = sorted([(a, 1) for a, _ in times] + [(b, -1) for _, b in times])
        running = 0
        for _, step in edges:
            running += step
            most = max(most, running)
    return most


#: The ops that torch.compile's graphs run as (their self time is the generated code's).
COMPILED_OP = re.compile(r"^(CompiledFunction(Backward)?|## Call CompiledFxGraph \w+ ##)$")
#: Compiled graphs this share of op self time or more are explained.
COMPILED_PCT = 20.0


def _compiled_code_finding(ranked: list[tuple[str, float]], total: float) -> Finding | None:
    """On the CPU, the self time of torch.compile's graph ops (``CompiledFunction``) is the
    code inductor generated for them, which runs inside the op without ops of its own: where
    it is ``COMPILED_PCT`` of op self time or more, say so and how to see its kernels."""
    if not total:
        return None
    parts = [(name, ns) for name, ns in ranked if COMPILED_OP.match(name)]
    ns = sum(v for _, v in parts)
    if percent(ns, total) < COMPILED_PCT:
        return None
    named = ", ".join(f"{short_name(n, 40)} {percent(v, total)}%" for n, v in parts[:3])
    return Finding(
        "info", f"Compiled code: {percent(ns, total)}% of op self time runs inside "
        f"torch.compile's graphs ({named}): the C++ kernels inductor generated, recorded as "
        "one op per graph", {"compiled_pct": percent(ns, total), "compiled_ns": int(ns)},
        "to see those kernels one by one, set torch._inductor.config.cpp.enable_kernel_profile"
        " = True (TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1) before compiling, so each is a "
        "range in the profiler; TORCH_LOGS=output_code prints their code")


def _op_findings(ranked: list[tuple[str, float]], top_level: np.ndarray, total: float,
                 span: int, threads: int, training: str | None,
                 shares: dict[str, float] | None = None, torch: bool = True,
                 cover: _Cover | None = None,
                 in_step: tuple[np.ndarray, str] | None = None,
                 per_host: int = 1, gpu: bool = False) -> list[Finding]:
    """Findings from host ops' self time (``ranked``) and the durations of the top-level ops
    (``top_level``: ops no other op on their thread encloses, the calls the program made).

    - Many small ops: half the top-level ops take under ``SMALL_OP_NS`` (their median), and
      those calls take ``SMALL_OP_SPAN_PCT`` of the span or more; nested ops (``as_strided``,
      ``view``) are parts of those calls and would pull the median down.
      The fix names
      ``torch.inference_mode()`` only for inference (``training`` None: no backward pass or
      optimizer step in the trace); PyTorch's ops only (``torch``), as its fixes are. Where
      most of the small calls start inside optimizer steps (``in_step``: per top-level op,
      and the step's name), the fix is the optimizer's: bigger batches do not cut its ops.
    - Ops covering under ``OP_COVER_PCT`` of the span on their busiest thread (``cover``):
      the time is outside ops; its Python frames and ranges there are named.
    - Matrix math ≥ 30% of op self time, where ops do cover the span: otherwise making them
      faster cannot make the program much faster. Not in a trace with GPU work (``gpu``):
      there the ops' host time is launching the GPU's matmuls, not computing them."""
    out: list[Finding] = []
    if not ranked or not total:
        return out
    # The median, not the mean: one first call of seconds (lazy init, a warm-up) would
    # lift the mean of thousands of microsecond calls over the bound.
    median = float(np.median(top_level)) if len(top_level) else 0.0
    small = top_level[top_level < SMALL_OP_NS]
    small_pct = percent(float(small.sum()), span) if span else 0.0
    if torch and len(top_level) and median < SMALL_OP_NS and small_pct >= SMALL_OP_SPAN_PCT:
        fix = ("Per-op dispatch overhead dominates tensors this small: batch more work per op "
               "(larger batches or tensors) or fuse ops with torch.compile")
        fix += "." if training else ", and run inference under torch.inference_mode()."
        stepping = int(in_step[0][top_level < SMALL_OP_NS].sum()) if in_step else 0
        if in_step and stepping * 2 > len(small):
            optimizer = optimizer_fix(in_step[1], cpu=True)
            fix = (f"{stepping:,} of them ({percent(stepping, len(small))}%) run in the "
                   f"optimizer step ({short_name(in_step[1])}), which larger batches do not "
                   f"shorten: {optimizer}.")
        out.append(Finding(
            "warning", f"Many small ops: {len(small):,} of {len(top_level):,} top-level op "
            f"calls take under {format_ns(SMALL_OP_NS)} (median {format_ns(median)}), "
            f"{small_pct}% of the span",
            {"top_level_calls": len(top_level), "median_ns": int(median),
             "mean_ns": int(top_level.mean()),
             "under_20us_pct": percent(len(small), len(top_level)),
             "under_20us_pct_of_span": small_pct,
             "mode": "training" if training else "inference",
             "mode_from": short_name(training, 60) if training else
             "no backward pass or optimizer step"}, fix))
    low = cover is not None and cover.pct < OP_COVER_PCT
    if low and cover is not None:
        out.append(_cover_finding(cover, shares or {}, torch))
    math = sum(s for n, s in ranked if MATMUL_OPS.match(n))
    if math / total >= 0.3 and not low and not gpu:
        convs = any(CONV_OPS.match(n) for n, _ in ranked)
        threads_fix = ("use torch.set_num_threads() up to the physical cores" if per_host <= 1
                       else f"{per_host} processes share one host here: give each "
                       "torch.set_num_threads(physical cores / "
                       f"{per_host}), as more threads than cores slow every one of them")
        out.append(Finding(
            "info", f"Matrix math (mm, addmm, bmm, matmul, linear, conv, einsum) takes "
            f"{percent(math, total)}% of op self time",
            {"matmul_pct": percent(math, total),
             **({"processes_per_host": per_host} if per_host > 1 else {})},
            f"CPU GEMM speed is the lever: {threads_fix}, bfloat16 autocast on CPUs with "
            "AVX512-BF16/AMX" + (", channels_last for convs." if convs else ".")))
    return out


def _cover_finding(cover: _Cover, shares: dict[str, float], torch: bool) -> Finding:
    """Ops cover little of the span: what the input-bound and communication findings account
    for, then the Python frames and ranges that hold the rest, if the trace recorded any."""
    where = "" if cover.threads == 1 and cover.processes == 1 else (
        f" of process {cover.thread[0]}" + (" (its ops on any thread)" if cover.threads > 1
                                             else "") if cover.thread[0] is not None
        else " (ops on any thread)")
    evidence: dict[str, Any] = {"op_cover_pct": cover.pct}
    if cover.threads > 1:
        evidence["threads_with_ops"] = cover.threads
    named = ", ".join(f"{short_name(n, 60)} ({format_ns(ns)}, {percent(ns, cover.span)}%)"
                      for n, ns in cover.outside)
    if cover.outside and SLEEP_FRAME.search(cover.outside[0][0]):
        evidence["outside_ops"] = named
        rest = (f"outside any op the time is in {named}: the program sleeps there, waiting "
                "by design: remove the sleep, or wait on the event it stands for (a queue, "
                "a condition, a future) so that the wait ends when the work can go on")
    elif cover.outside and all(STEP_PART.search(n) for n, _ in cover.outside):
        evidence["outside_ops"] = named
        rest = (f"outside any op the time is in {named}: the step's own parts, so it is the "
                "time between their ops (Python and dispatch around small ops), not work to "
                "move elsewhere: fewer, larger ops (larger batches, torch.compile)")
    elif cover.outside and OUTPUT_FRAME.search(cover.outside[0][0]):
        evidence["outside_ops"] = named
        rest = (f"outside any op the time is in {named}: the program prints or logs in its "
                "loop: log every N steps, log scalars (loss.item() once) rather than whole "
                "tensors (.tolist(), str(tensor)), and buffer or hand the output to a "
                "background thread (logging's QueueHandler)")
    elif cover.outside:
        evidence["outside_ops"] = named
        rest = (f"outside any op the time is in {named}: that code (native library work, "
                "Python, waiting or I/O) is what to make cheaper or to move off the loop "
                "(worker processes, a background thread), not the ops below")
    else:
        rest = ("Python or waiting outside any op: profile the Python side (py-spy, perf "
                "with -X perf)" + (", or record with with_stack=True to see its frames"
                                   if torch and not cover.python_frames else ""))
    found = {what: pct for what, pct in shares.items() if pct}
    if found:  # what the input-bound and communication findings already account for
        evidence.update({f"{what.replace(' ', '_')}_pct_of_span": pct
                         for what, pct in found.items()})
        said = " and ".join(f"{what} {pct}%" for what, pct in found.items())
        if cover.pct + sum(found.values()) >= 100 - OUTSIDE_NAMED_PCT and not cover.outside:
            # Nothing left worth a profile of its own.
            fix = (f"Of the span, {said} (the findings above): that accounts for the time "
                   "outside ops.")
        else:
            fix = f"Of the span, {said} (the findings above); for the rest, {rest}."
    else:
        fix = f"The rest is {rest}." if not cover.outside else rest[0].upper() + rest[1:] + "."
    return Finding("warning", f"Ops cover {cover.pct}% of the traced span{where}", evidence,
                   fix)


# --- what a sampled profile shows -----------------------------------------------------------

@dataclass
class _Profile:
    """Busy weight per leaf function, module, space (user/kernel), thread and path."""

    tree: StackTree
    grand: float = 0.0
    busy: float = 0.0
    user: float = 0.0
    kernel: float = 0.0
    unknown_side: float = 0.0
    unknown_fn: float = 0.0
    integral: bool = True
    self_w: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    total_w: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    mod_self: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_keys: set[tuple[str, str]] = field(default_factory=set)
    space: dict[tuple[str, str], str] = field(default_factory=dict)
    thread_w: dict[tuple[int, int], float] = field(default_factory=lambda: defaultdict(float))
    paths: dict[int, float] = field(default_factory=dict)
    rows_busy: np.ndarray | None = None
    weights: np.ndarray | None = None
    keys_of_row: list[tuple[str, str]] = field(default_factory=list)

    def has_call_paths(self) -> bool:
        """Whether any busy sample has a caller: a profile of functions alone (VTune's
        per-function CSV) has no paths worth a table of their own."""
        return any(len(self.tree.frames(s)) > 1 for s in self.paths)

    @classmethod
    def build(cls, rows: pa.Table, weights: np.ndarray, idle: np.ndarray,
              tree: StackTree) -> _Profile:
        p = cls(tree=tree)
        p.grand = float(weights.sum())
        p.integral = bool(np.all(np.mod(weights, 1) == 0))
        busy = ~idle
        p.rows_busy = busy
        p.weights = weights
        p.busy = float(weights[busy].sum())
        stack = pc.fill_null(rows["stack_id"], -1).to_numpy(zero_copy_only=False)
        ids, inverse = np.unique(stack[busy], return_inverse=True)
        per_stack = np.bincount(inverse.reshape(-1), weights=weights[busy], minlength=len(ids))
        names = rows["name"].cast(pa.string())
        for sid, w in zip(ids.tolist(), per_stack.tolist(), strict=True):
            if sid < 0:
                continue
            frames = tree.frames(sid)
            if not frames:
                continue
            leaf = frames[-1]
            keys = [(demangle(tree.names[f]), tree.modules[f] or "") for f in frames]
            p._leaf(keys[-1], w, tree.is_kernel(leaf), known_side=bool(tree.modules[leaf])
                    or tree.addresses.get(leaf) is not None)
            for key, f in zip(keys, frames, strict=True):
                if key not in p.space:
                    p.space[key] = "kernel" if tree.is_kernel(f) else (
                        "user" if tree.modules[f] and tree.modules[f] not in UNKNOWN else "-")
            for key in set(keys):
                p.total_w[key] += w
            p.paths[sid] = w
        unstacked = np.flatnonzero(busy & (stack < 0))
        for i, w in zip(unstacked.tolist(), weights[unstacked].tolist(), strict=True):
            if not w:
                continue  # a report's Total row, or a row with nothing in it
            key = (demangle(str(names[i].as_py())), "")
            p._leaf(key, w, False, known_side=False)
            p.total_w[key] += w
        # Busy weight per thread, for the threads table and the serial-path check.
        pid = pc.fill_null(rows["pid"], -1).to_numpy(zero_copy_only=False)
        tid = pc.fill_null(rows["tid"], -1).to_numpy(zero_copy_only=False)
        if rows.num_rows and (tid >= 0).any():
            pairs = np.stack([pid[busy], tid[busy]], axis=1)
            uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
            sums = np.bincount(inv.reshape(-1), weights=weights[busy], minlength=len(uniq))
            for (a, b), w in zip(uniq.tolist(), sums.tolist(), strict=True):
                p.thread_w[(a, b)] = w
        return p

    def _leaf(self, key: tuple[str, str], w: float, kernel: bool, known_side: bool) -> None:
        self.self_w[key] += w
        self.mod_self[key[1]] += w
        if not _named(key[0]):
            self.unknown_fn += w
        if kernel:
            self.kernel += w
            self.kernel_keys.add(key)
        elif known_side and key[1] not in UNKNOWN:
            self.user += w
        else:
            self.unknown_side += w


def _unwinding(trace: Trace) -> tuple[str, int | None]:
    """How perf unwound the stacks, as the ``perf script --header`` block says: ``dwarf``
    (with the bytes of user stack each sample copied, where given), ``lbr``, ``fp`` (``-g``
    alone), or ``""`` where no input says."""
    modes = set()
    size = None
    for meta in trace.metadata.get("sources", {}).values():
        if not isinstance(meta, dict):
            continue
        line = str(meta.get("command_line") or "")
        events = " ".join(str(e) for e in meta.get("event_descriptions") or ())
        if m := re.search(r"--call-graph[= ](dwarf|lbr|fp)(?:,(\d+))?", line):
            modes.add(m.group(1))
            size = int(m.group(2)) if m.group(2) else size
        elif re.search(r"(^|\s)-g(\s|$)", line):
            modes.add("fp")
        if m := re.search(r"sample_stack_user = (\d+)", events):
            modes.add("dwarf")
            size = int(m.group(1))
    return (modes.pop(), size) if len(modes) == 1 else ("", None)


def _cut_stacks_finding(rows: pa.Table, weights: np.ndarray, busy: np.ndarray,
                        tree: StackTree, unwinding: tuple[str, int | None] = ("", None),
                        ) -> Finding | None:
    """Where call stacks were recorded but at least ``CUT_STACKS_MIN_PCT`` of busy weight
    has a stack cut short (a caller perf could not name, or the leaf alone): the unwinder
    lost the callers (code built without frame pointers, JIT code, a DWARF copy of the stack
    too small for deep stacks), so totals and paths under-count the callers. The fix follows
    how the stacks were unwound (``_unwinding``)."""
    stack = pc.fill_null(rows["stack_id"], -1).to_numpy(zero_copy_only=False)
    ids, inverse = np.unique(stack, return_inverse=True)
    names = [tree.names_of(int(i)) if i >= 0 else [] for i in ids]
    if max((len(n) for n in names), default=0) < 2:
        return None  # no call stacks recorded: nothing was cut
    cut_id = np.array([_cut_short(n) for n in names])
    cut = cut_id[inverse.reshape(-1)] & busy
    total = float(weights[busy].sum())
    share = percent(float(weights[cut].sum()), total) if total else 0.0
    if share < CUT_STACKS_MIN_PCT:
        return None
    mode, size = unwinding
    if mode == "dwarf":
        copied = f" ({size:,} bytes a sample)" if size else ""
        how = ("The DWARF unwinder stops where the copy of the user stack ends"
               f"{copied}: record with a larger copy, `perf record --call-graph dwarf,65528`, or "
               "build with -fno-omit-frame-pointer and use `--call-graph fp`")
    elif mode == "lbr":
        how = ("LBR call stacks hold as many frames as the CPU's branch records (8 to 32): "
               "record with `perf record --call-graph dwarf`")
    else:
        how = ("The unwinder lost the callers: record with `perf record --call-graph dwarf` "
               "(or build with -fno-omit-frame-pointer)")
    evidence: dict[str, object] = {"cut_stacks_pct": share, "samples": int(cut.sum())}
    if mode:
        evidence["unwinding"] = mode + (f", {size} bytes" if size else "")
    return Finding(
        "warning", f"{share}% of busy time has call stacks cut short: callers' totals and the "
        "paths under-count them", evidence,
        f"{how}; for JIT code (Java, Node.js) write a perf map. Self times stay right.")


def _cut_short(root_to_leaf: list[str]) -> bool:
    """A stack whose callers perf lost: past any unnamed frames at its root (the walk ran
    beyond the entry point, as it does below ``__libc_start_main``), it does not begin where
    a thread begins (``ENTRY_POINTS``). A stack of unnamed frames only is a matter of
    symbols, not of unwinding."""
    root = next((f for f in root_to_leaf if f not in UNKNOWN), None)
    return root is not None and base_function(root) not in ENTRY_POINTS


def _sampled_cpus(rows: pa.Table) -> int:
    """How many distinct CPUs the samples say they were taken on (perf's ``[cpu]``, kept as
    ``args.cpu``); 0 where most samples name none."""
    if not rows.num_rows:
        return 0
    named = pc.extract_regex(rows["args"].cast(pa.string()), r'"cpu":(?P<cpu>\d+)')
    valid = pc.is_valid(named)
    if pc.sum(valid).as_py() * 10 < rows.num_rows * 9:
        return 0
    return len(pc.unique(pc.struct_field(named.filter(valid), [0])))


def _lock_finding(prof: _Profile) -> Finding | None:
    """User-space locking (pthread mutexes, glibc's lll locks, futex calls, semaphores) with
    at least ``LOCK_MIN_PCT`` of busy self time: threads serialize on a lock. Kernel spin
    locks have the kernel finding's own "locks" kind."""
    if not prof.busy:
        return None
    held: dict[str, float] = {}
    for (fn, module), w in prof.self_w.items():
        if not is_kernel(module) and LOCK_FUNCTIONS.fullmatch(
                base_function(fn).split("@", 1)[0]):
            name = base_function(fn).split("@", 1)[0]
            held[name] = held.get(name, 0.0) + w
    share = percent(sum(held.values()), prof.busy)
    if share < LOCK_MIN_PCT:
        return None
    top = sorted(held, key=lambda n: -held[n])[:3]
    return Finding(
        "warning", f"Lock contention: {share}% of busy time is in locking functions "
        f"({', '.join(top)})", {"lock_pct": share, "lock_functions": ", ".join(top)},
        "Threads serialize on a lock: hold it for less (move work out of the critical "
        "section), give each thread its own data and merge at the end, or use atomics; the "
        "time they wait for it is off CPU (perf sched timehist, offcputime -f), on top of "
        "this.")


def _interpreter_finding(prof: _Profile) -> Finding | None:
    """Where CPython's interpreter (``libpython3.x``, a ``python3.x`` binary) holds at least
    ``INTERPRETER_MIN_PCT`` of busy time and no Python function is named (``py::`` frames,
    from ``python -X perf``): the profile shows the interpreter's C functions, not the
    program's Python functions, which are the code to change."""
    if not prof.busy:
        return None
    modules: dict[str, float] = {}
    for module, w in prof.mod_self.items():
        if module and PYTHON_INTERPRETER.fullmatch(module.rsplit("/", 1)[-1]):
            modules[module] = modules.get(module, 0.0) + w
    share = percent(sum(modules.values()), prof.busy)
    if share < INTERPRETER_MIN_PCT or any(fn.startswith("py::") for fn, _ in prof.self_w):
        return None
    module = max(modules, key=modules.__getitem__)
    return Finding(
        "warning", f"The Python interpreter runs {share}% of busy time: perf sees its C "
        "functions, not the program's Python functions",
        {"interpreter_pct": share, "module": module},
        "Profile the Python functions: on Python 3.12 or later run with `python -X perf` "
        "(or PYTHONPERFSUPPORT=1) and perf names them; otherwise a Python sampler "
        "(`py-spy record --native`, or the PyTorch profiler's with_stack=True). The "
        "interpreter's own functions (_PyEval_EvalFrameDefault, object allocation) are where "
        "any Python code runs, not code to optimize.")


def _runner_up(self_w: dict[tuple[str, str], float], top: tuple[tuple[str, str], float],
               busy: float, samples: int) -> tuple[str, float, float] | None:
    """The second function by busy self time where the top one's lead over it is within the
    sampling margin of their difference (95 %, ``samples`` busy samples): (name, its share
    0..1, the margin in points); None where the top one leads clearly."""
    (key, w) = top
    second = max(((k, v) for k, v in self_w.items() if k != key and _named(k[0])),
                 key=lambda kv: (kv[1], kv[0]), default=None)
    if second is None or not busy or not samples:
        return None
    a, b = w / busy, second[1] / busy
    # The margin of a difference of two shares of the same samples (multinomial).
    margin = 196.0 * ((a + b - (a - b) ** 2) / samples) ** 0.5
    return (second[0][0], b, round(margin, 1)) if 100.0 * (a - b) <= margin else None


def _top_function(top: tuple[tuple[str, str], float], busy: float,
                  lever: Finding | None, paths: bool,
                  runner_up: tuple[str, float, float] | None = None) -> Finding:
    """The function with the most busy self time; under a serial lever that is not it, the
    finding names the serial function as the one to optimize first. ``paths``: whether the
    profile has call paths to look at (who calls it how often). ``runner_up``
    (``_runner_up``): a second function the samples cannot tell from the top one."""
    (fn, mod), w = top
    evidence: dict[str, Any] = {"function": fn, "module": mod or None,
                                "self_pct": percent(w, busy)}
    fix = (f"Optimize {short_name(fn, 60)} first ({mod or 'unknown module'}): its algorithm, "
           "its memory access, or how often it is called" + (" (see the paths)." if paths
                                                              else "."))
    title = f"One function takes {percent(w, busy)}% of busy time: {short_name(fn, 80)}"
    if runner_up and not lever:
        other, share, margin = runner_up
        evidence.update({"second_function": other, "second_pct": percent(share, 1.0),
                         "difference_margin_points": margin})
        title = (f"Two functions take about the same busy time: {short_name(fn, 60)} "
                 f"{percent(w, busy)}%, {short_name(other, 60)} {percent(share, 1.0)}%")
        fix = (f"{short_name(fn, 60)} and {short_name(other, 60)} take about the same time: "
               f"{percent(w, busy)}% and {percent(share, 1.0)}%, a difference within the "
               f"sampling margin (±{margin} points); weigh both (their algorithm, memory access, "
               "or how often they are called), or record more samples to rank them"
               + (" (see the paths)." if paths else "."))
    if HYPERCALL.fullmatch(fn.split("+0x", 1)[0]):
        fix = (f"{short_name(fn, 60)} is a call into the hypervisor: its samples are time the "
               "hypervisor spent for this guest, not work of the function's own code; see "
               "the kernel finding, and what calls it" + (" (the paths)." if paths else "."))
    serial_fn = lever.evidence.get("serial_function") if lever else None
    if lever and serial_fn != fn:
        evidence["wall_clock_lever"] = serial_fn
        what = f"its top function there, {short_name(serial_fn, 60)}," if serial_fn else \
            "its work"
        fix = (f"Not the wall-clock lever: thread {lever.evidence['thread']} runs alone for "
               f"{lever.evidence['serial_pct']}% of the profile, so optimize {what} first "
               f"(see 'Serial critical path'), then {short_name(fn, 60)} ("
               f"{mod or 'unknown module'}): its algorithm, its memory access, or how often "
               "it is called.")
    return Finding("info", title, evidence, fix)


def _too_few_to_rank(top: tuple[tuple[str, str], float], busy: float, n: int) -> Finding:
    """In place of the top function's finding under ``MIN_RANK_SAMPLES`` busy samples: a
    share of a handful of samples cannot single out a function to optimize."""
    (fn, _), w = top
    return Finding(
        "info", f"Too few samples to rank functions: {plural(n, 'busy sample')}, under "
                f"{MIN_RANK_SAMPLES}",
        {"samples": n, "min_samples": MIN_RANK_SAMPLES, "top_function": fn,
         "top_function_pct": percent(w, busy)},
        f"{short_name(fn, 60)}'s {percent(w, busy)}% rests on {plural(n, 'sample')}: too "
        f"small a profile to say which function to optimize. Record longer or sample at a "
        f"higher rate, to {MIN_RANK_SAMPLES} busy samples or more, then rank the functions.")


def _named(function: str) -> bool:
    """Whether perf could name the function: not ``[unknown]`` or a bare address."""
    return function not in UNKNOWN and not function.startswith("0x")


def _top_named(self_w: dict[tuple[str, str], float]) -> tuple[tuple[str, str], float] | None:
    """The (function, module) with the most self weight, of those perf could name: an
    ``[unknown]`` frame or a bare address is no function to optimize (the symbols finding
    tells of them); one only where nothing is named."""
    named = [(k, w) for k, w in self_w.items() if _named(k[0])]
    return max(named or self_w.items(), key=lambda kv: (kv[1], kv[0]), default=None)


def _few_samples(rows: pa.Table, prof: _Profile, aggregate: bool) -> Finding | None:
    """The caveat of a profile of fewer than ``FEW_SAMPLES`` busy samples, with the 95 %
    margin of its top function's share (not for a report's aggregate rows)."""
    n = int(prof.rows_busy.sum()) if prof.rows_busy is not None else 0
    top = _top_named(prof.self_w)
    if not (0 < n < FEW_SAMPLES) or top is None or not prof.busy or aggregate:
        return None
    (fn, _), w = top
    share = w / prof.busy
    return Finding(
        "warning", f"Only {plural(n, 'sample')}: shares are rough",
        {"samples": n, "top_function_pct": percent(w, prof.busy),
         "top_function_margin_points": share_margin(share, n),
         "margin_points_at_50": share_margin(0.5, n)},
        f"At 95% confidence a share p of n samples is ±1.96·√(p(1−p)/n): "
        f"{share_margins(n, short_name(fn, 60), share)}. Record longer or sample at a higher "
        f"rate, to {FEW_SAMPLES:,} samples or more, before weighing small shares.")


def _one_report(trace: Trace, rows: pa.Table, tree: StackTree
                ) -> tuple[pa.Table, pa.Table, list[str]]:
    """Of aggregate rows from several reports (VTune CSVs read together), the rows of the one
    the profile is made of, the rows whose hardware event counts it uses, and the reports
    left out, each as "name (what it is)".

    Rows of two reports are never added: a run's report by function and its report by
    package count the same CPU time twice, a hardware-event report counts cycles, not
    seconds, and two reports by function are two runs or one run twice. The profile is the
    report of CPU time by function where there is one (else of CPU time, else the first);
    the event counts (IPC, memory stalls) come from it, or else from a report of counts by
    the same grouping."""
    names = rows["source"].cast(pa.string())
    sources = list(dict.fromkeys(names.to_pylist()))
    if len(sources) <= 1:
        return rows, rows, []
    parts = {s: rows.filter(pc.equal(names, s)) for s in sources}
    timed = {s: parts[s]["dur_ns"].null_count < parts[s].num_rows for s in sources}
    group = {s: _group_by(parts[s], True) for s in sources}
    primary = max(sources, key=lambda s: (timed[s], group[s] == "Function", -sources.index(s)))
    counted = primary
    if event_counts(parts[primary], tree, report_values(parts[primary])) is None:
        counted = next((s for s in sources if s != primary and group[s] == group[primary]
                        and event_counts(parts[s], tree, report_values(parts[s])) is not None),
                       primary)
    left = [f"{s} ({'CPU time' if timed[s] else 'event counts'} by {group[s] or 'row'})"
            for s in sources if s != primary]
    return parts[primary], parts[counted], left


#: Packages (sockets) whose CPU time differs this much: the least busy under this share of
#: an even split.
PACKAGE_LOW_SHARE = 0.5


def _package_balance(trace: Trace) -> Finding | None:
    """A report of CPU time by package (VTune's ``-group-by package``) where some packages
    took under ``PACKAGE_LOW_SHARE`` of an even split: the threads ran on some sockets only
    (placement, affinity, too few threads), which also leaves their memory bandwidth unused."""
    ev = trace.events
    rows = ev.filter(pc.fill_null(pc.match_substring(ev["args"], '"group_by":"Package"'),
                                  False))
    rows = rows.filter(pc.is_valid(rows["dur_ns"]))
    if rows.num_rows < 2:
        return None
    names = rows["name"].cast(pa.string()).to_pylist()
    cpu = rows["dur_ns"].to_numpy(zero_copy_only=False).astype(np.float64)
    total = float(cpu.sum())
    if not total or cpu.min() >= PACKAGE_LOW_SHARE * total / len(cpu):
        return None
    order = np.argsort(-cpu, kind="stable")
    shares = ", ".join(f"{names[i]} {percent(cpu[i], total)}%" for i in order)
    low = [names[i] for i in order if cpu[i] < PACKAGE_LOW_SHARE * total / len(cpu)]
    return Finding(
        "warning", f"CPU time is uneven across the {len(cpu)} packages (sockets): {shares}",
        {"packages": len(cpu), "package_shares": shares, "little_used": ", ".join(low)},
        f"{', '.join(low)} did little: spread the threads over every socket (OMP_PROC_BIND="
        "spread with OMP_PLACES=cores, or numactl / taskset), check the thread count, and "
        "place each thread's data on its own socket (first touch) so that the sockets' "
        "memory bandwidth adds up")


def _reports_finding(rows: pa.Table, left_out: list[str], counts_apart: bool) -> Finding:
    """What the profile of several reports read together is made of."""
    source = rows["source"][0].as_py() if rows.num_rows else "?"
    also = "; its IPC and stalls from the hardware event counts of the report by the same " \
        "grouping" if counts_apart else ""
    return Finding("info", f"{plural(len(left_out) + 1, 'report')} read together: the "
                   f"profile is {source} alone{also}",
                   {"report": source, "reports_not_added": left_out,
                    "why": "rows of two reports are never added: another grouping counts the "
                           "same time again, event counts are not seconds, and two reports "
                           "by the same grouping are two runs (or one run twice)"},
                   "analyze each of the others on its own: tracekit analyze FILE")


def _group_by(rows: pa.Table, aggregate: bool) -> str | None:
    """What an aggregate report's rows are (VTune's ``group_by``: Function, Package...)."""
    if not aggregate:
        return None
    first = rows["args"][0].as_py()
    return (orjson.loads(first).get("group_by") or None) if first else None


def _fixed_periods(trace: Trace) -> dict[str, int]:
    """Events given a fixed sample period (perf record -c N), from perf's event
    descriptions: ``{ sample_period, sample_freq } = N`` without ``freq = 1``."""
    out: dict[str, int] = {}
    for meta in trace.metadata.get("sources", {}).values():
        for desc in meta.get("event_descriptions") or []:
            name = re.match(r"name = ([^,]+),", desc)
            period = re.search(r"sample_period(?:, sample_freq)? \}? ?= (\d+)", desc)
            if name and period and "freq = 1" not in desc:
                out[name.group(1).strip()] = int(period.group(1))
    return out


def _unit_words(unit: str, aggregate: bool = False) -> str:
    if unit == "ns":
        return "CPU seconds" if aggregate else "ns of CPU time"
    return unit


def _amount(w: float, unit: str) -> str:
    if unit == "ns":
        return format_ns(w) + " CPU time"
    words = _unit_words(unit)
    if w == 1 and words.endswith("s") and words in ("samples", "cycles", "instructions"):
        words = words[:-1]  # 1 sample, 1 cycle
    return f"{w:,.0f} {words}" if w == int(w) else f"{w:,.6g} {words}"


def _verdict_title(ev: dict[str, Any], busy: float, grand: float, unit: str) -> str:
    parts = []
    if ev.get("idle_pct") is not None:
        parts.append(f"{100 - ev['idle_pct']:.1f}% busy, {ev['idle_pct']}% idle")
    if (ev.get("unattributed_pct") or 0) >= 99:  # rows of packages or threads: no code
        parts.append(f"busy {_amount(busy, unit)}")
    else:
        parts.append(f"busy {_amount(busy, unit)}: {ev['user_pct']}% user, "
                     f"{ev['kernel_pct']}% kernel")
    if "top_function" in ev:
        what = ev.get("grouped_by", "function").lower()
        parts.append(f"top {what} {short_name(ev['top_function'], 60)} "
                     f"{ev['top_function_pct']}%")
    if ev.get("top_module"):
        parts.append(f"top module {ev['top_module'].rsplit('/', 1)[-1]} "
                     f"{ev['top_module_pct']}%")
    return "CPU profile: " + "; ".join(parts)


def _top(weights: dict[tuple[str, str], float], keys: set[tuple[str, str]],
         n: int) -> list[tuple[tuple[str, str], float]]:
    return sorted(((k, w) for k, w in weights.items() if k in keys),
                  key=lambda kv: (-kv[1], kv[0]))[:n]


def _kernel_hint(prof: _Profile) -> str:
    """The fix that the heaviest kernel functions point at."""
    scores = [0.0] * len(KERNEL_HINTS)
    for (name, _), w in _top(prof.self_w, prof.kernel_keys, 20):
        for i, (pattern, _) in enumerate(KERNEL_HINTS):
            if pattern.fullmatch(name.split("+0x", 1)[0]):
                scores[i] += w
                break
    # Each kind of kernel work with a fifth of kernel time or more, the heaviest first.
    hits = sorted((i for i, w in enumerate(scores) if w and w >= 0.2 * prof.kernel),
                  key=lambda i: -scores[i])
    if not hits:
        return ""
    return "The top kernel functions point at " + "; and at ".join(
        KERNEL_HINTS[i][1] for i in hits[:2]) + "."


def _debug_signature(prof: _Profile) -> tuple[float, list[str]] | None:
    """Busy self time in trivial std functions (core::cmp, core::ptr, Range::next,
    std::vector::operator[]): at 10% or more, the build was not optimized."""
    if not prof.busy:
        return None
    hits = [(k[0], w) for k, w in prof.self_w.items()
            if TRIVIAL_RUST.match(k[0])
            or (TRIVIAL_CXX.match(k[0]) and TRIVIAL_CXX_CALLS.search(k[0]))]
    share = sum(w for _, w in hits)
    if share / prof.busy < 0.1 or len(hits) < 2:
        return None
    hits.sort(key=lambda kv: -kv[1])
    return percent(share, prof.busy), [short_name(n, 70) for n, _ in hits]


def _vtune_findings(rows: pa.Table, prof: _Profile,
                    report: list[dict[str, Any]]) -> list[Finding]:
    """From VTune's own columns (``report``: each row's ``report_values``, none but for a
    report's aggregate rows): utilization (Effective Time by concurrency), spin and overhead
    time, OpenMP barrier waits, memory bound."""
    if not report:
        return []
    out: list[Finding] = []
    sums: dict[str, float] = defaultdict(float)
    mem = dram = cpu = 0.0
    top_mem: list[tuple[float, str, float]] = []
    for name, values in zip(rows["name"].cast(pa.string()).to_pylist(), report, strict=True):
        t = values.get("CPU Time")
        if not isinstance(t, (int, float)):
            continue
        cpu += t
        for k, v in values.items():
            if isinstance(v, (int, float)) and k.startswith("CPU Time:"):
                sums[k] += v
        mb, db = values.get("Memory Bound(%)"), values.get("Memory Bound:DRAM Bound(%)")
        if isinstance(mb, (int, float)):
            mem += t * mb
            top_mem.append((t, name, mb))
        if isinstance(db, (int, float)):
            dram += t * db
    omp = _openmp_waits(prof)
    if not cpu:  # a report without CPU Time (hardware event counts)
        return [omp] if omp else []
    levels = ["Idle", "Poor", "Ok", "Ideal", "Over"]
    eff = {lv: sums.get(f"CPU Time:Effective Time:{lv}", 0.0) for lv in levels}
    eff_total = sum(eff.values())
    if eff_total and (eff["Idle"] + eff["Poor"]) / eff_total >= 0.7:
        # VTune's utilization levels of effective CPU time; "Idle" is not idle time (that
        # is not in the report), but time when hardly any other CPU was busy.
        out.append(Finding(
            "warning", f"Poor CPU utilization: {percent(eff['Idle'] + eff['Poor'], eff_total)}%"
            f" of effective time ran with few CPUs busy (VTune's utilization levels Idle "
            f"{percent(eff['Idle'], eff_total)}% and Poor {percent(eff['Poor'], eff_total)}%)",
            {f"utilization_{lv.lower()}_pct": percent(eff[lv], eff_total) for lv in levels},
            "The work is serial or under-parallelized: parallelize the top functions or "
            "loops (OpenMP, TBB, threads) and check the thread count it runs with."))
    wait = sums.get("CPU Time:Spin Time", 0.0) + sums.get("CPU Time:Overhead Time", 0.0)
    if wait / cpu >= 0.1:
        out.append(Finding(
            "warning", f"Threading overhead: spin and overhead time are {percent(wait, cpu)}% "
            "of CPU time", {"spin_overhead_pct": percent(wait, cpu)},
            "Threads spin waiting or pay scheduling overhead: coarser parallel work, less "
            "synchronization, dynamic/guided scheduling for uneven loops."))
    if omp:
        out.append(omp)
    if top_mem and mem / cpu >= 30:
        top_mem.sort(reverse=True)
        t, name, mb = top_mem[0]
        # Rows of functions name the hot code; rows of packages, modules or threads do not.
        group = _group_by(rows, True)  # a report's rows
        of_code = group in (None, "Function", "Function Stack", "Source Function",
                            "Function / Call Stack")
        key = "top_function" if of_code else f"top_{(group or 'row').lower().replace(' ', '_')}"
        evidence = {"memory_bound_pct": round(mem / cpu, 1), key: name,
                    f"{key}_memory_bound_pct": mb}
        if dram:
            evidence["dram_bound_pct"] = round(dram / cpu, 1)
        what = f"The hot code ({short_name(name, 50)})" if of_code else "The work"
        out.append(Finding(
            "warning", f"Memory bound: {round(mem / cpu, 1)}% of pipeline slots (CPU-time "
            "weighted) wait on memory", evidence,
            f"{what} waits on memory, not arithmetic: improve "
            "locality (contiguous arrays instead of maps/trees, blocking/tiling), and on "
            "several sockets keep data NUMA-local (first touch, numactl --localalloc)."))
    return out


def _openmp_waits(prof: _Profile) -> Finding | None:
    """OpenMP's wait functions hold 5% of busy time or more."""
    omp = sum(w for (n, _), w in prof.self_w.items() if OPENMP_WAIT.search(n))
    if not prof.busy or omp / prof.busy < 0.05:
        return None
    return Finding(
        "warning", f"OpenMP barrier waits: {percent(omp, prof.busy)}% of busy time in "
        "__kmp_wait_template and other OpenMP wait functions",
        {"openmp_wait_pct": percent(omp, prof.busy)},
        "Threads wait at barriers for the slowest one: load imbalance. Balance the work "
        "(schedule(dynamic) or guided), remove needless barriers (nowait), and lower "
        "KMP_BLOCKTIME if the spinning steals CPUs.")


def _serial_thread(rows: pa.Table, prof: _Profile, aggregate: bool) -> Finding | None:
    """Amdahl: one thread busy across the whole profile while the other threads of its
    process are short and balanced: the serial thread bounds the speed-up.

    Its serial stretch is its time before the first and after the last worker sample; the
    finding names the functions with the most self time there (≥ 10% of it, at most 3)."""
    if aggregate or len(prof.thread_w) < 3 or not prof.busy:
        return None
    busy = prof.rows_busy
    ts = rows["ts_ns"].to_numpy(zero_copy_only=False)
    tid = pc.fill_null(rows["tid"], -1).to_numpy(zero_copy_only=False)
    pid = pc.fill_null(rows["pid"], -1).to_numpy(zero_copy_only=False)
    if busy is None or not busy.any():
        return None
    keep = busy & ~np.isnan(ts.astype(np.float64))
    if keep.sum() < 3:
        return None
    t = ts[keep].astype(np.float64)
    span_all = float(t.max() - t.min()) or 1.0
    pairs = np.stack([pid[keep], tid[keep]], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    lo = np.full(len(uniq), np.inf)
    hi = np.full(len(uniq), -np.inf)
    np.minimum.at(lo, inv, t)
    np.maximum.at(hi, inv, t)
    n = np.bincount(inv, minlength=len(uniq))
    bounds = {(int(a), int(b)): (lo_, h) for (a, b), lo_, h, c
              in zip(uniq.tolist(), lo.tolist(), hi.tolist(), n.tolist(), strict=True) if c >= 2}
    spans = {k: h - lo_ for k, (lo_, h) in bounds.items()}
    if len(spans) < 3:
        return None
    main_key = max(spans, key=lambda k: spans[k])
    workers = [k for k in spans if k != main_key and k[0] == main_key[0]]
    if len(workers) < 2:
        return None
    ws = np.array([spans[k] for k in workers])
    if spans[main_key] / span_all < 0.8 or ws.max() > 0.5 * spans[main_key]:
        return None
    if ws.min() < 0.5 * ws.max():
        return None  # workers unbalanced: a different story
    worker_w = np.mean([prof.thread_w.get(k, 0.0) for k in workers])
    if prof.thread_w.get(main_key, 0.0) < 2 * worker_w:
        return None  # a long span with few samples: a thread that waits, not serial work
    (main_lo, main_hi), first, last = bounds[main_key], min(bounds[k][0] for k in workers), \
        max(bounds[k][1] for k in workers)
    serial_pct = percent(max(0.0, first - main_lo) + max(0.0, main_hi - last), span_all)
    rows_t = ts.astype(np.float64)
    alone = keep & (pid == main_key[0]) & (tid == main_key[1]) & ((rows_t < first)
                                                                 | (rows_t > last))
    functions = _self_in(rows, prof, alone)
    stretch = sum(w for _, w in functions)
    named = [(k, w) for k, w in functions[:3] if stretch and w >= 0.1 * stretch]
    evidence: dict[str, Any] = {
        "thread": main_key[1], "workers": len(workers),
        "worker_span_pct": percent(ws.mean(), spans[main_key]), "serial_pct": serial_pct}
    said = ", ".join(f"{short_name(k[0], 50)} {percent(w, stretch)}%" for k, w in named)
    if named:
        evidence["serial_function"] = named[0][0][0]
        evidence["serial_functions"] = said
    title = (f"Serial critical path: thread {main_key[1]} runs alone for {serial_pct}% of the "
             "profile" + (f" (self time there: {said})" if named else "") + f" while "
             f"{len(workers)} worker threads run only {evidence['worker_span_pct']}% of its span")
    fix = (f"Amdahl's law: {serial_pct}% of the wall time is serial, so more workers or faster "
           "parallel code cannot help much; ")
    fix += (f"speed up or parallelize {short_name(named[0][0][0], 60)} first: it is the "
            "wall-clock lever." if named else
            "parallelize what the main thread does outside the parallel part.")
    return Finding("warning", title, evidence, fix)


def _self_in(rows: pa.Table, prof: _Profile, mask: np.ndarray
             ) -> list[tuple[tuple[str, str], float]]:
    """Self weight per leaf function (name, module) of the rows in ``mask``, most first."""
    weights = prof.weights if prof.weights is not None else np.ones(rows.num_rows)
    stack = pc.fill_null(rows["stack_id"], -1).to_numpy(zero_copy_only=False)
    ids, inverse = np.unique(stack[mask], return_inverse=True)
    per = np.bincount(inverse.reshape(-1), weights=weights[mask], minlength=len(ids))
    out: dict[tuple[str, str], float] = defaultdict(float)
    for sid, w in zip(ids.tolist(), per.tolist(), strict=True):
        frames = prof.tree.frames(sid) if sid >= 0 else []
        if frames:
            out[(demangle(prof.tree.names[frames[-1]]), prof.tree.modules[frames[-1]] or "")] += w
    names = rows["name"].cast(pa.string())
    for i in np.flatnonzero(mask & (stack < 0)).tolist():  # rows without a stack
        out[(demangle(str(names[i].as_py())), "")] += float(weights[i])
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def _leafward(names: list[str], keep: int = 6) -> list[str]:
    return names if len(names) <= keep else ["…", *names[-keep:]]


@tracekit.hookimpl
def register_analyzers(register: Any) -> None:
    register(CpuAnalyzer)
