"""Launches that tell waits and graphs apart (``launch``), and kernel-level evidence
(``kernels``): small grids and theoretical occupancy, against synthetic traces with planted
numbers and independent computations over the real traces."""

from __future__ import annotations

import csv
import gzip
import json
import math
import sqlite3
from collections import defaultdict

import numpy as np
import pytest
import tracekit
from helpers import shared_path
from tracekit.plugins.diagnosis import gaps as gaps_module
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.gaps import CAUSES, device_gaps
from tracekit.plugins.diagnosis.kernels import SM_LIMITS, kernel_findings, occupancy
from tracekit.plugins.diagnosis.launch import (
    graph_launches,
    launch_stats,
    launches_work,
)
from tracekit.plugins.diagnosis.timeline import device_timelines


def report_of(trace, analyzer, registry):
    [report] = tracekit.analyze(trace, analyzer, registry=registry)
    return report


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _kernel(name, ts, dur, corr, grid=(1, 1, 1), block=(128, 1, 1), regs=32, smem=0):
    return _x("kernel", name, ts, dur, pid=0, tid="stream 7", device=0, stream=7,
              correlation=corr, grid=list(grid), block=list(block),
              **{"registers per thread": regs, "shared memory": smem})


def _read(tmp_path, registry, events, props=None):
    doc = {"schemaVersion": 1, "traceEvents": events}
    if props:
        doc["deviceProperties"] = props
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return tracekit.read(path, registry=registry)


# --- launches: waits are not launches; a graph launch is one launch ------------------------

def _graph_trace(tmp_path, registry):
    """One cudaGraphLaunch (correlation 2) of three kernels between two plain launches, and a
    cudaStreamWaitEvent linked only to a device-side wait."""
    return _read(tmp_path, registry, [
        _x("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=1),
        _kernel("k0", 10, 2, 1),
        _x("cuda_runtime", "cudaGraphLaunch", 20, 10, correlation=2),
        _kernel("g1", 32, 3, 2), _kernel("g2", 35, 4, 2), _kernel("g3", 41, 2, 2),
        _x("cuda_runtime", "cudaStreamWaitEvent", 45, 1, correlation=4),
        _x("cuda_sync", "Stream Wait Event", 46, 1, pid=0, tid="stream 7", device=0, stream=7,
           correlation=4),
        _x("cuda_runtime", "cudaLaunchKernel", 50, 5, correlation=3),
        _kernel("k1", 60, 1, 3)])


def test_graph_launch_is_one_launch_and_its_nodes_a_graph(tmp_path, registry):
    trace = _graph_trace(tmp_path, registry)
    activity = Activity.of(trace)
    [work] = activity.devices
    stats = launch_stats(activity, work, 10_000)
    # k0 and k1 only: 10 - 5 µs and 60 - 55 µs; the graph's nodes are counted apart.
    assert (stats.kernels, stats.linked, stats.graph_nodes) == (2, 2, 3)
    assert sorted(stats.delay.tolist()) == [5_000, 5_000]
    assert stats.short == 2  # 2 µs and 1 µs kernels, 5 µs launch calls
    assert stats.launch_rate == pytest.approx(1e9 / 50_000)  # launches at 0 and 50 µs
    g = graph_launches(activity, work)
    assert len(g.call) == 1
    assert activity.name(int(activity.calls.row[g.call[0]])) == "cudaGraphLaunch"
    # Nodes 32-35, 35-39, 41-43 µs: span 11 µs, busy 9, one 2 µs hole; first node 2 µs
    # after the launch call ends at 30 µs.
    assert (int(g.nodes[0]), int(g.kernels[0]), int(g.span[0]), int(g.busy[0]),
            int(g.gaps[0]), int(g.delay[0])) == (3, 3, 11_000, 9_000, 1, 2_000)
    report = report_of(trace, "launch", registry)
    [delay] = report.tables["delay"].to_pylist()
    assert (delay["kernels"], delay["linked"], delay["graph_nodes"]) == (2, 2, 3)
    assert delay["median"] == 5_000
    [graphs] = report.tables["graphs"].to_pylist()
    assert (graphs["launches"], graphs["nodes"], graphs["span"], graphs["idle_inside"],
            graphs["gaps_inside"], graphs["median_delay"]) == (1, 3, 11_000, 2_000, 1, 2_000)
    kernels = {r["name"] for r in report.tables["kernels"].to_pylist()}
    assert kernels == {"k0", "k1"}


def test_wait_event_is_not_a_launch(tmp_path, registry):
    trace = _graph_trace(tmp_path, registry)
    names = trace.events["name"].cast("string").to_pylist()
    launching = sorted(n for n, w in zip(names, launches_work(trace.events), strict=True) if w)
    assert launching == ["cudaGraphLaunch", "cudaLaunchKernel", "cudaLaunchKernel"]
    activity = Activity.of(trace)
    call_names = [activity.name(int(r)) for r in activity.calls.row]
    wait = call_names.index("cudaStreamWaitEvent")
    assert not activity.calls.is_launch[wait]
    launching_calls = sorted(n for n, w in zip(call_names, activity.calls.is_launch,
                                               strict=True) if w)
    assert launching_calls == launching
    second = [i for i, n in enumerate(call_names) if n == "cudaLaunchKernel"][1]
    # The previous launch of the second cudaLaunchKernel is the graph launch (ends 30 µs),
    # not the wait (ends 46 µs).
    assert activity.calls.prev_launch_end[second] == 30_000


def test_alexnet_host_work_after_a_wait_is_cpu_not_launch(registry, monkeypatch):
    """The 1.04 s gap before fft2d_r2c: the launching thread's previous "launch" was a
    cudaStreamWaitEvent linked only to a 'Stream Wait Event' row, right before the gap."""
    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    work_corr = {e["args"]["correlation"] for e in events
                 if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    runtime = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
               and (e.get("args") or {}).get("correlation") in work_corr]
    trace = tracekit.read(path, registry=registry)
    activity = Activity.of(trace)
    # 139 calls are linked to device rows; 41 of them only to waits and synchronizes.
    assert int(activity.calls.is_launch.sum()) == len(runtime) == 98
    monkeypatch.setattr(gaps_module, "startup_calls", lambda activity: None)
    [timeline] = device_timelines(trace)
    gaps = device_gaps(activity, timeline, 50_000)
    i = int(np.argsort(-gaps.dur)[1])
    assert activity.name(int(gaps.next_row[i])).startswith("void fft2d_r2c_32x32")
    assert 1_040_000_000 < gaps.dur[i] < 1_050_000_000
    assert CAUSES[gaps.cause[i]] == "cpu"


def test_rocprof_v3_hip_graph_launch(registry):
    path = shared_path("rocprof-v3", "jimw_llamacpp_rocm7", "prefill_kernel_trace.csv")
    with open(path) as f:
        kernels = list(csv.DictReader(f))
    with open(path.with_name("prefill_hip_api_trace.csv")) as f:
        api = {r["Correlation_Id"]: r for r in csv.DictReader(f)}
    graph_calls = {c for c, r in api.items() if r["Function"] == "hipGraphLaunch"}
    nodes = [k for k in kernels if k["Correlation_Id"] in graph_calls]
    corr = {k["Correlation_Id"] for k in nodes}
    assert (len(graph_calls), len(corr), len(nodes)) == (3, 1, 1123)
    [c] = corr
    start = sorted((int(k["Start_Timestamp"]), int(k["End_Timestamp"])) for k in nodes)
    busy, holes, hi = 0, 0, None
    for s, e in start:
        if hi is None or s > hi:
            holes += hi is not None
            busy += e - s
            hi = e
        elif e > hi:
            busy += e - hi
            hi = e
    span = max(e for _, e in start) - start[0][0]
    linked_plain = [k for k in kernels if k["Correlation_Id"] in api
                    and k["Correlation_Id"] not in graph_calls]
    trace = tracekit.read(path, registry=registry)
    report = report_of(trace, "launch", registry)
    [graphs] = report.tables["graphs"].to_pylist()
    assert (graphs["launches"], graphs["nodes"], graphs["span"], graphs["idle_inside"],
            graphs["gaps_inside"]) == (1, 1123, span, span - busy, holes)
    assert graphs["median_delay"] == start[0][0] - int(api[c]["End_Timestamp"])
    [delay] = report.tables["delay"].to_pylist()
    assert (delay["kernels"], delay["linked"], delay["graph_nodes"]) == (
        len(kernels) - 1123, len(linked_plain), 1123)
    assert (delay["kernels"], delay["linked"]) == (5, 1)
    assert (span, span - busy, holes) == (69_375_476, 3_320_608, 1122)


# --- occupancy: the formula and its table --------------------------------------------------

@pytest.mark.parametrize(("cc", "threads", "regs", "smem", "blocks", "pct", "limiter"), [
    ("8.0", 256, 64, 0, 4, 50.0, "registers"),  # 2048 regs/warp: 8 warps per partition
    ("8.6", 256, 192, 0, 1, 16.7, "registers"),  # the n-body kernel on an RTX 3060
    ("8.6", 128, 166, 65536, 1, 8.3, "shared memory"),  # 66,560 B of 102,400 per SM
    ("7.5", 128, 32, 0, 8, 100.0, "warps"),  # registers allow 16 blocks, warps 32 / 4
    ("8.0", 1024, 64, 0, 1, 50.0, "registers"),
    ("8.0", 1024, 65, 0, 0, 0.0, "registers"),  # 2304 regs/warp x 32 warps > 65,536
    ("9.0", 128, 40, 0, 12, 75.0, "registers"),  # 1280/warp: 12 per partition: 48 warps
    ("6.0", 256, 48, 0, 5, 62.5, "registers"),  # 2 partitions of 32,768 registers
    ("8.9", 64, 16, 0, 24, 100.0, "warps, blocks"),  # 24 blocks of 2 warps = 48 warps
])
def test_theoretical_occupancy(cc, threads, regs, smem, blocks, pct, limiter):
    occ = occupancy(cc, threads, regs, smem)
    assert (occ.blocks_per_sm, occ.percent, occ.limiter) == (blocks, pct, limiter)


def test_occupancy_unknown_capability():
    assert occupancy("12.0", 256, 32, 0) is None
    assert occupancy(None, 256, 32, 0) is None


NSYS_WITH_GPU_INFO = ["pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite",
                      "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite",
                      "mordred_nsys2021_quadro-rtx6000_report1.sqlite",
                      "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"]


def _sql(path, query):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(query).fetchall()


@pytest.mark.parametrize("name", NSYS_WITH_GPU_INFO)
def test_sm_limits_match_nsys_target_info(name):
    path = shared_path("nsys-sqlite", name)
    for major, minor, warps, blocks, smem, optin, regs in set(_sql(
            path, "SELECT computeMajor, computeMinor, maxWarpsPerSm, maxBlocksPerSm, "
                  "maxShmemPerSm, maxShmemPerBlockOptin, maxRegistersPerSm "
                  "FROM TARGET_INFO_GPU")):
        lim = SM_LIMITS[f"{major}.{minor}"]
        assert (lim.max_warps, lim.max_blocks, lim.smem, lim.smem_block, 65536) == (
            warps, blocks, smem, optin, regs)


KINETO_WITH_PROPERTIES = [
    ("hta", "alexnet_a100_trace.json.gz"), ("hta", "nccl_data_rank0_a100.json.gz"),
    pytest.param(("hta", "ns_resolution_rank0_v100.pt.trace.json.gz"), marks=pytest.mark.slow),
    ("hta", "step_based_trace_gpu_user_annotation.json.gz"),
    pytest.param(("hta", "trace_diff_control_rank3_a100.json.gz"), marks=pytest.mark.slow),
    ("hta", "triton_example_cuda12.json.gz"),
    pytest.param(("kineto-tb_plugin", "resnet50_v100_2021.pt.trace.json.gz"),
                 marks=pytest.mark.slow),
    ("tracelens", "h100_bert-small.json.gz")]


@pytest.mark.parametrize("parts", KINETO_WITH_PROPERTIES)
def test_occupancy_matches_kinetos_estimate(parts):
    """Kineto records 'est. achieved occupancy %' per kernel from NVIDIA's cuda_occupancy.h at
    capture time: min(blocks / SMs, resident blocks per SM) x threads / max threads per SM,
    with the default 48 KB per-block shared memory limit (float32, rounded half up)."""
    with gzip.open(shared_path("torch-trace", *parts)) as f:
        doc = json.load(f)
    props = {p["id"]: p for p in doc["deviceProperties"]}
    checked = 0
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "Kernel"):
            continue
        a = e["args"]
        p = props[a["device"]]
        lim = SM_LIMITS[f"{p['computeMajor']}.{p['computeMinor']}"]
        assert (lim.smem, lim.max_warps * 32) == (p["sharedMemPerMultiprocessor"],
                                                  p["maxThreadsPerMultiprocessor"])
        threads, blocks = math.prod(a["block"]), math.prod(a["grid"])
        occ = occupancy(f"{p['computeMajor']}.{p['computeMinor']}", threads,
                        a["registers per thread"], a["shared memory"],
                        smem_block=p["sharedMemPerBlock"])
        per_sm = min(np.float32(blocks) / np.float32(p["numSms"]),
                     np.float32(occ.blocks_per_sm))
        est = float(np.float32(per_sm * np.float32(threads))
                    / np.float32(p["maxThreadsPerMultiprocessor"]))
        assert math.floor(est * 100 + 0.5) == a["est. achieved occupancy %"], a
        checked += 1
    assert checked > 0


# --- kernels: real nsys exports ------------------------------------------------------------

def _nsys_configs(path):
    """Per (name, blocks, threads, registers, shared memory): launches and total ns."""
    out = defaultdict(lambda: [0, 0])
    for name, blocks, threads, regs, smem, dur in _sql(
            path, "SELECT s.value, gridX * gridY * gridZ, blockX * blockY * blockZ, "
                  "registersPerThread, staticSharedMemory + dynamicSharedMemory, end - start "
                  "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"):
        out[(name, blocks, threads, regs, smem)][0] += 1
        out[(name, blocks, threads, regs, smem)][1] += dur
    return out


def test_saxpy_grid_too_small(registry):
    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    [(sms, major, minor)] = _sql(path, "SELECT smCount, computeMajor, computeMinor "
                                       "FROM TARGET_INFO_GPU")
    [((name, blocks, threads, regs, smem), (count, total))] = _nsys_configs(path).items()
    assert (sms, f"{major}.{minor}", blocks, threads, regs, smem, count) == (
        108, "8.0", 2, 512, 26, 0, 5)
    trace = tracekit.read(path, registry=registry)
    report = report_of(trace, "kernels", registry)
    [row] = report.tables["kernels"].to_pylist()
    assert (row["name"], row["count"], row["time"], row["blocks"], row["threads"],
            row["registers"], row["shared_mem"], row["sms"]) == (
        name, 5, total, 2, 512, 26, 0, 108)
    # 26 registers -> 1024 per warp: 16 warps per partition, 64 per SM = 4 blocks of 16
    # warps; the warp limit is also 64 / 16 = 4: 100 %, and 2 / (108 x 4) waves.
    assert (row["blocks_per_sm"], row["occupancy"], row["limiter"], row["waves"]) == (
        4, 100.0, "registers, warps", 0.00463)  # 2 / 432 to three significant digits
    [device] = report.tables["devices"].to_pylist()
    assert (device["sms"], device["small_grid_time_pct"]) == (108, 100.0)
    [finding] = report.findings
    assert finding.severity == "warning"  # the idle SMs cost 7.9 % of the device's span
    assert finding.title.startswith("GPU 0: grid too small to fill the GPU: ")
    assert (finding.evidence["blocks"], finding.evidence["sms"], finding.evidence["launches"],
            finding.evidence["kernel_time_ns"], finding.evidence["gpu_time_pct"]) == (
        2, 108, 5, total, 100.0)
    assert "grid-stride" in finding.suggestion
    assert [f.title for f in kernel_findings(trace)] == [finding.title]


def test_a_kernel_alike_on_several_gpus_is_one_finding(registry, tmp_path):
    """Two ranks of one run (the same export in two folders): one finding naming both GPUs,
    with the evidence of one, not a copy per rank."""
    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    copies = []
    for rank in (0, 1):
        (tmp_path / f"rank{rank}").mkdir()
        copies.append(tmp_path / f"rank{rank}" / path.name)
        copies[-1].write_bytes(path.read_bytes())
    [single] = kernel_findings(tracekit.read(path, registry=registry))
    [both] = kernel_findings(tracekit.read(copies, registry=registry))
    assert both.title == ("2 GPUs (rank0/" + path.name + " GPU 0, rank1/" + path.name +
                          " GPU 0): " + single.title.removeprefix("GPU 0: "))
    assert both.evidence == {**single.evidence, "gpu_time_pct_min": 100.0,
                             "devices": [f"rank{r}/{path.name} GPU 0" for r in (0, 1)]}


@pytest.mark.parametrize("name", NSYS_WITH_GPU_INFO[1:])
def test_kernel_configurations_match_the_export(registry, name):
    path = shared_path("nsys-sqlite", name)
    expected = _nsys_configs(path)
    [(sms,)] = set(_sql(path, "SELECT smCount FROM TARGET_INFO_GPU"))
    trace = tracekit.read(path, registry=registry)
    tracekit_options = ("top=1000",)
    [report] = tracekit.analyze(trace, "kernels", options=tracekit_options, registry=registry)
    rows = report.tables["kernels"].to_pylist()
    got = {(r["name"], r["blocks"], r["threads"], r["registers"], r["shared_mem"]):
           [r["count"], r["time"]] for r in rows}
    assert got == dict(expected)
    total = sum(t for _, t in expected.values())
    small = sum(t for k, (_, t) in expected.items() if k[1] < sms)
    [device] = report.tables["devices"].to_pylist()
    assert device["small_grid_time_pct"] == round(100 * small / total, 1)
    assert [r["time"] for r in rows] == sorted((r["time"] for r in rows), reverse=True)


def test_memfusion_occupancy_limited_by_shared_memory(registry):
    """TensorRT's sm80 implicit GEMMs on an RTX 3090 (cc 8.6): 64 KB + 1 KB reserved shared
    memory per block leaves room for one 4-warp block of 48 warps: 8.3 %. Library kernels:
    listed, no finding."""
    path = shared_path("nsys-sqlite", "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite")
    trace = tracekit.read(path, registry=registry)
    report = report_of(trace, "kernels", registry)
    top = report.tables["kernels"].to_pylist()[0]
    assert (top["count"], top["blocks"], top["threads"], top["registers"], top["shared_mem"],
            top["sms"]) == (4, 392, 128, 166, 65536, 82)
    assert (top["blocks_per_sm"], top["occupancy"], top["limiter"]) == (1, 8.3, "shared memory")
    assert top["name"].startswith("sm80_xmma_fprop_implicit_gemm")
    assert report.findings == []


def test_testcuda_and_mordred_full_occupancy(registry):
    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    [row] = report_of(tracekit.read(path, registry=registry), "kernels",
                      registry).tables["kernels"].to_pylist()
    assert (row["count"], row["blocks"], row["threads"], row["registers"], row["sms"],
            row["blocks_per_sm"], row["occupancy"]) == (4, 97657, 256, 16, 34, 6, 100.0)
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    rows = report_of(tracekit.read(path, registry=registry), "kernels",
                     registry).tables["kernels"].to_pylist()
    probe = [r for r in rows if "probe_group_by_GPU2" in r["name"]]
    # 55 registers -> 1792 per warp: 9 warps per partition, 36 per SM = 9 blocks; the
    # warp limit (32 / 4 = 8 blocks) binds first on Turing.
    assert [(r["blocks"], r["registers"], r["blocks_per_sm"], r["occupancy"], r["limiter"])
            for r in probe] == [(117161, 55, 8, 100.0, "warps")]


def test_amd_occupancy_not_computed(registry):
    path = shared_path("bonus", "rocpd-sqlite", "hgliu_15_results.db")
    report = report_of(tracekit.read(path, registry=registry), "kernels", registry)
    devices = report.tables["devices"].to_pylist()
    assert devices and all(d["occupancy"].startswith("not computed: AMD") for d in devices)
    assert all(r["occupancy"] is None for r in report.tables["kernels"].to_pylist())


# --- kernels: the n-body example -----------------------------------------------------------

def test_nbody_occupancy_limited_by_registers(tmp_path, registry):
    """One FP64 kernel of 50 s, 40 blocks x 256 threads, 192 registers, on an RTX 3060."""
    props = [{"id": 0, "name": "NVIDIA GeForce RTX 3060", "totalGlobalMem": 12 << 30,
              "computeMajor": 8, "computeMinor": 6, "maxThreadsPerBlock": 1024,
              "maxThreadsPerMultiprocessor": 1536, "regsPerBlock": 65536,
              "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
              "sharedMemPerMultiprocessor": 102400, "numSms": 28,
              "sharedMemPerBlockOptin": 101376}]
    trace = _read(tmp_path, registry, [
        _x("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=1),
        _kernel("integrate_fp64(double4*, double4*, int)", 10, 50_000_000, 1, grid=(40, 1, 1),
                block=(256, 1, 1), regs=192)], props)
    report = report_of(trace, "kernels", registry)
    [row] = report.tables["kernels"].to_pylist()
    assert (row["blocks"], row["sms"], row["blocks_per_sm"], row["occupancy"], row["limiter"],
            row["waves"]) == (40, 28, 1, 16.7, "registers", round(40 / 28, 3))
    [finding] = report.findings  # 40 blocks >= 28 SMs: the grid is not too small
    assert finding.title == ("GPU 0: occupancy limited by registers: integrate_fp64(double4*, "
                             "double4*, int) theoretical 16.7% (192 registers/thread x 256 "
                             "threads)")
    assert finding.evidence["warps_per_sm"] == 8
    assert finding.evidence["max_warps_per_sm"] == 48
    assert "__launch_bounds__" in finding.suggestion and "-maxrregcount" in finding.suggestion


def test_tiny_kernels_on_a_busy_gpu_are_no_launch_finding(registry):
    """cloverleaf (A100): most kernels are under 10 µs and launched slower than the GPU could
    run them, but the GPU hardly ever waits for a launch (a sync after every kernel, long
    kernels between): no launch finding. h100 bert-small waits for launches a quarter of its
    span: the finding, with that share."""
    from tracekit.plugins.diagnosis.activity import Activity
    from tracekit.plugins.diagnosis.launch import launch_stats

    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    activity = Activity.of(trace)
    [stats] = [launch_stats(activity, w, 10_000) for w in activity.devices]
    assert stats.tiny * 2 >= stats.kernels and stats.launch_rate < stats.exec_rate
    [report] = tracekit.analyze(trace, "launch", registry=registry)
    assert report.findings == []
    bert = shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz")
    [report] = tracekit.analyze(tracekit.read(bert, registry=registry), "launch",
                                registry=registry)
    [finding] = report.findings
    assert finding.evidence["launch_idle_pct"] == 24.9
