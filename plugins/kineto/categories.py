"""Kineto ``cat`` values to tracekit categories (matched case-insensitively)."""

from __future__ import annotations

from tracekit import CATEGORIES

KNOWN_CATEGORIES = frozenset(k for k in CATEGORIES if not k.endswith("*"))

# Current names (libkineto ActivityType), the pre-2021-11 names (Operator, Runtime, Kernel ...)
# and the 2021-2022 misspelling gpu_user_Annotation, which lower-casing absorbs.
CATEGORY_MAP: dict[str, str] = {
    "kernel": "gpu.kernel",
    "mtia_ccp_events": "gpu.kernel",  # work on an MTIA device (its pid is the device)
    "gpu_memcpy": "gpu.memcpy",
    "memcpy": "gpu.memcpy",
    "gpu_memset": "gpu.memset",
    "memset": "gpu.memset",
    "cuda_sync": "gpu.sync",
    "xpu_sync": "gpu.sync",
    "gpu_user_annotation": "gpu.annotation",
    "cuda_runtime": "api.runtime",
    "runtime": "api.runtime",
    "xpu_runtime": "api.runtime",
    "mtia_runtime": "api.runtime",
    "privateuse1_runtime": "api.runtime",
    "glow_runtime": "api.runtime",
    "cuda_event": "api.runtime",
    "cuda_driver": "api.driver",
    "xpu_driver": "api.driver",
    "privateuse1_driver": "api.driver",
    "cpu_op": "host.op",
    "operator": "host.op",
    "hpu_op": "host.op",
    "collective_comm": "host.op",
    "user_annotation": "host.annotation",
    "trace": "host.profiler",
    "cuda_profiler_range": "host.annotation",
    "python_function": "host.python",
    "python": "host.python",
    "overhead": "host.overhead",
    "cpu_instant_event": "host.instant",
    "memory": "host.memory",
    "hardware_counters": "counter.hardware",
    "mtia_counters": "counter.hardware",
    "xpu_scope_profiler": "counter.hardware",
}

# torch 1.8 (libkineto until 2021-05) wrote GPU user annotations as "User" on the thread
# "stream 7 user" of the GPU pid. Matched exactly: a lower-case "user" elsewhere stays other.
_USER_1_8 = "User"

DEVICE_CATEGORIES = frozenset({"gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.sync",
                               "gpu.annotation"})

# Flow categories: links from a runtime call to its device work (ids are correlation ids),
# and from a forward op to its backward op.
LAUNCH_FLOWS = frozenset({"ac2g", "async_cpu_to_gpu", "async"})
FWDBWD_FLOWS = frozenset({"fwdbwd", "forward_backward"})
# The arg PyTorch gives an op that autograd recorded: only where grad mode is on, never under
# torch.no_grad() or torch.inference_mode().
AUTOGRAD_KEY = "Sequence number"


def map_category(cat: str | None, name: str | None = None) -> str:
    """Return the tracekit category of a Kineto ``cat`` (``other`` if unknown)."""
    if name == "[memory]":
        return "host.memory"
    if cat is None:
        return "host.instant"
    if cat == _USER_1_8:
        return "gpu.annotation"
    mapped = CATEGORY_MAP.get(cat.lower())
    if mapped is None and (cat in KNOWN_CATEGORIES or cat.startswith("counter.")):
        return cat  # written by tracekit's chrome-json writer: already a tracekit category
    return mapped or "other"
