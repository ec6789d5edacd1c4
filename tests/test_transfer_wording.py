"""Wording the verdict's evidence and fixes as an expert would: copies as a count and their
total size, no advice contradicting the evidence (fixtures/scenarios/pageable_h2d: 5 pageable
64 MiB copies), and the profiler of the platform."""

from __future__ import annotations

import tracekit
from helpers import FIXTURES


def _report() -> tracekit.Report:
    trace = tracekit.read(FIXTURES / "scenarios" / "pageable_h2d.pt.trace.json.gz")
    (report,) = tracekit.analyze(trace, "bottleneck")
    return report


def test_copies_are_counted_with_their_total_size() -> None:
    report = _report()
    transfer = next(f for f in report.findings if f.title.startswith("transfer:"))
    # 5 copies of 67,108,864 bytes: 336 MB in all, not 336 MB each.
    assert transfer.evidence == {"HtoD pageable": "5 copies: 336 MB in 50ms, 6.7 GB/s"}


def test_pageable_copies_are_not_called_pinned() -> None:
    verdict = _report().findings[0]
    assert verdict.suggestion.startswith("pin the host buffers")
    assert "large host-to-device copies during inference" in verdict.suggestion
    assert "pinned host-to-device" not in verdict.suggestion


def test_start_up_advice_names_the_profiler_of_the_platform() -> None:
    """nsys does not profile AMD GPUs: a PyTorch-on-ROCm program is not told to use it."""
    from tracekit.plugins.diagnosis.bottleneck import startup_fix
    from tracekit.plugins.diagnosis.program import Program

    rocm = startup_fix(Program(gpu=True, framework="PyTorch", api="HIP"))
    cuda = startup_fix(Program(gpu=True, framework="PyTorch", api="CUDA"))
    assert "nsys" not in rocm and "torch.profiler schedule(wait=, warmup=, active=))" in rocm
    assert "torch.profiler schedule(wait=, warmup=, active=), nsys --capture-range" in cuda


def test_copies_without_a_recorded_size_are_not_zero_bytes() -> None:
    """rocprof v1 records no size or direction for its copy kernels: no '0 B at 0.0 GB/s',
    no 'memset'."""
    from helpers import shared_path

    trace = tracekit.read(shared_path("rocprof-v1", "gunrock_mi300_gfx942"))
    (report,) = tracekit.analyze(trace, "bottleneck")
    transfer = next(f for f in report.findings if f.title.startswith("transfer:"))
    # 19 __amd_rocclr_copyBuffer kernels of 580,607 ns in all (results.csv): copies, not
    # memsets, in a direction the trace does not record, so no device-to-device advice.
    assert transfer.evidence == {"copy": "19 copies: size not recorded in 581µs"}
    assert transfer.suggestion.startswith(
        "record the copy calls (rocprofv3 --hip-trace --memory-copy-trace)")
