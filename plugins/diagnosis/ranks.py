"""The ``ranks`` analyzer: a distributed run seen across its ranks.

A rank is one GPU's timeline (one device of one input). Its rank number comes from the trace:
the launching process's ``rank`` (Kineto ``distributedInfo``), else a ``RANK n`` / ``rank-n``
in the device's or process's name (TraceLens' merged traces), else in the input's file name,
else the input order; the report says which rule gave it.

Per rank: span, compute, exposed communication, memory and idle (the ``breakdown`` split),
and the time its communication kernels run. Collectives are matched across ranks by their
order, by the toolkit's one rule (``collective_kernels``, ``match_by_order``, which the
writers' alignment of ranks uses too): the i-th collective kernel of each rank is the same
collective (NCCL and RCCL issue collectives in the same order on every rank of a
communicator). For each matched collective
the *arrival spread* is the latest start minus the earliest, and each rank's *lateness* its
start minus the earliest. The rank that arrives last at most collectives is a **straggler**
when its total lateness is a robust outlier among the ranks (more than ``STRAGGLER_Z`` median
absolute deviations above the median of the other ranks, with MAD scaled by 1.4826 to estimate
a standard deviation; three ranks at least) and at least ``STRAGGLER_MIN_PCT`` % of its span;
the *wait it causes* is what the other ranks spend, summed over the collectives, between their
own start and its start.

Start times of ranks recorded on different hosts are compared as recorded: their clocks may
be offset (Kineto writes the system clock; nsys and rocprof their own), so the spread of
inputs from different files is only as good as the hosts' clock sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import NO_GPU, Activity
from tracekit.plugins.diagnosis.breakdown import step_windows
from tracekit.plugins.diagnosis.cpu_ranks import cpu_ranks_table
from tracekit.plugins.diagnosis.timeline import DeviceTimeline, device_timelines
from tracekit.toolkit import (
    STEPS_HELP,
    WINDOW_HELP,
    collective_kernels,
    end_offsets,
    format_ns,
    match_by_order,
    not_one_run,
    percent,
    rank_in_name,
    report_table,
    restrict,
    step_ranges,
    world_size,
)
from tracekit.toolkit import intervals as iv

STRAGGLER_Z = 3.0
STRAGGLER_MIN_RANKS = 3  # with two, neither is an outlier of the other
STRAGGLER_MIN_PCT = 1.0
SLOWER_COMPUTE = 1.1  # the straggler's compute over the others' median: its GPU work is more
# Ends of one collective on different ranks, clocks aligned, at most this far apart (the
# merged 4-rank ROCm run: within 3.4 ms; collectives paired wrongly: 14 ms and more).
END_AGREEMENT_NS = 5_000_000
MAD_TO_SIGMA = 1.4826


@dataclass
class Rank:
    """What the cross-rank analysis needs of one rank: small, so that it can be computed
    where the rank's trace was read and sent back (``summarize``)."""

    number: int
    rule: str
    source: str
    device: int
    span: int
    shares: dict[str, int]  # compute, communication (exposed), memory, idle: ns
    comm_kernel_time: int
    comm_start: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    comm_end: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    world_size: int | None = None
    step_ns: list[int] = field(default_factory=list)  # its steps' lengths on its GPU

    @property
    def idle_pct(self) -> float:
        return percent(self.shares["idle"], self.span)


@dataclass
class Skew:
    """Collectives matched across ranks by order, kept where their ends agree."""

    matched: int
    spread: np.ndarray  # per collective: latest start - earliest start
    lateness: np.ndarray  # [rank, collective]: start - earliest start
    counts: list[int]  # communication kernels per rank
    paired: int = 0  # collectives matched by order, before the check of their ends
    # [rank, collective]: how long its kernel ran, the most it can have waited in it (None:
    # not known, no cap)
    duration: np.ndarray | None = None


def ranks_of(trace: Trace) -> list[Rank]:
    """Every GPU timeline of ``trace`` as a rank, numbered by the first rule that applies
    (see ``number_ranks`` for inputs summarized apart)."""
    return number_ranks(summarize(trace))


def summarize(trace: Trace) -> list[Rank]:
    """The ranks of one input (or of several read together), numbered as far as the trace
    says; ``number_ranks`` settles the numbers once all inputs are in."""
    activity = Activity.of(trace)
    timelines = device_timelines(trace)
    proc = trace.processes.to_pylist()
    rank_of_pid = {(p["source"], p["pid"]): p["rank"] for p in proc if p["rank"] is not None}
    name_of_pid = {(p["source"], p["pid"]): p["name"] or "" for p in proc}
    name_of_device = {(d["source"], d["device"]): d["name"] or ""
                      for d in trace.devices.to_pylist()}
    collective = collective_kernels(trace.events)
    step_rows = step_ranges(trace).to_pydict()
    out: list[Rank] = []
    for tl in timelines:
        work = tl.work
        api = work.api[work.api >= 0]
        pids = np.unique(activity.calls.pid[api]).tolist() if len(api) else []
        number, rule = None, "input order"
        ranked = [rank_of_pid[(work.source, p)] for p in pids if (work.source, p) in rank_of_pid]
        if len(set(ranked)) == 1:
            number, rule = int(ranked[0]), "the trace's distributed info"
        if number is None:
            for text, what in ([(name_of_device.get((work.source, work.device), ""),
                                 "the device name")]
                               + [(name_of_pid.get((work.source, p), ""), "the process name")
                                  for p in pids]
                               + [(work.source, "the file name")]):
                number = rank_in_name(text)
                if number is not None:
                    rule = what
                    break
        out.append(Rank(-1 if number is None else number, rule, work.source, work.device, tl.span,
                        tl.shares(), iv.total(tl.communication),
                        work.start[collective[work.row]],
                        work.end[collective[work.row]],
                        _world_size_of(trace, work.source),
                        _gpu_steps(activity, tl, step_rows, pids)))
    return out


def _gpu_steps(activity: Activity, tl: DeviceTimeline, step_rows: dict[str, list[Any]],
               pids: list[int]) -> list[int]:
    """The length of each step of the timeline's processes on its GPU (``step_windows``: to
    the end of the work it launched), not its host range: a host that runs ahead ends its
    step ranges long before their work runs (pinned_overlap: 1.37 ms host, 13 ms on the
    GPU)."""
    mine = sorted((s, e) for src, pid, s, e in zip(
        step_rows["source"], step_rows["pid"], step_rows["start"], step_rows["end"],
        strict=True) if src == tl.work.source and pid in pids)
    if not mine:
        return []
    start, end = (np.array(x, dtype=np.int64) for x in zip(*mine, strict=True))
    lo, hi = step_windows(activity, tl, start, end)
    return (hi - lo).tolist()


def _world_size_of(trace: Trace, source: str) -> int | None:
    """The world size the input ``source`` declares (Kineto ``distributedInfo``), else the
    trace's."""
    info = trace.metadata.get("sources", {}).get(source)
    distributed = info.get("distributed") if isinstance(info, dict) else None
    size = distributed.get("world_size") if isinstance(distributed, dict) else None
    return size if type(size) is int and size > 0 else world_size(trace)


def number_ranks(ranks: list[Rank]) -> list[Rank]:
    """The ranks sorted by number; input order where the rules leave numbers unknown or
    the same for two ranks."""
    out = list(ranks)
    numbers = [r.number for r in out]
    if -1 in numbers or len(set(numbers)) != len(numbers):  # not told apart
        for order, r in enumerate(out):
            r.number, r.rule = order, "input order"
    return sorted(out, key=lambda r: r.number)


def collective_skew(ranks: list[Rank]) -> Skew | None:
    """Match the communication kernels of the ranks by order (up to the fewest), and keep
    the matches whose ends agree: a collective ends on every rank at once, once the last has
    arrived, so ends more than ``END_AGREEMENT_NS`` apart (after the ranks' clocks are put
    on one another's by the median end offset) are different collectives paired by order, as
    in sampled or cut traces."""
    counts = [len(r.comm_start) for r in ranks]
    starts = match_by_order([r.comm_start for r in ranks])
    paired = starts.shape[1]
    if len(ranks) < 2 or paired == 0:
        return None
    ends = match_by_order([r.comm_end if len(r.comm_end) == len(r.comm_start) else r.comm_start
                           for r in ranks])
    aligned = ends + end_offsets(ends)[:, None]
    agree = aligned.max(axis=0) - aligned.min(axis=0) <= END_AGREEMENT_NS
    timed = all(len(r.comm_end) == len(r.comm_start) for r in ranks)
    duration = (ends - starts)[:, agree] if timed else None
    starts = starts[:, agree]
    if not starts.shape[1]:
        return Skew(0, np.empty(0, np.int64), starts, counts, paired)
    earliest = starts.min(axis=0)
    return Skew(starts.shape[1], starts.max(axis=0) - earliest, starts - earliest, counts,
                paired, duration)


def straggler(ranks: list[Rank], skew: Skew) -> dict[str, Any] | None:
    """The straggler's evidence, or None when no rank's lateness stands out."""
    if len(ranks) < STRAGGLER_MIN_RANKS:
        return None
    late = skew.lateness.sum(axis=1)
    worst = int(np.argmax(late))
    others = np.delete(late, worst)
    median = float(np.median(others))
    mad = float(np.median(np.abs(others - median))) * MAD_TO_SIGMA
    span = ranks[worst].span
    stands_out = late[worst] > median + STRAGGLER_Z * max(mad, 1.0) and \
        late[worst] * 100 >= span * STRAGGLER_MIN_PCT
    if not stands_out:
        return None
    mine = skew.lateness[worst]
    # Last where strictly later than every other rank (a tie is nobody's lateness).
    last = mine > np.delete(skew.lateness, worst, axis=0).max(axis=0)
    caused = np.clip(mine[None, :] - skew.lateness, 0, None)
    if skew.duration is not None:
        # A rank waits inside its own collective kernel: never longer than that ran.
        caused = np.minimum(caused, np.clip(skew.duration, 0, None))
    caused[worst] = 0
    rank = ranks[worst]
    # Each figure beside the same figure of the median other rank: totals, then per
    # collective.
    others_per_collective = np.median(np.delete(skew.lateness, worst, axis=0), axis=1)
    return {"rank": rank.number, "ranks": len(ranks), "last_at": int(last.sum()),
            "collectives": skew.matched,
            "lateness_ns": int(late[worst]), "others_lateness_ns": int(median),
            "median_lateness_ns": int(np.median(mine)),
            "others_median_lateness_ns": int(np.median(others_per_collective)),
            "wait_caused_ns": int(caused.sum()),
            "idle_pct": rank.idle_pct,
            "compute_ns": rank.shares["compute"],
            "compute_vs_others": round(rank.shares["compute"] / float(np.median(
                [r.shares["compute"] for i, r in enumerate(ranks) if i != worst]) or 1), 3),
            "others_idle_pct": round(float(np.median(
                [r.idle_pct for i, r in enumerate(ranks) if i != worst])), 1)}


def straggler_finding(info: dict[str, Any]) -> Finding:
    """The straggler as a finding, with the wait it causes as its cost."""
    slow_host = info["idle_pct"] > info["others_idle_pct"] + 10
    # More GPU work than the others is the cause where it is there (its idle time then grows
    # too: its span does); else an idle GPU is a late host.
    if info["compute_vs_others"] < SLOWER_COMPUTE and slow_host:
        # Its GPU waits more than the others' do: the host is late, whatever its GPU work.
        fix = (f"its GPU is idle {info['idle_pct']}% of its span against "
               f"{info['others_idle_pct']}% on the others, with "
               f"{info['compute_vs_others']:g}× their compute: its host is slower (see its cpu "
               "gaps: '-a gaps'); check that host: CPU affinity, other processes, its data "
               "loading, a slower node")
    else:
        fix = (f"its GPU work takes longer than the others' ({info['compute_vs_others']:g}× "
               "their compute): balance its input (data shards, sequence lengths, embedding "
               "tables), or check its GPU (clocks, thermal throttling, a slower part)")
    others = info["ranks"] - 1
    return Finding(
        severity="critical" if info["last_at"] * 2 >= info["collectives"] else "warning",
        title=f"straggler: rank {info['rank']} arrives last at {info['last_at']} of "
              f"{info['collectives']} collectives; the other {others} ranks wait "
              f"{format_ns(info['wait_caused_ns'])} for it in all "
              f"({format_ns(info['wait_caused_ns'] // max(others, 1))} each)",
        evidence=dict(info),
        suggestion=f"make rank {info['rank']} as fast as the others: {fix}",
        cost_ns=info["wait_caused_ns"])


class RanksAnalyzer(tracekit.Analyzer):
    """Per-rank breakdown, collective skew and stragglers of a distributed run."""

    name = "ranks"
    description = "across ranks: per-rank breakdown, collective arrival skew, stragglers"
    # After the verdict, for every trace of several ranks.
    default_for = (tracekit.DefaultFor((tracekit.TraceKind.GPU_RANKS,), slot=1, rank=1),)
    # What summarize() reads: GPU work and the host calls that launched it (not args), and
    # the memsets' targets (a synchronous memset waits only on host memory).
    event_columns = frozenset({"kind", "category", "name", "ts_ns", "dur_ns", "pid", "tid",
                               "device", "stream", "correlation", "flow_id", "source",
                               "dst_kind"})

    @dataclass(frozen=True)
    class Options:
        window: str = field(default="", metadata={
            "help": WINDOW_HELP})
        steps: str = field(default="", metadata={
            "help": STEPS_HELP})

    def analyze(self, trace: Trace) -> Report:
        ranks = self.per_input(trace)
        # No GPU timeline: ranks that run on the CPU only, from the trace read whole.
        cpu = None if ranks else cpu_ranks_table(
            restrict(trace, self.options.window, self.options.steps))
        return self.combine([ranks], cpu)

    def per_input(self, trace: Trace) -> list[Rank]:
        """The ranks of one input, summarized where it was read."""
        return summarize(restrict(trace, self.options.window, self.options.steps))

    def combine(self, parts: list[list[Rank]],
                cpu_ranks: tuple[pa.Table, int] | None = None) -> Report:
        """The report of all inputs' ranks; ``cpu_ranks``: the table of CPU-only ranks and
        how many collectives it matched, where there is no GPU timeline."""
        report = Report(analyzer=self.name, title="Across ranks")
        every = [r for part in parts for r in part]
        odd = _not_one_run(every)
        ranks = number_ranks(every)
        if odd:
            report.findings.append(Finding(
                severity="warning", title=f"these inputs may not be ranks of one run: {odd}",
                evidence={"world_sizes": sorted({r.world_size for r in every
                                                 if r.world_size})},
                suggestion="give the ranks of one run (the same world size, each rank once); "
                           "to compare two runs, use -a diff"))
        if not ranks and cpu_ranks is not None:
            table, matched = cpu_ranks
            report.tables["cpu_ranks"] = table
            report.table_titles["cpu_ranks"] = (
                f"CPU-only ranks: time in collectives, arrival at {matched} collectives "
                "matched by order")
            report.notes.append("last_at: the collectives a rank reached last")
            report.notes.append("median_lateness: its start after the earliest rank's")
            report.notes.append("-a cpu says whom the others wait for, and why")
            return report
        if not ranks:
            # A rank here is one GPU timeline; the CPU report compares CPU-only processes.
            report.notes.append(f"{NO_GPU}: a rank here is one GPU's timeline; the CPU "
                                "report (-a cpu) compares CPU-only ranks by their time in "
                                "collectives and names a straggler")
            return report
        report.tables["ranks"] = _ranks_table(ranks)
        report.table_titles["ranks"] = "Per rank (one GPU each), first to last GPU activity"
        rules = sorted({r.rule for r in ranks})
        report.notes.append(f"rank numbers from {', '.join(rules)}")
        world = {r.world_size for r in ranks if r.world_size}
        if world and max(world) != len(ranks):
            report.notes.append(f"the run has {max(world)} ranks (distributedInfo.world_size); "
                                f"{len(ranks)} are in these inputs, so what is said of "
                                "stragglers and arrival is of these only")
        skew = collective_skew(ranks)
        if len(ranks) < 2:
            report.notes.append("one rank: nothing to compare")
            return report
        if skew is None:
            report.notes.append("no communication kernels to match across ranks")
            return report
        if len(set(skew.counts)) > 1:
            report.notes.append(f"ranks ran different numbers of communication kernels "
                                f"({', '.join(map(str, skew.counts))}): the first "
                                f"{skew.paired} of each are matched")
        if skew.matched < skew.paired:
            report.findings.append(Finding(
                severity="warning",
                title=f"the ranks' collectives do not line up: {skew.paired - skew.matched} of "
                      f"the {skew.paired} matched by order end more than "
                      f"{format_ns(END_AGREEMENT_NS)} apart",
                evidence={"paired": skew.paired, "ends_agree": skew.matched},
                suggestion="a collective ends on every rank at once, so these are different "
                           "collectives: the traces hold different parts of the run (sampled "
                           "or cut traces, or inputs of different runs); arrival is measured "
                           "on the collectives whose ends agree" if skew.matched else
                           "a collective ends on every rank at once, so these are different "
                           "collectives: the traces hold different parts of the run (sampled "
                           "or cut traces, or inputs of different runs); no arrival is "
                           "measured"))
        if not skew.matched:
            return report
        report.tables["skew"] = report_table([
            ("rank", "int", None, [r.number for r in ranks]),
            ("last_at", "int", None,
             [int((skew.lateness.argmax(axis=0) == i).sum()) for i in range(len(ranks))]),
            ("lateness", "int", "ns", skew.lateness.sum(axis=1).tolist()),
            ("median_lateness", "int", "ns",
             [int(v) for v in np.median(skew.lateness, axis=1)])])
        report.table_titles["skew"] = (f"Arrival at {skew.matched} matched collectives "
                                       "(lateness: start minus the earliest rank's start, "
                                       "summed over them; median_lateness: per collective)")
        info = straggler(ranks, skew)
        spread = skew.spread
        report.findings.append(Finding(
            severity="info", title=f"collective arrival spread: median "
            f"{format_ns(int(np.median(spread)))}, largest {format_ns(int(spread.max()))} over "
            f"{skew.matched} collectives",
            evidence={"collectives": skew.matched, "median_spread_ns": int(np.median(spread)),
                      "max_spread_ns": int(spread.max()), "ranks": len(ranks)}))
        if info is not None:
            report.findings.insert(0, straggler_finding(info))
        return report


def _not_one_run(ranks: list[Rank]) -> str:
    """Why the ranks cannot be of one run, as far as they declare it ('' where nothing
    says so): different world sizes, or one rank number declared twice."""
    return not_one_run([r.world_size for r in ranks],
                       [r.number for r in ranks if r.rule == "the trace's distributed info"])


def _ranks_table(ranks: list[Rank]) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in (
        "rank", "device", "span", "compute", "communication", "memory", "idle", "comm_kernels",
        "overlap", "steps", "step")}
    several = len({r.source for r in ranks}) > 1
    for r in ranks:
        cols["rank"].append(r.number)
        cols["device"].append(f"{r.source} GPU {r.device}" if several else f"GPU {r.device}")
        cols["span"].append(r.span)
        for part in ("compute", "communication", "memory", "idle"):
            cols[part].append(r.shares[part])
        cols["comm_kernels"].append(r.comm_kernel_time)
        # Communication hidden under compute: kernel time not exposed as the GPU's only work.
        cols["overlap"].append(percent(r.comm_kernel_time - r.shares["communication"],
                                       r.comm_kernel_time) if r.comm_kernel_time else None)
        cols["steps"].append(len(r.step_ns))
        cols["step"].append(int(np.median(r.step_ns)) if r.step_ns else None)
    spec: list[tuple[str, str, str | None, Any]] = [
        ("rank", "int", None, cols["rank"]), ("device", "str", None, cols["device"]),
        ("span", "int", "ns", cols["span"])]
    for part in ("compute", "communication", "memory", "idle"):
        spec.append((f"{part}_pct", "float", "%", [percent(v, s) for v, s in
                                                    zip(cols[part], cols["span"], strict=True)]))
    spec += [("comm_kernel_time", "int", "ns", cols["comm_kernels"]),
             ("comm_overlap_pct", "float", "%", cols["overlap"]),
             ("steps", "int", None, cols["steps"]),
             ("median_step", "int", "ns", cols["step"])]
    return report_table(spec)
