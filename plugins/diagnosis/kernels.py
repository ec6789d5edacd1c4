"""The ``kernels`` analyzer: what each kernel's launch configuration asks of the device.

Per device and launch configuration (kernel name, grid blocks, threads per block, registers per
thread, shared memory per block), with the device's SM count (Kineto ``deviceProperties``, nsys
``TARGET_INFO_GPU``, rocprof agent info):

- **grid too small**: fewer blocks than the device has SMs (CUs): the launch runs in one wave
  that leaves ``1 - blocks/SMs`` of the SMs idle, so the SM time it loses is about its time x
  that fraction; the severity follows that lost share of the device's kernel time, not the
  share the launches take (critical from 25 % of the kernel time and of the device's span, a
  warning from ``min_share_pct``), so 128
  blocks on 132 SMs (3 % idle) is no finding; none on a device with under 1 ms of kernel time;
- **theoretical occupancy** (NVIDIA only): resident warps per SM over the SM's maximum, where
  resident blocks per SM = min of four limits, as NVIDIA's occupancy calculator
  (``cuda_occupancy.h``, ``cudaOccMaxActiveBlocksPerMultiprocessor``) computes them:

  - warps: ``max_warps // ceil(threads / 32)``;
  - registers: a warp takes ``ceil(regs * 32 / 256) * 256`` registers; each of the SM's
    ``partitions`` quarters of the 65,536-register file holds
    ``(65536 / partitions) // regs_per_warp`` warps, so blocks =
    ``(warps per partition * partitions) // warps_per_block``;
  - shared memory: ``smem_per_sm // ceil((smem_per_block + reserved) / unit) * unit``;
  - blocks: ``max_blocks``.

  The per-capability facts (``SM_LIMITS``) are the CUDA C++ Programming Guide's "Technical
  Specifications per Compute Capability" table and ``cuda_occupancy.h``'s granularities; shared
  memory per SM is the largest carveout, the default the calculator assumes. The result matches
  the "est. achieved occupancy %" Kineto records for every kernel of the real Kineto traces
  (tests/test_launch_and_kernels.py). AMD: not computed (the traces give architectural VGPRs
  only, not accumulation VGPRs and SGPRs, and wave slots differ by generation).

Vendor and framework kernels (cuBLAS, cuDNN, CUTLASS, TensorRT, PyTorch, NCCL, Triton...)
choose their registers and tiles on purpose: they are listed, but raise no occupancy finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import (
    COMMUNICATION,
    NO_GPU,
    READS_COLUMNS,
    Activity,
    DeviceWork,
)
from tracekit.toolkit import percent, report_table, short_name

WARP = 32
REG_UNIT = 256  # registers are allocated per warp in units of 256 (cuda_occupancy.h)
REGS_PER_SM = 65536
MAX_REGS_PER_THREAD = 255
MAX_THREADS_PER_BLOCK = 1024
LIBRARY_KERNEL = (r"(?i)cutlass|cublas|cudnn|cask_|xmma|_trt$|^trt_|nvjet|^(sm\d+|ampere|volta"
                  r"|turing|hopper|maxwell|pascal)_|gemm|gemv|nccl|rccl|cub::|thrust::|rocprim"
                  r"|at::native|at::cuda|c10::|^triton_|fmha|flash_?attn|^void (cutlass|cub|at)"
                  r"|elementwise_kernel|vectorized_|reduce_kernel|miopen|rocblas|hipblas|Tensile"
                  r"|^Cijk_")


# Batch norm kernels that launch one block per channel, ATen's (backward and statistics
# reductions: dim3 blocks(input.size(1))) and cuDNN's NCHW ones (bn_bw_1C11_…, 64 to 512
# blocks in ResNet-18, its channel counts): the batch does not change their grid.
PER_CHANNEL_KERNEL = re.compile(r"batch_norm_(backward|collect_statistics|backward_reduce)"
                                r"_kernel|\bbn_(bw|fw_tr|fw_inf)_1C11_")
# PyTorch's own kernels (ATen, c10, Inductor's Triton kernels).
FRAMEWORK_KERNEL = re.compile(r"at::native|at::cuda|c10::|^triton_|^void at::|"
                              r"elementwise_kernel|vectorized_|reduce_kernel")


@dataclass(frozen=True)
class SmLimits:
    """What one SM of a compute capability holds (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"; granularities from ``cuda_occupancy.h``)."""

    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    smem: int  # shared memory per SM, bytes (largest carveout)
    smem_block: int  # shared memory per block with opt-in, bytes
    smem_unit: int  # shared memory allocation unit, bytes
    smem_reserved: int  # shared memory the driver reserves per block, bytes (cc >= 8.0)
    partitions: int = 4  # SM sub-partitions the register file is split over


SM_LIMITS = {
    "6.0": SmLimits(64, 32, 64 * 1024, 48 * 1024, 256, 0, partitions=2),
    "6.1": SmLimits(64, 32, 96 * 1024, 48 * 1024, 256, 0),
    "7.0": SmLimits(64, 32, 96 * 1024, 96 * 1024, 256, 0),
    "7.5": SmLimits(32, 16, 64 * 1024, 64 * 1024, 256, 0),
    "8.0": SmLimits(64, 32, 164 * 1024, 163 * 1024, 128, 1024),
    "8.6": SmLimits(48, 16, 100 * 1024, 99 * 1024, 128, 1024),
    "8.9": SmLimits(48, 24, 100 * 1024, 99 * 1024, 128, 1024),
    "9.0": SmLimits(64, 32, 228 * 1024, 227 * 1024, 128, 1024),
}


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one launch configuration."""

    blocks_per_sm: int
    warps_per_block: int
    max_warps: int
    limits: dict[str, int]  # resident blocks allowed by each of warps, registers, ...

    @property
    def percent(self) -> float:
        return round(100.0 * self.blocks_per_sm * self.warps_per_block / self.max_warps, 1)

    @property
    def limiter(self) -> str:
        """The limits that bind (several when they tie), most specific first."""
        bound = [k for k in ("registers", "shared memory", "warps", "blocks")
                 if self.limits[k] == self.blocks_per_sm]
        return ", ".join(bound)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(compute_capability: str | None, threads: int, registers: int,
              shared_mem: int, smem_block: int | None = None) -> Occupancy | None:
    """Theoretical occupancy of blocks of ``threads`` threads using ``registers`` registers per
    thread and ``shared_mem`` bytes of shared memory per block, or None for a capability not in
    ``SM_LIMITS``. ``smem_block`` overrides the per-block shared memory limit (the opt-in one
    by default: a kernel that ran fitted it)."""
    lim = SM_LIMITS.get(compute_capability or "")
    if lim is None or threads <= 0 or registers < 0 or shared_mem < 0:
        return None
    warps = -(-threads // WARP)
    big = 1 << 30
    by_warps = lim.max_warps // warps if threads <= MAX_THREADS_PER_BLOCK else 0
    by_regs = big
    if registers:
        per_warp = _round_up(registers * WARP, REG_UNIT)
        if registers > MAX_REGS_PER_THREAD or \
                per_warp * _round_up(warps, lim.partitions) > REGS_PER_SM:
            by_regs = 0
        else:
            by_regs = (REGS_PER_SM // lim.partitions // per_warp) * lim.partitions // warps
            # cc 6.0 launches only what GP10x (4 partitions) could also run.
            if lim.partitions == 2 and per_warp * _round_up(warps, 4) > REGS_PER_SM:
                by_regs = 0
    alloc = _round_up(shared_mem + lim.smem_reserved, lim.smem_unit)
    limit = (lim.smem_block if smem_block is None else smem_block) + lim.smem_reserved
    by_smem = 0 if alloc > limit else (lim.smem // alloc if alloc else big)
    limits = {"warps": by_warps, "registers": by_regs, "shared memory": by_smem,
              "blocks": lim.max_blocks}
    return Occupancy(min(limits.values()), warps, lim.max_warps, limits)


@dataclass
class DeviceInfo:
    """What the trace says about one device."""

    sm_count: int | None
    compute_capability: str | None
    vendor: str | None
    name: str | None

    @property
    def occupancy_note(self) -> str:
        if self.vendor == "nvidia" and self.compute_capability in SM_LIMITS:
            return f"computed (cc {self.compute_capability})"
        if self.vendor == "amd":
            return "not computed: AMD (VGPR/SGPR/wave-slot data incomplete)"
        if self.compute_capability:
            return f"not computed: compute capability {self.compute_capability} not tabled"
        return "not computed: compute capability unknown"


def device_info(trace: Trace, work: DeviceWork) -> DeviceInfo:
    """The devices row of ``work``'s source and device, or all unknown."""
    devices = trace.devices
    if devices is None or not devices.num_rows:
        return DeviceInfo(None, None, None, None)
    for row in devices.to_pylist():
        if row.get("source") == work.source and row.get("device") == work.device:
            sms = row.get("sm_count")
            return DeviceInfo(int(sms) if sms else None, row.get("compute_capability"),
                              row.get("vendor"), row.get("name"))
    return DeviceInfo(None, None, None, None)


@dataclass
class KernelConfigs:
    """The kernels of one device grouped by launch configuration, by total time."""

    work: DeviceWork
    info: DeviceInfo
    kernel_time: int  # all kernels of the device, ns
    kernels: int
    configured: int  # kernels whose grid and block are known
    table: pa.Table  # name, blocks, threads, registers, shared_mem, count, time

    def occupancy(self, i: int) -> Occupancy | None:
        row = {k: self.table[k][i].as_py() for k in ("threads", "registers", "shared_mem")}
        if self.info.vendor != "nvidia" or row["registers"] is None or not row["threads"]:
            return None
        return occupancy(self.info.compute_capability, row["threads"], row["registers"],
                         row["shared_mem"] or 0)


def kernel_configs(trace: Trace, activity: Activity, work: DeviceWork) -> KernelConfigs:
    """Group one device's kernels by (name, blocks, threads, registers, shared memory)."""
    ev = activity.events
    rows = pa.array(work.row)
    category = ev["category"].take(rows).cast(pa.string()).to_numpy(zero_copy_only=False)
    kernel = np.asarray(category == "gpu.kernel", dtype=bool)
    idx = pa.array(work.row[kernel])
    dur = (work.end - work.start)[kernel]

    def product(prefix: str) -> pa.Array:
        out = None
        for axis in "xyz":
            col = ev[f"{prefix}_{axis}"].take(idx).cast(pa.int64())
            col = pc.if_else(col.is_valid(), col, 1) if axis != "x" else col
            out = col if out is None else pc.multiply(out, col)
        return out

    table = pa.table({
        "name": ev["name"].take(idx).cast(pa.string()),
        "blocks": product("grid"), "threads": product("block"),
        "registers": ev["registers"].take(idx).cast(pa.int64()),
        "shared_mem": ev["shared_mem_bytes"].take(idx).cast(pa.int64()),
        "comm": pa.array(work.cls[kernel] == COMMUNICATION, pa.bool_()),
        "dur": pa.array(dur, pa.int64())})
    configured = int(pc.sum(pc.and_(table["blocks"].is_valid(),
                                    table["threads"].is_valid())).as_py() or 0)
    keys = ["name", "blocks", "threads", "registers", "shared_mem", "comm"]
    grouped = table.group_by(keys, use_threads=False).aggregate([("dur", "sum"),
                                                                  ("dur", "count")])
    grouped = grouped.rename_columns([*keys, "time", "count"]).sort_by(
        [("time", "descending"), ("name", "ascending")])
    return KernelConfigs(work, device_info(trace, work), int(dur.sum()), int(kernel.sum()),
                         configured, grouped)


def all_kernel_configs(trace: Trace) -> list[KernelConfigs]:
    """``kernel_configs`` of every device of ``trace`` that ran kernels."""
    activity = Activity.of(trace)
    if "kernel_configs" not in activity.cache:
        configs = [kernel_configs(trace, activity, w) for w in activity.devices]
        activity.cache["kernel_configs"] = [c for c in configs if c.kernels]
    return activity.cache["kernel_configs"]


# "grid too small": critical when this % of the device's kernel time is idle SM time (filling
# those SMs would cut the kernel time by at most this much, 1.33x); no finding on a device with
# less kernel time than this (ms): a capture or warm-up, not a workload to tune.
GRID_CRITICAL_PCT = 25.0
GRID_MIN_KERNEL_MS = 1.0


def small_grid(c: KernelConfigs) -> np.ndarray:
    """Per configuration: fewer blocks than SMs, and not a collective (communication kernels
    run on a few channels by design)."""
    sms = c.info.sm_count
    if not sms:
        return np.zeros(c.table.num_rows, dtype=bool)
    small = pc.and_(pc.less(c.table["blocks"], sms).fill_null(False), pc.invert(c.table["comm"]))
    return np.asarray(small.to_numpy(zero_copy_only=False), dtype=bool)


def small_grid_time(c: KernelConfigs) -> int:
    """ns of the device's kernel time in launches with fewer blocks than SMs."""
    return int(c.table["time"].to_numpy()[small_grid(c)].sum())


def _is_library(name: str) -> bool:
    return bool(pc.match_substring_regex(pa.array([name]), LIBRARY_KERNEL)[0].as_py())


def kernel_findings(trace: Trace, min_share_pct: float = 5.0, occupancy_pct: float = 50.0,
                    per_device: int = 3) -> list[Finding]:
    """Grids too small to fill the GPU, and (own, not library) kernels whose theoretical
    occupancy is held under ``occupancy_pct`` by registers or shared memory; each only when
    it takes at least ``min_share_pct`` of the device's kernel time."""
    found = []
    for c in all_kernel_configs(trace):
        found += [(c.work.label, f) for f in _grid_findings(c, min_share_pct)]
        found += [(c.work.label, f) for f in
                  _occupancy_findings(c, min_share_pct, occupancy_pct, per_device)]
    return _alike_across_devices(found)


def _alike_across_devices(found: list[tuple[str, Finding]]) -> list[Finding]:
    """One finding for a kernel that shows the same problem on several GPUs (the ranks of a
    run), naming them, with the worst GPU's evidence: not one copy per rank."""
    groups: dict[tuple[str, str], list[tuple[str, Finding]]] = {}
    for label, f in found:
        problem = f.title[len(label) + 2:].split(":")[0]
        groups.setdefault((problem, f.evidence["kernel"]), []).append((label, f))
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        labels = [label for label, _ in members]
        label, worst = max(members, key=lambda m: m[1].evidence["gpu_time_pct"])
        shares = sorted(f.evidence["gpu_time_pct"] for _, f in members)
        named = ", ".join(labels[:2]) + (f" and {len(labels) - 2} more" if len(labels) > 2
                                         else "")
        title = f"{len(labels)} GPUs ({named}): {worst.title[len(label) + 2:]}"
        if shares[0] != shares[-1]:
            title += f" (on {label}; {shares[0]}–{shares[-1]}% across them)"
        out.append(replace(worst, title=title, evidence={
            **worst.evidence, "devices": labels, "gpu_time_pct_min": shares[0]}))
    return out


def _grid_findings(c: KernelConfigs, min_share_pct: float) -> list[Finding]:
    """A grid of fewer blocks than SMs runs in one wave that leaves ``1 - blocks/SMs`` of the
    SMs idle while it runs: the SM time lost is about the launch's time x that fraction. The
    severity follows the lost share of the device's kernel time, summed over such launches,
    not the share they take: critical from ``GRID_CRITICAL_PCT`` (25 %: a full grid would cut
    the kernel time by up to a quarter, 1.33x, one of the largest levers a trace shows), a
    warning from ``min_share_pct`` (the analyzer's floor for any finding), else none. So 128
    blocks on 132 SMs (3 % idle) is no finding even at 100 % of the time, and 2 blocks on 108
    SMs is critical. Critical also needs the lost SM time to be that share of the device's
    span (first kernel start to last end): where kernels fill a small part of the span (a
    CPU- or transfer-bound trace) fuller grids cannot shorten the run by a quarter, so it is a
    warning (the MPI saxpy: 98 % of its kernel time, 7.9 % of its span). No finding either on
    less than ``GRID_MIN_KERNEL_MS`` of kernel time on the device (a graph capture or warm-up:
    too little to judge a device by)."""
    sms, small_ns = c.info.sm_count, small_grid_time(c)
    if not sms or not small_ns or c.kernel_time < GRID_MIN_KERNEL_MS * 1_000_000:
        return []
    t = c.table
    small = np.flatnonzero(small_grid(c))
    times = t["time"].to_numpy()[small].astype(float)
    idle_fraction = 1.0 - t["blocks"].to_numpy()[small].astype(float) / sms
    lost_ns = float((times * idle_fraction).sum())
    lost = percent(lost_ns, c.kernel_time)
    if lost < min_share_pct:
        return []
    lost_of_span = percent(lost_ns, c.work.span) if c.work.span else lost
    share = percent(small_ns, c.kernel_time)
    top = int(small[0])
    name, blocks = t["name"][top].as_py(), t["blocks"][top].as_py()
    unit = "CUs" if c.info.vendor == "amd" else "SMs"
    occupancy_api = ("hipOccupancyMaxActiveBlocksPerMultiprocessor" if c.info.vendor == "amd"
                     else "cudaOccupancyMaxActiveBlocksPerMultiprocessor")
    idle = percent(sms - blocks, sms)
    return [Finding(
        severity="critical" if min(lost, lost_of_span) >= GRID_CRITICAL_PCT else "warning",
        title=f"{c.work.label}: grid too small to fill the GPU: {short_name(name)} runs "
              f"{blocks} block{'s' if blocks != 1 else ''} on {sms} {unit}: {idle}% of {unit} "
              f"idle; launches with fewer blocks than {unit} take {share}% of kernel time, "
              f"and their idle {unit} waste {lost}% of all kernel time",
        evidence={"kernel": name, "blocks": blocks, "sms": sms, "idle_sm_pct": idle,
                  "threads_per_block": t["threads"][top].as_py(),
                  "launches": t["count"][top].as_py(), "kernel_time_ns": t["time"][top].as_py(),
                  "small_grid_configs": len(small), "small_grid_time_ns": small_ns,
                  "gpu_time_pct": share, "idle_sm_time_ns": round(lost_ns),
                  "idle_sm_time_pct": lost, "idle_sm_span_pct": lost_of_span},
        suggestion=(
            # A framework's or library's kernel sizes its grid from the tensors: only more
            # work per launch fills it, not launch parameters the program does not set.
            "this batch norm kernel runs one block per channel: a larger batch adds no "
            "blocks (more channels would); torch.compile may generate a fused kernel with "
            "another grid" if PER_CHANNEL_KERNEL.search(name) else
            "this is PyTorch's own kernel, its grid sized by its tensors: give each launch "
            f"more work (a larger batch, or fuse the small ops with torch.compile) so it has "
            f"{sms} blocks or more" if FRAMEWORK_KERNEL.search(name) else
            "this is a library's kernel, its grid chosen for the problem's size: a larger "
            f"batch (larger matrices) gives it {sms} blocks or more"
            if _is_library(name) else
            f"give each launch at least {sms} blocks (one per {unit[:-1]}, better several): "
            "more, smaller blocks or fewer elements per thread; size a grid-stride loop's "
            f"grid from the device ({unit} x {occupancy_api}) instead of a constant; batch "
            "small independent launches into one, or run them on separate streams"),
        cost_ns=None)]


def _occupancy_findings(c: KernelConfigs, min_share_pct: float, occupancy_pct: float,
                        per_device: int) -> list[Finding]:
    findings: list[Finding] = []
    t = c.table
    for i in range(t.num_rows):
        if len(findings) >= per_device:
            break
        share = percent(t["time"][i].as_py(), c.kernel_time)
        if share < min_share_pct:
            break  # sorted by time
        occ = c.occupancy(i)
        if occ is None or occ.percent >= occupancy_pct or _is_library(t["name"][i].as_py()):
            continue
        limiter = occ.limiter.split(", ")[0]
        if limiter not in ("registers", "shared memory"):
            continue
        regs, threads = t["registers"][i].as_py(), t["threads"][i].as_py()
        smem, name = t["shared_mem"][i].as_py() or 0, t["name"][i].as_py()
        what = (f"{regs} registers/thread x {threads} threads" if limiter == "registers"
                else f"{smem:,} B shared memory/block")
        fix = ("cap registers so more blocks fit: __launch_bounds__(threads, minBlocksPerSM) "
               "on the kernel or nvcc -maxrregcount=N (check spills with -Xptxas -v); smaller "
               "blocks waste fewer registers per partition; hoist per-thread arrays out of "
               "registers" if limiter == "registers" else
               "use smaller tiles (or fewer pipeline stages) per block, or opt in to the "
               "largest shared-memory carveout (cudaFuncSetAttribute "
               "cudaFuncAttributePreferredSharedMemoryCarveout)")
        findings.append(Finding(
            severity="warning",
            title=f"{c.work.label}: occupancy limited by {limiter}: {short_name(name)} "
                  f"theoretical {occ.percent:g}% ({what})",
            evidence={"kernel": name, "theoretical_occupancy_pct": occ.percent,
                      "limiter": occ.limiter, "blocks_per_sm": occ.blocks_per_sm,
                      "warps_per_sm": occ.blocks_per_sm * occ.warps_per_block,
                      "max_warps_per_sm": occ.max_warps, "registers": regs,
                      "threads_per_block": threads, "shared_mem_bytes": smem,
                      "compute_capability": c.info.compute_capability, "gpu_time_pct": share},
            suggestion=fix + "; then check achieved occupancy and speed in Nsight Compute: "
                             "low occupancy only hurts when latency is not hidden",
            cost_ns=None))
    return findings


class KernelsAnalyzer(tracekit.Analyzer):
    """Launch configurations against the device: small grids, theoretical occupancy."""

    name = "kernels"
    event_columns = READS_COLUMNS
    description = ("kernel launch configurations: grids smaller than the SM count, "
                   "theoretical occupancy and its limiter")

    @dataclass(frozen=True)
    class Options:
        top: int = field(default=15, metadata={"help": "launch configurations to list per "
                                                        "device (by time)"})
        min_share_pct: float = field(default=5.0, metadata={
            "help": "a finding needs this share of the device's kernel time"})
        occupancy_pct: float = field(default=50.0, metadata={
            "help": "theoretical occupancy under this is a finding (registers/shared memory)"})

    def analyze(self, trace: Trace) -> Report:
        report = Report(analyzer=self.name, title="Kernel launch configurations")
        configs = all_kernel_configs(trace)
        if not configs:
            report.notes.append(NO_GPU)
        report.tables["devices"] = _devices_table(configs)
        report.table_titles["devices"] = ("Devices: SMs, kernels with a known grid, GPU time "
                                          "in grids smaller than the SM count")
        report.tables["kernels"] = self._kernels_table(configs)
        report.table_titles["kernels"] = (
            "Launch configurations by GPU time: blocks, threads/block, registers/thread, "
            "shared memory/block; theoretical occupancy (NVIDIA's occupancy calculator, for "
            "NVIDIA GPUs) and waves = blocks / (SMs x blocks per SM)")
        report.findings.extend(kernel_findings(trace, self.options.min_share_pct,
                                               self.options.occupancy_pct))
        return report

    def _kernels_table(self, configs: list[KernelConfigs]) -> pa.Table:
        cols: dict[str, list[Any]] = {k: [] for k in (
            "device", "count", "time", "share", "blocks", "threads", "registers", "smem",
            "sms", "per_sm", "occupancy", "limiter", "waves", "name")}
        for c in configs:
            t = c.table
            for i in range(min(t.num_rows, self.options.top)):
                occ = c.occupancy(i)
                blocks = t["blocks"][i].as_py()
                cols["device"].append(c.work.label)
                cols["count"].append(t["count"][i].as_py())
                cols["time"].append(t["time"][i].as_py())
                cols["share"].append(percent(t["time"][i].as_py(), c.kernel_time))
                cols["blocks"].append(blocks)
                cols["threads"].append(t["threads"][i].as_py())
                cols["registers"].append(t["registers"][i].as_py())
                cols["smem"].append(t["shared_mem"][i].as_py())
                cols["sms"].append(c.info.sm_count)
                cols["per_sm"].append(occ.blocks_per_sm if occ else None)
                cols["occupancy"].append(occ.percent if occ else None)
                cols["limiter"].append(occ.limiter if occ else "-")
                cols["waves"].append(
                    _waves(blocks / (c.info.sm_count * occ.blocks_per_sm))
                    if occ and occ.blocks_per_sm and blocks and c.info.sm_count else None)
                cols["name"].append(t["name"][i].as_py())
        return report_table([
            ("device", "str", None, cols["device"]), ("count", "int", None, cols["count"]),
            ("time", "int", "ns", cols["time"]), ("gpu_time_pct", "float", "%", cols["share"]),
            ("blocks", "int", None, cols["blocks"]), ("threads", "int", None, cols["threads"]),
            ("registers", "int", None, cols["registers"]),
            ("shared_mem", "int", "bytes", cols["smem"]), ("sms", "int", None, cols["sms"]),
            ("blocks_per_sm", "int", None, cols["per_sm"]),
            ("occupancy", "float", "%", cols["occupancy"]),
            ("limiter", "str", None, cols["limiter"]), ("waves", "float", None, cols["waves"]),
            ("name", "str", None, cols["name"])])


def _devices_table(configs: list[KernelConfigs]) -> pa.Table:
    return report_table([
        ("device", "str", None, [c.work.label for c in configs]),
        ("name", "str", None, [c.info.name or "-" for c in configs]),
        ("sms", "int", None, [c.info.sm_count for c in configs]),
        ("kernels", "int", None, [c.kernels for c in configs]),
        ("with_grid", "int", None, [c.configured for c in configs]),
        # Unknown (null, "-") without the SM count or any kernel's grid, not 0.
        ("small_grid_time_pct", "float", "%",
         [percent(small_grid_time(c), c.kernel_time) if c.info.sm_count and c.configured
          else None for c in configs]),
        ("occupancy", "str", None, [c.info.occupancy_note for c in configs])])


def _waves(waves: float) -> float:
    """Waves to three decimals, or to three significant digits under 0.01: a one-block
    kernel on 132 SMs is 0.000473 waves, not 0."""
    return round(waves, 3) if waves >= 0.01 else float(f"{waves:.3g}")
