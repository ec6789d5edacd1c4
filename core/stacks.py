"""Call stacks of samples: the frames of each stack id, root first, from the stacks tree."""

from __future__ import annotations

import functools
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.columns import arg_strings, equals
from tracekit.factorize import first_rows
from tracekit.model import Trace

Frame = tuple[str, "str | None"]  # (name, module)


class CallSites:
    """Builds a stacks/frames tree: frames interned by (name, module), call sites by
    (parent site, frame), so that every path shares its prefix with the others."""

    def __init__(self) -> None:
        self.frames: dict[Frame, int] = {}
        self.sites: dict[tuple[int, int], int] = {}
        # In id order, for the rows added since a given count (tables(since=...)).
        self._frame_rows: list[Frame] = []
        self._site_rows: list[tuple[int, int]] = []

    def site(self, parent: int | None, frame: Frame) -> int:
        """The id of ``frame`` called from call site ``parent`` (None at the root)."""
        fid = self.frames.get(frame)
        if fid is None:
            fid = self.frames[frame] = len(self._frame_rows)
            self._frame_rows.append(frame)
        key = (-1 if parent is None else parent, fid)
        sid = self.sites.get(key)
        if sid is None:
            sid = self.sites[key] = len(self._site_rows)
            self._site_rows.append(key)
        return sid

    def stack_of(self, leaf_first: list[Frame]) -> int | None:
        """The call-site id of a callchain given leaf first (None for an empty one)."""
        site = None
        for frame in reversed(leaf_first):
            site = self.site(site, frame)
        return site

    @property
    def counts(self) -> tuple[int, int]:
        """How many frames and call sites there are so far."""
        return len(self._frame_rows), len(self._site_rows)

    def tables(self, since: tuple[int, int] = (0, 0)) -> tuple[pa.Table, pa.Table]:
        """The (frames, stacks) tables of the event model, ids in order of first use; with
        ``since`` (earlier ``counts``), only the rows added after it."""
        f0, s0 = since
        new_frames, new_sites = self._frame_rows[f0:], self._site_rows[s0:]
        frames = pa.table({"frame_id": pa.array(range(f0, f0 + len(new_frames)), pa.int64()),
                           "name": pa.array([f[0] for f in new_frames], pa.string()),
                           "module": pa.array([f[1] for f in new_frames], pa.string())})
        stacks = pa.table({"stack_id": pa.array(range(s0, s0 + len(new_sites)), pa.int64()),
                           "parent_id": pa.array([p if p >= 0 else None for p, _ in new_sites],
                                                 pa.int64()),
                           "frame_id": pa.array([f for _, f in new_sites], pa.int64())})
        return frames, stacks


class StackTree:
    """The stacks and frames tables of a trace, for walking paths from the root."""

    def __init__(self, trace: Trace) -> None:
        stacks = trace.stacks
        self._parent = dict(zip(stacks["stack_id"].to_pylist(), stacks["parent_id"].to_pylist(),
                                strict=True))
        self._frame = dict(zip(stacks["stack_id"].to_pylist(), stacks["frame_id"].to_pylist(),
                               strict=True))
        frames = trace.frames
        self.names = dict(zip(frames["frame_id"].to_pylist(), frames["name"].to_pylist(),
                              strict=True))
        self.modules = dict(zip(frames["frame_id"].to_pylist(), frames["module"].to_pylist(),
                                strict=True))
        self.addresses: dict[int, int | None] = (
            dict(zip(frames["frame_id"].to_pylist(), frames["address"].to_pylist(),
                     strict=True)) if "address" in frames.column_names else {})
        self._paths: dict[int, tuple[int, ...]] = {}

    def frames(self, stack_id: int) -> tuple[int, ...]:
        """Frame ids from the root to the leaf of ``stack_id``."""
        path = self._paths.get(stack_id)
        if path is not None:
            return path
        chain, node, seen = [], stack_id, set()
        while node is not None and node not in self._paths:
            if node in seen:  # a cycle in a damaged stack table: cut it here
                node = None
                break
            seen.add(node)
            chain.append(node)
            node = self._parent.get(node)
        path = self._paths[node] if node is not None else ()
        for site in reversed(chain):
            path = (*path, self._frame[site])
            self._paths[site] = path
        return path

    def names_of(self, stack_id: int) -> list[str]:
        """Frame names from the root to the leaf of ``stack_id``."""
        return [self.names[f] for f in self.frames(stack_id)]

    def is_kernel(self, frame_id: int) -> bool:
        """Is the frame kernel code (by its module, or its address where the tool kept it)?"""
        return is_kernel(self.modules.get(frame_id), self.addresses.get(frame_id))


def sample_weights(events: pa.Table, weight: str) -> tuple[pa.Array, str]:
    """Per row its weight, and the weight's unit (``ns`` or empty).

    ``weight="samples"``: 1 per sampled row. Otherwise the row's value (perf's period, 1 for
    nsys). Untimed aggregate rows (VTune) always weigh what they total: their ``dur_ns``
    (CPU time) where they have one, else their value; counting report rows would mean
    nothing.
    """
    n = events.num_rows
    aggregate = pc.and_(pc.is_null(events["ts_ns"]), pc.is_valid(events["dur_ns"]))
    has_aggregates = bool(pc.any(aggregate).as_py()) if n else False
    if has_aggregates and bool(pc.all(aggregate).as_py()):
        return pc.cast(events["dur_ns"], pa.float64(), safe=False).combine_chunks(), "ns"
    if weight == "samples":
        return pa.array(np.ones(n)), ""
    return pc.fill_null(events["value"], 1.0).combine_chunks(), ""


SAMPLE_COLUMNS = ("category", "name", "ts_ns", "dur_ns", "value", "stack_id", "args",
                  "source", "pid", "tid")


#: The ``args`` key in which a reader of a profile that samples several events names each
#: sample's event (``cycles:u``); it counts them per source in ``metadata["sample_events"]``.
SAMPLE_EVENT_ARG = "event"


def sample_events(trace: Trace, event: str | None) -> tuple[pa.Table, list[str]]:
    """CPU sample rows of one sampled event (``args.event``), and the events seen.

    ``event`` None keeps the most frequent event, as FlameGraph keeps one event type:
    folding cycles and instructions together would mean nothing. Only the columns that
    sample consumers use are kept, and nothing is copied when every row qualifies.
    """
    events = trace.events.select(list(SAMPLE_COLUMNS))
    is_sample = equals(events["category"], "cpu.sample")
    rows = events if pc.all(is_sample).as_py() else events.filter(is_sample)
    seen = sampled_events(trace)
    if len(seen) <= 1 and event is None:
        return rows, seen
    keep = event if event is not None else seen[0]
    names = arg_strings(rows["args"], SAMPLE_EVENT_ARG)
    return rows.filter(pc.fill_null(pc.equal(names, keep), False)), seen


def aggregate_rows(rows: pa.Table, trace: Trace | None = None) -> bool:
    """Whether sample ``rows`` are a report's totals per group (VTune's per-function CSV)
    rather than samples: no timestamps, and either totals in ``dur_ns`` or a reader that
    declared its rows aggregates (``metadata["sample_rows"] == "aggregates"`` of every source
    of the rows, e.g. a report of hardware event counts, which has no durations). Samples of
    a ``perf script`` run without ``-F time`` have no timestamps either, but no durations and
    no declaration: they stay samples."""
    if not rows.num_rows or rows["ts_ns"].null_count != rows.num_rows:
        return False
    if rows["dur_ns"].null_count < rows.num_rows:
        return True
    if trace is None:
        return False
    declared = aggregate_sources(trace)
    sources = pc.unique(rows["source"]).to_pylist() if "source" in rows.column_names else []
    return bool(declared) and bool(sources) and all(s in declared for s in sources)


def aggregate_sources(trace: Trace) -> set[str]:
    """The inputs whose reader declared its sample rows a report's totals
    (``metadata["sample_rows"] == "aggregates"``)."""
    return {name for name, meta in trace.metadata.get("sources", {}).items()
            if isinstance(meta, dict) and meta.get("sample_rows") == "aggregates"}


def sampled_events(trace: Trace) -> list[str]:
    """The sampled events the readers declared (``metadata["sample_events"]`` of each
    source: event name to sample count), most frequent first."""
    counts: dict[str, int] = {}
    for meta in trace.metadata.get("sources", {}).values():
        declared = meta.get("sample_events") if isinstance(meta, dict) else None
        for name, n in (declared.items() if isinstance(declared, dict) else ()):
            if isinstance(n, int):
                counts[name] = counts.get(name, 0) + n
    return [e for e, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


# --- what a CPU profile's frames and weights mean ----------------------------------------

# The kernel's idle loop (x86 and arm64), whole names after any ``.isra.0``-style suffix.
IDLE_FUNCTIONS = re.compile(
    r"cpuidle_enter\w*|intel_idle\w*|poll_idle|acpi_idle\w*|default_idle\w*|do_idle"
    r"|cpu_startup_entry|arch_cpu_idle\w*|native_safe_halt|mwait_idle\w*|cpu_idle_poll"
    r"|cpu_do_idle|call_cpuidle")
# Interrupt and softirq entry: work done on top of the idle loop is not idle.
INTERRUPT_FUNCTIONS = re.compile(
    r"do_IRQ|irq_exit\w*|irq_enter\w*|handle_\w*irq\w*|\w*_interrupt|\w*sysvec_\w*"
    r"|\w*softirq\w*|net_rx_action|\w*napi_poll|tasklet_\w*|gic_handle_irq|el\dh?_64_irq\w*"
    r"|el\d_irq|\w*handle_domain_irq")
IDLE_COMMS = re.compile(r"swapper(/\d+)?")
# x86-64 kernel text is at 0xffff8000_00000000 and above, arm64's at 0xffff0000_00000000 and
# above; user addresses on both stay below 0x0001000000000000, so one bound serves both.
KERNEL_ADDRESS = 0xFFFF_0000_0000_0000
_SUFFIX = re.compile(r"(\.(isra|constprop|part|cold|lto_priv|llvm)(\.\d+)?)+$")
# Time events: their weight is CPU time (ns) or cycles. Instructions and software events
# (page-faults, context-switches) are not CPU time.
TIME_EVENTS = ("cpu-clock", "task-clock", "cycles", "cpu-cycles", "ref-cycles")
_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
# Legacy Rust mangling escapes characters a C++ identifier cannot hold ($LT$ for <, ..
# for ::): what rustc-demangle undoes after the C++-style demangling.
_RUST_ESCAPES = {"$SP$": "@", "$BP$": "*", "$RF$": "&", "$LT$": "<", "$GT$": ">",
                 "$LP$": "(", "$RP$": ")", "$C$": ",", "$u7e$": "~", "$u20$": " ",
                 "$u27$": "'", "$u3d$": "=", "$u5b$": "[", "$u5d$": "]", "$u7b$": "{",
                 "$u7d$": "}", "$u3b$": ";", "$u2b$": "+", "$u22$": '"'}
_RUST_ESCAPE = re.compile("|".join(re.escape(k) for k in _RUST_ESCAPES) + r"|\.\.")
_MANGLED = re.compile(r"_Z[A-Za-z0-9_]|_R[A-Z0-9_]|__Z[A-Za-z0-9_]")


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """A C++ (``_Z…``) or legacy Rust (``_ZN…17h<hash>E``) symbol demangled by libstdc++'s
    ``__cxa_demangle`` (through ``cxxfilt``), the Rust hash dropped; the name as it is when it
    is not mangled, when ``cxxfilt`` is missing, or when demangling fails (Rust v0 ``_R…``
    names, which ``__cxa_demangle`` does not know, stay raw)."""
    if not _MANGLED.match(name):
        # perf and VTune print legacy Rust names demangled as C++ is, hash kept: drop it.
        return _rust(name) if "::h" in name else name
    try:
        import cxxfilt
        out = cxxfilt.demangle(name.removeprefix("_") if name.startswith("__Z") else name)
    except Exception:  # cxxfilt.InvalidName, or cxxfilt absent or unloadable
        return name
    if name.startswith("_ZN") and name.endswith("E") and "17h" in name:
        out = _rust(out)
    return out or name


def _rust(name: str) -> str:
    """A legacy Rust name demangled as C++ is (``core::cmp::impls::_$LT$impl$u20$...$GT$::lt
    ::h8ab8e1f0a3b7cd2e``): the hash dropped and the escapes undone, as rustc-demangle does
    (``core::cmp::impls::<impl core::cmp::PartialOrd for usize>::lt``); the name as it is
    where it holds none of them."""
    if not _RUST_HASH.search(name):
        return name
    name = _RUST_HASH.sub("", name)
    if "$" not in name and ".." not in name:
        return name
    # A path segment that begins with an escape is written with a leading "_".
    name = re.sub(r"(^|::)_(?=\$)", r"\1", name)
    return _RUST_ESCAPE.sub(lambda m: "::" if m.group() == ".." else _RUST_ESCAPES[m.group()],
                            name)


def base_function(name: str) -> str:
    """A symbol without perf's ``+0x…`` offset or a compiler's ``.isra.0`` clone suffix."""
    return _SUFFIX.sub("", name.split("+0x", 1)[0])


def is_kernel(module: str | None, address: int | None = None) -> bool:
    """Kernel code: ``[kernel.kallsyms]``, a ``vmlinux`` image, a module under
    ``/lib/modules`` (or any ``.ko``), BPF programs, or an address in the kernel half."""
    # The model keeps addresses as int64: a kernel one is stored negative.
    if address is not None and address & 0xFFFF_FFFF_FFFF_FFFF >= KERNEL_ADDRESS:
        return True
    if not module:
        return False
    base = module.rsplit("/", 1)[-1]
    return (module.startswith(("[kernel", "[guest.kernel", "/lib/modules/", "bpf_prog_"))
            or base.startswith(("vmlinux", "[vmlinux")) or base.endswith((".ko", ".ko]"))
            or module in ("[kernel]", "[bpf_prog]"))


def event_base(event: str) -> str:
    """The event a perf event spec names, without modifiers or terms (perf-list(1)):
    ``cycles:ppp`` -> ``cycles``; ``cpu_core/cycles/u`` and ``cpu/cycles,period=9/`` ->
    ``cycles`` (a PMU and its event); ``cpu-clock/period=1000000/`` -> ``cpu-clock`` (an
    event and its terms); ``cpu/event=0x3c,name=loops/`` -> ``loops``."""
    base = event.split(":", 1)[0]
    parts = [p for p in base.split("/") if p]
    if len(parts) < 2:
        return parts[0] if parts else base
    terms = parts[1].split(",")
    named = [t for t in terms if t and "=" not in t]
    if named:  # pmu/event/: the event
        return named[0]
    label = [t.split("=", 1)[1] for t in terms if t.startswith("name=")]
    return label[0] if label else parts[0]  # event/terms/: the event itself


def time_event(events: list[str]) -> str | None:
    """The event to rank CPU time by among those sampled: cpu-clock, task-clock, then cycles
    (never instructions or a software event while one of those is there); else the most
    frequent (``events`` is ordered by count)."""
    for want in TIME_EVENTS:
        for event in events:
            if event_base(event) == want:
                return event
    return events[0] if events else None


def weight_unit(trace: Trace, rows: pa.Table, event: str | None, weight: str = "value") -> str:
    """What one unit of a sample's weight is: ``ns`` for untimed aggregates (their CPU time),
    ``samples`` with ``weight=samples``; else what the readers declared for ``event``
    (``metadata["sample_units"]`` of each source: event name, or ``""`` for samples of no
    named event, to ``ns``, ``cycles``, ``samples`` ...) when they agree; else ``samples``
    when every weight is 1 and ``value`` otherwise."""
    aggregate = pc.and_(pc.is_null(rows["ts_ns"]), pc.is_valid(rows["dur_ns"]))
    if rows.num_rows and bool(pc.all(aggregate).as_py()):
        return "ns"
    if weight == "samples":
        return "samples"
    declared = set()
    for meta in trace.metadata.get("sources", {}).values():
        units = meta.get("sample_units") if isinstance(meta, dict) else None
        if isinstance(units, dict) and isinstance(units.get(event or ""), str):
            declared.add(units[event or ""])
    if len(declared) == 1:
        return declared.pop()
    return "samples" if _all_ones(rows) else "value"


def _all_ones(rows: pa.Table) -> bool:
    values = rows["value"]
    return not rows.num_rows or bool(pc.all(pc.fill_null(pc.equal(values, 1.0), True)).as_py())


def thread_names(trace: Trace) -> dict[tuple[int | None, int | None], str]:
    """``(pid, tid) -> name`` from the threads table (the comm, for perf)."""
    th = trace.threads
    if not th.num_rows:
        return {}
    return dict(zip(zip(th["pid"].to_pylist(), th["tid"].to_pylist(), strict=True),
                    th["name"].to_pylist(), strict=True))


def idle_comm_rows(trace: Trace, rows: pa.Table) -> np.ndarray:
    """Per row: is it a sample of the idle task (comm ``swapper``, thread id 0)?"""
    names = thread_names(trace)
    idle = {k for k, v in names.items() if v and IDLE_COMMS.fullmatch(v)}
    tid = pc.fill_null(rows["tid"], -1).to_numpy(zero_copy_only=False)
    if not idle:
        return np.zeros(rows.num_rows, dtype=bool)
    pid = pc.fill_null(rows["pid"], -1).to_numpy(zero_copy_only=False)
    keys = pid.astype(np.int64) * (1 << 23) + tid
    want = np.array([(p if p is not None else -1) * (1 << 23) + (t if t is not None else -1)
                     for p, t in idle], dtype=np.int64)
    return np.isin(keys, want) & (tid == 0)


def idle_of_stack(names_leaf_first: list[str], idle_task: bool) -> bool:
    """Walking from the leaf, the first idle-loop or interrupt frame decides: the idle loop
    is idle, interrupt or softirq work on top of it is not. With neither, a sample of the
    idle task (``swapper``) is idle and any other is not."""
    for name in names_leaf_first:
        base = base_function(name)
        if IDLE_FUNCTIONS.fullmatch(base):
            return True
        if INTERRUPT_FUNCTIONS.fullmatch(base):
            return False
    return idle_task


def idle_rows(trace: Trace, rows: pa.Table, tree: StackTree) -> np.ndarray:
    """Per sample row: is the CPU idle? (see :func:`idle_of_stack`)."""
    n = rows.num_rows
    if not n:
        return np.zeros(0, dtype=bool)
    task = idle_comm_rows(trace, rows)
    stack = pc.fill_null(rows["stack_id"], -1).to_numpy(zero_copy_only=False)
    key = stack.astype(np.int64) * 2 + task
    keys, inverse = np.unique(key, return_inverse=True)
    decided = np.zeros(len(keys), dtype=bool)
    first_row = first_rows(inverse.reshape(-1), len(keys))
    for i, k in enumerate(keys.tolist()):
        sid, is_task = k // 2, bool(k % 2)
        if sid >= 0:
            decided[i] = idle_of_stack(tree.names_of(sid)[::-1], is_task)
        else:  # no stack: the sample's own name is its leaf
            name = str(rows["name"][int(first_row[i])].as_py() or "")
            decided[i] = idle_of_stack([name], is_task)
    return decided[inverse.reshape(-1)]
