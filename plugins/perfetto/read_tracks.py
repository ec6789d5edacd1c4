"""Perfetto track descriptors to the event model's identities: pid, tid, device and stream.

Processes and threads come from ``TrackDescriptor.process`` / ``.thread`` (and the legacy
packet-level descriptors). tracekit's own layout (``plugins/perfetto/tracks.py``) is read
back: a "GPU n: name" track, top-level or under a process (a run's rank), is device n, its
"Stream k" children are its streams, "<track> (overlap n)" lanes belong to their track, a
"<source>: no process" track holds rows of no process, "name (rank N)" names a ranked
process. Any other named track becomes what tracekit would have drawn that way: a named track
under a process is a thread of that process with a synthetic id, a named top-level track a
process with a synthetic id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tracekit import TraceBuilder
from tracekit.plugins.perfetto.tracks import DEVICE_PROPERTIES, PROCESS, THREAD, stable_uuid
from tracekit.toolkit import SYNTHETIC_ID_MAX

# "GPU 2: GPU 2" is device 2 named "GPU 2": a prefix ("rank r ", an input's name) only
# where the name does not start with "GPU n".
_DEVICE = re.compile(r"(?:(?:rank \d+|.+?) )??GPU (\d+)(?:: (.+))?", re.S)
_LANE = re.compile(r"(.*) \(overlap \d+\)", re.S)
_RANKED = re.compile(r"(.*) \(rank (\d+)\)", re.S)
_STREAM = re.compile(r"Stream (-?\d+)")
_NO_STREAM = "(no stream)"
_NO_PROCESS = ": no process"


#: A GPU track's description as tracekit's writer gives it: "label: value" parts, "; " apart
#: (``tracks.DEVICE_PROPERTIES``), back to the devices table's columns.
_PROPERTY_COLUMNS = {label: (column, unit, kind)
                     for column, label, unit, kind in DEVICE_PROPERTIES}


def device_properties(description: str) -> dict[str, Any]:
    """The devices table's columns a GPU track's description names; other text is left."""
    out: dict[str, Any] = {}
    for part in description.split("; "):
        label, _, value = part.partition(": ")
        column = _PROPERTY_COLUMNS.get(label)
        if column is None or not value:
            continue
        name, unit, kind = column
        value = value.removesuffix(unit) if unit else value
        try:
            out[name] = kind(value)
        except ValueError:
            continue
    return out


@dataclass
class Descriptor:
    """What the reader keeps of one TrackDescriptor."""

    uuid: int
    parent: int = 0
    name: str | None = None
    pid: int | None = None
    tid: int | None = None
    is_process: bool = False
    is_thread: bool = False
    is_counter: bool = False
    counter_categories: tuple[str, ...] = ()
    unit_multiplier: int = 1
    incremental: bool = False
    description: str | None = None

    @property
    def label(self) -> str:
        """The name the track is shown with (as tracekit's writer names it)."""
        if self.name:
            return self.name
        if self.is_thread:
            return f"thread {self.tid}"
        if self.is_process:
            return f"process {self.pid}"
        return ""


@dataclass(frozen=True)
class Identity:
    """Who the rows on a track belong to."""

    pid: int | None = None
    tid: int | None = None
    device: int | None = None
    stream: int | None = None
    known: bool = True


_UNKNOWN = Identity(known=False)


@dataclass
class TrackMap:
    """All track descriptors of a trace, resolved to identities on demand."""

    tracks: dict[int, Descriptor] = field(default_factory=dict)
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    conflicting: int = 0
    ambiguous_lanes: int = 0
    _memo: dict[int, Identity] = field(default_factory=dict)
    _synthetic: dict[tuple[object, ...], int] = field(default_factory=dict)
    _implicit: dict[tuple[int, int], int] = field(default_factory=dict)
    _children: dict[int, list[int]] | None = None
    _devices: dict[int, str | None] = field(default_factory=dict)
    _device_properties: dict[int, dict[str, Any]] = field(default_factory=dict)
    _processes: dict[int, tuple[str | None, int | None]] = field(default_factory=dict)
    _threads: dict[tuple[int, int], str | None] = field(default_factory=dict)

    def add(self, d: Descriptor) -> None:
        """Declare a track; a uuid declared twice keeps its first description."""
        old = self.tracks.get(d.uuid)
        if old is None:
            self.tracks[d.uuid] = d
            self._children = None
        elif old != d:
            self.conflicting += 1

    def implicit_thread(self, pid: int, tid: int) -> int:
        """A track key for events of a legacy thread-descriptor sequence (no track uuid)."""
        key = self._implicit.get((pid, tid))
        if key is None:
            key = (1 << 64) - 1 - len(self._implicit)
            self._implicit[(pid, tid)] = key
            self.tracks[key] = Descriptor(key, pid=pid, tid=tid, is_thread=True)
            self._children = None
        return key

    def resolve(self, uuid: int) -> Identity:
        """The identity of the rows on track ``uuid``."""
        found = self._memo.get(uuid)
        if found is None:
            found = self._memo[uuid] = self._resolve(uuid, 0)
        return found

    def peek(self, uuid: int) -> Identity | None:
        """The identity of track ``uuid`` if it and its ancestors are declared, else None
        (and nothing remembered, so that a later look sees later descriptors)."""
        d, depth = self.tracks.get(uuid), 0
        while d is not None and d.parent and depth < 64:
            d, depth = self.tracks.get(d.parent), depth + 1
        return self.resolve(uuid) if d is not None else None

    def counter(self, uuid: int) -> Descriptor | None:
        """The descriptor of ``uuid`` if it is a counter track."""
        d = self.tracks.get(uuid)
        return d if d is not None and d.is_counter else None

    def fill(self, out: TraceBuilder) -> None:
        """Add the processes, threads and devices met while resolving to ``out``."""
        # A process whose rows all lie on its threads' tracks is named by its own
        # descriptor, which no row resolved through.
        for d in list(self.tracks.values()):
            if d.is_process and d.pid in self._processes:
                self._process(d.pid, d.name)
        for pid, (name, rank) in sorted(self._processes.items()):
            out.add_process(pid, name=name or self.process_names.get(pid), rank=rank)
        for pid, name in sorted(self.process_names.items()):
            out.add_process(pid, name=name)
        for (pid, tid), name in sorted(self._threads.items()):
            out.add_thread(pid, tid, name=name or self.thread_names.get((pid, tid)))
        for (pid, tid), name in sorted(self.thread_names.items()):
            out.add_thread(pid, tid, name=name)
        for device, name in sorted(self._devices.items()):
            out.add_device(device, name=name, kind="gpu",
                           **self._device_properties.get(device, {}))

    # -- resolution ---------------------------------------------------------------------
    def _resolve(self, uuid: int, depth: int) -> Identity:
        d = self.tracks.get(uuid)
        if d is None or depth > 64:  # undeclared, or a parent cycle
            return _UNKNOWN
        if d.is_thread:
            return self._thread(d.pid or 0, d.tid or 0, d.name)
        if d.is_process:
            return self._process(d.pid or 0, d.name)
        if d.is_counter:
            return self._resolve(d.parent, depth + 1) if d.parent else Identity()
        name = d.name or ""
        lane = _LANE.fullmatch(name)
        if lane:
            base = self._lane_base(d, lane.group(1))
            if base is not None:
                return self._resolve(base, depth + 1)
        parent = self.tracks.get(d.parent)
        if not d.parent or self._is_device(d):  # a GPU: top-level, or in its rank's group
            return self._top_level(name, d.description)
        owner = self._resolve(d.parent, depth + 1)
        if parent is not None and self._is_device(parent):
            if name == _NO_STREAM:
                return owner
            stream = _STREAM.fullmatch(name)
            # Any other child of a device is a track of device rows (analysis spans).
            return Identity(device=owner.device,
                            stream=int(stream.group(1)) if stream else None)
        if owner.pid is not None and owner.tid is None and owner.device is None:
            return self._thread(owner.pid, self._synthetic_id(("tid", owner.pid, name)), name)
        if owner.known and (owner.tid is not None or owner.device is not None):
            return owner
        return self._top_level(name)

    def _top_level(self, name: str, description: str | None = None) -> Identity:
        device = _DEVICE.fullmatch(name)
        if device:
            n = int(device.group(1))
            self._devices.setdefault(n, device.group(2))
            if description:
                self._device_properties.setdefault(n, device_properties(description))
            return Identity(device=n)
        if name.endswith(_NO_PROCESS):
            return Identity()
        pid = self._synthetic_id(("pid", name))
        return self._process(pid, name)

    def _is_device(self, d: Descriptor) -> bool:
        parent = self.tracks.get(d.parent) if d.parent else None
        return ((not d.parent or (parent is not None and parent.is_process))
                and not (d.is_process or d.is_thread or d.is_counter)
                and _DEVICE.fullmatch(d.name or "") is not None)

    def _process(self, pid: int, name: str | None) -> Identity:
        rank = None
        if name:
            ranked = _RANKED.fullmatch(name)
            if ranked:
                name, rank = ranked.group(1), int(ranked.group(2))
            if name in (f"process {pid}", "(unnamed)"):
                name = None
        old_name, old_rank = self._processes.get(pid, (None, None))
        self._processes[pid] = (old_name or name, old_rank if old_rank is not None else rank)
        return Identity(pid=pid)

    def _thread(self, pid: int, tid: int, name: str | None) -> Identity:
        if name == f"thread {tid}":
            name = None
        self._process(pid, None)
        if not self._threads.get((pid, tid)):
            self._threads[(pid, tid)] = name
        return Identity(pid=pid, tid=tid)

    def _synthetic_id(self, key: tuple[object, ...]) -> int:
        found = self._synthetic.get(key)
        if found is None:
            found = self._synthetic[key] = SYNTHETIC_ID_MAX - len(self._synthetic)
        return found

    def _lane_base(self, lane: Descriptor, base: str) -> int | None:
        """The track an overlap lane belongs to: beside it, under the same parent."""
        if self._children is None:
            children: dict[int, list[int]] = {}
            for d in self.tracks.values():
                if not (d.is_thread or d.is_process):
                    children.setdefault(d.parent, []).append(d.uuid)
            self._children = children
        candidates = [u for u in self._children.get(lane.parent, []) if u != lane.uuid]
        parent = self.tracks.get(lane.parent)
        if parent is not None and parent.is_process:
            # The lanes of a thread hang off its process; the thread itself has no parent.
            candidates += [d.uuid for d in self.tracks.values()
                           if d.is_thread and d.pid == parent.pid]
        if not lane.parent:
            candidates += [d.uuid for d in self.tracks.values() if d.is_process]
        same = [u for u in candidates if self.tracks[u].label == base
                and not _LANE.fullmatch(self.tracks[u].label)]
        if len(same) > 1:
            # Two threads (or processes) of one name: tracekit's writer derives a lane's uuid
            # from its track's key, which tells them apart.
            lane_no = int((lane.name or "").rsplit("(overlap ", 1)[-1].rstrip(")") or 0)
            for uuid in same:
                d = self.tracks[uuid]
                cls, b = (THREAD, d.tid) if d.is_thread else (PROCESS, 0)
                for source in range(8):
                    if stable_uuid("lane", (cls, source, d.pid, b), lane_no) == lane.uuid:
                        return uuid
            self.ambiguous_lanes += 1
        return same[0] if same else None
