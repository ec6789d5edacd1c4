"""What the host's calls say happened on the GPU that the trace did not record: copies made
by copy calls when the tool traced no copies (rocprofv3 without --memory-copy-trace)."""

from __future__ import annotations

import numpy as np
from tracekit import Finding
from tracekit.plugins.diagnosis.activity import COPY_KERNEL, Activity
from tracekit.plugins.diagnosis.program import Program
from tracekit.toolkit import format_ns

#: The runtime calls that copy between host and device memory (or device to device).
COPY_CALL = r"^(cuda|hip)Memcpy"
#: Blocking copy calls this long in all make the missing copies a warning, else a note.
WARN_NS = 1_000_000


def unrecorded_copies_finding(activity: Activity, program: Program) -> Finding | None:
    """Copy calls in a trace that holds no copy on the GPU (no copy record, no blit kernel
    that copies): the tool did not trace copies, so the GPU's time in them is not on its
    timeline (idle, or start-up, instead of transfer)."""
    category, names, calls = activity.category, activity.name_codes, activity.calls
    if not len(activity.events) or category.equals("gpu.memcpy").any() or (
            category.equals("gpu.kernel") & names.matches(COPY_KERNEL)).any():
        return None
    copy = names.matches(COPY_CALL)[calls.row] & ~calls.is_op
    if not copy.any():
        return None
    dur = (calls.end - calls.start)[copy]
    called, counts = np.unique(names.codes[calls.row[copy]], return_counts=True)
    order = np.argsort(-counts, kind="stable")
    named = ", ".join(f"{names.entries[called[i]]} ×{counts[i]}" for i in order[:3])
    ns = int(dur.sum())
    # Blocking copies stop the host for the copy (activity's sync rule); a few asynchronous
    # ones may be small.
    blocking_ns = int(dur[calls.is_sync[copy]].sum())
    record = ("rocprofv3 --memory-copy-trace (with --kernel-trace)" if program.api == "HIP"
              else "nsys --trace=cuda, or torch.profiler with CUDA activities")
    return Finding(
        "warning" if blocking_ns >= WARN_NS else "info",
        f"copies not recorded: {int(copy.sum()):,} copy calls ({named}; {format_ns(ns)} on "
        "the host) and no copy on the GPU timeline",
        {"copy_calls": int(copy.sum()), "copy_call_ns": ns},
        f"record the copies too ({record}): the GPU's time in them shows as idle or start-up "
        "here, not as transfer")
