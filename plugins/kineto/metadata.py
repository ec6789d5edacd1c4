"""Metadata: process and thread names from ``ph: M`` events, and the document's top-level
fields (tool versions, clock, distributed info, run facts)."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pyarrow as pa
from tracekit.plugins.kineto.context import Context, Events
from tracekit.plugins.kineto.fields import dumps, texts


def metadata_events(ctx: Context, evs: Events) -> None:
    """Process names, thread names and device labels; every M event is counted."""
    if not len(evs):
        return
    names = evs.field("name")
    kinds = names.to_pylist() if isinstance(names, pa.Array) else texts(names)[0]
    pids = ctx.ids(evs.field("pid"), "pid", "M")
    tids = evs.field("tid")
    tids = tids.to_pylist() if isinstance(tids, pa.Array) else tids
    for args, name, pid, tid in zip(evs.args().dicts(), kinds, pids.tolist(), tids,
                                    strict=True):
        args = args if type(args) is dict else {}
        value = args.get("name")
        value = str(value) if type(value) in (str, int, float) else None
        if name == "process_name" and value is not None:
            ctx.process_names[pid] = value
            ctx.out.note("M:process_name", "process names")
        elif name == "thread_name" and value is not None:
            key = (pid, int(ctx.ids([tid], "tid", "M")[0]))
            if ctx.thread_names.setdefault(key, value) == value:
                ctx.out.note("M:thread_name", "thread names")
            else:
                # Kineto names PyTorch's autograd thread twice, "(pt_autograd_0)" first,
                # then with the name of the thread that recorded it ("(pt_main_thread)").
                ctx.out.note("M:thread_name", "second name of a named thread (the first "
                             "kept)")
        elif name == "process_labels" and type(args.get("labels")) is str:
            ctx.process_labels[pid] = args["labels"]
            ctx.out.note("M:process_labels", "process and device labels")
        elif name in ("process_sort_index", "thread_sort_index"):
            ctx.out.note(f"M:{name}", "not needed: display order hint")
        elif name in ("process_name", "thread_name", "process_labels"):
            ctx.out.note(f"M:{name}", "skipped: no text in args")
        else:
            ctx.out.note(f"M:{(name or '(no name)')[:40]}", "skipped: unknown metadata "
                          "event")

def top_metadata(ctx: Context) -> None:
    top = ctx.top
    meta = ctx.out.metadata
    meta["format"] = "kineto"
    meta["tool"] = "PyTorch profiler (Kineto)"
    ours = top.get("tracekit")
    tools = ours.get("tools") if isinstance(ours, dict) else None
    if isinstance(tools, dict) and tools:
        # Written by tracekit from another tool's input: that tool's events, in Kineto's
        # layout. One tool names the trace; several are listed.
        names = sorted({str(t) for t in tools.values()})
        meta["tool"] = f"{' + '.join(names)} (through tracekit's Chrome JSON)"
        meta["converted_from"] = names
    version = {k: top[k] for k in ("schemaVersion", "cupti_version", "cuda_runtime_version",
                                   "cuda_driver_version", "roctracer_version",
                                   "hip_runtime_version", "hip_driver_version") if k in top}
    if version:
        meta["tool_version"] = ", ".join(f"{k} {v}" for k, v in version.items())
    if ctx.base_ns:
        meta["clock"] = ("system clock, ns since the Unix epoch "
                         "(baseTimeNanoseconds + relative µs)")
        meta["base_time_ns"] = ctx.base_ns
    elif ctx.base_unusable:
        meta["clock"] = "relative µs from an unknown start (baseTimeNanoseconds unusable)"
    else:
        meta["clock"] = "as written: absolute µs (system clock since the Unix epoch)"
    if ctx.autograd_ops:
        # Ops autograd recorded: grad mode was on (an inference run without no_grad).
        meta["autograd_ops"] = ctx.autograd_ops
        meta["autograd_nodes"] = ctx.autograd_nodes
    dist = top.get("distributedInfo")
    if isinstance(dist, dict) and (text := dumps(dist)):
        meta["distributed"] = orjson.loads(text)
    run = {k: v for k, v in top.items()
           if k not in ("deviceProperties", "distributedInfo", "traceEvents")
           and isinstance(v, (str, int, float, bool, Decimal))}
    if run and (text := dumps(run)):
        meta["run"] = orjson.loads(text)


