"""Steps that take far longer than the others: a step of a training or inference loop that
something else ran in (a checkpoint, an evaluation, a data stall, garbage collection, another
process on the machine)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Finding, Trace
from tracekit.toolkit import COLLECTIVE_RANGE, format_ns, is_in, starts_with, step_ranges
from tracekit.toolkit import intervals as iv

#: A step this many times the median of its process's steps is an outlier ...
SLOW_STEP_RATIO = 1.5
#: ... among at least this many steps (fewer give no median worth the name).
MIN_STEPS = 4
#: A range or op is named as what ran in the slow step when it took at least this share
#: of the step's time over the median more than it usually does.
EXPLAINS = 0.25


def slow_step_finding(trace: Trace) -> Finding | None:
    """The slowest step of any process that takes ``SLOW_STEP_RATIO`` times its process's
    median step or more, among ``MIN_STEPS`` steps or more. The first recorded step is left
    out: warm-up (compilation, optimizer state, allocator growth) has findings of its own."""
    steps = step_ranges(trace)
    if steps.num_rows < MIN_STEPS:
        return None
    source = steps["source"].to_numpy(zero_copy_only=False)
    pid = steps["pid"].fill_null(-1).to_numpy(zero_copy_only=False)
    number = steps["step"].to_numpy()
    begin, finish = steps["start"].to_numpy(), steps["end"].to_numpy()
    dur = finish - begin
    worst: tuple[float, int, int, int, int, str, int, int] | None = None
    processes = sorted(set(zip(source.tolist(), pid.tolist(), strict=True)))
    slow_steps: dict[tuple[str, int], set[int]] = {}  # per process, its slow step numbers
    for key in processes:
        mine = np.flatnonzero((source == key[0]) & (pid == key[1]))
        if len(mine) < MIN_STEPS:
            continue
        mine = mine[np.argsort(number[mine], kind="stable")]
        median = float(np.median(dur[mine]))
        if median <= 0:
            continue
        growing = _growth(number[mine[1:]], dur[mine[1:]])
        if growing is not None:
            return _growth_finding(*growing, key[1] if len(processes) > 1 else None)
        slow_steps[key] = set(number[mine][dur[mine] >= SLOW_STEP_RATIO * median].tolist())
        later = mine[1:]
        i = int(later[np.argmax(dur[later])])
        ratio = dur[i] / median
        if ratio >= SLOW_STEP_RATIO and (worst is None or ratio > worst[0]):
            others = [(int(begin[j]), int(finish[j])) for j in mine if j != i]
            name, extra = _what_ran(trace, key, (int(begin[i]), int(finish[i])), others)
            worst = (float(ratio), int(number[i]), int(dur[i]), int(median), len(mine), name,
                     extra, key[1])
    if worst is None:
        return None
    ratio, step, took, median, count, name, extra, process = worst
    evidence: dict[str, object] = {"step": step, "step_ns": took, "median_step_ns": median,
                                   "steps": count, "ratio": round(ratio, 1)}
    whose = ""
    if len(processes) > 1:
        evidence["pid"] = process
        whose = f" of process {process}"
    waited = False
    if _names_the_cause(extra, took, median):
        evidence.update({"in_it": name, "in_it_ns": extra})
        cause = f"; in it, {name} {format_ns(extra)} more than in a usual step"
        waited = bool(re.search(COLLECTIVE_RANGE, name))
    else:
        cause = (f"; no traced op or range took much of the {format_ns(took - median)} more "
                 "(untraced Python, I/O or a wait)")
        evidence["in_it"] = "no traced op or range"
    every = len(slow_steps) > 1 and all(step in s for s in slow_steps.values())
    if every:
        evidence["slow_on_every_process"] = True
    if waited:
        fix = (f"the extra time is in a collective: this process waited in it for a slower "
               f"one, or the ranks reached it out of step; compare the ranks' step {step} "
               f"(-O steps={step})")
    else:
        fix = ("something else ran in that step (a checkpoint, an evaluation, a data stall, "
               "garbage collection, another process on the machine): look at it alone "
               f"(-O steps={step}) against a normal step")
    if every:
        fix += (f"; step {step} is slow on every process, so look at what they share (the "
                "machine, the file system, the network) before any one of them")
    return Finding(
        "warning", f"step {step}{whose} takes {ratio:.1f}× the median step ({format_ns(took)} "
        f"against {format_ns(median)} over {count} steps){cause}",
        evidence, fix + ", and keep it out of any average of the run")


#: Steps that grow: the last this many times the first (after warm-up) ...
GROWTH_RATIO = 1.5
#: ... with at least this share of the step-to-step changes increases ...
GROWTH_RISES = 0.8
#: ... over at least this many steps after warm-up: three noisy steps rise by chance.
GROWTH_MIN_STEPS = 5


def _growth(number: np.ndarray, dur: np.ndarray) -> tuple[int, int, int, int, int] | None:
    """Steps (warm-up left out) that grow from first to last: (first step, its ns, last
    step, its ns, steps), where there are ``GROWTH_MIN_STEPS`` or more, the last is
    ``GROWTH_RATIO`` times the first or more and ``GROWTH_RISES`` of the changes are rises;
    else None."""
    if len(dur) < GROWTH_MIN_STEPS or dur[0] <= 0:
        return None
    rises = np.diff(dur) > 0
    if dur[-1] < GROWTH_RATIO * dur[0] or rises.mean() < GROWTH_RISES:
        return None
    return int(number[0]), int(dur[0]), int(number[-1]), int(dur[-1]), len(dur)


def _growth_finding(first: int, first_ns: int, last: int, last_ns: int, count: int,
                    pid: int | None) -> Finding:
    whose = f" of process {pid}" if pid is not None else ""
    evidence: dict[str, object] = {"first_step": first, "first_step_ns": first_ns,
                                   "last_step": last, "last_step_ns": last_ns, "steps": count}
    if pid is not None:
        evidence["pid"] = pid
    return Finding(
        "warning", f"steps{whose} grow: step {first} takes {format_ns(first_ns)}, step {last} "
        f"{format_ns(last_ns)} ({last_ns / first_ns:.1f}×), longer almost every step",
        evidence,
        "something accumulates from step to step: tensors kept alive with their autograd "
        "graphs (a running loss summed without .item() or .detach()), lists or caches that "
        "grow, memory that fragments; compare the first and last steps (-O steps=N) to see "
        "which ops grow")


def _what_ran(trace: Trace, process: tuple[str, int], slow: tuple[int, int],
              others: list[tuple[int, int]]) -> tuple[str, int]:
    """The host range or op of ``process`` whose time within the ``slow`` step most exceeds
    its mean over the ``others``, and by how much (its own time: nested ones count too)."""
    ev = trace.events
    rows = ev.filter(pc.and_(
        pc.and_(is_in(ev["category"], ("host.annotation", "host.op", "host.python")),
                pc.invert(starts_with(ev["name"], "ProfilerStep#"))),
        pc.and_(pc.equal(ev["source"].cast(pa.string()), process[0]),
                pc.and_(pc.equal(ev["pid"].fill_null(-1), process[1]),
                        pc.is_valid(ev["dur_ns"])))))
    if not rows.num_rows:
        return "", 0
    start = rows["ts_ns"].to_numpy()
    end = start + rows["dur_ns"].to_numpy()
    names, code = np.unique(rows["name"].cast(pa.string()).to_numpy(zero_copy_only=False),
                            return_inverse=True)
    code = code.reshape(-1)

    def per_name(lo: int, hi: int) -> np.ndarray:
        """Each name's time within [lo, hi), by name code: the union of its ranges, so that
        the same range on two threads at once (gloo's workers) or nested in itself counts
        once."""
        return iv.total_by_group(code, start, end, len(names), lo, hi)

    usual = sum(per_name(lo, hi) for lo, hi in others) / len(others) if others else 0.0
    excess = per_name(*slow) - usual
    # The largest excess; ties to the name last in order, as before.
    best = len(names) - 1 - int(np.argmax(excess[::-1]))
    return (str(names[best]), int(excess[best])) if excess[best] > 0 else ("", 0)


def _names_the_cause(extra_ns: int, step_ns: int, median_ns: int) -> bool:
    """Whether a range or op that took ``extra_ns`` more than usual explains a step of
    ``step_ns`` against a median of ``median_ns``: at least ``EXPLAINS`` of the difference."""
    return extra_ns > 0 and extra_ns >= EXPLAINS * (step_ns - median_ns)
