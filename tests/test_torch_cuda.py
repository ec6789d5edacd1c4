"""The diagnosis on real CUDA traces recorded by tracekit on an H200 (fixtures/torch-cuda):
the verdict an expert gives each program, and the figures behind it against the raw JSON and
the program's own counts (manifest.json)."""

from __future__ import annotations

import json
from functools import cache

import pytest
import tracekit
from helpers import FIXTURES, shared_path
from independent import hta_temporal_breakdown, idle_after, load, merge, ns
from tracekit.plugins.diagnosis.activity import Activity, host_reads
from tracekit.plugins.diagnosis.program import classify
from tracekit.registry import load_registry
from tracekit.toolkit import optimizer_implementation

CUDA = FIXTURES / "torch-cuda"
MANIFEST = json.loads((CUDA / "manifest.json").read_text())["scenarios"]
EXPECTED = {name: s["cause"] for name, s in MANIFEST.items() if s.get("cause")}
# The recordings over 100 KB (with_stack, models, many kernels): the full suite reads them.
LARGE = {p.name.removesuffix(".pt.trace.json.gz") for p in CUDA.glob("*.gz")
         if p.stat().st_size > 100_000}


def path(name: str):
    return CUDA / f"{name}.pt.trace.json.gz"


def params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in LARGE else n for n in sorted(names)]


def analysis(name: str, analyzer: str) -> tracekit.Report:
    registry = load_registry(dists={"tracekit"}, environ={})
    [result] = tracekit.analyze(tracekit.read(path(name), registry=registry), analyzer,
                                registry=registry)
    return result


@cache
def bottleneck(name: str) -> tracekit.Report:
    return analysis(name, "bottleneck")


def finding(report: tracekit.Report, prefix: str) -> tracekit.Finding:
    return next(f for f in report.findings if f.title.startswith(prefix))


def raw(name: str, *categories: str) -> list[dict]:
    _, events = load(path(name))
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in categories]


def test_every_recording_is_in_the_manifest():
    assert sorted(p.name.removesuffix(".pt.trace.json.gz") for p in CUDA.glob("*.gz")) == \
        sorted(MANIFEST)
    assert all("error" not in s for s in MANIFEST.values())


@pytest.mark.parametrize("name", params(EXPECTED))
def test_verdict_is_the_experts(name):
    verdict = bottleneck(name).findings[0]
    assert verdict.evidence["verdict"] == EXPECTED[name], verdict.title


@pytest.mark.parametrize("name", params(MANIFEST))
def test_span_and_kernels_match_the_raw_json(name):
    """The verdict's span is the GPU activity's extent and the compute finding counts every
    kernel, computed from the JSON by hand."""
    doc, events = load(path(name))
    work = [(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy = merge(work)
    report = bottleneck(name)
    assert report.findings[0].evidence["span_ns"] == pytest.approx(
        busy[-1][1] - busy[0][0], abs=2)
    kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    compute = [f for f in report.findings if f.title.startswith("compute:")]
    if report.findings[0].evidence["compute_pct"] < 5:  # min_share_pct: no finding of its own
        assert not compute
    else:
        assert compute[0].evidence["kernels"] == kernels


def test_pageable_copies_carry_the_programs_bytes():
    """4 steps of one 256 MiB pageable host-to-device copy: 1.07 GB, as the JSON's bytes."""
    copies = raw("pageable_h2d", "gpu_memcpy")
    per_step = MANIFEST["pageable_h2d"]["h2d_bytes_per_step"]
    assert [c["args"]["bytes"] for c in copies] == [per_step] * 4
    transfer = finding(bottleneck("pageable_h2d"), "transfer:")
    assert transfer.evidence["HtoD pageable"].startswith("4 copies: 1.07 GB in ")
    assert "pin the host buffers" in bottleneck("pageable_h2d").findings[0].suggestion


@pytest.mark.slow
def test_tiny_kernels_launch_gaps():
    """1,000 kernels a step for 4 steps; every hole between them is a launch or host gap."""
    kernels = raw("tiny_kernels", "kernel")
    assert len(kernels) == 4 * MANIFEST["tiny_kernels"]["kernels_per_step"]
    report = bottleneck("tiny_kernels")
    launch = finding(report, "launch:").evidence
    assert launch["shorter_than_launch_pct"] == 100.0 and launch["gaps"] == 3995
    assert "CUDA graphs" in report.findings[0].suggestion


@pytest.mark.parametrize("name", params(["matmul_loop", "pinned_overlap", "transformer_bf16",
                                         "resnet18_amp"]))
def test_bf16_programs_are_not_told_to_use_bf16(name):
    """cuBLAS's nvjet GEMMs (nvjet_sm90_tst_…) are bf16: no 'try bf16 autocast' advice."""
    report = bottleneck(name)
    assert "bf16/fp16" in classify(
        tracekit.read(path(name))).precisions
    assert not any("autocast" in (f.suggestion or "") for f in report.findings)


def test_gemm_precisions_from_kernel_names():
    """One range per precision; the kernels cuBLAS ran in each tell it (fp32 has none)."""
    program = classify(tracekit.read(path("gemm_dtypes")))
    assert program.precisions == {"fp8", "bf16/fp16", "tf32"}
    # 77% of compute is still FP32 without tensor cores: those are told to move.
    assert bottleneck("gemm_dtypes").findings[0].suggestion.startswith(
        "run the FP32 matmuls left outside reduced precision on tensor cores")
    fp32 = classify(tracekit.read(path("matmul_fp32")))
    assert fp32.precisions == set()
    assert "tensor cores" in bottleneck("matmul_fp32").findings[0].suggestion


def test_item_sync_names_the_python_after_the_read():
    """The host's 3 ms of Python after loss.item(), not per-op overhead, bounds the step:
    without stacks it is time no op covers, right after aten::item."""
    verdict = bottleneck("item_sync").findings[0]
    assert "untraced host code" in verdict.suggestion
    assert "after aten::item" in verdict.suggestion
    assert "framework overhead" not in verdict.suggestion


@pytest.mark.slow
def test_item_sync_with_stacks_names_the_python_function():
    verdict = bottleneck("item_sync_stack").findings[0]
    assert verdict.suggestion.startswith("make the Python code the step runs between launches")
    assert "in Python code, e.g. record_cuda.py(38): busy_python" in verdict.suggestion


@pytest.mark.slow
def test_loader_stall_is_input_bound_however_little_the_gpu_works():
    """The GPU works 0.3% of the recording, but four whole steps are recorded: the loader
    starves it, which is the verdict, not a capture too short to judge."""
    report = bottleneck("dataloader_stall")
    assert report.findings[0].evidence["verdict"] == "input"
    assert report.findings[0].evidence["gpu_busy_pct"] < 2
    assert "num_workers=0" in report.findings[0].suggestion


@pytest.mark.slow
def test_resnet18_fp32_is_told_channels_last():
    report = bottleneck("resnet18_fp32")
    assert "channels_last" in report.findings[0].suggestion
    # cuDNN's NCHW batch norm runs one block per channel: ResNet-18's channel counts.
    _, events = load(path("resnet18_fp32"))
    grids = {e["args"]["grid"][0] for e in events
             if e.get("cat") == "kernel" and "bn_bw_1C11" in e["name"]}
    assert grids == {64, 128, 256, 512}
    grid = finding(report, "GPU 0: grid too small")
    assert "bn_bw_1C11" in grid.evidence["kernel"]
    assert grid.suggestion.startswith("this batch norm kernel runs one block per channel")


def test_allocator_churn_names_empty_cache():
    """cudaFree outside any op: only torch.cuda.empty_cache() frees to the driver there."""
    _, events = load(path("allocator_churn"))
    frees = [e for e in events if e.get("name") == "cudaFree"]
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "cpu_op"]
    assert len(frees) == 4 * MANIFEST["allocator_churn"]["empty_cache_per_step"]
    assert not any(a <= f["ts"] < b for f in frees for a, b in ops)
    fix = bottleneck("allocator_churn").findings[0].suggestion
    assert fix.startswith("remove torch.cuda.empty_cache() from the loop")
    assert "larger batches per step" not in fix


def test_fill_kernels_are_not_called_fusable_elementwise_work():
    """allocator_churn fills a 512 MiB tensor per step: a fill reads nothing, so the fix is to
    fill less, not to fuse it; the shares are the kernels' time from the JSON."""
    kernels = raw("allocator_churn", "kernel")
    total = sum(k["dur"] for k in kernels)
    fills = sum(k["dur"] for k in kernels if "FillFunctor" in k["name"])
    others = sum(k["dur"] for k in kernels if "elementwise" in k["name"]
                 and "FillFunctor" not in k["name"])
    compute = finding(bottleneck("allocator_churn"), "compute:")
    assert compute.suggestion.startswith("fill fewer tensors: allocate with torch.empty where "
                                         "every value is written before it is read")
    assert f"fill kernels take {round(100 * fills / total)}% of compute" in compute.suggestion
    assert 100 * others / total < 20 and "torch.compile" not in compute.suggestion


@pytest.mark.slow
def test_small_copies_are_told_to_copy_once():
    """2,000 pageable 4 KiB copies in 4 steps; nearly every launch gap ends in one."""
    doc, events = load(path("small_copies"))
    copies = [e for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
    expected = MANIFEST["small_copies"]
    assert len(copies) == 4 * expected["copies_per_step"]
    assert {c["args"]["bytes"] for c in copies} == {expected["bytes_per_copy"]}
    report = bottleneck("small_copies")
    assert report.title == ("Bottleneck: CPU/launch-bound (small host-device copies issued one "
                            "after another)")
    fix = report.findings[0].suggestion
    assert fix.startswith("copy once per step instead of piece by piece: build the batch on "
                          "the host")
    # Holes in the GPU's busy time that a copy ends, from the JSON: an upper bound on the
    # launch gaps the fix counts.
    work = sorted((ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"]), e["cat"]) for e in events
                  if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy",
                                                              "gpu_memset"))
    end, holes_to_copies = work[0][1], 0
    for start, stop, cat in work[1:]:
        holes_to_copies += start > end and cat == "gpu_memcpy"
        end = max(end, stop)
    copies_in_fix = int(fix.rsplit("(", 2)[1].split(" of the ")[0].replace(",", ""))
    assert 0.95 * len(copies) <= copies_in_fix <= holes_to_copies
    # '-a launch' says the same, not "fuse the small kernels" for its 28 kernels.
    [launch] = analysis("small_copies", "launch").findings
    assert launch.title == "GPU 0: the GPU waits for host-device copies issued one after another"
    assert launch.evidence["ending_in_copy"] == copies_in_fix
    assert launch.suggestion.startswith("copy once per step instead of piece by piece")


def test_reads_inside_the_step_come_before_graphs():
    """24 .item() per step: a CUDA graph cannot capture them, so the fix says so first."""
    _, events = load(path("sync_per_layer"))
    reads = sum(1 for e in events if e.get("name") == "aten::_local_scalar_dense")
    assert reads == 4 * MANIFEST["sync_per_layer"]["item_calls_per_step"] == 96
    fix = bottleneck("sync_per_layer").findings[0].suggestion
    assert fix.startswith("take the reads of device values out of the step before capturing")
    assert "(96 host reads of device values in 4 steps); launch fewer kernels: CUDA graphs" in fix
    # One read at the end of a step (logging the loss) leaves the step capturable.
    assert "take the reads" not in bottleneck("item_sync").findings[0].suggestion


def test_short_reads_that_idle_the_gpu_are_a_sync_finding():
    """sync_per_layer's 96 reads wait 0.6 ms in all, under 5% of the wall time, but the GPU
    idles after each until the host relaunches: a quarter of its span (the gaps of cause
    sync or launch a read returns in; the JSON's holes bound it)."""
    doc, events = load(path("sync_per_layer"))
    busy = [(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("name", "").startswith("ProfilerStep#")]
    returns = [ns(doc, e["ts"] + e["dur"]) for e in events
               if e.get("name") == "cudaStreamSynchronize"
               and any(a <= e["ts"] < b for a, b in steps)]
    idle = idle_after(busy, returns)  # every hole a read returns in: an upper bound
    span = max(b for _, b in busy) - min(a for a, _ in busy)
    causes = {r["cause"]: r["total"]
              for r in analysis("sync_per_layer", "gaps").tables["causes"].to_pylist()}
    [wait] = analysis("sync_per_layer", "sync").findings
    cost = wait.evidence["gpu_idle_after_ns"]
    assert causes["sync"] <= cost <= min(causes["sync"] + causes["launch"], idle)
    assert 100 * wait.evidence["sync_ns"] / wait.evidence["wall_ns"] < 5
    assert wait.severity == "warning" and 100 * cost / span >= 20
    assert wait.suggestion.startswith("remove per-step host reads of device values")


@pytest.mark.parametrize("name", params(["resnet18_fp16_scaler", "transformer_bf16"]))
def test_optimizer_implementation_is_read_from_the_ops_in_its_steps(name):
    """SGD and AdamW run foreach on CUDA by default: their steps hold aten::_foreach_ ops."""
    _, events = load(path(name))
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")]
    inside = {e["name"] for e in events if e.get("cat") == "cpu_op"
              and any(a <= e["ts"] <= b for a, b in steps)}
    assert any(n.startswith("aten::_foreach_") for n in inside)
    assert not any(n.startswith("aten::_fused_") for n in inside)
    assert optimizer_implementation(tracekit.read(path(name))) == "foreach"


@pytest.mark.slow
def test_foreach_optimizer_is_told_fused_not_foreach():
    fix = bottleneck("resnet18_fp16_scaler").findings[0].suggestion
    # Per-op overhead (backward, host code: 36% of the longest gaps) comes first; the
    # optimizer's 33% gets its fix after it, and not "use foreach".
    assert fix.startswith("cut framework overhead per op")
    assert "; the step already runs foreach ops: use torch.optim.SGD(..., fused=True)" in fix
    assert "use a fused or foreach optimizer" not in fix


def test_foreach_ops_outside_the_step_do_not_count(tmp_path):
    """Gradient clipping's _foreach_norm runs before the step: not the optimizer's."""
    def x(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    doc = {"traceEvents": [x("aten::_foreach_norm", 0, 5),
                           x("Optimizer.step#SGD.step", 10, 20, "user_annotation"),
                           x("aten::add_", 12, 2)]}
    trace_path = tmp_path / "clip.json"
    trace_path.write_text(json.dumps(doc))
    assert optimizer_implementation(tracekit.read(trace_path)) is None
    doc["traceEvents"].append(x("aten::_fused_sgd_", 15, 3))
    trace_path.write_text(json.dumps(doc))
    assert optimizer_implementation(tracekit.read(trace_path)) == "fused"


def test_decode_in_a_graph_is_gpu_bound_with_small_grids():
    report = bottleneck("llm_decode_graph")
    assert report.findings[0].evidence["verdict"] == "compute"
    program = classify(tracekit.read(path("llm_decode_graph")))
    assert program.graphs and "bf16/fp16" in program.precisions
    small = finding(report, "GPU 0: grid too small")
    assert small.severity == "critical" and small.evidence["blocks"] == 1
    # Busy is not full: one block on 132 SMs leaves 60% of the span's SM time idle.
    assert small.evidence["idle_sm_span_pct"] >= 50
    assert report.title == ("Bottleneck: GPU-bound, but most SMs idle (kernels of fewer blocks "
                            "than SMs)")
    assert report.findings[0].suggestion.startswith(small.suggestion)


@pytest.mark.parametrize("name", params(MANIFEST))
def test_breakdown_matches_htas_definition(name):
    """Idle, compute and non-compute time per device, by HTA's definitions computed from the
    JSON in plain Python."""
    doc, events = load(path(name))
    [want] = hta_temporal_breakdown(events, doc).values()
    [got] = analysis(name, "breakdown").tables["devices"].to_pylist()
    assert (got["span"], got["idle"], got["compute"]) == (want["span"], want["idle"],
                                                          want["compute"])
    assert got["comm"] + got["mem"] == want["non_compute"]


def test_the_profilers_stop_is_not_the_programs_sync():
    """matmul_loop has no sync; the profiler's cudaDeviceSynchronize after the last step
    waits for the queued GPU work and is left out."""
    _, events = load(path("matmul_loop"))
    steps = [e for e in events if e.get("cat") == "user_annotation"
             and e["name"].startswith("ProfilerStep#")]
    end = max(e["ts"] + e["dur"] for e in steps)
    syncs = [e for e in events if e.get("cat") == "cuda_runtime"
             and e["name"] == "cudaDeviceSynchronize"]
    assert len(syncs) == 1 and syncs[0]["ts"] > end
    assert analysis("matmul_loop", "sync").findings == []


@pytest.mark.slow
def test_cpu_tensor_reads_are_not_device_reads():
    """AdamW's step counters are CPU tensors: 576 reads, no API call inside any of them."""
    _, events = load(path("transformer_bf16"))
    assert sum(1 for e in events if e.get("name") == "aten::_local_scalar_dense") == 576
    evidence = finding(bottleneck("transformer_bf16"), "verdict:")
    assert "take the reads" not in evidence.suggestion
    registry = load_registry(dists={"tracekit"}, environ={})
    activity = Activity.of(
        tracekit.read(path("transformer_bf16"), registry=registry))
    assert host_reads(activity) == 0


@pytest.mark.slow
def test_copy_waits_without_reads_are_told_to_pin():
    [wait, pageable] = analysis("small_copies", "sync").findings
    assert wait.evidence["host_reads"] == 0 and wait.evidence["sync_calls"] == 2000
    # Each copy's wait runs inside its aten::copy_: a blocking copy, not an explicit sync.
    assert wait.evidence["inside"] == "copy 2,000"
    assert wait.suggestion.startswith("no blocking copies in the step")
    assert ".item()" not in wait.suggestion
    assert pageable.evidence["copies"] == 2000


def test_steps_follow_the_gpu_work_they_launched():
    """matmul_loop's host runs ahead: each 2-3 ms host step range ends long before its GPU
    work. A step's row spans to the end of the work it launched (by correlation), so steps
    after the first take the time between the ends of consecutive steps' work, as measured
    outside the profiler (manifest: 17.5 ms)."""
    doc, events = load(path("matmul_loop"))
    steps = sorted((ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"]), int(e["name"][13:]))
                   for e in events if e.get("cat") == "user_annotation"
                   and e["name"].startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: ns(doc, e["ts"]) for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    gpu_end = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            at = launch.get(e["args"].get("correlation"), ns(doc, e["ts"]))
            step = next((n for s, t, n in steps if s <= at < t), None)
            if step is not None:
                gpu_end[step] = max(gpu_end.get(step, 0), ns(doc, e["ts"] + e["dur"]))
    assert all(t < gpu_end[n] for _, t, n in steps)  # every host range ends before its work
    rows = {r["step"]: r for r in analysis("matmul_loop", "breakdown").tables["steps"].to_pylist()}
    for step in (2, 3, 4, 5):
        if step > 2:
            assert rows[step]["duration"] == gpu_end[step] - gpu_end[step - 1]
        assert rows[step]["host_range"] < 4_000_000
        assert rows[step]["duration"] == pytest.approx(
            MANIFEST["matmul_loop"]["step_ms_median"] * 1e6, rel=0.1)
        assert rows[step]["compute_pct"] > 95


def test_cpu_report_tells_host_and_gpu_memory_apart():
    """Kineto records GPU allocations as host [memory] events: Device Type 1 is the GPU's."""
    _, events = load(path("memory_profile"))
    memory = [e["args"] for e in events if e.get("name") == "[memory]"]
    host = [a for a in memory if a["Device Type"] == 0]
    gpu = [a for a in memory if a["Device Type"] == 1]
    found = finding(analysis("memory_profile", "cpu"), "Memory:").evidence
    assert found["largest_allocation_bytes"] == max(a["Bytes"] for a in host)
    assert found["peak_allocated_bytes"] == max(a["Total Allocated"] for a in host)
    assert found["gpu0_peak_allocated_bytes"] == max(a["Total Allocated"] for a in gpu)
    assert found["gpu0_peak_reserved_bytes"] == max(a["Total Reserved"] for a in gpu)


def test_cpu_report_of_a_gpu_trace_gives_no_cpu_gemm_advice():
    report = analysis("pinned_overlap", "cpu")
    assert not any("CPU GEMM" in (f.suggestion or "") for f in report.findings)


def test_text_tables_keep_names_whole_outside_a_terminal(monkeypatch):
    """Written to a pipe or a file (no COLUMNS), a kernel name stays whole for grep and diff;
    on an 80-column terminal it is cut to fit."""
    from tracekit.report import render_text

    kernels = analysis("cuda_graph", "kernels")
    name = kernels.tables["kernels"]["name"][0].as_py()
    assert len(name) > 150
    monkeypatch.delenv("COLUMNS", raising=False)
    assert name in render_text([kernels])  # pytest's captured stdout is no terminal
    assert name not in render_text([kernels], width=80)
    monkeypatch.setenv("COLUMNS", "80")
    assert name not in render_text([kernels])


def test_perfetto_says_which_args_it_writes_as_text(tmp_path):
    """Perfetto's annotations hold no empty list or null: 'Input Dims' [[]] of scalar inputs
    and a null 'Python parent id' are written as texts, and convert says for how many."""
    _, events = load(path("item_sync_stack"))

    def odd(value):
        return value is None or value in ([], {}) or (
            isinstance(value, list) and any(odd(v) for v in value))

    expected = sum(1 for e in events if e.get("ph") in ("X", "i", "I")
                   and any(odd(v) for v in (e.get("args") or {}).values()))
    assert expected == 453
    result = tracekit.write(tracekit.read(path("item_sync_stack")), tmp_path / "t.pftrace")
    [(key, n)] = [(k, n) for k, n in result.skipped.items() if "empty lists" in k]
    assert n == expected and "written as the texts" in key


def test_device_properties_not_kept_are_named():
    """The H200's deviceProperties holds 14 keys; the devices table keeps 6 of them (with
    the id): the reader names the other 8 rather than dropping them unsaid."""
    doc, _ = load(path("matmul_loop"))
    [props] = doc["deviceProperties"]
    kept = {"id", "name", "gcnArchName", "numSms", "totalGlobalMem", "computeMajor",
            "computeMinor"}
    others = sorted(set(props) - kept)
    assert len(others) == 8 and "regsPerMultiprocessor" in others and "warpSize" in others
    trace = tracekit.read(path("matmul_loop"))
    notes = [outcome for (_, kind, outcome), n in trace.log.outcomes.items()
             if kind == "deviceProperties" and n == 1]
    assert f"keys not kept (the devices table holds name, SMs, memory and compute " \
           f"capability): {', '.join(others)}" in notes


def test_autograd_thread_keeps_its_own_name():
    """Kineto names the autograd thread twice: '(pt_autograd_0)', then the recording
    thread's '(python3)'. The first is the thread's own."""
    _, events = load(path("matmul_loop"))
    names = [e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["tid"] == 597]
    assert names == ["thread 597 (pt_autograd_0)", "thread 597 (python3)"]
    threads = {r["tid"]: r["name"] for r in tracekit.read(path("matmul_loop")).threads.to_pylist()}
    assert threads[597] == "thread 597 (pt_autograd_0)"


@pytest.mark.slow
def test_work_queued_before_the_recording_is_no_steps():
    """mi300_resnet_act_checkpoint: 968 GPU ops with no launch in the trace run in the first
    30 ms; the first step's window starts after them, so it takes what the others take."""
    trace_path = shared_path("torch-trace", "tracelens", "mi300_resnet_act_checkpoint.json.gz")
    registry = load_registry(dists={"tracekit"}, environ={})
    [breakdown] = tracekit.analyze(tracekit.read(trace_path, registry=registry), "breakdown",
                                   registry=registry)
    rows = {r["step"]: r["duration"] for r in breakdown.tables["steps"].to_pylist()
            if r["device"] == "GPU 2"}
    assert sorted(rows) == [15, 16, 17]
    assert max(rows.values()) < 1.1 * min(rows.values())


@pytest.mark.slow
def test_device_to_device_copies_are_not_told_to_copy_from_the_host():
    """nccl_data_rank0's launch gaps end in DDP's device-to-device bucket copies: batching on
    the host would remove none of them."""
    trace_path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    _, events = load(trace_path)
    copies = {e["name"] for e in events if e.get("cat") == "gpu_memcpy"}
    assert copies == {"Memcpy DtoD (Device -> Device)"}
    registry = load_registry(dists={"tracekit"}, environ={})
    [verdict] = tracekit.analyze(tracekit.read(trace_path, registry=registry), "bottleneck",
                                 registry=registry)
    assert not any("copy once per step" in (f.suggestion or "") for f in verdict.findings)


@pytest.mark.slow
def test_diff_says_where_the_kernels_saving_went():
    """bf16 autocast cut ResNet-18's kernel time by more than half, its GPU span by 8%: the
    rest became idle time (the host overhead the FP32 kernels hid)."""
    times = {}
    for name in ("resnet18_fp32", "resnet18_amp"):
        doc, events = load(path(name))
        kernels = [(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"])) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "kernel"]
        work = merge([(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"])) for e in events
                      if e.get("ph") == "X"
                      and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")])
        times[name] = (sum(t - s for s, t in kernels), work[-1][1] - work[0][0])
    (k_a, span_a), (k_b, span_b) = times["resnet18_fp32"], times["resnet18_amp"]
    registry = load_registry(dists={"tracekit"}, environ={})
    [diff] = tracekit.analyze(tracekit.read([path("resnet18_fp32"), path("resnet18_amp")],
                                            registry=registry), "diff", registry=registry)
    saving = finding(diff, "Kernel time ")
    assert saving.evidence["kernel_change_pct"] == round(100 * (k_b - k_a) / k_a, 1) == -58.1
    # 58.1% less time is 2.4 times as fast, not "58.1% faster".
    assert saving.title.startswith(f"Kernel time 58.1% less ({k_a / k_b:.2g}× faster)")
    assert saving.evidence["span_change_pct"] == round(100 * (span_b - span_a) / span_a, 1)
    assert "idle gaps" in saving.suggestion


def test_waits_inside_data_dependent_ops_are_told_static_shapes():
    """x[x > 0] runs aten::nonzero, which reads the count of true elements back: each of the
    200 stream synchronizes is inside one, and the fix is shapes, not .item() or copies."""
    _, events = load(path("mask_indexing"))
    nonzero = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
               if e.get("name") == "aten::nonzero"]
    syncs = [e for e in events if e.get("name") == "cudaStreamSynchronize"]
    assert len(nonzero) == len(syncs) == 4 * MANIFEST["mask_indexing"]["nonzero_per_step"]
    assert all(any(a <= s["ts"] <= b and t == s["tid"] for a, b, t in nonzero) for s in syncs)
    [wait] = analysis("mask_indexing", "sync").findings
    assert wait.evidence["inside"] == "shape 200" and wait.evidence["host_reads"] == 0
    assert "meanwhile, keep shapes static: an op whose output size depends on the data" in \
        wait.suggestion
    # The GPU stays busy through the waits (compute-bound): the idle holes a wait returns in
    # are under 5% of its span, so the waits are information.
    doc, events = load(path("mask_indexing"))
    busy = merge([(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"])) for e in events
                  if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy",
                                                              "gpu_memset")])
    returns = [ns(doc, s["ts"] + s["dur"]) for s in syncs]
    idle = idle_after(busy, returns)
    assert wait.evidence["gpu_idle_after_ns"] == pytest.approx(idle, abs=200)
    assert wait.severity == "info" and 100 * idle / (busy[-1][1] - busy[0][0]) < 5
    # Those reads cannot be captured either: the launch finding says so before graphs.
    launch = finding(bottleneck("mask_indexing"), "launch:").suggestion
    assert launch.startswith("take the reads of device values out of the step")
    assert "(200 host reads of device values in 4 steps)" in launch


def test_offloaded_weights_are_told_to_stay_resident():
    """Weights copied in from pinned host memory layer by layer each step: transfer-bound,
    and the fix is to keep them on the GPU, not to pin them."""
    _, events = load(path("offload_inference"))
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert {e["args"]["bytes"] for e in copies} == {4096 * 4096 * 2}
    assert all("Pinned" in e["name"] for e in copies)
    verdict = bottleneck("offload_inference").findings[0]
    assert verdict.evidence["verdict"] == "transfer"
    assert "weights offloaded and fetched again" in verdict.suggestion
    assert "pin the host buffers" not in verdict.suggestion


@pytest.mark.slow
def test_diff_of_a_much_shorter_run_is_no_regression():
    """tiny_kernels -> cuda_graph: more kernel time (the graph runs 2,000 ops a step against
    1,000, and kernels queued before the recording), but a GPU span 86% shorter."""
    registry = load_registry(dists={"tracekit"}, environ={})
    [diff] = tracekit.analyze(tracekit.read([path("tiny_kernels"), path("cuda_graph")],
                                            registry=registry), "diff", registry=registry)
    total = diff.findings[0]
    assert total.title.startswith("GPU kernel time +") and total.severity == "info"
    assert total.suggestion.startswith("the run is shorter, though: the GPU's active span -86%")
    spans = {r["metric"]: r for r in diff.tables["totals"].to_pylist()}["GPU active span"]
    assert spans["change_pct"] == -86.0


@pytest.mark.slow
def test_work_queued_before_the_recording_is_noted():
    """cuda_graph: the GPU runs a warm-up replay's kernels into the recording; they have no
    launching call in the trace and run before the first kernel that has one."""
    doc, events = load(path("cuda_graph"))
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    work = sorted((ns(doc, e["ts"]), e["args"].get("correlation") in launched) for e in events
                  if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy",
                                                              "gpu_memset"))
    first = min(t for t, linked in work if linked)
    early = sum(1 for t, linked in work if not linked and t < first)
    assert early == 1837  # 9,837 kernels against 4 x 2,000 replayed in the window
    assert any(n.startswith(f"{early:,} GPU operations ran before the first one")
               for n in bottleneck("cuda_graph").notes)
    # They have no launch to measure: '-a launch' leaves them out and says so.
    launch = analysis("cuda_graph", "launch")
    [row] = launch.tables["delay"].to_pylist()
    assert (row["kernels"], row["linked"], row["graph_nodes"]) == (0, 0, 4 * 2000)
    assert any(n.startswith(f"{early:,} kernels ran before the first one") for n in launch.notes)


@pytest.mark.slow
def test_a_cache_grown_by_cat_is_made_static_before_graphs():
    """llm_decode_eager grows its key/value cache with torch.cat: two per attention call.
    CUDA graphs need the cache static first; the graph-captured decode needs no such fix."""
    _, events = load(path("llm_decode_eager"))
    names = [e["name"] for e in events if e.get("cat") == "cpu_op"]
    attention = names.count("aten::scaled_dot_product_attention")
    assert attention == 4 * MANIFEST["llm_decode_eager"]["tokens_per_step"] * 4  # 4 blocks
    assert names.count("aten::cat") == 2 * attention
    fix = bottleneck("llm_decode_eager").findings[0].suggestion
    assert fix.startswith("make the key/value cache static before capturing")
    assert f"({2 * attention} aten::cat beside {attention} attention calls" in fix
    assert "key/value cache" not in bottleneck("llm_decode_graph").findings[0].suggestion
