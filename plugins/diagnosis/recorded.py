"""What the host's calls say happened on the GPU that the trace did not record: copies made
by copy calls when the tool traced no copies (rocprofv3 without --memory-copy-trace)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Finding
from tracekit.plugins.diagnosis.activity import API, Activity
from tracekit.plugins.diagnosis.program import Program
from tracekit.toolkit import any_true, equals, format_ns, is_in, matches

#: The runtime calls that copy between host and device memory (or device to device).
COPY_CALL = r"^(cuda|hip)Memcpy"
#: Kernels that copy: ROCm runs a copy as a blit kernel where it does not use a copy engine.
COPY_KERNEL = r"(?i)^(hip)?memcpy|^__amd_rocclr_copy(Buffer|Image)"
#: Blocking copy calls this long in all make the missing copies a warning, else a note.
WARN_NS = 1_000_000


def unrecorded_copies_finding(activity: Activity, program: Program) -> Finding | None:
    """Copy calls in a trace that holds no copy on the GPU (no copy record, no blit kernel
    that copies): the tool did not trace copies, so the GPU's time in them is not on its
    timeline (idle, or start-up, instead of transfer)."""
    ev = activity.events
    if not ev.num_rows or any_true(equals(ev["category"], "gpu.memcpy")) or any_true(
            pc.and_(equals(ev["category"], "gpu.kernel"), matches(ev["name"], COPY_KERNEL))):
        return None
    calls = ev.filter(pc.and_(is_in(ev["category"], list(API)), matches(ev["name"], COPY_CALL)))
    calls = calls.filter(pc.is_valid(calls["dur_ns"]))
    if not calls.num_rows:
        return None
    names, counts = np.unique(calls["name"].cast(pa.string()).to_numpy(zero_copy_only=False)
                              .astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    named = ", ".join(f"{names[i]} ×{counts[i]}" for i in order[:3])
    ns = int(pc.sum(calls["dur_ns"]).as_py() or 0)
    # Blocking copies stop the host for the copy; a few asynchronous ones may be small.
    blocking = ~matches(calls["name"], "Async").to_numpy(zero_copy_only=False)
    blocking_ns = int(calls["dur_ns"].to_numpy(zero_copy_only=False)[blocking].sum())
    record = ("rocprofv3 --memory-copy-trace (with --kernel-trace)" if program.api == "HIP"
              else "nsys --trace=cuda, or torch.profiler with CUDA activities")
    return Finding(
        "warning" if blocking_ns >= WARN_NS else "info",
        f"copies not recorded: {calls.num_rows:,} copy calls ({named}; {format_ns(ns)} on the "
        "host) and no copy on the GPU timeline",
        {"copy_calls": calls.num_rows, "copy_call_ns": ns},
        f"record the copies too ({record}): the GPU's time in them shows as idle or start-up "
        "here, not as transfer")
