"""The GPUs of a rocprof v1 run, named as the product is: rocprof v1 writes the run's
``rocminfo`` output beside its results (``results.sysinfo.txt``) and copies it into
``results.json``'s ``otherData`` (keys such as ``Agent5.MarketingName``, spaces removed).

The device number in v1's outputs (``gpu-id`` in results.csv, ``dev-id`` and ``GPU<n>``
in results.json and results.db) is not the same in every ROCm: ROCm 4 wrote the GPU's
position among the GPU agents (rocprofiler's ``dev_index``: 0 for the first GPU of a
machine whose GPUs are nodes 4-7), ROCm 6 writes the agent's node id (4 for the same GPU,
as rocminfo's ``Node``). The real files of both show it. A run's devices are named by node
id when every device its events use is a GPU node, else by position.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from tracekit import TraceBuilder

Gpu = dict[str, Any]
_AGENT = re.compile(r"^\s*Agent\s+(\d+)\s*$", re.MULTILINE)
_FIELD = re.compile(r"^  (Name|Marketing Name|Device Type|Compute Unit|Node):\s*(.*?)\s*$",
                    re.MULTILINE)
_OTHER_KEY = re.compile(rb'"Agent(\d+)\.(Name|MarketingName|DeviceType|ComputeUnit|Node)"'
                        rb'\s*:\s*"((?:[^"\\]|\\.){0,200})"')
_KEYS = {"Name": "arch", "Marketing Name": "product", "MarketingName": "product",
         "Device Type": "type", "DeviceType": "type", "Compute Unit": "cus",
         "ComputeUnit": "cus", "Node": "node"}
# Where spaces were removed: a word starting after a lower-case letter or a digit run,
# or the last capital of an acronym before a capitalised word (AMDInstinct).
_WORD_START = re.compile(r"(?<=[a-z])(?=[A-Z0-9])|(?<=[A-Z])(?=[A-Z][a-z])")
_MAX_SCAN = 16 << 20  # bytes of a results.json searched for its otherData


def respace(name: str) -> str:
    """A rocminfo name whose spaces rocprof v1 removed, spaced again at its word starts:
    ``AMDInstinctMI300X`` is ``AMD Instinct MI300X``, ``Vega20`` is ``Vega 20``."""
    return name if " " in name else _WORD_START.sub(" ", name)


def _small_int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() and len(text) < 9 else None


def _gpus(agents: dict[int, dict[str, str]]) -> list[Gpu]:
    """GPU agents, in rocminfo's order: their position among the GPUs (``index``), node id
    (``node``) and device row fields."""
    gpus = []
    for number in sorted(agents):
        fields = agents[number]
        if fields.get("type", "").strip().upper() != "GPU":
            continue
        gpus.append({"index": len(gpus), "node": _small_int(fields.get("node")),
                     "name": fields.get("product") or None,
                     "compute_capability": fields.get("arch") or None,
                     "sm_count": _small_int(fields.get("cus"))})
    return gpus


def from_rocminfo(text: str) -> list[Gpu]:
    """The GPUs of a ``rocminfo`` listing (``results.sysinfo.txt``); the first ``Name`` of
    an agent is its own (later ones belong to its ISAs)."""
    agents: dict[int, dict[str, str]] = {}
    starts = list(_AGENT.finditer(text))
    for m, end in zip(starts, [*(s.start() for s in starts[1:]), len(text)], strict=True):
        fields: dict[str, str] = {}
        for key, value in _FIELD.findall(text, m.end(), end):
            fields.setdefault(_KEYS[key], value)
        agents[int(m.group(1))] = fields
    return _gpus(agents)


def from_other_data(other: Any) -> list[Gpu]:
    """The GPUs of a results.json ``otherData`` object."""
    if not isinstance(other, dict):
        return []
    agents: dict[int, dict[str, str]] = {}
    for key, value in other.items():
        m = re.fullmatch(r"Agent(\d{1,6})\.(Name|MarketingName|DeviceType|ComputeUnit|Node)",
                         str(key))
        if m and isinstance(value, str | int) and not isinstance(value, bool):
            agents.setdefault(int(m.group(1)), {})[_KEYS[m.group(2)]] = str(value)
    return _respaced(_gpus(agents))


def _respaced(gpus: list[Gpu]) -> list[Gpu]:
    for gpu in gpus:
        if gpu["name"]:
            gpu["name"] = respace(gpu["name"])
    return gpus


def _from_json_file(path: Path) -> list[Gpu]:
    """The GPUs in a results.json beside the input, found without parsing all of it."""
    with open(path, "rb") as fh:
        raw = fh.read(_MAX_SCAN)
    start = raw.find(b'"otherData"')
    if start < 0:
        return []
    agents: dict[int, dict[str, str]] = {}
    for number, key, value in _OTHER_KEY.findall(raw, start):
        agents.setdefault(int(number), {})[_KEYS[key.decode()]] = \
            value.decode("utf-8", "replace")
    return _respaced(_gpus(agents))


def beside(paths: list[Path]) -> tuple[list[Gpu], str | None]:
    """The GPUs named by the rocminfo copy of the v1 run the files ``paths`` belong to:
    ``<prefix>.sysinfo.txt`` beside them (or one of ``paths``), else ``<prefix>.json``'s
    otherData; and the name of the file that held them."""
    seen: set[Path] = set()
    for suffix in (".sysinfo.txt", ".json"):
        for path in paths:
            candidate = path if path.name.endswith(suffix) and suffix != ".json" else \
                path.with_name(path.name.split(".")[0] + suffix)
            if candidate in seen or (candidate == path and suffix == ".json") or \
                    not candidate.is_file():
                continue
            seen.add(candidate)
            try:
                gpus = from_rocminfo(candidate.read_text("utf-8", "replace")) \
                    if suffix == ".sysinfo.txt" else _from_json_file(candidate)
            except OSError:
                continue
            if gpus:
                return gpus, candidate.name
    return [], None


def add(out: TraceBuilder, gpus: list[Gpu], source: str, used: set[int]) -> None:
    """Name the devices ``gpus`` describes, numbered as the events (using the devices
    ``used``) number them, and say where the names came from."""
    nodes = {g["node"] for g in gpus if g["node"] is not None}
    key = "node" if nodes and used <= nodes else "index"
    for gpu in gpus:
        if gpu[key] is not None:
            out.add_device(gpu[key], vendor="amd", kind="gpu", name=gpu["name"],
                           compute_capability=gpu["compute_capability"],
                           sm_count=gpu["sm_count"])
    if gpus:
        out.note(source, f"GPU agents (devices table, numbered by {key})", len(gpus))


def used_devices(parts: list[dict[str, Any]]) -> set[int]:
    """The device numbers the event columns of ``parts`` use."""
    used: set[int] = set()
    for columns in parts:
        if columns.get("device") is not None:
            used.update(d for d in pa.array(columns["device"]).to_pylist() if d is not None)
    return used
