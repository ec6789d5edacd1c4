"""Fixes that follow from the evidence: long host gaps of CPU tensor work are not framework
overhead (no CUDA graphs), and reduced precision is advised only where matmuls and
convolutions run."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.plugins.diagnosis.advice import Facts, fixes_for, optimizer_fix, place_of
from tracekit.plugins.diagnosis.program import Program
from tracekit.toolkit import format_ns


def _verdict(name: str) -> tracekit.Finding:
    trace = tracekit.read(FIXTURES / "scenarios" / f"{name}.pt.trace.json.gz")
    (report,) = tracekit.analyze(trace, "bottleneck")
    return report.findings[0]


def test_host_tensor_work_in_long_gaps_is_moved_off_the_launch_path() -> None:
    """cpu_data_prep: each step runs aten::randn (5 ms) and aten::cat (3 ms) on the host
    before its kernels; 4 steady-state gaps of 6.18 ms on average. The 4 aten::cat ops lie
    wholly in the gaps (12 ms); aten::randn starts before each gap (12.7 ms of them)."""
    verdict = _verdict("cpu_data_prep")
    assert verdict.evidence["verdict"] == "cpu"
    assert verdict.suggestion.startswith(
        "take the host computation between launches off the launch path")
    assert ("(4 host gaps of 6.18ms on average; the launching thread runs aten::randn 12.7ms, "
            "aten::cat 12ms in them)") in verdict.suggestion
    assert "CUDA graphs" not in verdict.suggestion


def test_short_host_gaps_still_get_the_framework_overhead_fix() -> None:
    facts = Facts(cpu_gaps=1000, cpu_gap_ns=1000 * 80_000, gap_ops={"aten::add": 60_000_000},
                  gap_places={"host code": 80_000_000})
    (first, *_) = fixes_for("cpu", Program(gpu=True, framework="PyTorch", api="CUDA"), facts)
    assert first.text.startswith("cut framework overhead per op: capture the step in CUDA graphs")


@pytest.mark.parametrize(("mode", "ahead"), [
    ("training", "prepare them in DataLoader workers (num_workers>0) so they are ready"),
    ("inference", "prepare the next inputs on another thread while the GPU runs so they are"),
])
def test_host_computation_is_prepared_ahead_the_way_the_program_gets_inputs(mode, ahead):
    """Training gets its batches from a DataLoader; inference from requests: no DataLoader."""
    facts = Facts(cpu_gaps=4, cpu_gap_ns=4 * 6_000_000, gap_ops={"aten::zeros": 20_000_000},
                  gap_places={"host code": 24_000_000})
    program = Program(gpu=True, framework="PyTorch", api="CUDA", mode=mode)
    (first, *rest) = fixes_for("cpu", program, facts)
    assert first.text.startswith("take the host computation between launches off the launch "
                                 "path: create or compute those tensors on the GPU")
    assert ahead in first.text
    assert ("DataLoader" in " ".join(f.text for f in (first, *rest))) == (mode == "training")


@pytest.mark.parametrize(("processes", "caveat"), [(1, True), (8, False)])
def test_one_rank_of_a_run_is_told_its_collectives_may_be_waiting(processes, caveat):
    """A collective ends when the last rank arrives: one rank's trace cannot tell waiting for
    a straggler from transfer time, so the fix asks for every rank."""
    facts = Facts(collective_ns={"all-reduce": 50_000_000}, compute_ns=200_000_000)
    program = Program(gpu=True, framework="PyTorch", api="HIP", mode="training",
                      collectives=True, world_size=8, processes=processes)
    texts = [f.text for f in fixes_for("communication", program, facts)]
    assert texts[0].startswith("overlap gradient communication with backward")
    told = [t for t in texts if t.startswith("analyze every rank's trace together")]
    assert len(told) == caveat
    if caveat:
        reasons = [f.because for f in fixes_for("communication", program, facts)]
        assert "the input holds 1 of the run's 8 ranks" in reasons


@pytest.mark.parametrize(("ddp", "fsdp", "told", "not_told"), [
    (True, False, "DDP's buckets (bucket_cap_mb", "FSDP"),
    (False, True, "FSDP backward_prefetch", "bucket_cap_mb"),
    (False, False, "DDP bucket_cap_mb, FSDP backward_prefetch", "DDP's buckets")])
def test_the_overlap_fix_names_the_wrapper_in_use(ddp, fsdp, told, not_told):
    facts = Facts(collective_ns={"all-reduce": 50_000_000}, compute_ns=200_000_000)
    program = Program(gpu=True, framework="PyTorch", api="CUDA", mode="training",
                      collectives=True, world_size=2, world_size_declared=True, processes=2,
                      ddp=ddp, fsdp=fsdp)
    [fix] = fixes_for("communication", program, facts)
    assert told in fix.text and not_told not in fix.text


def test_communication_of_ranks_waiting_for_a_straggler_points_at_it():
    facts = Facts(collective_ns={"all-reduce": 50_000_000}, compute_ns=200_000_000,
                  straggler=(3, 21, 21))
    program = Program(gpu=True, framework="PyTorch", api="HIP", mode="training",
                      collectives=True, world_size=4, world_size_declared=True, processes=4)
    [fix] = fixes_for("communication", program, facts)
    assert fix.text.startswith("much of this time is the ranks waiting for rank 3")
    assert fix.because == "rank 3 arrives last at 21 of 21 collectives"


def test_collectives_longer_than_compute_are_not_told_to_overlap():
    """With 20 ms of compute kernels against 50 ms of all-reduce, overlap hides 20 ms at
    most: the fix is to send less, less often."""
    facts = Facts(collective_ns={"all-reduce": 50_000_000}, compute_ns=20_000_000)
    program = Program(gpu=True, framework="PyTorch", api="CUDA", mode="training",
                      collectives=True, world_size=2, world_size_declared=True, processes=2)
    [fix] = fixes_for("communication", program, facts)
    assert fix.text.startswith("send less, less often: overlap can hide at most the compute "
                               "time (20ms against 50ms of collectives)")


def test_compute_time_is_counted_once_for_copies_and_collectives():
    """mi300_resnet_act_checkpoint (DDP training with copies): its compute kernels take
    25.7 ms against 71.5 ms of RCCL kernels, by the JSON; the compute time was counted twice
    once both copies and collectives were looked at, which kept the send-less fix silent."""
    import gzip
    import json
    import re

    path = shared_path("torch-trace", "tracelens", "mi300_resnet_act_checkpoint.json.gz")
    with gzip.open(path) as f:
        kernels = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"
                   and e.get("cat") == "kernel"]
    comm = sum(round(e["dur"] * 1000) for e in kernels if "nccl" in e["name"].lower())
    memory = re.compile(r"(?i)^(hip)?memcpy|^(hip)?memset|__amd_rocclr_(copy|fill)")
    compute = sum(round(e["dur"] * 1000) for e in kernels if "nccl" not in
                  e["name"].lower() and not memory.search(e["name"]))
    assert compute * 2 < comm
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    verdict = report.findings[0]  # communication: its fix is the verdict's
    assert verdict.evidence["verdict"] == "communication"
    assert verdict.suggestion.startswith(
        f"send less, less often: overlap can hide at most the compute time "
        f"({format_ns(compute)} against {format_ns(comm)} of collectives)")


@pytest.mark.slow
def test_collective_kernels_far_longer_than_the_median_are_waits_for_other_ranks():
    """tracelens_908 (rocprofv3 JSON, one rank of a run): 19 RCCL kernels of 10x the median
    or more hold 64% of its collective time, the longest 733 ms against a median of 1.22 ms:
    waiting for the other ranks, not bandwidth, by the kernels in the file."""
    import gzip
    import json

    path = shared_path("bonus", "rocprofv3-json", "tracelens_908_results.json.gz")
    tool = json.loads(gzip.decompress(path.read_bytes()))["rocprofiler-sdk-tool"][0]
    names = {s["kernel_id"]: s["formatted_kernel_name"] for s in tool["kernel_symbols"]}
    durs = sorted(r["end_timestamp"] - r["start_timestamp"]
                  for r in tool["buffer_records"]["kernel_dispatch"]
                  if names[r["dispatch_info"]["kernel_id"]].startswith("ncclDevKernel"))
    median = durs[len(durs) // 2] if len(durs) % 2 else \
        (durs[len(durs) // 2 - 1] + durs[len(durs) // 2]) // 2
    long = [d for d in durs if d >= 10 * median]
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [comm] = [f for f in report.findings if f.title.startswith("communication:")]
    assert comm.suggestion.startswith(
        f"{len(long):,} collective kernels run 10× the median one or longer and hold most of "
        "the communication time: this rank waits in them for the others")
    assert f"longest {format_ns(max(durs))} against a median of {format_ns(median)}" in \
        comm.suggestion
    assert "overlap gradient communication" not in comm.suggestion


@pytest.mark.parametrize(("where", "fix"), [
    ("Optimizer.step#AdamW.step", "use a fused or foreach optimizer (e.g. torch.optim.AdamW(..., "
                                  "fused=True))"),
    ("Optimizer.step#RMSprop.step", "use a fused or foreach optimizer (e.g. "
                                    "torch.optim.RMSprop(..., foreach=True))"),
    ("Optimizer.step#Shampoo.step (79% of the gap, in a 199ms call)",
     "Shampoo's step updates and inverts its preconditioners: invert them less often"),
    ("Optimizer.step#Lion.step", "Lion is not one of torch.optim's foreach or fused optimizers"),
    ("optimizer_step", "use a fused or foreach optimizer (e.g. torch.optim.AdamW(..., "
                       "fused=True))"),
])
def test_the_optimizer_fix_follows_its_class(where, fix):
    assert optimizer_fix(where).startswith(fix)


@pytest.mark.parametrize(("top_pct", "fix"), [
    (6.6, "no kernel dominates: profile the top five together with Nsight Compute (ncu)"),
    (40.0, "profile k with Nsight Compute (ncu): achieved occupancy"),
])
def test_a_flat_profile_is_not_one_kernel_to_tune(top_pct, fix):
    facts = Facts(top_kernel="k", top_kernel_pct=top_pct, top5_kernels_pct=28.6)
    (first, *_) = fixes_for("compute", Program(gpu=True, api="CUDA"), facts)
    assert first.text.startswith(fix)


def test_cloverleaf_top_five_kernels_match_sql() -> None:
    """CloverLeaf (nsys, A100): 102 kernel names, the top one 6.6 % of kernel time, the top five
    28.6 % (SQL over the export): a flat profile."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    totals = [t for (t,) in db.execute(
        "select sum(k.end - k.start) from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s "
        "on k.demangledName = s.id group by s.value order by 1 desc")]
    db.close()
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    verdict = report.findings[0]
    top, top5 = (round(100 * sum(totals[:n]) / sum(totals)) for n in (1, 5))
    assert (top, top5) == (7, 29)
    assert verdict.suggestion.startswith("no kernel dominates: profile the top five together")
    assert f"takes {top}% of compute, the top five {top5}%)" in verdict.suggestion


def test_copies_on_a_gpu_that_shares_the_cpus_memory_are_dropped() -> None:
    """rocprof v1 shashank_mi300a: an MI300A (an APU: CPU and GPU share one HBM) spends 98.5 %
    of its GPU time copying 8 GB to the GPU (two 4 GB calls) and 4 GB back: the first fix is
    not to copy."""
    trace = tracekit.read(shared_path("rocprof-v1", "shashank_mi300a", "results.json"))
    (report,) = tracekit.analyze(trace, "bottleneck")
    verdict = report.findings[0]
    assert verdict.evidence["verdict"] == "transfer"
    assert verdict.suggestion.startswith(
        "drop the copies: allocate with hipMalloc (the CPU can use it too) or, with XNACK on "
        "(HSA_XNACK=1), let the kernels use the host's own buffers (AMD Instinct MI300A shares "
        "one memory with the CPU: each copy (HtoD 8 GB, DtoH 4 GB) moves data within it)")
    facts = Facts(copy_kinds={"HtoD": 10**9}, shared_memory_gpu="NVIDIA Jetson AGX Orin")
    (first, *_) = fixes_for("transfer", Program(gpu=True, framework="PyTorch", api="CUDA"),
                            facts)
    assert first.text == ("drop the copies: create the tensors on the GPU (device='cuda') and "
                          "keep them there")
    (first, *_) = fixes_for("transfer", Program(gpu=True, api="CUDA"), Facts(
        copy_kinds={"HtoD": 10**9}))
    assert not first.text.startswith("drop the copies")


@pytest.mark.parametrize(("loader", "first"), [
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
     "give the DataLoader worker processes (it loads in the training process: num_workers=0)"),
    ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
     "the DataLoader's workers cannot keep up: more workers"),
    ("enumerate(DataLoader)#__next__", "load data off the launching thread: DataLoader("),
])
def test_the_input_fix_follows_the_loader_the_trace_shows(loader, first):
    """PyTorch names the loader's iterator: single-process (num_workers=0) wants workers;
    multi-process already has them, so more of them or cheaper samples."""
    facts = Facts(input_wait_ns=287_000_000, gap_places={"data loading": 287_000_000},
                  gap_examples={"data loading": f"{loader} (100% of the gap, in a 70.8ms call)"})
    program = Program(gpu=True, framework="PyTorch", api="CUDA", mode="training")
    fixes = fixes_for("input", program, facts)
    assert fixes[0].text.startswith(first)
    assert loader in fixes[0].because
    assert len(fixes) == (1 if "Multi" in loader else 2)


def test_an_aten_op_is_not_forward_by_its_name() -> None:
    """An innermost aten:: op inside a backward range is backward; alone it is host code."""
    assert place_of("aten::mm", ["autograd::engine::evaluate_function: MmBackward0"]) == \
        "backward"
    assert place_of("aten::cat", ["ProfilerStep#2"]) == "host code"
    assert place_of("aten::mm", ["DistributedDataParallel.forward"]) == "forward"


def test_no_reduced_precision_advice_without_matmuls_or_convolutions() -> None:
    """tiny_kernels runs only elementwise kernels; matmul_loop's GEMMs already use TF32
    (sm90_xmma_gemm_f32f32_tf32f32); the FP32 sgemm scenarios are told to use tensor cores."""
    for name in ("tiny_kernels", "matmul_loop"):
        trace = tracekit.read(FIXTURES / "scenarios" / f"{name}.pt.trace.json.gz")
        (report,) = tracekit.analyze(trace, "bottleneck")
        fixes = " ".join(f.suggestion for f in report.findings)
        assert "autocast" not in fixes and "allow_tf32" not in fixes, name
    facts = Facts(matmul_conv_pct=0.0, top_kernel="elementwise_kernel", top_kernel_pct=100.0)
    texts = [f.text for f in fixes_for("compute", Program(gpu=True, framework="PyTorch",
                                                          api="CUDA"), facts)]
    assert not any("autocast" in t for t in texts)
    facts.matmul_conv_pct = 60.0
    texts = [f.text for f in fixes_for("compute", Program(gpu=True, framework="PyTorch",
                                                          api="CUDA"), facts)]
    assert any(t.startswith("try bf16 autocast") for t in texts)


@pytest.mark.slow
def test_several_devices_are_gpu_time_not_a_span() -> None:
    """Two H100s over a 1 s window: the denominator is their spans summed (kernels, copies and
    memsets per deviceId, by SQL), named gpu_time_ns, not a 1.94 s span."""
    import sqlite3

    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    work = " union all ".join(f"select deviceId d, start s, end e from CUPTI_ACTIVITY_KIND_{t}"
                              for t in ("KERNEL", "MEMCPY", "MEMSET"))
    spans = [n for (n,) in db.execute(f"select max(e) - min(s) from ({work}) group by d")]
    db.close()
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    verdict = report.findings[0]
    assert spans == [969_447_605, 969_258_578]
    assert verdict.evidence["devices"] == 2
    assert verdict.evidence["gpu_time_ns"] == sum(spans)
    assert "span_ns" not in verdict.evidence


def test_a_few_waits_for_results_are_not_a_sync_problem() -> None:
    """rocprof v1 shashank_mi300a: 3 hipMemcpy and 1 hipDeviceSynchronize wait for results
    (51.7% of the wall time, the first call's context creation left out): info, no PyTorch
    advice. item_sync: 5 steps each reading a
    device value: a per-step habit, a warning with the PyTorch fix."""
    import json

    run = shared_path("rocprof-v1", "shashank_mi300a")
    xs = [e for e in json.loads((run / "results.json").read_text())["traceEvents"]
          if e.get("ph") == "X"]
    waits = [(int(e["args"]["BeginNs"]), int(e["args"]["EndNs"])) for e in xs
             if e["name"] in ("hipMemcpy", "hipDeviceSynchronize")]
    first_gpu = min(int(e["args"]["BeginNs"]) for e in xs if e["name"].startswith("Copy"))
    # The first hipMemcpy creates the context before its copy starts: set-up, not a wait.
    set_up = sum(max(0, min(end, first_gpu) - start) for start, end in waits)
    trace = tracekit.read(run)
    (report,) = tracekit.analyze(trace, "sync")
    (finding,) = report.findings
    assert finding.evidence["set_up_sync_ns"] == set_up
    assert (f"{format_ns(set_up)} of waits before the first GPU work (set-up) are in the "
            "table, not the findings") in report.notes
    assert finding.evidence["sync_ns"] == sum(e - b for b, e in waits) - set_up
    assert (finding.severity, finding.title) == (
        "info", "the host waits for the GPU 51.7% of the wall time in 4 calls")
    assert finding.suggestion.startswith("4 waits for results the host needs")
    assert ".item()" not in finding.suggestion
    trace = tracekit.read(FIXTURES / "scenarios" / "item_sync.pt.trace.json.gz")
    (report,) = tracekit.analyze(trace, "sync")
    assert report.findings[0].severity == "warning"
    assert report.findings[0].suggestion.startswith("remove per-step host reads")


def test_a_grid_a_few_blocks_short_of_the_sms_is_no_finding() -> None:
    """128 blocks on 132 SMs leaves 3% of the SMs idle: no 'grid too small' (it was critical
    in every scenario)."""
    trace = tracekit.read(FIXTURES / "scenarios" / "cpu_data_prep.pt.trace.json.gz")
    (report,) = tracekit.analyze(trace, "kernels")
    assert not [f for f in report.findings if "grid too small" in f.title]


def test_a_grid_is_weighed_by_the_sm_time_it_leaves_idle() -> None:
    """pipit saxpy: every launch has 2 blocks on an A100's 108 SMs; the idle SM time is each
    kernel's duration times 1 - blocks/108, summed by SQL over the kernel table."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ((idle, total),) = db.execute(
        "select sum((end - start) * (1.0 - gridX * gridY * gridZ / 108.0)), sum(end - start) "
        "from CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    # The device's span: its first work (kernel, copy or memset) to its last.
    ((span,),) = db.execute(
        "select max(end) - min(start) from (select start, end from CUPTI_ACTIVITY_KIND_KERNEL "
        "union all select start, end from CUPTI_ACTIVITY_KIND_MEMCPY union all "
        "select start, end from CUPTI_ACTIVITY_KIND_MEMSET)").fetchall()
    db.close()
    (report,) = tracekit.analyze(tracekit.read(path), "kernels")
    (finding,) = [f for f in report.findings if "grid too small" in f.title]
    assert finding.evidence["idle_sm_pct"] == 98.1
    assert finding.evidence["idle_sm_time_pct"] == round(100 * idle / total, 1)
    # 98 % of the kernel time, but the copies and the host take most of the span: the idle
    # SMs cost 7.9 % of it, a warning.
    assert finding.evidence["idle_sm_span_pct"] == round(100 * idle / span, 1) == 7.9
    assert finding.severity == "warning"


@pytest.mark.slow
def test_a_steady_state_of_microseconds_gets_no_cause_findings() -> None:
    """vLLM with HIP graph capture: 57.8 ms of start-up, then 28.8 µs of GPU work; the copy
    and compute findings of those µs (with 'overlap the copies' for 256 B) were noise."""
    path = shared_path("torch-trace", "tracelens",
                       "vllm_hipgraph_capture_rank0_rocm7.pt.trace.json.gz")
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    assert report.findings[0].evidence["verdict"] == "startup"
    assert [f.title.split(":")[0] for f in report.findings] == \
        ["verdict", "program", "start-up"]
    assert "the steady state is 28.8µs of GPU timeline: too short to judge its causes " \
        "(the causes table has them)" in report.notes


def test_the_kernel_profiler_is_the_platforms() -> None:
    facts = Facts(matmul_conv_pct=0.0, top_kernel="k", top_kernel_pct=100.0)
    for api, tool in (("HIP", "(rocprof-compute)"), ("CUDA", "(Nsight Compute)")):
        (fix,) = fixes_for("compute", Program(gpu=True, framework="PyTorch", api=api), facts)
        assert fix.text.startswith(f"profile the top kernels {tool} to see what limits them")


def test_the_launch_fix_gives_the_traces_launch_rates_not_back_to_back_kernels() -> None:
    """h100_bert-small: the GPU is busy 7.9% of the span, so its kernels are not back to
    back; the launch fix says why launching is the limit in the launch finding's own figures."""
    trace = tracekit.read(shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz"))
    (report,) = tracekit.analyze(trace, "bottleneck")
    [launch] = [f for f in report.findings if f.title.startswith("launch:")]
    ev = launch.evidence
    assert (ev["shorter_than_launch_pct"], ev["launches_per_s"], ev["gpu_can_run_per_s"]) == (
        65.0, 15_232, 195_314)
    assert "back to back" not in launch.suggestion
    assert "(65% of the kernels are shorter than their launch calls: the host launches 15,232 " \
        "kernels/s where the GPU could run 195,314/s)" in launch.suggestion
    # Without rates (no launch calls linked), the reason is said without figures.
    (fix, *_) = fixes_for("launch", Program(gpu=True, api="CUDA"), Facts())
    assert fix.because == "the GPU waited for the next launch in these gaps"
    (fix, *_) = fixes_for("launch", Program(gpu=True, api="CUDA"), Facts(
        shorter_than_launch_pct=1.8, launches_per_s=123_398, gpu_can_run_per_s=105_176))
    assert fix.because == ("the GPU waited for the next launch in these gaps (2% of the "
                           "kernels are shorter than their launch calls)")


def test_collective_fixes_follow_the_run_the_trace_declares() -> None:
    """World size 1 with collectives: they exchange nothing. One process, collectives, no
    declared world size: the other ranks' traces are asked for. A plain program's collectives
    get no inference or training advice, and NVLS (NVSwitch's) is never advised on HIP."""
    facts = Facts(collective_ns={"all-reduce": 10**6})
    ddp1 = Program(gpu=True, framework="PyTorch", mode="training", api="CUDA", collectives=True,
                   world_size=1, world_size_declared=True)
    [fix] = fixes_for("communication", ddp1, facts)
    assert fix.text.startswith("the run has one rank (world_size 1): its collectives exchange "
                               "nothing")
    plain_hip = Program(gpu=True, api="HIP", collectives=True)
    first, last = fixes_for("communication", plain_hip, facts)
    assert first.text.startswith("the collectives sit on the critical path: run them on their "
                                 "own stream") and "NVLS" not in first.text
    assert "inference" not in first.because
    assert last.text.startswith("analyze every rank's trace together")
    assert last.because == "the input holds one process of a run with collectives"
    served = Program(gpu=True, framework="PyTorch", mode="inference", api="CUDA",
                     collectives=True, world_size=8, world_size_declared=True, processes=8)
    [fix] = fixes_for("communication", served, facts)
    assert "one-shot all-reduce (NVLS on NVSwitch systems)" in fix.text


@pytest.mark.slow  # reads a large real trace
def test_a_start_up_that_is_graph_capture_says_so() -> None:
    """vLLM's capture pass on ROCm: between hipStreamBeginCapture and hipStreamEndCapture
    the host records launches into a graph, which the trace never replays. The counts are
    taken here from the calls themselves."""
    trace = tracekit.read(shared_path("torch-trace", "tracelens",
                                      "vllm_hipgraph_capture_rank0_rocm7.pt.trace.json.gz"))
    ev = trace.events.to_pylist()
    calls = [r for r in ev if str(r["category"]).startswith("api.")]
    [begin] = [r for r in calls if r["name"] == "hipStreamBeginCapture"]
    [end] = [r for r in calls if r["name"] == "hipStreamEndCapture"]
    launch_names = {"hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel"}
    inside = [r for r in calls if r["name"] in launch_names
              and begin["ts_ns"] <= r["ts_ns"] <= end["ts_ns"] + end["dur_ns"]]
    assert not [r for r in calls if "GraphLaunch" in r["name"]]
    (report,) = tracekit.analyze(trace, "bottleneck")
    [startup] = [f for f in report.findings if f.title.startswith("start-up:")]
    assert startup.evidence["graph_capture_ns"] == end["ts_ns"] + end["dur_ns"] - begin["ts_ns"]
    assert startup.evidence["captured_launches"] == len(inside) == 421
    assert startup.evidence["graph_replays"] == 0
    assert startup.suggestion.startswith(
        "this is graph capture: 55ms of host time between hipStreamBeginCapture and "
        "hipStreamEndCapture, where 421 kernel launches were recorded into a graph, not run; "
        "the trace holds no replay of it")
    assert report.findings[0].suggestion == startup.suggestion


def _nsys_cpu_gaps(path):
    """An nsys export read, the ns to add to its SQLite times for tracekit's (its first
    kernel's start in each), and its one GPU's cpu gaps as (lo, hi)."""
    import sqlite3

    from tracekit.plugins.diagnosis.gaps import CAUSES, all_gaps

    trace = tracekit.read(path)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        first_kernel = db.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
                                  ).fetchone()[0]
    kernels = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()),
                                           "gpu.kernel"))
    shift = min(kernels["ts_ns"].to_pylist()) - first_kernel
    [gaps] = all_gaps(trace, 50.0)
    cpu = [(int(lo), int(hi)) for lo, hi, c in zip(gaps.lo, gaps.hi, gaps.cause, strict=True)
           if c == CAUSES.index("cpu")]
    return trace, shift, cpu


def test_cpu_samples_in_the_gaps_name_the_untraced_host_code() -> None:
    """pipit saxpy (nsys with CPU sampling): most of each cpu gap is in no recorded range, but
    the trace holds the launching thread's CPU samples. They are counted here from the
    SQLite (COMPOSITE_EVENTS and the leaf of SAMPLING_CALLCHAINS) in the cpu gaps, and the
    fix names their leaf functions instead of asking for a sampling run."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        samples = db.execute(
            "SELECT C.start, S.value FROM COMPOSITE_EVENTS C JOIN SAMPLING_CALLCHAINS K "
            "ON K.id = C.id AND K.stackDepth = 0 JOIN StringIds S ON S.id = K.symbol"
        ).fetchall()
    trace, shift, cpu = _nsys_cpu_gaps(path)
    inside = [name for start, name in samples
              if any(lo <= start + shift <= hi for lo, hi in cpu)]  # one thread samples
    main = round(100 * inside.count("main") / len(inside))
    (report,) = tracekit.analyze(trace, "bottleneck")
    [finding] = [f for f in report.findings if f.title.startswith("cpu:")]
    described = finding.evidence["cpu_samples_in_gaps"]
    assert described.startswith(f"main {main}%, ")
    assert described.endswith(f" of {len(inside):,} CPU samples")
    assert len(inside) == 3610 and main == 66
    assert report.findings[0].suggestion.startswith(
        "make the host code the CPU samples in these gaps land in faster, or run it beside "
        f"the GPU work instead of between launches: {described}")


def test_fp32_convolutions_without_tensor_cores_count_with_the_gemms() -> None:
    """alexnet (A100): besides sgemm, cuDNN's FP32 convolutions (scudnn) and the complex GEMMs
    of FFT convolutions (gcgemm) run without tensor cores; their share of kernel time is
    summed here from the JSON."""
    import gzip
    import json
    import re

    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    kernels = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
               if e.get("cat") == "kernel"]
    fp32 = sum(e["dur"] for e in kernels
               if re.search(r"(?i)sgemm|scudnn|gcgemm|_cgemm|_ffma", e["name"]))
    share = round(100 * fp32 / sum(e["dur"] for e in kernels))
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [compute] = [f for f in report.findings if f.title.startswith("compute:")]
    assert share == 50
    assert f"(FP32 GEMMs and convolutions without tensor cores take {share}% of compute)" in \
        compute.suggestion


def test_many_short_gaps_between_queued_kernels_are_the_dispatch_cost() -> None:
    """llama.cpp prefill on ROCm (one HIP graph per step): the GPU idles ~2 µs between
    kernels whose launch had begun before the gap. Gaps between the kernels' union, each
    queued when the next kernel's launching call (same Correlation_Id) started before the gap,
    are counted here from the two CSVs."""
    import csv
    import statistics

    run = shared_path("rocprof-v3", "jimw_llamacpp_rocm7")
    with (run / "prefill_hip_api_trace.csv").open(newline="") as f:
        start_of = {r["Correlation_Id"]: int(r["Start_Timestamp"]) for r in csv.DictReader(f)}
    with (run / "prefill_kernel_trace.csv").open(newline="") as f:
        kernels = sorted((int(r["Start_Timestamp"]), int(r["End_Timestamp"]),
                          r["Correlation_Id"]) for r in csv.DictReader(f))
    queued, end = [], kernels[0][1]
    for start, stop, corr in kernels[1:]:
        if start > end and corr in start_of and start_of[corr] <= end:
            queued.append(start - end)
        end = max(end, stop)
    (report,) = tracekit.analyze(tracekit.read(run), "bottleneck")
    [idle] = [f for f in report.findings if f.title.startswith("idle-other:")]
    assert (idle.evidence["queued_gaps"], idle.evidence["median_queued_gap_ns"]) == (
        len(queued), int(statistics.median(queued))) == (1122, 2124)
    assert idle.suggestion.startswith(
        "fewer, larger kernels (fusion): the GPU pays a dispatch cost per kernel even when the "
        "next one is already queued, inside a graph too (1,122 gaps between queued kernels, "
        "2.12µs long at the median)")


def test_a_collectives_kind_comes_from_the_host_range_that_launched_it() -> None:
    """HTA's sampled rank 0: every NCCL kernel is named ncclKernel_SendRecv_…, but the host
    launched all-reduces, all-to-alls and all-gathers (nccl:all_reduce, c10d::alltoall_base_
    …). Each kernel's kind is found here from the JSON: its launching runtime call (the same
    correlation), then the innermost nccl:/c10d:: range of that thread around the call."""
    import gzip
    import json
    import re

    path = shared_path("torch-trace", "hta", "sampled_rank-0.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    calls = {e["args"]["correlation"]: e for e in xs if e.get("cat") == "cuda_runtime"
             and "correlation" in e.get("args", {})}
    ranges = [e for e in xs if e.get("cat") in ("cpu_op", "user_annotation")
              and re.match(r"nccl:|c10d::", e["name"])]
    kinds = {"all_reduce": "all-reduce", "allreduce": "all-reduce", "all_to_all": "all-to-all",
             "alltoall": "all-to-all", "all_gather": "all-gather", "allgather": "all-gather"}
    time: dict[str, float] = {}
    for k in (e for e in xs if e.get("cat") == "kernel" and "nccl" in e["name"].lower()):
        call = calls[k["args"]["correlation"]]
        around = [r for r in ranges if r["tid"] == call["tid"] and r["pid"] == call["pid"]
                  and r["ts"] <= call["ts"] <= r["ts"] + r["dur"]]
        inner = max(around, key=lambda r: r["ts"])
        kind = next(v for key, v in kinds.items() if key in inner["name"])
        time[kind] = time.get(kind, 0) + k["dur"]
    total = sum(time.values())
    shares = {k: round(100 * v / total) for k, v in time.items()}
    assert shares == {"all-to-all": 46, "all-reduce": 27, "all-gather": 27}
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [comm] = [f for f in report.findings if f.title.startswith("communication:")]
    assert "(all-to-all kernels take 46% of communication time, then all-reduce 27%, " \
        "all-gather 27%)" in comm.suggestion
    assert "TrainPipelineSparseDist" in comm.suggestion


def test_exchange_calls_inside_the_cpu_gaps_get_their_share_and_fix() -> None:
    """pipit saxpy: a quarter of the host time in the cpu gaps is in MPI_Send/MPI_Recv (each
    gap is mostly other host code, so the gaps stay cpu). The time is computed here from the
    SQLite's NVTX ranges named MPI_*, intersected with the cpu gaps."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        named = db.execute("SELECT start, end, coalesce(text, (SELECT value FROM StringIds "
                           "WHERE id = textId)) FROM NVTX_EVENTS WHERE end IS NOT NULL"
                           ).fetchall()
    ranges = [(s, e) for s, e, name in named if name in ("MPI_Send", "MPI_Recv")]
    trace, shift, cpu = _nsys_cpu_gaps(path)
    inside = sum(max(0, min(hi, e + shift) - max(lo, s + shift))
                 for lo, hi in cpu for s, e in ranges)  # the MPI ranges do not overlap
    (report,) = tracekit.analyze(trace, "bottleneck")
    [finding] = [f for f in report.findings if f.title.startswith("cpu:")]
    assert finding.evidence["in_exchange_calls_ns"] == inside
    share = round(100 * inside / sum(hi - lo for lo, hi in cpu))
    assert share == 24
    assert report.findings[0].suggestion.endswith(
        f"({share}% of the host time in these gaps is in exchange calls (MPI_Send, MPI_Recv))")


def test_seconds_of_host_set_up_before_the_first_gpu_work_are_told() -> None:
    """alexnet: the trace starts 30.5 s before its first GPU work, 29.9 s of it in one
    cudaDeviceGetStreamPriorityRange (the lazy CUDA context of the first .to('cuda')). The
    GPU timeline starts at the first GPU work, so only this finding tells of it. Figures from
    the JSON (the profiler's own range and markers left out)."""
    import gzip
    import json

    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    xs = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i", "I")
          and isinstance(e.get("ts"), (int, float)) and e.get("cat") != "Trace"]
    gpu = min(e["ts"] for e in xs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    first = min(e["ts"] for e in xs if e["ph"] == "X")  # not the profiler's "Iteration Start"
    runtime = [e for e in xs if e.get("cat") == "cuda_runtime" and e["ts"] < gpu]
    longest = max(runtime, key=lambda e: min(e["ts"] + e["dur"], gpu) - e["ts"])
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [early] = [f for f in report.findings if f.title.startswith("before the first GPU work")]
    assert early.evidence["before_first_gpu_ns"] == round((gpu - first) * 1000)
    assert (early.evidence["longest_call"], early.evidence["longest_call_ns"]) == (
        longest["name"], round(longest["dur"] * 1000)) == (
        "cudaDeviceGetStreamPriorityRange", 29_927_377_000)
    assert early.suggestion.startswith("runtime calls take most of it: creating the GPU "
                                       "context")


def test_host_time_before_the_gpu_is_of_the_program_not_the_profilers_messages() -> None:
    """testcuda: nsys logged diagnostic messages from 193 ms before its session to 325 ms
    after the program's last call; the program's span is that of its own calls (runtime,
    OS runtime) and GPU work."""
    import sqlite3

    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "OSRT_API")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        first, last = db.execute("SELECT min(start), max(end) FROM (" + " UNION ALL ".join(
            f"SELECT start, end FROM {t}" for t in tables) + ")").fetchone()
        gpu = db.execute("SELECT min(start) FROM (SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL "
                         "UNION ALL SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()[0]
        diagnostics = db.execute("SELECT min(timestamp) FROM DIAGNOSTIC_EVENT").fetchone()[0]
    assert diagnostics < 0 < first
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [early] = [f for f in report.findings if f.title.startswith("before the first GPU work")]
    assert (early.evidence["before_first_gpu_ns"], early.evidence["trace_ns"]) == (
        gpu - first, last - first)
    # Three cudaHostAlloc and the other runtime calls before the first copy take over half
    # of it (one thread: their sum is their union).
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        in_calls = db.execute("SELECT sum(min(end, ?) - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                              "WHERE start < ?", (gpu, gpu)).fetchone()[0]
    assert early.evidence["in_runtime_calls_ns"] == in_calls and in_calls * 2 >= gpu - first
    assert early.suggestion.startswith("runtime calls take most of it")


def test_dropout_that_draws_masks_in_an_inference_run_is_told() -> None:
    """alexnet (forward passes only) runs aten::native_dropout: its model was left in
    training mode; bert-small's inference runs dropout in eval mode (no mask drawn)."""
    import gzip
    import json

    def ops(path):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        return Counter(e["name"] for e in doc["traceEvents"]
                       if e.get("ph") == "X" and e.get("cat") == "cpu_op")

    alexnet = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    counted = ops(alexnet)
    assert counted["aten::native_dropout"] == 4 and not any("Backward" in n for n in counted)
    (report,) = tracekit.analyze(tracekit.read(alexnet), "bottleneck")
    [dropout] = [f for f in report.findings if f.title.startswith("dropout is active")]
    assert dropout.evidence["dropout_mask_calls"] == counted["aten::native_dropout"]
    assert dropout.suggestion.startswith("call model.eval()")
    bert = shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz")
    counted = ops(bert)
    assert counted["aten::dropout"] > 0 == counted["aten::native_dropout"]
    (report,) = tracekit.analyze(tracekit.read(bert), "bottleneck")
    assert not any(f.title.startswith("dropout") for f in report.findings)


def test_a_compute_verdict_with_the_gpu_idle_a_third_of_the_time_says_so() -> None:
    """mordred: kernels are 58% of the steady span, but the GPU idles 41% (the host between
    launches 33%): not "kernels keep the GPU busy"."""
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    ev = report.findings[0].evidence
    assert ev["verdict"] == "compute"
    idle = round(sum(v for k, v in ev.items() if k.endswith("_pct") and k.split("_")[0] in (
        "sync", "launch", "cpu", "idle-other")), 1)
    assert idle == 40.7 and 100 - ev["gpu_busy_pct"] == pytest.approx(idle, abs=0.1)
    assert report.title == (f"Bottleneck: GPU compute {ev['compute_pct']}%, but the GPU idles "
                            f"{idle}% of the time (cpu {ev['cpu_pct']}%)")
    cloverleaf = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    (report,) = tracekit.analyze(tracekit.read(cloverleaf), "bottleneck")
    assert report.title == "Bottleneck: GPU-bound (kernels keep the GPU busy)"


def test_a_steady_state_of_microseconds_under_start_up_gets_no_shares() -> None:
    """vLLM's capture pass: 57.8 ms of start-up and 28.8 µs of steady state; "gpu_busy_pct:
    100%" of those 28.8 µs would read as the program's."""
    path = shared_path("torch-trace", "tracelens",
                       "vllm_hipgraph_capture_rank0_rocm7.pt.trace.json.gz")
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    ev = report.findings[0].evidence
    assert ev["verdict"] == "startup" and ev["span_ns"] < 1_000_000
    assert ev["steady_state"] == f"{format_ns(ev['span_ns'])}: too short to judge"
    assert not any(k.endswith("_pct") for k in ev)


def test_host_gaps_of_a_benchmark_harness_flushing_caches_are_said_to_be_its() -> None:
    """alexnet (PARAM's benchmark): the largest host gaps lie under [param|clear_cache], the
    harness zeroing a buffer to flush the caches between timed runs: not the workload."""
    import gzip
    import json

    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    flushes = [(e["ts"], e["ts"] + e["dur"]) for e in events
               if e.get("ph") == "X" and e["name"] == "[param|clear_cache]"]
    zeros = [e for e in events if e.get("ph") == "X" and e["name"] == "aten::zeros"]
    assert len(flushes) == 2 and all(any(a <= z["ts"] and z["ts"] + z["dur"] <= b
                                         for a, b in flushes) for z in zeros)
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [cpu] = [f for f in report.findings if f.title.startswith("cpu: ")]
    assert cpu.evidence["host_during_largest"].startswith("[param|clear_cache]")
    assert cpu.suggestion.startswith("this host time is the benchmark harness flushing caches")
    assert "device='cuda'" not in cpu.suggestion


def test_host_gaps_of_ddps_buffer_broadcast_get_ddps_fix() -> None:
    """nccl_data_rank0: the largest host gaps lie in aten::unflatten_dense_tensors inside
    DistributedDataParallel.forward, after a c10d::broadcast_: DDP broadcasting its buffers
    before every forward. CUDA graphs would not remove it; broadcast_buffers=False would."""
    import gzip
    import json

    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
              if e.get("ph") == "X"]
    forwards = [(e["ts"], e["ts"] + e["dur"]) for e in events
                if e["name"] == "DistributedDataParallel.forward"]
    inside = [e for e in events if any(a <= e["ts"] < b for a, b in forwards)]
    names = {e["name"] for e in inside}
    assert {"aten::unflatten_dense_tensors", "aten::flatten_dense_tensors",
            "c10d::broadcast_"} <= names
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    verdict = report.findings[0]
    assert verdict.evidence["verdict"] == "cpu"
    assert verdict.suggestion.startswith("DistributedDataParallel broadcasts the module's "
                                         "buffers from rank 0 before every forward")
    assert "broadcast_buffers=False" in verdict.suggestion
    assert "in DDP buffer broadcast, e.g. aten::unflatten_dense_tensors" in verdict.suggestion


def test_copies_without_sizes_get_the_host_device_fix_not_the_device_to_device_one() -> None:
    """rocprofiler-sdk's copy trace example has one HOST_TO_DEVICE and one DEVICE_TO_HOST row
    and no byte column (its facts, with kernels beside them): they are still host-device
    copies, of no recorded size. (The file itself has no kernel: its fix asks for them.)"""
    import csv

    path = shared_path("rocprof-v3", "rocprofiler-sdk-docs", "memory_copy_trace_2024-07.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["Direction"] for r in rows) == ["DEVICE_TO_HOST", "HOST_TO_DEVICE"]
    assert not any("byte" in k.lower() or "size" in k.lower() for k in rows[0])
    facts = Facts(copy_counts={"HtoD": (1, 564_000), "DtoH": (1, 582_000)},
                  host_copy_ns=1_146_000, compute_ns=5_000_000)
    [fix] = fixes_for("transfer", Program(gpu=True, api="HIP"), facts)
    assert fix.text.startswith("move less between host and device")
    assert fix.because == "copies: HtoD size not recorded, DtoH size not recorded"
    assert "device-to-device" not in fix.text and "0 B" not in fix.because


def test_a_hip_api_statistics_file_is_the_host_side_of_a_gpu_program() -> None:
    """rocprof's results.hip_stats.csv holds the HIP calls' totals and no GPU work: not a
    CPU profile. hipMemcpy, a blocking copy, takes 99.996% of the calls' time."""
    import csv

    path = shared_path("rocprof-v1", "hgliu_mi300x_2025", "results.hip_stats.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    total = sum(int(r["TotalDurationNs"]) for r in rows)
    top = max(rows, key=lambda r: int(r["TotalDurationNs"]))
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [finding] = report.findings
    assert finding.evidence["api_time_ns"] == total
    assert finding.evidence["api_calls"] == sum(int(r["Calls"]) for r in rows)
    assert finding.title.endswith(f"{top['Name']} takes "
                                  f"{round(100 * int(top['TotalDurationNs']) / total, 1)}% of "
                                  "their time")
    assert finding.evidence["program"] == "HIP program (its GPU work not in this input)"
    assert finding.suggestion.startswith("the host mostly waits in blocking calls (hipMemcpy)")
    assert "nsys" not in finding.suggestion


@pytest.mark.parametrize(("written", "printing"), [(600, True), (400, False)])
def test_a_gap_is_the_host_printing_where_output_calls_take_half_of_it(written, printing):
    from tracekit.plugins.diagnosis.gaps import UNTRACED, GapContext

    context = GapContext(UNTRACED, 1_000, 90.0, [], output_calls=("putc", 30, written))
    assert context.writing is printing


def test_output_calls_in_a_host_gap_are_named_with_their_time() -> None:
    """mordred: the largest GPU idle gap (2.48 ms) holds 284 recorded putc/fwrite/fflush calls
    spread over it, about a fifth of it by their own time: they are named with that time, and
    the gap is not called the host printing (about 30 worker threads spin in it)."""
    import sqlite3

    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        ops = sorted(db.execute(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end FROM "
            "CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT start, end FROM "
            "CUPTI_ACTIVITY_KIND_MEMSET").fetchall())
        reach, gaps = ops[0][1], []
        for start, end in ops[1:]:
            if start > reach:
                gaps.append((start - reach, reach, start))
            reach = max(reach, end)
        length, lo, hi = max(gaps)
        spans = db.execute(
            "SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId WHERE "
            "o.start >= ? AND o.end <= ? AND s.value IN ('putc', 'fwrite', 'fflush') "
            "ORDER BY o.start", (lo, hi)).fetchall()
    written, reach = 0, lo
    for start, end in spans:  # their union
        written += max(0, end - max(start, reach))
        reach = max(reach, end)
    assert (length, len(spans)) == (2_478_783, 284) and written * 2 < length
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [cpu] = [f for f in report.findings if f.title.startswith("cpu: ")]
    assert cpu.evidence["largest_gap_ns"] == length
    assert cpu.evidence["host_during_largest"].endswith(
        f"with {len(spans)} output calls spread over it (putc …, {format_ns(written)} of it)")
    assert cpu.suggestion.startswith("find the host time no recorded op covers")


def test_a_gpu_with_one_copy_engine_is_said_to_copy_one_way_at_a_time() -> None:
    """testcuda (RTX 4060 Ti): TARGET_INFO_GPU.asyncEngines is 1, so its HtoD and DtoH copies
    take turns; the A100s of the other exports have 5 and are not said to."""
    import sqlite3

    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        engines = dict(db.execute("SELECT id, asyncEngines FROM TARGET_INFO_GPU").fetchall())
    assert engines == {0: 1}
    trace = tracekit.read(path)
    assert trace.metadata["sources"][path.name]["copy_engines"] == {"0": 1}
    (report,) = tracekit.analyze(trace, "bottleneck")
    assert report.findings[0].suggestion.endswith(
        "already pinned; one copy engine: host-to-device and device-to-host copies take "
        "turns, never both at once)")
    saxpy = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    (report,) = tracekit.analyze(tracekit.read(saxpy), "bottleneck")
    assert not any("one copy engine" in f.suggestion for f in report.findings)


def test_the_sync_wall_time_is_the_programs_not_the_profilers() -> None:
    """cloverleaf (nsys): the profiler's diagnostic messages run from before its session to
    after it (2.19 s); the wall time the waits are a share of is the program's own traced
    activity: CUDA calls and GPU work, from the SQLite."""
    import sqlite3

    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER",
                  "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
        spans = [db.execute(f"SELECT MIN(start), MAX(end) FROM {t}").fetchone()
                 for t in tables if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                               (t,)).fetchone()]
    wall = max(e for _, e in spans if e) - min(s for s, _ in spans if s)
    (report,) = tracekit.analyze(tracekit.read(path), "sync")
    [finding] = [f for f in report.findings if f.title.startswith("the host waits")]
    assert finding.evidence["wall_ns"] == wall
    assert finding.title.startswith(f"the host waits for the GPU "
                                    f"{round(100 * finding.evidence['sync_ns'] / wall, 1)}% of "
                                    "the wall time; ")
    assert finding.title.startswith("the host waits for the GPU 51.6% of the wall time")


def test_what_the_waits_cost_the_gpu_is_its_idle_time_after_them() -> None:
    """cloverleaf (nsys): what 1,591 waits cost the GPU is its idle time in the gaps a wait
    returns in and the host's relaunch ends (causes sync and launch): at least every sync
    gap, at most those and the launch gaps; and never more than the SQLite's holes in which
    a wait returns (host work after a wait is the cpu cause's, not the wait's)."""
    import sqlite3

    from independent import idle_after

    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        busy = [r for t in ("KERNEL", "MEMCPY") for r in db.execute(
            f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")]
        returns = [e for (e,) in db.execute(
            "SELECT r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id"
            " WHERE s.value GLOB 'cuda*Synchronize*' OR (s.value GLOB 'cudaMemcpy*' AND "
            "s.value NOT GLOB '*Async*')")]
    trace = tracekit.read(path)
    (gaps,) = tracekit.analyze(trace, "gaps")
    causes = {r["cause"]: r["total"] for r in gaps.tables["causes"].to_pylist()}
    (report,) = tracekit.analyze(trace, "sync")
    [finding] = [f for f in report.findings if f.title.startswith("the host waits")]
    cost = finding.evidence["gpu_idle_after_ns"]
    assert causes["sync"] <= cost <= causes["sync"] + causes.get("launch", 0)
    assert cost < idle_after(busy, returns)  # 31.9 ms with the cpu gaps after waits
    span = max(e for _, e in busy) - min(s for s, _ in busy)
    assert finding.severity == "warning" and 100 * cost / span >= 5
    assert finding.title.endswith(f"; the GPU idles {round(100 * cost / span, 1)}% of its time "
                                  "after the waits")
    # Device synchronizes are most of the waits: their fix is an event for the result needed.
    assert finding.suggestion.startswith("wait for the result the host needs, not for the "
                                         "whole device or stream: cudaEventRecord after")

def test_a_few_bytes_of_pageable_async_copies_are_information() -> None:
    """nsysai H100: 4 asynchronous copies from pageable memory move 3.14 kB in µs: no
    warning for so little (the pinned HtoD copies that fill the GPU are the transfer
    verdict's). The copies are counted here from the SQLite."""
    import sqlite3

    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        pageable = db.execute(
            "SELECT COUNT(*), SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "WHERE srcKind = 0 OR dstKind = 0").fetchone()
    (report,) = tracekit.analyze(tracekit.read(path), "sync")
    [finding] = [f for f in report.findings if "pageable" in f.title]
    assert (finding.evidence["bytes"], finding.evidence["time_ns"]) == (pageable[1], pageable[2])
    assert pageable[2] < 1_000_000 and finding.severity == "info"
    # Inference: no DataLoader to pin, and nothing to gain at this size.
    assert finding.suggestion.startswith("nothing to gain at this size; if these copies grow, "
                                         "pin the host buffers")
    assert "DataLoader" not in finding.suggestion


def test_small_copies_of_equal_cost_are_batched() -> None:
    """Many small copies whose median is their average: the per-copy latency is the cost."""
    facts = Facts(copy_counts={"DtoH": (20, 400_000)}, copy_kinds={"DtoH": 20 * 128},
                  host_copy_ns=500_000, copy_medians={"DtoH": 20_000},
                  stalled_copies={"DtoH": (0, 0)})
    (first, *_) = fixes_for("transfer", Program(gpu=True, api="CUDA"), facts)
    assert first.text.startswith("batch the small DtoH copies into fewer, larger ones")
    assert first.because == "20 DtoH copies of 128 B on average take 400µs, 20µs each (median)"


def test_small_copies_that_stall_are_named_and_a_plain_program_keeps_no_weights() -> None:
    """Kokkos (rocprof v1): 14 DtoH copies of 128 B take a third of the copy time, but two of
    them take 96% of it (an expert's re-read): the copies waited, and batching the per-copy
    latency would not save that. A program that is no ML model is told to keep its data on
    the GPU, not 'weights'. An APU's fix is to drop the copies, and nothing after it
    contradicts that (shashank, MI300A)."""
    import json
    import statistics

    run = shared_path("rocprof-v1", "kokkos_2021_gfx906")
    xs = [int(e["args"]["EndNs"]) - int(e["args"]["BeginNs"]) for e in json.loads(
        (run / "results.json").read_text())["traceEvents"]
          if e.get("ph") == "X" and e.get("name") == "CopyDeviceToHost"]
    median = int(statistics.median(xs))
    stalled = [x for x in xs if x >= 10 * median]
    (report,) = tracekit.analyze(tracekit.read(run), "bottleneck")
    [transfer] = [f for f in report.findings if f.title.startswith("transfer:")]
    assert transfer.suggestion.startswith(
        "see what the longest DtoH copies wait for (the work before them on their stream, or "
        f"the host's side of the copy): a copy of 128 B takes {format_ns(median)} (median) "
        f"({len(stalled)} of {len(xs)} DtoH copies take {format_ns(sum(stalled))}, "
        f"{round(100 * sum(stalled) / sum(xs))}% of their {format_ns(sum(xs))})")
    assert (len(stalled), len(xs), round(100 * sum(stalled) / sum(xs))) == (2, 14, 96)
    assert "weights" not in transfer.suggestion
    assert "keep the data on the GPU between steps" in transfer.suggestion
    (report,) = tracekit.analyze(tracekit.read(shared_path("rocprof-v1", "shashank_mi300a")),
                                 "bottleneck")
    fix = report.findings[0].suggestion
    assert fix.startswith("drop the copies") and "move less" not in fix


@pytest.mark.slow  # reads a large real trace
def test_a_kernel_only_trace_claims_no_eager_mode() -> None:
    """908 (rocprofv3, kernels only): PyTorch training from its ATen kernels, RCCL from its
    collective kernels; eager or compiled cannot be told without host ops, so it is not."""
    from tracekit.plugins.diagnosis.program import classify

    trace = tracekit.read(shared_path("bonus", "rocprofv3-json", "tracelens_908_results.json.gz"))
    assert classify(trace).label() == "PyTorch training (RCCL collectives)"


@pytest.mark.slow  # reads a large real trace
def test_a_fix_the_verdict_gives_is_not_given_again() -> None:
    """merged 4-rank: the straggler is the verdict, whose fix the straggler finding repeated
    word for word; HTA's sampled rank 0: the queued gap's reason names the range instead of
    quoting the evidence again."""
    trace = tracekit.read(shared_path("torch-trace", "hpcte-tracelens-fused",
                                      "merged_4rank_rocm_cifar100.json.gz"))
    (report,) = tracekit.analyze(trace, "bottleneck")
    verdict, straggler = report.findings[0], report.findings[2]
    assert verdict.evidence["verdict"] == "straggler" and straggler.title.startswith("straggler")
    assert verdict.suggestion.startswith("make rank 3 as fast as the others")
    assert straggler.suggestion == ""
    (report,) = tracekit.analyze(tracekit.read(shared_path("torch-trace", "hta",
                                                           "sampled_rank-0.json.gz")),
                                 "bottleneck")
    [idle] = [f for f in report.findings if f.title.startswith("idle-other:")]
    assert ("(the largest queued gap waits on Optimizer.step#Shampoo.step on another thread)"
            in idle.suggestion)


def test_teardown_after_the_last_gpu_work_is_told() -> None:
    """memfusion (TensorRT, nsys): the GPU timeline is 6.5 ms; after the last kernel the
    program spends 479 ms unloading 5,490 modules. Only this finding tells of it. Figures
    from the SQLite: the program's span is that of its calls, ranges and GPU work."""
    import sqlite3

    path = shared_path("nsys-sqlite", "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite")
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        # Ranges only: a domain's creation is an NVTX row without an end (here at -1.9 s).
        first, last = db.execute("SELECT min(start), max(end) FROM (" + " UNION ALL ".join(
            f"SELECT start, end FROM {t} WHERE end IS NOT NULL" for t in tables)
            + ")").fetchone()
        gpu_end = db.execute("SELECT max(end) FROM (SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                             "UNION ALL SELECT end FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()[0]
        count, unloading = db.execute(
            "SELECT count(*), sum(r.end - max(r.start, ?)) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON r.nameId = s.id WHERE s.value GLOB 'cuModuleUnload*' AND "
            "r.end > ?", (gpu_end, gpu_end)).fetchone()
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [late] = [f for f in report.findings if f.title.startswith("after the last GPU work")]
    assert (late.evidence["after_last_gpu_ns"], late.evidence["trace_ns"]) == (
        last - gpu_end, last - first)
    assert (late.evidence["top_call"], late.evidence["top_call_count"],
            late.evidence["top_call_ns"]) == ("cuModuleUnload", count, unloading)
    assert count == 5490 and late.severity == "info"
    assert late.title.endswith(f"most of it in 5,490 cuModuleUnload calls, {format_ns(unloading)}")
    assert late.suggestion.startswith("runtime calls take most of it: teardown")


def test_start_up_gaps_are_no_part_of_the_idle_alarm() -> None:
    """kokkos (rocprof v1): 217 ms of one-time set-up in a 228 ms span made '-a gaps' say
    'idle 95.8%, critical'; the steady state idles 0.3%. The start-up gaps get their own
    info finding; the idle share is of the span after them (the causes table's rows)."""
    run = shared_path("rocprof-v1", "kokkos_2021_gfx906")
    (report,) = tracekit.analyze(tracekit.read(run), "gaps")
    causes = {r["cause"]: r["total"] for r in report.tables["causes"].to_pylist()}
    [startup] = report.findings
    assert startup.severity == "info" and startup.evidence["startup_ns"] == causes["startup"]
    steady = sum(ns for cause, ns in causes.items() if cause != "startup")
    span = startup.evidence["span_ns"]
    assert 100 * steady / (span - causes["startup"]) < 10
    assert startup.title == (f"GPU 0: start-up gaps take "
                             f"{round(100 * causes['startup'] / span, 1)}% of its span, left "
                             "out of its idle share")


def test_threads_waiting_after_the_last_gpu_work_are_no_work() -> None:
    """mordred (nsys): 4.49 s after its last GPU work, two helper threads sit in
    pthread_cond_timedwait and poll (the OS runtime trace), and nothing else runs: idle wall
    time, not 'the program's own work' (an expert's diff of the reports)."""
    import sqlite3

    from independent import merge

    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        gpu_end = db.execute("SELECT max(end) FROM (SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                             "UNION ALL SELECT end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                             "SELECT end FROM CUPTI_ACTIVITY_KIND_MEMSET)").fetchone()[0]
        waits = db.execute(
            "SELECT max(o.start, ?), o.end FROM OSRT_API o JOIN StringIds s ON o.nameId = s.id "
            "WHERE s.value IN ('pthread_cond_timedwait', 'poll') AND o.end > ?",
            (gpu_end, gpu_end)).fetchall()
    waited = sum(e - s for s, e in merge(waits))
    (report,) = tracekit.analyze(tracekit.read(path), "bottleneck")
    [late] = [f for f in report.findings if f.title.startswith("after the last GPU work")]
    assert late.evidence["in_os_waits_ns"] == waited
    assert waited * 2 >= late.evidence["after_last_gpu_ns"]
    assert late.title.endswith("its threads wait in pthread_cond_timedwait, poll most of it")
    assert late.suggestion.startswith("nothing runs: the threads wait in OS calls")
