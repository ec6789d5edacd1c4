"""What ``tracekit info``, ``formats`` and ``plugins`` show, as data a program can use too.

Each function returns dataclasses; their ``lines()`` give the text the command prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from tracekit import fields
from tracekit.inputs import STDIN, Source
from tracekit.model import SYNTHETIC_ID_MAX
from tracekit.options import describe_options
from tracekit.pipeline import default_registry, read, sniff

if TYPE_CHECKING:
    from tracekit.interfaces import WriteResult
    from tracekit.model import Trace
    from tracekit.registry import PluginInfo, Registry


@dataclass
class Description:
    """What one input holds (``tracekit info``)."""

    path: str
    format: str | None
    confidence: float | None  # the reader's sniffing weight; None when not sniffed
    tool: dict[str, str] = field(default_factory=dict)  # tool, tool_version, clock
    start_ns: int | None = None
    end_ns: int | None = None
    events: int = 0
    #: (category, kind, rows), sorted.
    categories: list[tuple[str, str, int]] = field(default_factory=list)
    devices: list[tuple[int, str | None]] = field(default_factory=list)
    #: (pid, name, rank).
    processes: list[tuple[int, str | None, int | None]] = field(default_factory=list)
    #: (input record kind, what became of it, count), sorted.
    records: list[tuple[str, str, int]] = field(default_factory=list)
    #: pids a reader made up for processes the input names but gives no pid (perf script
    #: without -F pid: its ``synthetic_pids``), and each one's thread ids.
    made_up: dict[int, list[int]] = field(default_factory=dict)

    def _tids(self, pid: int) -> str:
        tids = self.made_up.get(pid) or []
        return ", ".join(map(str, tids[:5])) + (f" and {len(tids) - 5} more"
                                                  if len(tids) > 5 else "") if tids else "?"

    def lines(self) -> list[str]:
        """The text ``tracekit info`` prints."""
        fmt = self.format if self.confidence is None else \
            f"{self.format} (confidence {self.confidence:.2f})"
        header = [("format", fmt), *self.tool.items()]
        if self.start_ns is not None and self.end_ns is not None:
            header.append(("time span", f"{(self.end_ns - self.start_ns) / 1e6:,.3f} ms "
                                        f"(from {self.start_ns:,} to {self.end_ns:,} ns)"))
        header.append(("events", f"{self.events:,}"))
        width = max(len(key) for key, _ in header)
        out = [self.path, *(f"  {key:<{width}} {value}" for key, value in header)]
        width = max([18, *(len(category) for category, _, _ in self.categories)])
        out += [f"    {category:<{width}} {kind:<8} {n:>10,}"
                for category, kind, n in self.categories]
        out += [f"  device {device}: {name or '?'}" for device, name in self.devices]
        out += [(f"  process {name or '?'}, threads {self._tids(pid)}" if pid in self.made_up
                 else f"  process {pid}: {name or '?'}"
                 if pid is None or pid > SYNTHETIC_ID_MAX
                 # a number the reader made up for a process the trace names only
                 else f"  process {name} (no pid in the trace)"
                 if name and name != "(no pid)" else "  process without a pid")
                + (f" rank {rank}" if rank is not None else "")
                for pid, name, rank in self.processes]
        out.append("  input records:")
        width = max([28, *(len(kind) for kind, _, _ in self.records)])
        out += [f"    {kind:<{width}} {n:>10,}  {outcome}" for kind, outcome, n in self.records]
        return out


def describe(path: str | Path, *, format: str | None = None,
             registry: Registry | None = None) -> Description:
    """Read one input and say what it holds: format, tool, time span, events per category
    and kind, devices, processes, and the account of every input record.

    Examples
    --------
    >>> d = describe("fixtures/torch-cpu/mlp_cpu.pt.trace.json.gz")  # doctest: +SKIP
    >>> d.format, d.events  # doctest: +SKIP
    ('kineto', 1059)
    """
    registry = registry or default_registry()
    sniffed = format is None and str(path) != STDIN
    ranked = sniff(Source(path), registry) if sniffed else []
    trace = read(path, format=format, registry=registry)
    meta = trace.metadata.get("sources", {}).get(trace.sources[0], {}) if trace.sources else {}
    ev = trace.events
    desc = Description(str(path), ranked[0][1] if ranked else (meta.get("reader") or format),
                       ranked[0][0] if ranked else None,
                       tool={k: str(meta[k]) for k in ("tool", "tool_version", "clock")
                             if meta.get(k)},
                       events=ev.num_rows)
    timed = ev.filter(pc.is_valid(ev["ts_ns"]))
    if timed.num_rows:
        desc.start_ns = pc.min(timed["ts_ns"]).as_py()
        desc.end_ns = pc.max(pc.add(timed["ts_ns"], pc.fill_null(timed["dur_ns"], 0))).as_py()
    counts = ev.group_by(["category", "kind"], use_threads=False).aggregate(
        [("name", "count")]).to_pylist()
    desc.categories = sorted((r["category"], r["kind"], r["name_count"]) for r in counts)
    desc.devices = [(d["device"], d["name"]) for d in trace.devices.to_pylist()]
    desc.processes = [(p["pid"], p["name"], p["rank"]) for p in trace.processes.to_pylist()]
    sources = trace.metadata.get("sources", {}) if isinstance(trace.metadata, dict) else {}
    made_up = {pid for meta in sources.values() if isinstance(meta, dict)
               for pid in (meta.get("synthetic_pids") or {}).values()}
    for t in trace.threads.to_pylist():
        if t["pid"] in made_up and t["tid"] is not None:
            desc.made_up.setdefault(t["pid"], []).append(t["tid"])
    desc.made_up.update({pid: sorted(tids) for pid, tids in desc.made_up.items()})
    desc.made_up.update({pid: [] for pid in made_up if pid not in desc.made_up})
    desc.records = sorted((kind, outcome, n)
                          for (_, kind, outcome), n in trace.log.outcomes.items())
    return desc


@dataclass
class ComponentInfo:
    """One registered reader, writer or analyzer (``tracekit formats``)."""

    kind: str
    name: str
    description: str
    extensions: tuple[str, ...]
    #: (option, type, default, help) per option.
    options: list[tuple[str, str, Any, str]]
    #: A reader that ``streams_events`` or a writer that ``takes_batches``.
    streams: bool = False

    def lines(self) -> list[str]:
        """The text ``tracekit formats`` prints for this component."""
        exts = f" [{', '.join(self.extensions)}]" if self.extensions else ""
        streams = f"; {_STREAMS[self.kind]}" if self.streams else ""
        return [f"{self.kind:<9} {self.name:<14} {self.description}{exts}{streams}",
                *(f"{'':<25}-O {opt}={typ} (default {default!r}) {help_}"
                  for opt, typ, default, help_ in self.options)]


_STREAMS = {"reader": "streams its events (docs/cli.md, Streaming)",
            "writer": "writes one streamed input as it is read (docs/cli.md, Streaming)"}


def components(registry: Registry | None = None) -> list[ComponentInfo]:
    """Every registered component, by kind and then name, with its options."""
    registry = registry or default_registry()
    return [ComponentInfo(kind, name, cls.description, tuple(getattr(cls, "extensions", ())),
                          describe_options(cls),
                          bool(getattr(cls, "streams_events", False)
                               or getattr(cls, "takes_batches", False)))
            for kind, by_name in registry.components.items()
            for name, cls in sorted(by_name.items())]


def plugins(registry: Registry | None = None, *, builtin: bool = False) -> list[PluginInfo]:
    """The installed plugins (the built-in ones too with ``builtin``), with the commands
    each adds to the command line."""
    import typer

    registry = registry or default_registry()
    if not registry.commands_known:
        registry.register_commands(typer.Typer())  # learn the commands on an app of their own
    return [p for p in registry.plugins if builtin or not p.builtin]


def plugin_json(info: PluginInfo) -> dict[str, Any]:
    """One plugin as ``tracekit plugins --json`` lists it."""
    return {"name": info.name, "distribution": info.dist, "version": info.version,
            "value": info.value, "status": info.status, "error": info.error,
            "components": [f"{k} {n}" for k, n in info.components], "commands": info.commands}


def plugin_lines(info: PluginInfo) -> list[str]:
    """One plugin as ``tracekit plugins`` prints it."""
    comps = ", ".join([*(f"{k} {n}" for k, n in info.components),
                       *(f"command {c}" for c in info.commands)]) or "-"
    line = f"{info.name:<16} {info.dist} {info.version:<8} {info.status:<8} {comps}"
    return [line, f"{'':<16} error: {info.error}"] if info.error else [line]


# A notice's kind that ends in one of these already names what was counted ("PERF_RECORD
# side-band lines", "trace events (X)"); any other kind (a file, a table, a key) is followed
# by "records".
COUNTED_NOUNS = frozenset({
    "records", "rows", "entries", "lines", "files", "events", "samples", "packets", "fields",
    "cells", "bins", "endpoints", "names", "annotations", "descriptors", "ranges", "agents",
    "values", "frames", "dispatches", "calls", "tables"})


def counted(kind: str) -> str:
    """``kind`` as the thing counted in a notice: ``results.csv records``, ``LOST lines``."""
    words = re.sub(r"\s*\([^()]*\)$", "", kind).split()
    return kind if words and words[-1] in COUNTED_NOUNS else f"{kind} records"


def read_notice_lines(trace: Trace) -> list[str]:
    """What the readers skipped or warned of, a line each (``ReadLog.notices``): said by
    ``convert`` and ``analyze`` alike, so that nothing is dropped silently."""
    out = []
    for (source, kind, outcome), n in sorted(trace.log.notices().items()):
        if outcome.startswith("warning"):
            what = "" if kind == source else f"{kind}: "  # a file read alone names itself
            out.append(f"warning: {source}: {what}{outcome.removeprefix('warning: ')}")
        else:
            out.append(f"warning: {source}: {n:,} {counted(kind)} {outcome}")
    return out


def conversion_lines(trace: Trace, result: WriteResult) -> list[str]:
    """What ``tracekit convert`` says after writing, besides the time taken: what the
    readers skipped or warned of, the events the writer could not represent, and then the
    values of events it wrote without them (``fields.field_skip`` keys)."""
    out = read_notice_lines(trace)
    skipped = sorted(result.skipped.items())
    out += [f"warning: {n:,} events not written: {reason}"
            for reason, n in skipped if not fields.is_field_skip(reason)]
    # One line per reason and count: the columns a CPU sample cannot carry, said once.
    columns: dict[tuple[int, str], list[str]] = {}
    for key, n in skipped:
        if fields.is_field_skip(key):
            column, _, why = key.removeprefix(fields.FIELD_PREFIX).partition(": ")
            columns.setdefault((n, why), []).append(column)
    for (n, why), names in columns.items():
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        kind = "note" if why.startswith(fields.BY_FORMAT) else "warning"
        whose = "their" if n != 1 else "its"
        out.append(f"{kind}: {n:,} event{'s' if n != 1 else ''} written without {whose} {listed}: "
                   f"{why.removeprefix(fields.BY_FORMAT)}")
    return out
