"""Devices, processes and threads: device and stream ids of device rows, the launching pid,
``deviceProperties``, and the process and thread tables."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import DEVICE_CATEGORIES
from tracekit.plugins.kineto.context import Context
from tracekit.plugins.kineto.fields import INT32, INT64, as_int
from tracekit.plugins.kineto.flows import launching_pid
from tracekit.toolkit import SYNTHETIC_ID_MAX, is_in

_STREAM_TID = re.compile(r"stream\s+(\d+)", re.IGNORECASE)
_AMD_NAMES = ("AMD", "Instinct", "Radeon", "gfx")


def device_columns(ctx: Context, table: pa.Table) -> pa.Table:
    """Device rows: device from the GPU pid, stream from args or tid, pid of the launcher."""
    is_dev = is_in(table["category"], sorted(DEVICE_CATEGORIES)).to_numpy()
    pid = table["_pid"].fill_null(-1).to_numpy()
    tid_valid = table["_tid"].is_valid().to_numpy(zero_copy_only=False) & ~is_dev
    tid = table["_tid"].fill_null(-1).to_numpy()
    device = np.where(is_dev, pid, 0)
    stream = tid.copy()
    didx = np.flatnonzero(is_dev)
    # args.device/stream are the tool's own ids; a GPU pid can be remapped (TraceLens
    # merges ranks as pid = rank * 1e8 + device), so the args win where present.
    for column, key in ((stream, "_arg_stream"), (device, "_arg_device")):
        np.copyto(column, table[key].fill_null(0).to_numpy(),
                  where=table[key].is_valid().to_numpy(zero_copy_only=False))
    # Rows without args.device (gpu_user_annotation) take the device that the same GPU pid
    # maps to on the rows that have it, so one GPU never appears under two ids.
    has_dev = table["_arg_device"].is_valid().to_numpy(zero_copy_only=False) & is_dev
    gpu_pids, devices = _one_device_per_pid(pid[has_dev], device[has_dev])
    fill = is_dev & ~has_dev & np.isin(pid, gpu_pids)
    if fill.any():
        device[fill] = devices[np.searchsorted(gpu_pids, pid[fill])]
    # Old traces name GPU threads "stream 7"; they arrive here as synthetic ids.
    named = didx[stream[didx] <= SYNTHETIC_ID_MAX]
    ids = np.unique(stream[named])
    parsed = [_STREAM_TID.search(ctx.labels.get(int(i), "")) for i in ids]
    numbers = np.array([int(m.group(1)) if m else i for m, i in zip(parsed, ids,
                                                                     strict=True)],
                       dtype=np.int64)
    stream[named] = numbers[np.searchsorted(ids, stream[named])]
    # A device id must fit int32: a GPU pid that is a name or a huge number is none.
    dev_ok = is_dev & (device >= INT32[0]) & (device <= INT32[1])
    if (is_dev & ~dev_ok).any():
        ctx.warn("X:device work", "no device id in int32 range (device null)",
                   int((is_dev & ~dev_ok).sum()))
    # Each device seen, with the GPU pid whose process labels name it.
    ok_idx = np.flatnonzero(dev_ok)
    ctx.gpu_devices = dict(zip(device[ok_idx].tolist(), pid[ok_idx].tolist(),
                                strict=True))
    launcher = launching_pid(table, pid, is_dev)
    out_pid = np.where(is_dev, launcher, pid)
    pid_valid = ~is_dev | (launcher >= 0)
    cols = {
        "pid": pa.array(out_pid, mask=~pid_valid),
        "tid": pa.array(tid, mask=~tid_valid),
        "device": pa.array(np.where(dev_ok, device, 0).astype(np.int32), mask=~dev_ok),
        "stream": pa.array(stream, mask=~is_dev),
    }
    for name, col in cols.items():
        table = table.append_column(name, col) if name not in table.column_names \
            else table.set_column(table.schema.get_field_index(name), name, col)
    return table

def _one_device_per_pid(pid: np.ndarray, device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pids (sorted) that go with one device only, and that device of each; over the
    distinct pids and devices (a few), not over a sort of the (pid, device) rows."""
    pids = pc.dictionary_encode(pa.array(pid, type=pa.int64()))
    devices = pc.dictionary_encode(pa.array(device, type=pa.int64()))
    width = len(devices.dictionary)
    pairs = np.unique(pids.indices.to_numpy().astype(np.int64) * width +
                      devices.indices.to_numpy())
    of_pid, of_device = pairs // max(width, 1), pairs % max(width, 1)
    single = (np.bincount(of_pid, minlength=len(pids.dictionary)) == 1)[of_pid]
    gpu_pids = pids.dictionary.to_numpy()[of_pid[single]]
    order = np.argsort(gpu_pids)
    return gpu_pids[order], devices.dictionary.to_numpy()[of_device[single]][order]


def devices_and_processes(ctx: Context, table: pa.Table | None) -> None:
    out = ctx.out
    props = ctx.top.get("deviceProperties")
    vendor_hint = "amd" if any(k in ctx.top for k in ("roctracer_version",
                                                          "hip_runtime_version")) else None
    named = _device_properties(ctx, props, vendor_hint, _property_ids(ctx, props))
    if table is None:
        return
    for dev, gpu_pid in sorted(ctx.gpu_devices.items()):
        label = ctx.process_labels.get(gpu_pid) or ctx.process_names.get(gpu_pid)
        out.add_device(int(dev), kind="gpu", vendor=vendor_hint,
                       name=None if int(dev) in named else label)
    rank = _rank(ctx.top)
    host = ctx.top.get("host_name") if isinstance(ctx.top.get("host_name"), str) else None
    # Threads in order of first appearance, processes of host rows sorted: over the three
    # columns that tell, not over copies of the whole table.
    pairs = [p for p in pa.table({"pid": table["pid"], "tid": table["tid"]}).group_by(
        ["pid", "tid"], use_threads=False).aggregate([]).to_pylist() if p["tid"] is not None]
    on_host = pc.invert(is_in(table["category"], sorted(DEVICE_CATEGORIES)))
    host_pids = set(pc.unique(table["pid"].filter(on_host).drop_null()).to_pylist())
    for pid in sorted(host_pids):
        name = ctx.process_names.get(pid) or ctx.labels.get(pid)
        out.add_process(pid, name=name, host=host, rank=rank)
    for p in pairs:
        out.add_thread(p["pid"], p["tid"], name=ctx.thread_names.get((p["pid"], p["tid"]))
                       or ctx.labels.get(p["tid"]))

# HIP launch calls whose grid is the global work size (work-items), not blocks: Kineto
# records the call's own arguments.
GLOBAL_SIZE_LAUNCH = r"^hip(Ext|Hcc)ModuleLaunchKernel$"


def grids_in_blocks(ctx: Context, table: pa.Table) -> pa.Table:
    """Kernels launched by ``hipExtModuleLaunchKernel`` (hipBLASLt's, Tensile's) carry the
    global work size as their grid: divided by the block size, rounded up, as blocks."""
    if "grid_x" not in table.column_names or "correlation" not in table.column_names:
        return table
    names = table["name"].cast(pa.string())
    calls = pc.and_(pc.fill_null(pc.match_substring_regex(names, GLOBAL_SIZE_LAUNCH), False),
                    pc.invert(is_in(table["category"], sorted(DEVICE_CATEGORIES))))
    launched = pc.unique(table["correlation"].filter(calls).drop_null())
    if not len(launched):
        return table
    kernels = pc.and_(pc.equal(table["category"].cast(pa.string()), "gpu.kernel"),
                      pc.fill_null(pc.is_in(table["correlation"], launched), False))
    rows = np.flatnonzero(kernels.to_numpy(zero_copy_only=False))
    if not len(rows):
        return table
    for axis in "xyz":
        grid = table[f"grid_{axis}"].to_numpy(zero_copy_only=False).astype(np.float64)
        block = table[f"block_{axis}"].to_numpy(zero_copy_only=False).astype(np.float64)
        ok = np.isfinite(grid[rows]) & np.isfinite(block[rows]) & (block[rows] > 0)
        grid[rows[ok]] = np.ceil(grid[rows[ok]] / block[rows[ok]])
        column = pa.array(grid, mask=np.isnan(grid)).cast(pa.int32())
        table = table.set_column(table.column_names.index(f"grid_{axis}"), f"grid_{axis}",
                                 column)
    ctx.out.note("derived from X:kernel", "grid given in work-items by hipExtModuleLaunchKernel: "
                 "divided by the block size (blocks)", len(rows))
    return table


def _property_ids(ctx: Context, props: Any) -> dict[int, int]:
    """``deviceProperties`` ids to the device ids the events run on, where they differ: on
    ROCm the properties number the GPUs from 0 (HIP's ordinals) while the GPU events carry
    the agent's index, the CPU agents first (an MI300X is device 2). Where none of the
    properties' ids is a device the events use and there are as many of each, they are
    matched in order; else the ids stay as they are."""
    if type(props) is not list or not ctx.gpu_devices:
        return {}
    ids = sorted({i for p in props if type(p) is dict and (i := as_int(p.get("id"))) is not None})
    used = sorted(int(d) for d in ctx.gpu_devices)
    if not ids or len(ids) != len(used) or set(ids) & set(used):
        return {}
    pairs = ", ".join(f"{i} as {u}" for i, u in zip(ids, used, strict=True))
    ctx.out.note("deviceProperties", f"matched in order to the devices the events use ({pairs}"
                 "): ROCm numbers its CPU agents first", len(ids))
    return dict(zip(ids, used, strict=True))


#: The deviceProperties keys the devices table holds (with the id).
_KEPT_PROPERTIES = frozenset({"id", "name", "gcnArchName", "numSms", "totalGlobalMem",
                              "computeMajor", "computeMinor"})


def _device_properties(ctx: Context, props: Any, vendor_hint: str | None,
                       ids: dict[int, int] | None = None) -> set[int]:
    """Add the devices of ``deviceProperties`` (their ids mapped by ``ids``); return the ids
    that have a name."""
    if props is None:
        return set()
    if type(props) is not list:
        ctx.out.note("deviceProperties", "skipped: not a list")
        return set()
    named: set[int] = set()
    skipped = odd = 0
    others: set[str] = set()
    for p in props:
        device = as_int(p.get("id")) if type(p) is dict else None
        if device is None or not INT32[0] <= device <= INT32[1]:
            skipped += 1
            continue
        device = (ids or {}).get(device, device)
        others.update(k for k in p if k not in _KEPT_PROPERTIES)
        fields = {k: p.get(k) for k in ("name", "gcnArchName")}
        fields.update({k: as_int(p.get(k)) for k in ("numSms", "totalGlobalMem",
                                                       "computeMajor", "computeMinor")})
        for k in ("name", "gcnArchName"):
            if fields[k] is not None and type(fields[k]) is not str:
                fields[k] = None
        if fields["numSms"] is not None and not 0 <= fields["numSms"] <= INT32[1]:
            fields["numSms"] = None
        if fields["totalGlobalMem"] is not None and \
                not 0 <= fields["totalGlobalMem"] <= INT64[1]:
            fields["totalGlobalMem"] = None
        odd += sum(1 for k, v in fields.items() if v is None and p.get(k) is not None)
        name = fields["name"]
        if name:
            named.add(device)
        vendor = vendor_hint or ("amd" if name and any(a in name for a in _AMD_NAMES)
                                 else "nvidia")
        major, minor = fields["computeMajor"], fields["computeMinor"]
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        ctx.out.add_device(device, name=name, vendor=vendor, kind="gpu",
                            sm_count=fields["numSms"],
                            memory_bytes=fields["totalGlobalMem"],
                            compute_capability=fields["gcnArchName"] or cc)
    ctx.out.note("deviceProperties", "devices", len(props) - skipped)
    if others:  # the devices table holds the kept ones; the rest are named, not lost unsaid
        ctx.out.note("deviceProperties", "keys not kept (the devices table holds name, SMs, "
                     "memory and compute capability): " + ", ".join(sorted(others)),
                     len(props) - skipped)
    ctx.out.note("deviceProperties", "skipped: no integer id in int32 range", skipped)
    if odd:
        ctx.warn("deviceProperties", "a field has the wrong type or range (ignored)",
                   odd)
    return named

def _rank(top: dict[str, Any]) -> int | None:
    dist = top.get("distributedInfo")
    rank = as_int(dist.get("rank")) if isinstance(dist, dict) else None
    return rank if rank is not None and 0 <= rank <= INT64[1] else None


