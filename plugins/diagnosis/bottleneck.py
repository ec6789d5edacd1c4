"""The ``bottleneck`` analyzer: what the workload is bound by, with evidence and the fix.

Every nanosecond of each device's active span (first to last GPU activity) goes to exactly
one cause, and the causes add up to the span:

- ``compute``: compute kernels ran (``breakdown``'s compute part);
- ``communication``: communication kernels ran with no compute beside them (exposed);
- ``transfer``: copies or memsets ran with neither compute nor communication beside them;
- ``sync``, ``launch``, ``cpu``: the device was idle, and ``gaps`` attributed the gap to a
  synchronizing call, to back-to-back launches, or to host work between launches;
- ``idle-other``: idle with work already queued (stream dependencies, launch latency) or with
  no launch record to tell.

The verdict is the cause with the largest share when it holds at least half of the time or
1.5 times the runner-up; otherwise the workload is *mixed*. Findings for every cause worth at
least ``min_share_pct`` follow, ordered by the time they cost, each with its evidence and the
fixes the field's guides give for that pattern.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import (
    COMMUNICATION,
    COMPUTE,
    MEMORY,
    READS_COLUMNS,
    SYNC_API,
    SYNC_COPY_API,
    SYNC_MEMSET_API,
    Activity,
    host_reads,
    queued_before,
    sync_api_calls,
)
from tracekit.plugins.diagnosis.advice import (
    WAITING_RATIO,
    Facts,
    Fix,
    fixes_for,
    place_of,
    render,
)
from tracekit.plugins.diagnosis.before_gpu import after_last_gpu, before_first_gpu
from tracekit.plugins.diagnosis.breakdown import devices_table
from tracekit.plugins.diagnosis.capture import capture_fix, graph_capture
from tracekit.plugins.diagnosis.collectives import kernel_kinds
from tracekit.plugins.diagnosis.dataload import INPUT_BOUND_PCT, data_loading_wait
from tracekit.plugins.diagnosis.gap_samples import GapSamples, samples_in_gaps
from tracekit.plugins.diagnosis.gaps import CAUSES as GAP_CAUSES
from tracekit.plugins.diagnosis.gaps import (
    HOST_COMMUNICATION,
    HOST_CONTEXT,
    Gaps,
    all_gaps,
    covered_by,
    gap_context,
    host_calls,
    host_context,
    host_ops_during,
    launch_gaps_to_copies,
)
from tracekit.plugins.diagnosis.kernels import kernel_findings
from tracekit.plugins.diagnosis.launch import launch_stats
from tracekit.plugins.diagnosis.program import (
    Program,
    autograd_finding,
    classify,
    dropout_finding,
)
from tracekit.plugins.diagnosis.ranks import (
    collective_skew,
    ranks_of,
    straggler,
    straggler_finding,
)
from tracekit.plugins.diagnosis.recorded import unrecorded_copies_finding
from tracekit.plugins.diagnosis.steps import slow_step_finding
from tracekit.plugins.diagnosis.sync import sync_sources
from tracekit.toolkit import (
    STEPS_HELP,
    WINDOW_HELP,
    format_bytes,
    format_ns,
    grouped_stats,
    is_in,
    matches,
    optimizer_implementation,
    percent,
    plural,
    report_table,
    restrict,
    short_name,
    short_names,
    step_ranges,
)
from tracekit.toolkit import intervals as iv

# Memory operations without a copy kind that set memory rather than copy it.
SETS_MEMORY = r"(?i)memset|fill"
CAUSES = ("compute", "communication", "transfer", "sync", "launch", "cpu", "idle-other")
VERDICTS = {
    "compute": "GPU-bound (kernels keep the GPU busy)",
    "communication": "communication-bound",
    "transfer": "transfer-bound (memory copies)",
    "sync": "sync-bound (the host waits for the GPU, then the GPU for the host)",
    "launch": "CPU/launch-bound (kernel launch overhead)",
    "cpu": "CPU-bound (host work between launches starves the GPU)",
    "idle-other": "idle with work queued (stream dependencies or launch latency)",
    "input": "input-bound (the GPU waits while the host loads data)",
    "startup": "start-up only (one-time initialization takes most of the trace)",
    "straggler": "load imbalance: one rank is late and the others wait for it in collectives",
}
STARTUP_MIN_PCT = 1.0  # start-up under this share of the span is not told apart
# A compute verdict whose GPU idles this share of the time or more is not "kept busy".
COMPUTE_IDLE_PCT = 25.0
# Less GPU work than this, and under this share of the recorded time, is too little to judge:
# the GPU span of one tiny kernel is "100% compute" but says nothing about the program.
TOO_LITTLE_GPU_NS = 1_000_000
TOO_LITTLE_GPU_PCT = 1.0
# Steps with GPU work in them that make a recording the steady state: however little the GPU
# works there, that is the program's behaviour, not a capture too short to judge.
STEADY_STEPS = 2
STARTUP_ONLY_PCT = 50.0  # start-up over this share: the trace shows no steady state
FIXES = {
    "compute": "the GPU is busy computing, so make the math cheaper: bf16/fp16 autocast, "
               "TF32 for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32), FP8 where "
               "supported; check that the top kernels use tensor cores; fuse elementwise "
               "ops (torch.compile)",
    "communication": "overlap communication with compute: DDP gradient bucketing "
                     "(bucket_cap_mb), FSDP forward/backward prefetch, async collectives on "
                     "a side stream; fewer, larger collectives",
    "transfer": "keep data on the device between steps; pin host memory "
                "(DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True) "
                "on a side stream so copies overlap compute; avoid per-step .cpu()",
    "sync": "remove per-step synchronization: no .item(), .cpu(), .tolist() or printing of "
            "device tensors in the loop (keep metrics on the device, read every N steps); "
            "no explicit torch.cuda.synchronize(); use non_blocking copies",
    "launch": "launch fewer, larger kernels: CUDA graphs (torch.compile "
              "mode='reduce-overhead' or torch.cuda.graphs), torch.compile to fuse ops, "
              "larger batches",
    "cpu": "take host work off the launching thread: DataLoader(num_workers>0, "
           "pin_memory=True, prefetch_factor), preprocessing on the GPU, less Python per "
           "step; profile the host side to see which work",
    "idle-other": "look at the largest gaps ('tracekit analyze -a gaps'): cross-stream "
                  "waits (cudaStreamWaitEvent) or a launch queue that drains",
}
def startup_fix(program: Program) -> str:
    """How to keep start-up out of a profile of this program."""
    amd = program.api == "HIP"  # nsys does not profile AMD GPUs
    how = ("torch.profiler schedule(wait=, warmup=, active=)" + (
               "" if amd else ", nsys --capture-range=cudaProfilerApi or --delay")
           if program.pytorch else
           "rocprofv3 --collection-period with a start delay past the set-up"
           if amd else "nsys --capture-range=cudaProfilerApi with "
           "cudaProfilerStart/Stop around the loop, or --delay")
    return (f"profile the steady state: start recording after warm-up ({how}) or cut this "
            "trace with -O window=START:END; the causes below are of what remains")
MIXED_FIX = "several causes share the time; the findings below are ordered by what they cost"


class BottleneckAnalyzer(tracekit.Analyzer):
    """The verdict: compute-, CPU/launch-, transfer-, sync- or communication-bound, or mixed."""

    name = "bottleneck"
    event_columns = READS_COLUMNS
    description = "what the workload is bound by, with evidence and fixes (the default)"
    # The verdict comes first for every trace; one without GPU work gets why there is none.
    default_for = (tracekit.DefaultFor(tuple(tracekit.TraceKind), slot=0, rank=1),)

    @dataclass(frozen=True)
    class Options:
        launch_gap_us: float = field(default=50.0, metadata={
            "help": "host time between launches up to which a gap counts as launch overhead"})
        min_share_pct: float = field(default=5.0, metadata={
            "help": "report causes that take at least this % of the GPU span"})
        tiny_us: float = field(default=10.0, metadata={"help": "a kernel under this is tiny"})
        window: str = field(default="", metadata={
            "help": WINDOW_HELP})
        steps: str = field(default="", metadata={
            "help": STEPS_HELP})

    def analyze(self, trace: Trace) -> Report:
        trace = restrict(trace, self.options.window, self.options.steps)
        activity = Activity.of(trace)
        per_device = all_gaps(trace, self.options.launch_gap_us)
        if not per_device:
            report = Report(analyzer=self.name, title="Bottleneck: no GPU activity")
            untimed_gpu = int(pc.sum(pc.starts_with(
                trace.events["category"].cast(pa.string()), "gpu.")).as_py() or 0)
            if untimed_gpu:
                report.findings.append(Finding(
                    severity="info", title=f"no GPU timeline: {untimed_gpu:,} GPU rows without "
                    "timestamps (aggregate totals)",
                    evidence={"verdict": "none", "events": trace.events.num_rows,
                              **classify(trace).as_evidence()},
                    suggestion="'-a summary' shows the totals; a verdict needs a trace with "
                               "timestamps (the tool's trace output, not its statistics)"))
                return report
            api = api_only_finding(trace)
            if api is not None:
                report.title = "Bottleneck: no GPU work in this input (the host's GPU API calls)"
                report.findings.append(api)
                return report
            report.findings.append(Finding(
                severity="info", title="no GPU activity in this trace: a CPU-side profile",
                evidence={"verdict": "none", "events": trace.events.num_rows,
                          **classify(trace).as_evidence()},
                suggestion="the CPU report ('tracekit analyze -a cpu') says where the time "
                           "goes"))
            return report
        costs = cause_costs(per_device)
        loading = 0
        if not activity.has_steps:
            # Uploads before the first kernel, with no copy after it: loading, not the work.
            loading = sum(set_up_copies_ns(trace, g) for g in per_device)
            costs["transfer"] -= loading
            costs["startup"] += loading
        full_span = sum(g.timeline.span for g in per_device)
        startup = costs.pop("startup")
        if startup * 100 < full_span * STARTUP_MIN_PCT:
            costs["idle-other"] += startup  # too little to tell apart
            startup = 0
        span = full_span - startup  # the steady state: the verdict leaves start-up out
        verdict, ranked = decide(costs, span)
        input_wait = data_loading_wait(trace, activity, per_device)
        if input_wait * 100 >= span * INPUT_BOUND_PCT:
            verdict = "input"  # whatever else bounds the step: see plugins/diagnosis/dataload
        if startup * 100 >= full_span * STARTUP_ONLY_PCT:
            verdict = "startup"
        else:
            too_little = _too_little_gpu_work(trace, per_device)
            if too_little is not None:
                return too_little
        lagging = _straggler(trace)
        if lagging is not None and verdict in ("mixed", "communication"):
            # The communication time is the other ranks waiting for one: imbalance.
            verdict = "straggler"
        title = f"Bottleneck: {VERDICTS.get(verdict, 'mixed')}" if verdict != "mixed" else \
            "Bottleneck: mixed (" + ", ".join(f"{c} {percent(n, span)}%" for c, n in ranked[:3]) \
            + ")"
        idle_ns = sum(n for c, n in ranked if c not in ("compute", "communication",
                                                          "transfer"))
        if verdict == "compute" and percent(idle_ns, span) >= COMPUTE_IDLE_PCT:
            # Compute leads, but the GPU is not kept busy: say what the rest of its time was.
            idle_cause, idle_cause_ns = next((c, n) for c, n in ranked
                                             if c not in ("compute", "communication",
                                                          "transfer"))
            title = (f"Bottleneck: GPU compute {percent(ranked[0][1], span)}%, but the GPU "
                     f"idles {percent(idle_ns, span)}% of the time ({idle_cause} "
                     f"{percent(idle_cause_ns, span)}%)")
        report = Report(analyzer=self.name, title=title)
        report.tables["causes"] = report_table([
                   ("cause", "str", None, [c for c, _ in ranked] + ["startup"] * bool(startup)),
                   ("time", "int", "ns", [n for _, n in ranked] + [startup] * bool(startup)),
                   ("span_pct", "float", "%", [percent(n, full_span) for _, n in ranked]
                    + [percent(startup, full_span)] * bool(startup))])
        report.table_titles["causes"] = ("Where the GPU timeline went (all devices; % of the span, "
                                         "start-up included)")
        report.tables["devices"] = devices_table([g.timeline for g in per_device], compact=True)
        report.table_titles["devices"] = "Per device (see -a breakdown, -a gaps)"
        evidence = Evidence(trace, activity, per_device, self.options.tiny_us)
        # Start-up that is mostly a graph capture is said to be one.
        capture = graph_capture(activity) if startup else None
        capture = capture if capture and capture.ns * 2 >= startup else None
        program = classify(trace)
        facts = evidence.facts()
        facts.input_wait_ns = input_wait
        if lagging is not None:
            facts.straggler = (lagging["rank"], lagging["last_at"], lagging["collectives"])
        if dict(ranked).get("launch"):
            evidence.launch_facts(facts)
            copies_ns, gaps_ns = facts.launch_gaps_to_copies[1], facts.launch_gaps[1]
            if verdict == "launch" and copies_ns * 4 >= gaps_ns * 3 > 0:
                report.title = ("Bottleneck: CPU/launch-bound (small host-device copies issued "
                                "one after another)")
        if verdict == "idle-other" and facts.no_kernels:
            report.title = ("Bottleneck: unknown, the trace records copies but no kernels "
                            "(kernel tracing was off)")
        elif verdict == "idle-other" and facts.unattributed_idle_ns * 2 > facts.other_idle_ns:
            report.title = ("Bottleneck: GPU idle, why is not recorded (the trace holds no "
                            "launching calls)")
        top_share = percent(startup, full_span) if verdict == "startup" else \
            percent(input_wait, span) if verdict == "input" else percent(ranked[0][1], span)
        headline = f"verdict: {verdict}" + (
            "" if verdict == "mixed" else
            f", {top_share}% of the recorded span" if verdict == "startup" else
            f", rank {lagging['rank']}" if verdict == "straggler" and lagging else
            f", {top_share}% of the GPU timeline waiting for data loading" + (
                f", part of its {ranked[0][0]} time ({percent(ranked[0][1], span)}%)"
                if ranked[0][0] not in ("compute", "communication", "transfer") else
                f" ({ranked[0][0]} takes {percent(ranked[0][1], span)}%)")
            if verdict == "input" else
            f", {top_share}% of the GPU timeline")
        verdict_fixes = []
        if verdict == "straggler" and lagging:
            suggestion = straggler_finding(lagging).suggestion
        elif verdict == "startup":
            suggestion = capture_fix(capture) if capture else startup_fix(program)
        else:
            verdict_fixes = fixes_for(verdict, program, facts)
            suggestion = render(verdict_fixes) or MIXED_FIX
        kernels = kernel_findings(trace)
        grid = _small_grids(kernels) if verdict == "compute" else None
        if grid is not None:
            # Busy is not full: the SMs the small grids leave idle are the lever.
            report.title = ("Bottleneck: GPU-bound, but most SMs idle (kernels of fewer "
                            "blocks than SMs)")
            verdict_fixes = [Fix(grid.suggestion,
                                 f"launches with fewer blocks than SMs leave "
                                 f"{grid.evidence['idle_sm_span_pct']:g}% of the SM time of the "
                                 "span idle"), *verdict_fixes]
            suggestion = render(verdict_fixes)
        unknown = verdict == "idle-other" and facts.no_kernels  # no verdict to stand by
        report.findings.append(Finding(
            severity="info" if verdict == "compute" else
            ("critical" if top_share >= 50 and not unknown else "warning"),
            title=headline,
            # Several devices' spans summed are GPU time, not a span of the trace.
            evidence={"verdict": verdict, "devices": len(per_device),
                      "span_ns" if len(per_device) == 1 else "gpu_time_ns": span,
                      **({"startup_ns": startup, "recorded_span_ns": full_span}
                         if startup and len(per_device) == 1 else
                         {"startup_ns": startup} if startup else {}),
                      **({"input_wait_pct": percent(input_wait, span)} if input_wait else {}),
                      # Shares of a steady state of a few microseconds would read as the
                      # program's: under start-up the steady state is too short to judge.
                      **({"steady_state": f"{format_ns(span)}: too short to judge"}
                         if verdict == "startup" and span < STEADY_MIN_MS * 1_000_000
                         else {"gpu_busy_pct": percent(sum(iv.total(g.timeline.busy)
                                                           for g in per_device) - loading,
                                                       span),
                               **{f"{c}_pct": percent(n, span) for c, n in ranked if n}})},
            suggestion=suggestion))
        report.findings.append(_program_finding(program))
        if (dropout := dropout_finding(program)) is not None:
            report.findings.append(dropout)
        if (autograd := autograd_finding(program)) is not None:
            report.findings.append(autograd)
        if (copies := unrecorded_copies_finding(activity, program)) is not None:
            report.findings.append(copies)
        if (slow := slow_step_finding(trace)) is not None:
            report.findings.append(slow)
        if lagging is not None:
            finding = straggler_finding(lagging)
            if verdict == "straggler":
                finding.suggestion = ""  # the verdict gives it, word for word
            report.findings.append(finding)
        if startup:
            report.findings.append(Finding(
                severity="warning" if percent(startup, full_span) >= 20 else "info",
                title=f"start-up: {format_ns(startup)} ({percent(startup, full_span)}% of the "
                      "recorded span), left out of the verdict",
                evidence=evidence.of("startup") | ({
                    "graph_capture_ns": capture.ns, "captured_launches": capture.launches,
                    "graph_replays": capture.replays} if capture else {}) | (
                    {"set_up_copies_ns": loading} if loading else {}),
                suggestion=capture_fix(capture) if capture else
                "one-time initialization (context, modules, a kernel's code object on its first "
                "launch, library handles, first allocations, compilation"
                + (", uploads before the first kernel with no copy after it: a model's weights"
                   if loading else "")
                + "): warm up before profiling, or keep it out with -O window=START:END",
                cost_ns=startup))
        report.findings.extend(f for f in (before_first_gpu(trace, activity),
                                           after_last_gpu(trace, activity)) if f)
        if verdict == "startup" and span < STEADY_MIN_MS * 1_000_000:
            # No steady state to speak of: causes of a few µs would be noise, not findings.
            report.notes.append(f"the steady state is {format_ns(span)} of GPU timeline: too "
                                "short to judge its causes (the causes table has them)")
            ranked = []
        given = list(verdict_fixes)  # each fix once: the verdict's, then each cause's new ones
        for cause, ns in ranked:
            if percent(ns, span) < self.options.min_share_pct or ns == 0:
                continue
            fixes = [] if cause == verdict else _not_given(fixes_for(cause, program, facts),
                                                           given)
            given.extend(fixes)
            report.findings.append(Finding(
                severity="info" if cause == "compute" else
                ("critical" if percent(ns, span) >= 50 and not unknown else "warning"),
                title=f"{cause}: {format_ns(ns)} ({percent(ns, span)}% of the GPU timeline)",
                evidence=evidence.of(cause),
                suggestion=render(fixes),
                cost_ns=ns))
        report.findings.extend(kernels)
        early_work = _queued_before_recording(activity)
        if early_work:
            report.notes.append(
                f"{early_work:,} GPU operation{'s' if early_work != 1 else ''} ran before the "
                f"first one whose launching call the trace holds: {queued_before(trace)} "
                "(counted in the span and its shares; -a breakdown's steps leave them out)")
        return report


def _queued_before_recording(activity: Activity) -> int:
    """GPU work with no launching call that starts before the first work with one, on each
    device where some work has a call: launched before the profiler started recording."""
    return sum(int(w.before_recording.sum()) for w in activity.devices)


# A compute verdict whose small grids leave this share of the span's SM time idle is said to
# be bound by them (the grid finding's idle_sm_span_pct).
SMALL_GRID_VERDICT_PCT = 50.0


def _small_grids(kernels: list[Finding]) -> Finding | None:
    """The grid-too-small finding whose idle SMs take ``SMALL_GRID_VERDICT_PCT`` of its
    device's span or more, if any."""
    return next((f for f in kernels if "grid too small" in f.title
                 and f.evidence.get("idle_sm_span_pct", 0) >= SMALL_GRID_VERDICT_PCT), None)


def _not_given(fixes: list[Fix], given: list[Fix]) -> list[Fix]:
    """A cause's fixes without those the verdict already gave."""
    said = {f.text for f in given}
    return [f for f in fixes if f.text not in said]


def _program_finding(program: Program) -> Finding:
    """The class of program the fixes were chosen for, and what it rests on."""
    return Finding(severity="info", title=f"program: {program.label()}",
                   evidence=program.grounds())


def _straggler(trace: Trace) -> dict[str, Any] | None:
    """The straggler rank's evidence when the trace holds several ranks (see ``ranks``)."""
    ranks = ranks_of(trace)
    skew = collective_skew(ranks) if len(ranks) > 1 else None
    return straggler(ranks, skew) if skew is not None else None


def _steps_with_gpu_work(trace: Trace, per_device: list[Gaps]) -> int:
    """How many ``ProfilerStep#N`` ranges have GPU work starting inside them."""
    steps = step_ranges(trace)
    if not steps.num_rows or not per_device:
        return 0
    starts = np.sort(np.concatenate([g.timeline.work.start for g in per_device]))
    lo = np.searchsorted(starts, steps["start"].to_numpy(), side="left")
    hi = np.searchsorted(starts, steps["end"].to_numpy(), side="left")
    return int(np.count_nonzero(hi > lo))


def _too_little_gpu_work(trace: Trace, per_device: list[Gaps]) -> Report | None:
    """The report for a trace whose GPU work is too little to judge (``TOO_LITTLE_GPU_*``),
    or None."""
    busy = sum(iv.total(g.timeline.busy) for g in per_device)
    if busy >= TOO_LITTLE_GPU_NS:
        return None  # the common case: no need to look at the host side
    if _steps_with_gpu_work(trace, per_device) >= STEADY_STEPS:
        return None  # the steady state is recorded: the GPU starves, and the verdict says why
    ev = trace.events
    timed = ev.filter(pc.and_(ev["ts_ns"].is_valid(), pc.invert(pc.equal(
        ev["category"].cast(pa.string()), "host.profiler"))))
    if not timed.num_rows:
        return None
    start = pc.min(timed["ts_ns"]).as_py()
    end = pc.max(pc.add(timed["ts_ns"], timed["dur_ns"].fill_null(0))).as_py()
    recorded = end - start
    if busy * 100 >= recorded * TOO_LITTLE_GPU_PCT:
        return None
    works = sum(len(g.timeline.work.start) for g in per_device)
    program = classify(trace)
    report = Report(analyzer="bottleneck", title="Bottleneck: too little GPU work to judge")
    why = ("a compiled program compiles on its first calls (Dynamo, Inductor, Triton), and "
           "the profiler records little of that; " if program.compiled else "")
    report.findings.append(Finding(
        severity="info",
        title=f"verdict: too-little-gpu-work: {plural(works, 'GPU operation')}, "
              f"{format_ns(busy)} of "
              f"GPU time in {format_ns(recorded)} of recorded time",
        evidence={"verdict": "too-little-gpu-work", "gpu_busy_ns": busy,
                  "recorded_ns": recorded, "gpu_operations": works,
                  "gpu_busy_pct": percent(busy, recorded)},
        suggestion=why + "record steps of the steady state, after warm-up, long enough to "
                   "hold real GPU work (torch.profiler schedule(wait=1, warmup=2, active=3); "
                   + ("rocprofv3 --collection-period)" if program.api == "HIP" else
                      "nsys --capture-range=cudaProfilerApi)")))
    report.findings.append(_program_finding(program))
    return report


def api_only_finding(trace: Trace) -> Finding | None:
    """For an input of GPU runtime calls and no GPU work (rocprof's HIP API statistics or
    trace, an API-only capture): the host side of a GPU program, not a CPU profile. Names
    the calls that take most host time, from their durations (a statistics file's rows
    total their calls)."""
    ev = trace.events
    api = ev.filter(pc.and_(is_in(ev["category"], ("api.runtime", "api.driver")),
                            pc.is_valid(ev["dur_ns"])))
    if not api.num_rows:
        return None
    s = grouped_stats(api["name"], api["dur_ns"], api["count"])
    total = float(np.sum(s["total"]))
    if not total:
        return None
    top = [(str(k), percent(float(t), total)) for k, t in zip(s["key"][:3], s["total"][:3],
                                                               strict=True)]
    waits = [(k, pct) for k, pct in top if _blocks(k)]
    program = classify(trace)
    hip = program.api == "HIP"
    evidence: dict[str, Any] = {"verdict": "none", "api_calls": int(np.sum(s["count"])),
                                "api_time_ns": int(total),
                                "top_calls": ", ".join(f"{k} {pct}%" for k, pct in top),
                                **program.grounds(),
                                "program": f"{program.framework or program.api or 'GPU'} "
                                           "program (its GPU work not in this input)"}
    return Finding(
        "info", f"no GPU work in this input, only the host's GPU API calls: {top[0][0]} takes "
        f"{top[0][1]}% of their time", evidence,
        ("the host mostly waits in blocking calls (" + ", ".join(k for k, _ in waits)
         + "): the GPU work they wait for is what to profile; " if waits else "")
        + "record the GPU side too ("
        + ("rocprofv3 --kernel-trace --memory-copy-trace" if hip else "nsys --trace=cuda")
        + ") for a verdict; '-a summary' gives every call's totals")


def _blocks(name: str) -> bool:
    """Whether a runtime call blocks the host (activity's rules: synchronize calls, copies
    and memsets without ``Async``; a memset's target is not known without its GPU work)."""
    return bool(re.search(SYNC_API, name) or re.search(SYNC_MEMSET_API, name)
                or (re.search(SYNC_COPY_API, name) and "Async" not in name))


HOST_COPY_KINDS = ("HtoD", "DtoH")


def set_up_copies_ns(trace: Trace, gaps: Gaps) -> int:
    """The device's copy time before its first compute kernel, where the copies between host
    and device all come before that kernel: the GPU then computes on what was uploaded (a
    model's weights) and never copies again, so the uploads were loading, not the
    workload's transfers. 0 where any host-device copy starts at or after the first kernel
    (a program that uploads, computes and copies back is transfer work throughout)."""
    tl = gaps.timeline
    work = tl.work
    compute = work.cls == COMPUTE
    if not compute.any():
        return 0
    first = int(work.start[compute].min())
    memory = np.flatnonzero(work.cls == MEMORY)
    if not len(memory):
        return 0
    kinds = trace.events["copy_kind"].take(pa.array(work.row[memory], pa.int64()))
    host = is_in(kinds, HOST_COPY_KINDS).fill_null(False).to_numpy(zero_copy_only=False)
    if not host.any() or (work.start[memory][host] >= first).any():
        return 0
    return int(iv.covered_within(np.array([tl.start]), np.array([first]),
                                 tl.exposed_memory)[0])


def cause_costs(per_device: list[Gaps]) -> dict[str, int]:
    """ns per cause over all devices, and ``startup``; they sum to the devices' spans."""
    costs = dict.fromkeys((*CAUSES, "startup"), 0)
    for g in per_device:
        parts = g.timeline.shares()
        costs["compute"] += parts["compute"]
        costs["communication"] += parts["communication"]
        costs["transfer"] += parts["memory"]
        idle = g.by_cause()
        for cause in ("sync", "launch", "cpu"):
            costs[cause] += idle[cause]
        costs["communication"] += idle["communication"]  # waiting in host exchange calls
        costs["idle-other"] += idle["queued"] + idle["unknown"]
        costs["startup"] += idle["startup"]
    return costs


def decide(costs: dict[str, int], span: int) -> tuple[str, list[tuple[str, int]]]:
    """The verdict and the causes ranked by cost."""
    ranked = sorted(costs.items(), key=lambda kv: (-kv[1], CAUSES.index(kv[0])))
    (top, top_ns), (_, second_ns) = ranked[0], ranked[1]
    if top_ns * 2 >= span or top_ns >= 1.5 * second_ns:
        return top, ranked
    return "mixed", ranked


# A host-device copy this many times its kind's median copy waited for something else.
STALLED_COPY = 10
ELEMENTWISE = r"(?i)elementwise|vectorized_|unrolled_|triton_poi_"
# PyTorch's fill kernels (torch.zeros/ones/full, Tensor.fill_/zero_): elementwise by name, but
# a fill reads nothing, so there is no producer to fuse it into; what saves it is not filling.
FILL = r"FillFunctor|fill_kernel"
LAYOUT = r"(?i)nchwToNhwc|nhwcToNchw"
FP32_NO_TENSOR_CORE = r"(?i)sgemm|gemm\w*_ffma|_ffma\w*gemm|scudnn|gcgemm|_cgemm"
FP64 = r"(?i)dgemm|fp64|double|d884|dmma"
# Matrix multiplications and convolutions (the work reduced precision speeds up), by kernel
# name: BLAS and CUTLASS GEMMs, cuDNN/MIOpen convolutions, Tensile (Cijk_), Triton mm templates.
MATMUL_CONV = (r"(?i)gemm|matmul|mat_?mul|cutlass|cublas|nvjet|xmma|Cijk_|convol|conv_?[123]d|"
               r"conv_(fwd|bwd|wrw)|naive_conv|winograd|wgrad|dgrad|fprop|triton_tem_|bmm|_mm_|"
               r"hmma|wmma|mfma")
# GPUs whose FP64 rate is a half or a third of FP32 (data-center parts); others are 1/32-1/64.
# GPUs that share one physical memory with the CPU (an APU, a Jetson module, GB10): a
# host-device copy there moves data from one place of the same memory to another.
SHARED_MEMORY_GPU = r"MI300A|Jetson|\bOrin\b|Xavier|Tegra|\bThor\b|\bGB10\b"
FULL_FP64 = r"(?i)A100|A800|H100|H200|H800|H20\b|GH200|B200|B100|GB200|V100|P100|MI\d{3}|Instinct"
LARGE_COPY = 16 << 20
# Under a start-up verdict, a steady state shorter than this (ms) gets no cause findings.
STEADY_MIN_MS = 1.0
CONTEXT_GAPS = 50  # the largest gaps of a cause whose host context is read for the fixes


class Evidence:
    """The numbers behind each cause, computed on demand."""

    def __init__(self, trace: Trace, activity: Activity, per_device: list[Gaps],
                 tiny_us: float) -> None:
        self.trace, self.activity, self.per_device = trace, activity, per_device
        self.tiny_ns = int(tiny_us * 1000)

    def of(self, cause: str) -> dict[str, Any]:
        """Evidence numbers for ``cause``."""
        method = getattr(self, "_" + cause.replace("-", "_"))
        return method()

    def _work(self, cls: int | None = None) -> tuple[pa.ChunkedArray, np.ndarray]:
        rows = [w.row if cls is None else w.row[w.cls == cls] for w in self.activity.devices]
        r = np.concatenate(rows) if rows else np.empty(0, np.int64)
        return self.activity.events["name"].take(pa.array(r)), r

    def _compute(self) -> dict[str, Any]:
        names, rows = self._work(0)
        dur = self.activity.events["dur_ns"].take(pa.array(rows))
        s = grouped_stats(names, dur)
        total = int(np.sum(s["total"])) if len(s["total"]) else 0
        out: dict[str, Any] = {"kernels": int(np.sum(s["count"])) if len(s["count"]) else 0}
        top = min(3, len(s["key"]))
        for i, name in enumerate(short_names([str(k) for k in s["key"][:top]])):
            out[f"top{i + 1}"] = f"{name} ({percent(s['total'][i], total)}%)"
        return out

    def _communication(self) -> dict[str, Any]:
        comm = sum(iv.total(g.timeline.communication) for g in self.per_device)
        exposed = sum(iv.total(g.timeline.exposed_communication) for g in self.per_device)
        # The cause's time first, in its two parts (exposed collectives, and GPU idle while
        # the host exchanged), then all collective time, overlapped or not.
        out: dict[str, Any] = {"exposed_ns": exposed}
        waited = self._host_exchange_ns()
        if waited:
            out["gpu_idle_in_host_exchange_ns"] = waited
        out["all_communication_ns"] = comm
        out["overlap_pct"] = percent(comm - exposed, comm)
        return out

    def _host_exchange_calls(self) -> str:
        """The two exchange calls (gaps.HOST_COMMUNICATION) with the most host time."""
        a = self.activity
        rows = np.flatnonzero(a.category.is_in(HOST_CONTEXT)
                              & a.name_codes.matches(HOST_COMMUNICATION))
        if not len(rows):
            return ""
        take = pa.array(rows)
        s = grouped_stats(a.events["name"].take(take), a.events["dur_ns"].take(take))
        return ", ".join(str(k) for k in s["key"][:2])

    def _host_exchange_ns(self) -> int:
        """GPU idle ns in gaps the host spent in exchange calls (MPI, collectives)."""
        code = GAP_CAUSES.index("communication")
        return sum(int(g.dur[g.cause == code].sum()) for g in self.per_device)

    def _transfer(self) -> dict[str, Any]:
        """Copies per kind and host memory kind, each with its own bandwidth (a mixed figure
        would average a PCIe link with HBM)."""
        out: dict[str, Any] = {}
        table = self._copy_table
        for row in table.to_pylist():
            what = row["kind"] if row["memory"] in ("", "Device") else \
                f"{row['kind']} {row['memory'].lower()}"
            # No size recorded (rocprof's copy kernels) is not 0 B moved at 0 GB/s.
            size = format_bytes(row["bytes"]) if row["sized"] else "size not recorded"
            rate = row["bytes"] / row["time"] if row["time"] and row["sized"] else None
            # GB/s is bytes per ns; a few bytes' copies read better in MB/s than as 0.0 GB/s.
            bandwidth = "" if rate is None else f", {rate:.1f} GB/s" if rate >= 0.1 else \
                f", {rate * 1000:.2g} MB/s"
            # "5 copies: 336 MB": the size is their total ("5 × 336 MB" read as per copy).
            noun = ("memset", "memsets") if row["kind"] == "memset" else ("copy", "copies")
            out[what] = (f"{row['count']:,} {noun[row['count'] != 1]}: {size} in "
                         f"{format_ns(row['time'])}{bandwidth}")
        return out

    @functools.cached_property
    def _copy_table(self) -> pa.Table:
        """Memory operations grouped by copy kind and host memory kind (computed once: the
        transfer evidence and the facts behind the fixes both read it)."""
        ev = self.activity.events
        _, rows = self._work(MEMORY)
        take = pa.array(rows, pa.int64())
        src = ev["src_kind"].take(take).cast(pa.string())
        dst = ev["dst_kind"].take(take).cast(pa.string())
        memory = pc.coalesce(pc.if_else(pc.equal(src, "Device"), dst, src), pa.scalar(""))
        # Without a copy kind, the name says: memsets and fills (gpu.memset rows, ROCm's
        # __amd_rocclr_fillBuffer) set memory, the rest (__amd_rocclr_copyBuffer, DMA) copy it
        # in a direction the trace does not record.
        names = ev["name"].take(take).cast(pa.string())
        sets = pc.or_(pc.equal(ev["category"].take(take).cast(pa.string()), "gpu.memset"),
                      pc.match_substring_regex(names, SETS_MEMORY)).fill_null(False)
        kind = pc.coalesce(ev["copy_kind"].take(take).cast(pa.string()),
                           pc.if_else(sets, "memset", "copy"))
        table = pa.table({
            "kind": kind,
            "memory": memory, "bytes": ev["bytes"].take(take).fill_null(0),
            "time": ev["dur_ns"].take(take).fill_null(0)})
        table = table.append_column("sized", ev["bytes"].take(take).is_valid())
        grouped = table.group_by(["kind", "memory"], use_threads=False).aggregate(
            [("bytes", "count"), ("bytes", "sum"), ("time", "sum"), ("sized", "any")])
        grouped = grouped.rename_columns(["kind", "memory", "count", "bytes", "time", "sized"])
        return grouped.sort_by([("time", "descending"), ("kind", "ascending")])

    def _sync(self) -> dict[str, Any]:
        calls = self.activity.calls
        api = sync_api_calls(self.activity)
        sync_idx = [g.cause == GAP_CAUSES.index("sync") for g in self.per_device]
        return {"sync_calls": int(api.sum()),
                "sync_call_ns": int((calls.end - calls.start)[api].sum()),
                "host_reads": host_reads(self.activity),
                "gaps_after_sync": int(sum(s.sum() for s in sync_idx))}

    def _gap_evidence(self, cause: str) -> dict[str, Any]:
        code = GAP_CAUSES.index(cause)
        count, largest, where = 0, 0, (None, -1)
        for g in self.per_device:
            sel = np.flatnonzero(g.cause == code)
            count += len(sel)
            if len(sel):
                i = sel[np.argmax(g.dur[sel])]
                if g.dur[i] > largest:
                    largest, where = int(g.dur[i]), (g, int(i))
        out: dict[str, Any] = {"gaps": count, "largest_gap_ns": largest}
        if where[0] is not None:
            out["host_during_largest"] = host_context(self.trace, where[0], where[1])
        return out

    def _launch(self) -> dict[str, Any]:
        return self._gap_evidence("launch") | self._launch_rates

    @functools.cached_property
    def _launch_rates(self) -> dict[str, Any]:
        """How the kernels compare with their launch calls, and the launch and execution
        rates of the device with the most kernels."""
        stats = [launch_stats(self.activity, w, self.tiny_ns) for w in self.activity.devices]
        if not stats:
            return {}
        kernels = sum(s.kernels for s in stats)
        best = max(stats, key=lambda s: s.kernels)
        return {"tiny_kernel_pct": percent(sum(s.tiny for s in stats), kernels),
                "shorter_than_launch_pct": percent(sum(s.short for s in stats),
                                                   sum(s.linked for s in stats)),
                "launches_per_s": round(best.launch_rate),
                "gpu_can_run_per_s": round(best.exec_rate)}

    def _cpu(self) -> dict[str, Any]:
        out = self._gap_evidence("cpu")
        cpu_ns = sum(int(g.dur[g.cause == GAP_CAUSES.index("cpu")].sum())
                     for g in self.per_device)
        if self._cpu_gap_exchange_ns * 100 >= cpu_ns:  # 1% or more of the cpu gaps
            out["in_exchange_calls_ns"] = self._cpu_gap_exchange_ns
        if self._gap_samples:
            out["cpu_samples_in_gaps"] = self._gap_samples.describe()
        return out

    @functools.cached_property
    def _cpu_gap_exchange_ns(self) -> int:
        """The ns of the cpu gaps the launching processes spent in exchange calls (MPI,
        collectives: gaps.HOST_COMMUNICATION), where under half of a gap each (a gap mostly
        in them is a communication gap)."""
        exchange = host_calls(self.activity, HOST_COMMUNICATION)
        calls, code, total = self.activity.calls, GAP_CAUSES.index("cpu"), 0
        for g in self.per_device:
            sel = g.cause == code
            work = g.timeline.work
            pids = np.unique(calls.pid[work.api[work.api >= 0]])
            covered = covered_by(exchange, work.source_code, pids, g.lo[sel], g.hi[sel])
            total += int(covered.sum()) if covered is not None else 0
        return total

    @functools.cached_property
    def _gap_samples(self) -> GapSamples | None:
        """The CPU samples of the launching threads in the cpu gaps, where there are any."""
        return samples_in_gaps(self.trace, self.activity, self.per_device,
                               GAP_CAUSES.index("cpu"))

    def _startup(self) -> dict[str, Any]:
        return self._gap_evidence("startup")

    def facts(self) -> Facts:
        """What the choice of fixes depends on (see ``advice.Facts``)."""
        f = Facts()
        self._compute_facts(f)
        self._gap_facts(f)
        self._transfer_facts(f)
        self._communication_facts(f)
        idle = self._idle_other()
        f.unattributed_idle_ns = idle["unattributed_ns"]
        f.other_idle_ns = idle["queued_ns"] + idle["unattributed_ns"]
        # Copies and no kernel at all: the trace was recorded without kernel tracing.
        f.no_kernels = not self.activity.category.is_in(("gpu.kernel", "gpu.graph")).any()
        self._queued_facts(f)
        calls = self.activity.calls
        api = sync_api_calls(self.activity)
        if api.any():
            names = self.activity.events["name"].take(pa.array(calls.row[api])).cast(
                pa.string()).to_numpy(zero_copy_only=False)
            values, counts = np.unique(names.astype(str), return_counts=True)
            f.sync_apis = dict(zip(values.tolist(), counts.tolist(), strict=True))
        f.host_reads = host_reads(self.activity)
        f.sync_sources = sync_sources(self.activity, api)
        f.steps = step_ranges(self.trace).num_rows if self.activity.has_steps else 0
        f.optimizer = optimizer_implementation(self.trace)
        ops = self.activity.category.is_in(("host.op",))
        names = self.activity.name_codes
        f.attention_calls = int((ops & names.matches(r"^aten::scaled_dot_product_attention$"))
                                .sum())
        f.cat_calls = int((ops & names.matches(r"^aten::cat$")).sum())
        return f

    def launch_facts(self, f: Facts) -> None:
        """The launch rates behind the launch fixes (computed only where launch costs)."""
        rates = self._launch_rates
        f.shorter_than_launch_pct = rates.get("shorter_than_launch_pct")
        f.launches_per_s = rates.get("launches_per_s", 0)
        f.gpu_can_run_per_s = rates.get("gpu_can_run_per_s", 0)
        per_device = [launch_gaps_to_copies(self.activity, g) for g in self.per_device]
        gaps, gaps_ns, copies, copies_ns = (sum(x) for x in zip(*per_device, strict=True)) \
            if per_device else (0, 0, 0, 0)
        f.launch_gaps, f.launch_gaps_to_copies = (gaps, gaps_ns), (copies, copies_ns)

    def _compute_facts(self, f: Facts) -> None:
        names, rows = self._work(COMPUTE)
        if not len(rows):
            return
        dur = self.activity.events["dur_ns"].take(pa.array(rows)).fill_null(0).to_numpy()
        f.compute_ns = int(dur.sum())  # what copies or collectives could hide behind
        total = float(dur.sum()) or 1.0

        def hits(pattern: str) -> np.ndarray:
            return matches(names, pattern).to_numpy()  # per distinct name, not per kernel

        def share(pattern: str | np.ndarray) -> float:
            hit = hits(pattern) if isinstance(pattern, str) else pattern
            return round(100.0 * float(dur[hit].sum()) / total, 1)

        s = grouped_stats(names, pa.array(dur))
        if len(s["key"]):
            f.top_kernel = short_name(s["key"][0])
            f.top_kernel_pct = percent(s["total"][0], total)
            f.top5_kernels_pct = percent(float(np.sum(s["total"][:5])), total)
        fill = hits(FILL)
        f.fill_pct = share(fill)
        f.elementwise_pct = share(hits(ELEMENTWISE) & ~fill)
        f.layout_pct = share(LAYOUT)
        f.fp32_no_tensor_core_pct = share(FP32_NO_TENSOR_CORE)
        f.fp64_pct = share(FP64)
        f.matmul_conv_pct = share(MATMUL_CONV)
        if "compute_capability" in self.trace.devices.column_names:
            ccs = []
            for cc in self.trace.devices.column("compute_capability").to_pylist():
                try:
                    ccs.append(float(cc))
                except (TypeError, ValueError):
                    continue
            f.compute_capability = min(ccs) if ccs else None
        f.consumer_gpu = self._every_gpu(lambda name: not re.search(FULL_FP64, name))

    def _communication_facts(self, f: Facts) -> None:
        f.host_exchange_ns = self._host_exchange_ns()
        if f.host_exchange_ns:
            f.host_exchange_calls = self._host_exchange_calls()
        durations = []
        for g in self.per_device:
            work = g.timeline.work
            at = np.flatnonzero(work.cls == COMMUNICATION)
            if not len(at):
                continue
            dur = work.end[at] - work.start[at]
            durations.append(dur)
            kinds = kernel_kinds(self.activity, g.timeline, at)
            for kind in np.unique(kinds).tolist():
                f.collective_ns[kind] = f.collective_ns.get(kind, 0) + int(dur[kinds == kind]
                                                                           .sum())
        if durations:
            dur = np.concatenate(durations)
            median = int(np.median(dur))
            long = dur[dur >= WAITING_RATIO * max(median, 1)]
            f.median_collective_ns, f.max_collective_ns = median, int(dur.max())
            f.long_collectives, f.long_collective_ns = len(long), int(long.sum())

    def _queued_durations(self) -> np.ndarray:
        code = GAP_CAUSES.index("queued")
        return np.concatenate([g.dur[g.cause == code] for g in self.per_device]
                              or [np.empty(0, np.int64)])

    def _queued_facts(self, f: Facts) -> None:
        """Whether the largest queued gap waited on host work of another thread; how many
        queued gaps there are and their median length."""
        durs = self._queued_durations()
        if len(durs):
            f.queued_gaps, f.median_queued_gap_ns = len(durs), int(np.median(durs))
        code, best = GAP_CAUSES.index("queued"), None
        for g in self.per_device:
            sel = np.flatnonzero(g.cause == code)
            if len(sel):
                i = int(sel[np.argmax(g.dur[sel])])
                if best is None or g.dur[i] > best[0].dur[best[1]]:
                    best = (g, i)
        context = gap_context(self.trace, *best) if best else None
        if context is not None and context.launched_after is not None:
            f.queued_place = place_of(context.innermost, context.path)
            f.queued_example = context.describe(2)

    def _gap_facts(self, f: Facts) -> None:
        cpu = GAP_CAUSES.index("cpu")
        for g in self.per_device:
            f.cpu_gaps += int((g.cause == cpu).sum())
            f.cpu_gap_ns += int(g.dur[g.cause == cpu].sum())
        if f.cpu_gap_ns and self._gap_samples:
            f.gap_samples = self._gap_samples.describe()
        if f.cpu_gap_ns and self._cpu_gap_exchange_ns:
            f.cpu_gap_exchange_ns = self._cpu_gap_exchange_ns
            f.host_exchange_calls = f.host_exchange_calls or self._host_exchange_calls()
        # The CONTEXT_GAPS largest cpu and launch gaps; ties keep the order cause, device, gap.
        durs, owners, index = [], [], []
        for code in (GAP_CAUSES.index("cpu"), GAP_CAUSES.index("launch")):
            for d, g in enumerate(self.per_device):
                sel = np.flatnonzero(g.cause == code)
                durs.append(g.dur[sel])
                owners.append(np.full(len(sel), d))
                index.append(sel)
        if not durs:
            return
        dur_all = np.concatenate(durs)
        top = np.argsort(-dur_all, kind="stable")[:CONTEXT_GAPS]
        owner, gap = np.concatenate(owners)[top], np.concatenate(index)[top]
        for dur, d, i in zip(dur_all[top].tolist(), owner.tolist(), gap.tolist(), strict=True):
            g = self.per_device[d]
            context = gap_context(self.trace, g, i)
            if context is None:
                continue
            place = "writing output" if context.writing else \
                place_of(context.innermost, context.path)
            f.gap_places[place] = f.gap_places.get(place, 0) + dur
            f.gap_examples.setdefault(place, context.describe(2))
            if g.cause[i] == cpu:
                for name, ns in host_ops_during(self.trace, g, i).items():
                    f.gap_ops[name] = f.gap_ops.get(name, 0) + ns

    @staticmethod
    def _copy_medians(f: Facts, ev: pa.Table, rows: np.ndarray) -> None:
        """Per host-device copy kind: the median copy's time, and the copies that take
        ``STALLED_COPY`` times that or more (count, ns)."""
        take = pa.array(rows, pa.int64())
        kind = ev["copy_kind"].take(take).cast(pa.string()).fill_null("").to_numpy(
            zero_copy_only=False)
        dur = ev["dur_ns"].take(take).fill_null(0).to_numpy()
        for name in ("HtoD", "DtoH"):
            mine = dur[kind == name]
            if not len(mine):
                continue
            median = int(np.median(mine))
            stalled = mine[mine >= STALLED_COPY * max(median, 1)]
            f.copy_medians[name] = median
            f.stalled_copies[name] = (len(stalled), int(stalled.sum()))

    def _every_gpu(self, test: Callable[[str], Any]) -> str:
        """The first GPU's name when every named GPU of the trace passes ``test``, else ''."""
        devices = self.trace.devices
        gpus = [n for n in devices.column("name").to_pylist() if n] \
            if "name" in devices.column_names else []
        return gpus[0] if gpus and all(test(n) for n in gpus) else ""

    def _transfer_facts(self, f: Facts) -> None:
        f.shared_memory_gpu = self._every_gpu(lambda name: re.search(SHARED_MEMORY_GPU, name))
        ev = self.activity.events
        _, rows = self._work(MEMORY)
        if not len(rows):
            return
        copies = self._copy_table.to_pylist()
        copy_time = sum(r["time"] for r in copies if r["kind"] != "memset") or 1
        for r in copies:
            if r["kind"] == "memset":
                continue
            f.copy_kinds[r["kind"]] = f.copy_kinds.get(r["kind"], 0) + r["bytes"]
            if r["memory"] == "Pageable":
                f.pageable_copies += r["count"]
                f.pageable_time_pct += 100.0 * r["time"] / copy_time
            elif r["memory"] == "Pinned":
                f.pinned_copies += r["count"]
            if r["kind"] == "HtoD" and r["count"] and r["bytes"] / r["count"] >= LARGE_COPY:
                f.large_htod = True
            if r["kind"] in ("HtoD", "DtoH"):
                f.host_copy_ns += int(r["time"])
                count, time = f.copy_counts.get(r["kind"], (0, 0))
                f.copy_counts[r["kind"]] = (count + r["count"], time + int(r["time"]))
        self._copy_medians(f, ev, rows)
        f.one_copy_engine = self._one_copy_engine()
        # Copies on a stream that also runs compute kernels serialize with them.
        stream = ev["stream"].fill_null(-1).to_numpy().astype(np.int64)
        device = ev["device"].fill_null(-1).to_numpy().astype(np.int64)
        _, compute_rows = self._work(COMPUTE)
        busy = np.unique(device[compute_rows] * (1 << 32) + stream[compute_rows])
        key = device[rows] * (1 << 32) + stream[rows]
        on = np.isin(key, busy)
        is_copy = pc.is_valid(ev["copy_kind"].take(pa.array(rows))).to_numpy(
            zero_copy_only=False)
        dur = ev["dur_ns"].take(pa.array(rows)).fill_null(0).to_numpy()
        copy_ns = float(dur[is_copy].sum())
        if copy_ns:
            f.copies_on_compute_stream_pct = round(
                100.0 * float(dur[on & is_copy].sum()) / copy_ns, 1)

    def _one_copy_engine(self) -> bool:
        """Whether every GPU that runs memory work has one copy engine, as its input's
        reader says (``metadata["copy_engines"]``: nsys' asyncEngines per device)."""
        sources = self.trace.metadata.get("sources", {})
        counts = []
        for work in self.activity.devices:
            if not (work.cls == MEMORY).any():
                continue
            meta = sources.get(work.source)
            engines = meta.get("copy_engines") if isinstance(meta, dict) else None
            counts.append(engines.get(str(work.device)) if isinstance(engines, dict) else None)
        return bool(counts) and all(c == 1 for c in counts)

    def _idle_other(self) -> dict[str, Any]:
        queued = sum(int(g.dur[g.cause == GAP_CAUSES.index("queued")].sum())
                     for g in self.per_device)
        unknown = sum(int(g.dur[g.cause == GAP_CAUSES.index("unknown")].sum())
                      for g in self.per_device)
        out: dict[str, Any] = {"queued_ns": queued, "unattributed_ns": unknown}
        if queued:  # what held the largest queued gap: often host work on another thread
            durs = self._queued_durations()
            out["queued_gaps"] = len(durs)
            out["median_queued_gap_ns"] = int(np.median(durs))
            largest = self._gap_evidence("queued")
            out["largest_queued_gap_ns"] = largest["largest_gap_ns"]
            if "host_during_largest" in largest:
                out["host_during_largest"] = largest["host_during_largest"]
        return out
