"""The kernels analyzer's "grid too small": each launch of fewer blocks than SMs weighed by the
share of SMs it leaves idle (``1 - blocks/SMs``), severity from that lost share of the
device's kernel time, none under 1 ms of kernel time; on planted traces and on the real ones,
checked against sums over their kernel events."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.plugins.diagnosis.kernels import kernel_findings

SMS = 100  # the planted device: every block is 1 % of it


def _trace(tmp_path, kernels, sms=SMS, gap_us=3):
    """A Kineto trace of ``kernels`` (name, blocks, µs) on GPU 0 of ``sms`` SMs, each
    ``gap_us`` after the previous one's end (back to back by default)."""
    events, ts = [], 0.0
    for corr, (name, blocks, dur) in enumerate(kernels, 1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": "stream 7",
                       "ts": ts + 2, "dur": dur,
                       "args": {"device": 0, "stream": 7, "correlation": corr,
                                "grid": [blocks, 1, 1], "block": [256, 1, 1],
                                "registers per thread": 32, "shared memory": 0}})
        ts += dur + gap_us
    props = [{"id": 0, "name": "Planted GPU", "computeMajor": 8, "computeMinor": 0,
              "numSms": sms}] if sms else []
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events,
                                "deviceProperties": props}))
    return tracekit.read(path)


def _grid(findings):
    return [f for f in findings if "grid too small" in f.title]


def test_half_the_sms_idle_is_critical(tmp_path):
    """50 blocks on 100 SMs for all 10 ms: 5 ms of the SM time idle, 50 %."""
    (report,) = tracekit.analyze(_trace(tmp_path, [("half", 50, 10_000)]), "kernels")
    (finding,) = report.findings
    assert finding.severity == "critical"
    assert finding.title == ("GPU 0: grid too small to fill the GPU: half runs 50 blocks on "
                             "100 SMs: 50.0% of SMs idle; launches with fewer blocks than SMs "
                             "take 100.0% of kernel time, and their idle SMs waste 50.0% of all "
                             "kernel time")
    ev = finding.evidence
    assert (ev["blocks"], ev["sms"], ev["idle_sm_pct"], ev["gpu_time_pct"],
            ev["idle_sm_time_ns"], ev["idle_sm_time_pct"]) == (50, 100, 50.0, 100.0,
                                                                5_000_000, 50.0)


@pytest.mark.parametrize(("kernels", "severity", "lost_pct"), [
    ([("k", 75, 10_000)], "critical", 25.0),  # 25 % idle all along: the critical floor
    ([("k", 50, 4_980), ("full", 200, 5_020)], "warning", 24.9),
    ([("k", 95, 10_000)], "warning", 5.0),  # the min_share_pct floor
    ([("k", 96, 10_000)], None, 4.0),
    ([("k", 128, 10_000)], None, 0.0),  # not fewer blocks than SMs
])
def test_severity_follows_the_lost_share(tmp_path, kernels, severity, lost_pct):
    findings = _grid(kernel_findings(_trace(tmp_path, kernels)))
    assert [f.severity for f in findings] == ([severity] if severity else [])
    if findings:
        assert findings[0].evidence["idle_sm_time_pct"] == lost_pct


@pytest.mark.parametrize(("gap_us", "severity", "span_pct"), [(2_000, "critical", 49.0),
                                                                (8_000, "warning", 19.6)])
def test_critical_needs_the_idle_sm_time_to_weigh_on_the_span(tmp_path, gap_us, severity,
                                                               span_pct):
    """Two 1 ms launches of 2 blocks on 100 SMs: 98 % of the kernel time is idle SM time
    (1.96 ms), which is 49 % of a 4 ms span but 19.6 % of a 10 ms one (the GPU idles between
    them): fuller grids cannot shorten that run by a quarter."""
    trace = _trace(tmp_path, [("k", 2, 1_000), ("k", 2, 1_000)], gap_us=gap_us)
    (finding,) = _grid(kernel_findings(trace))
    ev = finding.evidence
    assert (finding.severity, ev["idle_sm_time_pct"], ev["idle_sm_span_pct"],
            ev["idle_sm_time_ns"]) == (severity, 98.0, span_pct, 1_960_000)


def test_the_raw_share_does_not_make_it_critical(tmp_path):
    """128 blocks on 132 SMs for all the kernel time (the scenarios' sgemm): 3 % idle is no
    finding at the default floor, and only a warning with the floor at 3 %."""
    trace = _trace(tmp_path, [("sgemm", 128, 10_000)], sms=132)
    assert _grid(kernel_findings(trace)) == []
    (finding,) = _grid(kernel_findings(trace, min_share_pct=3.0))
    assert finding.severity == "warning"
    assert "128 blocks on 132 SMs: 3.0% of SMs idle" in finding.title
    assert (finding.evidence["idle_sm_pct"], finding.evidence["idle_sm_time_ns"]) == (
        3.0, round(10_000_000 * 4 / 132))


def test_each_small_configuration_is_weighed_by_its_own_idle_share(tmp_path):
    """2 ms at 50 blocks (1 ms idle) + 4 ms at 90 blocks (0.4 ms idle) + 4 ms full: 14 %
    idle; the evidence names the longest small configuration."""
    trace = _trace(tmp_path, [("a", 50, 2_000), ("b", 90, 4_000), ("full", 100, 4_000)])
    (finding,) = _grid(kernel_findings(trace))
    ev = finding.evidence
    assert finding.severity == "warning"
    assert (ev["kernel"], ev["blocks"], ev["idle_sm_pct"], ev["small_grid_configs"],
            ev["small_grid_time_ns"], ev["gpu_time_pct"], ev["idle_sm_time_ns"],
            ev["idle_sm_time_pct"]) == ("b", 90, 10.0, 2, 6_000_000, 60.0, 1_400_000, 14.0)


def test_under_a_millisecond_of_kernel_time_is_no_finding(tmp_path):
    """1 block on 100 SMs: 99 % idle, but a finding only from 1 ms of kernel time."""
    assert _grid(kernel_findings(_trace(tmp_path, [("one", 1, 999)]))) == []
    (finding,) = _grid(kernel_findings(_trace(tmp_path, [("one", 1, 1_000)])))
    assert (finding.severity, finding.evidence["idle_sm_time_ns"]) == ("critical", 990_000)


def test_collectives_and_unknown_sm_counts_are_no_finding(tmp_path):
    assert _grid(kernel_findings(_trace(tmp_path, [("ncclKernel_AllReduce_RING_LL_Sum_float",
                                                    2, 10_000)]))) == []
    assert _grid(kernel_findings(_trace(tmp_path, [("k", 2, 10_000)], sms=0))) == []


@pytest.mark.parametrize("name", ["cpu_data_prep", "dataloader_stall", "item_sync",
                                  "matmul_loop", "pageable_h2d", "tiny_kernels",
                                  "unoverlapped_allreduce"])
def test_no_scenario_has_a_grid_finding(name):
    """Every scenario launches 128 blocks on 132 SMs (3 % idle): it was critical in six."""
    trace = tracekit.read(FIXTURES / "scenarios" / f"{name}.pt.trace.json.gz")
    (report,) = tracekit.analyze(trace, "kernels")
    assert {r["blocks"] for r in report.tables["kernels"].to_pylist()} == {128}
    assert _grid(report.findings) == []


def _kineto_lost(path, sms):
    """(kernel µs, µs in launches of fewer blocks than SMs, idle SM µs) over the non-collective
    kernel events of a Kineto trace (a kernel without a grid is not counted as small)."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    # hipExtModuleLaunchKernel takes the global work size: its grid is in work-items.
    global_size = {e["args"]["correlation"] for e in events
                   if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
                   and e["name"] in ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")}

    def blocks(e):
        grid = e["args"].get("grid", [sms])
        if e["args"].get("correlation") in global_size:
            grid = [math.ceil(g / b) for g, b in zip(grid, e["args"]["block"], strict=True)]
        return math.prod(grid)

    small = [(e["dur"], blocks(e)) for e in kernels
             if blocks(e) < sms and "nccl" not in e["name"].lower()]
    return (sum(e["dur"] for e in kernels), sum(d for d, _ in small),
            sum(d * (1 - b / sms) for d, b in small))


@pytest.mark.parametrize(("parts", "sms", "severity", "idle_sm_pct"), [
    (("tracelens", "mi210_gpu_only_trace.json.gz"), 104, "warning", 38.5),
    pytest.param(("hta", "trace_diff_control_rank3_a100.json.gz"), 108, "warning", 40.7,
                 marks=pytest.mark.slow),
    pytest.param(("tracelens", "mi300_resnet_act_checkpoint.json.gz"), 304, "warning", 78.9,
                 marks=pytest.mark.slow),
    # 64 blocks on 108 SMs for 11.4 % of the time: 3.8 % idle, under the 5 % floor
    pytest.param(("hta", "nccl_data_rank0_a100.json.gz"), 108, None, None,
                 marks=pytest.mark.slow),
])
def test_real_traces_weigh_the_idle_sms(parts, sms, severity, idle_sm_pct):
    path = shared_path("torch-trace", *parts)
    total, small, lost = _kineto_lost(path, sms)
    findings = _grid(kernel_findings(tracekit.read(path)))
    if severity is None:
        assert findings == [] and 100 * small / total >= 5 > 100 * lost / total
        return
    (finding,) = findings
    ev = finding.evidence
    assert (finding.severity, ev["sms"], ev["idle_sm_pct"]) == (severity, sms, idle_sm_pct)
    assert ev["gpu_time_pct"] == round(100 * small / total, 1)
    assert ev["idle_sm_time_pct"] == round(100 * lost / total, 1)
    assert ev["idle_sm_time_ns"] == pytest.approx(lost * 1000, abs=1)


@pytest.mark.parametrize(("parts", "kernel_us"), [
    (("tracelens", "h100_bert-small.json.gz"), 307.197),  # 80 blocks on 132 SMs, 35.6 % idle
    pytest.param(("tracelens", "vllm_hipgraph_capture_rank0_rocm7.pt.trace.json.gz"), 19.633,
                 marks=pytest.mark.slow),  # a graph capture: 1 block on 304 CUs
    (("hta", "triton_example_cuda12.json.gz"), 1.76),
])
def test_short_traces_are_no_finding(parts, kernel_us):
    """Idle SMs on these would be critical; under 1 ms of kernel time they are no finding."""
    path = shared_path("torch-trace", *parts)
    assert _kineto_lost(path, 1 << 30)[0] == pytest.approx(kernel_us)
    assert _grid(kernel_findings(tracekit.read(path))) == []


def test_a_frameworks_kernel_is_told_more_work_not_launch_parameters():
    """mi210 (AMD): PyTorch's own batch_norm_backward_kernel has one block per channel, so
    a larger batch is no fix, nor are launch parameters; never CUDA's names."""
    path = shared_path("torch-trace", "tracelens", "mi210_gpu_only_trace.json.gz")
    (finding,) = _grid(kernel_findings(tracekit.read(path)))
    assert "at::native::batch_norm_backward_kernel" in finding.evidence["kernel"]
    # ATen launches it with one block per channel (dim3 blocks(input.size(1))).
    assert finding.suggestion == (
        "this batch norm kernel runs one block per channel: a larger batch adds no blocks "
        "(more channels would); torch.compile may generate a fused kernel with another grid")
    assert "cuda" not in finding.suggestion.lower()


def test_the_grid_fix_names_the_occupancy_call_of_the_gpus_vendor(tmp_path):
    """A program's own kernel on an AMD GPU: CUs and hipOccupancyMaxActiveBlocksPerMultiprocessor
    only; on an NVIDIA one, SMs and cudaOccupancyMaxActiveBlocksPerMultiprocessor."""
    trace = _trace(tmp_path, [("my_stencil", 10, 2000)] * 3)
    (nvidia,) = _grid(kernel_findings(trace))
    assert "SMs x cudaOccupancyMaxActiveBlocksPerMultiprocessor" in nvidia.suggestion
    doc = json.loads((tmp_path / "t.json").read_text())
    doc["deviceProperties"][0]["name"] = "AMD Instinct MI210"
    amd_path = tmp_path / "amd.json"
    amd_path.write_text(json.dumps(doc))
    (amd,) = _grid(kernel_findings(tracekit.read(amd_path)))
    assert "CUs x hipOccupancyMaxActiveBlocksPerMultiprocessor" in amd.suggestion
    assert "cuda" not in amd.suggestion.lower()
