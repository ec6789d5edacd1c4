"""What torch.optim offers to make an optimizer step cheaper, by optimizer class: the fix that
analyzers give for host time in optimizer steps (the GPU diagnosis and the CPU report)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import intervals as iv
from tracekit.columns import matches, starts_with
from tracekit.factorize import factorize
from tracekit.model import Trace

#: torch.optim's optimizers with a foreach (multi-tensor) implementation, lower-case.
FOREACH_OPTIMIZERS = frozenset({"adadelta", "adafactor", "adagrad", "adam", "adamw", "adamax",
                                "asgd", "nadam", "radam", "rmsprop", "rprop", "sgd"})
#: Those of them with fused kernels (on CUDA, and on the CPU since PyTorch 2.4).
FUSED_OPTIMIZERS = frozenset({"adam", "adamw", "sgd", "adagrad"})
#: Host ranges of an optimizer step: PyTorch names them after the class (Optimizer.step#AdamW.step).
OPTIMIZER_STEP_RANGE = r"^Optimizer\.step#"
_OPTIMIZER_CLASS = re.compile(r"Optimizer\.(?:step|zero_grad)#(\w+)\.")


#: The ops of torch.optim's multi-tensor and fused implementations (aten::_foreach_add_,
#: aten::_fused_adamw_): seen inside an optimizer step, they say which one runs.
FOREACH_OP = r"^aten::_foreach_"
FUSED_OP = r"^aten::_fused_(sgd|adam|adamw|adagrad)_"


def optimizer_fix(where: str, cpu: bool = False, implementation: str | None = None) -> str:
    """The fix for host time in an optimizer, by its class where the range ``where`` names
    it: a fused or foreach implementation for torch.optim's own (on the CPU, ``cpu``, fused
    only: its foreach ops loop over the tensors); for another optimizer its own knobs
    (Shampoo inverts preconditioners: less often, or split over the ranks). Where the step
    already runs ``implementation`` ("foreach" or "fused", seen from its ops), the fix is
    the next one up: fused, then compiling the step.

    >>> optimizer_fix("Optimizer.step#AdamW.step", cpu=True)[:52]
    'use a fused optimizer (torch.optim.AdamW(..., fused='
    >>> optimizer_fix("Optimizer.step#SGD.step", implementation="foreach")[:60]
    'the step already runs foreach ops: use torch.optim.SGD(..., '
    """
    found = _OPTIMIZER_CLASS.search(where)
    name = found.group(1) if found else None
    compiled = ("compile the step (torch.compile(optimizer.step)) so its updates are a few "
                "generated kernels, or capture it in a CUDA graph with the rest of the step")
    if not cpu and implementation == "fused":
        return f"the step already runs fused kernels: {compiled}"
    if not cpu and implementation == "foreach" and (name is None or
                                                     name.lower() in FOREACH_OPTIMIZERS):
        if name is not None and name.lower() in FUSED_OPTIMIZERS:
            return (f"the step already runs foreach ops: use torch.optim.{name}(..., "
                    f"fused=True) so it is one kernel per group of tensors, or {compiled}")
        return f"the step already runs foreach ops: {compiled}"
    if cpu and (name is None or name.lower() in FUSED_OPTIMIZERS):
        return (f"use a fused optimizer (torch.optim.{name or 'AdamW'}(..., fused=True), on the "
                "CPU since PyTorch 2.4) so the step is one pass over all parameters, not a few "
                "ops per parameter; foreach=True helps little on the CPU, where it still loops "
                "over the tensors")
    if name is None or name.lower() in FOREACH_OPTIMIZERS:
        use = (f"torch.optim.{name}(..., "
               f"{'fused' if name.lower() in FUSED_OPTIMIZERS else 'foreach'}=True)" if name
               else "torch.optim.AdamW(..., fused=True)")
        return (f"use a fused or foreach optimizer (e.g. {use}) so the step is a few kernels, "
                "not one per parameter")
    if "shampoo" in name.lower():
        return (f"{name}'s step updates and inverts its preconditioners: invert them less "
                "often (Distributed Shampoo's precondition_frequency, "
                "start_preconditioning_step) or split the work over the ranks (its "
                "distributed_config)")
    return (f"{name} is not one of torch.optim's foreach or fused optimizers: shorten its host "
            "work per step (a multi-tensor implementation, its costly updates less often)")


def in_optimizer_steps(events: pa.Table, rows: pa.Table) -> tuple[np.ndarray, str] | None:
    """Per row of ``rows`` (events rows: ``source``, ``pid``, ``ts_ns``): whether it starts
    inside an optimizer step (``OPTIMIZER_STEP_RANGE``, a host range) of its input and
    process; and the longest step's name. None where ``events`` holds no step."""
    timed = pc.and_(pc.is_valid(events["ts_ns"]), starts_with(events["category"], "host."))
    steps = events.filter(pc.and_(timed, pc.and_(matches(events["name"], OPTIMIZER_STEP_RANGE),
                                                  pc.is_valid(events["dur_ns"]))))
    if not steps.num_rows:
        return None
    start = steps["ts_ns"].to_numpy(zero_copy_only=False)
    end = start + steps["dur_ns"].to_numpy(zero_copy_only=False)
    # Processes by (input, pid) codes shared by the steps and the rows: ranks may share pids.
    process, _ = factorize(
        np.concatenate([steps["source"].cast(pa.string()).to_numpy(zero_copy_only=False),
                        rows["source"].cast(pa.string()).to_numpy(zero_copy_only=False)]),
        np.concatenate([steps["pid"].fill_null(-1).to_numpy(zero_copy_only=False),
                        rows["pid"].fill_null(-1).to_numpy(zero_copy_only=False)]))
    n = steps.num_rows
    inside = iv.covered_by_group(process[n:], rows["ts_ns"].fill_null(0).to_numpy(
        zero_copy_only=False), process[:n], start, end)
    names = steps["name"].cast(pa.string()).to_pylist()
    return inside, names[int(np.argmax(end - start))]


def optimizer_implementation(trace: Trace) -> str | None:
    """Which of torch.optim's implementations the trace's optimizer steps run, from the ops
    that start inside an ``Optimizer.step#`` range of the same process: "fused"
    (``aten::_fused_adamw_`` …), "foreach" (``aten::_foreach_*``), or None (neither seen, or
    no step). The same ops outside a step (gradient clipping's ``_foreach_norm``) do not
    count."""
    ev = trace.events
    ops = ev.filter(pc.and_(pc.and_(pc.is_valid(ev["ts_ns"]), starts_with(ev["category"],
                                                                          "host.")),
                            matches(ev["name"], f"{FOREACH_OP}|{FUSED_OP}")))
    found = in_optimizer_steps(ev, ops) if ops.num_rows else None
    if found is None:
        return None
    names = ops["name"].cast(pa.string()).to_numpy(zero_copy_only=False)[found[0]]
    if any(re.match(FUSED_OP, n) for n in set(names.tolist())):
        return "fused"
    return "foreach" if len(names) else None
