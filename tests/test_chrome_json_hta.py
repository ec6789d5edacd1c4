"""HolisticTraceAnalysis reads tracekit's Chrome JSON as it reads the original torch trace:
the same temporal breakdown (idle, compute, non-compute time per rank) and the same
communication/computation overlap, for one trace and for a run written one file per rank; and
an nsys export's copies count as memory work."""

from __future__ import annotations

import json
import logging
import math
import shutil
import warnings

import numpy as np
import pytest
import tracekit
from helpers import FIXTURES, shared_path

pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed: "
                                  "pip install -e '.[test]'")
from hta.trace_analysis import TraceAnalysis


def _analysis(path, tmp_path, name):
    """HTA's TraceAnalysis of one trace file (HTA reads a directory of rank files)."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(path, folder / path.name)
    return _hta_of_folder(folder)


def _converted(path, tmp_path, registry):
    out = tmp_path / ("converted" + "".join(path.suffixes))
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    return out


@pytest.mark.parametrize("rel", [
    "torch-trace/tracelens/h100_bert-small.json.gz",
    pytest.param("torch-trace/tracelens/mi300_bert-small.json.gz", marks=pytest.mark.slow),
    pytest.param("torch-trace/hta/nccl_data_rank0_a100.json.gz", marks=pytest.mark.slow),
])
def test_hta_temporal_breakdown_and_overlap_match_the_original(rel, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    original = _analysis(path, tmp_path, "original")
    converted = _analysis(_converted(path, tmp_path, registry), tmp_path, "converted")
    a = original.get_temporal_breakdown(visualize=False)
    b = converted.get_temporal_breakdown(visualize=False)
    assert b.to_dict("records") == a.to_dict("records")
    assert a["kernel_time(us)"].iloc[0] > 0 and a["idle_time(us)"].iloc[0] > 0
    x = original.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].to_numpy()
    y = converted.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].to_numpy()
    assert np.array_equal(x, y, equal_nan=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["two_streams", "pinned_overlap", "cuda_graph"])
def test_hta_reads_converted_cuda13_recordings_as_the_originals(name, tmp_path, registry):
    """tracekit's own H200 recordings (two streams, a copy stream, CUDA graph kernels):
    HTA's temporal breakdown and kernel breakdown of the Chrome JSON tracekit writes equal
    those of the original. (HTA's own temporal breakdown fails an assertion on the original
    llm_decode_graph, a negative non-compute time, so that one is not here.)"""
    path = FIXTURES / "torch-cuda" / f"{name}.pt.trace.json.gz"
    original = _analysis(path, tmp_path, "original")
    converted = _analysis(_converted(path, tmp_path, registry), tmp_path, "converted")
    a = original.get_temporal_breakdown(visualize=False)
    b = converted.get_temporal_breakdown(visualize=False)
    assert b.to_dict("records") == a.to_dict("records")
    assert a["kernel_time(us)"].iloc[0] > 0
    kernels = [analysis.get_gpu_kernel_breakdown(visualize=False, num_kernels=10_000,
                                                 duration_ratio=1.0)[1]
               for analysis in (original, converted)]
    assert kernels[1].sort_values("name").to_dict("records") == \
        kernels[0].sort_values("name").to_dict("records")


@pytest.mark.slow
def test_hta_overlap_of_nccl_rank0_is_the_originals_14_percent(tmp_path, registry):
    """The issue's case: with device fields on GPU annotations HTA saw 100 % overlap."""
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    converted = _analysis(_converted(path, tmp_path, registry), tmp_path, "converted")
    overlap = converted.get_comm_comp_overlap(visualize=False)
    assert overlap["comp_comm_overlap_pctg"].tolist() == [14.31]


def test_hta_counts_nsys_copies_and_memsets_as_memory_work(tmp_path, registry):
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    out = tmp_path / "mordred.json"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    _, kernels = _analysis(out, tmp_path, "converted").get_gpu_kernel_breakdown(
        visualize=False, include_memory_kernels=True, num_kernels=10_000, duration_ratio=1.0)
    kind = dict(zip(kernels["name"], kernels["kernel_type"], strict=True))
    time = dict(zip(kernels["name"], kernels["sum (us)"], strict=True))
    events = json.loads(out.read_text())["traceEvents"]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    assert len(copies) == 60
    names = {e["name"] for e in copies}
    assert names == {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)",
                     "Memset (Device)"}
    assert {kind[n] for n in names} == {"MEMORY"}
    assert {v for n, v in kind.items() if n not in names} == {"COMPUTATION"}
    # HTA rounds each event's start up and its end down to the µs, in floating point.
    for name in names:
        assert time[name] == sum(math.floor(e["ts"] + e["dur"]) - math.ceil(e["ts"])
                                 for e in copies if e["name"] == name)


def _hta_of_folder(folder):
    """HTA's TraceAnalysis of a directory of rank files, its logging and warnings quiet."""
    logging.disable(logging.WARNING)  # HTA logs each parse step
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return TraceAnalysis(trace_dir=str(folder))
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.slow  # HTA parses four 5k-event traces
def test_hta_reads_each_converted_rank_as_its_own_rank(tmp_path, registry):
    """A run converted to one file per rank: HTA's per-rank results are the originals'."""
    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{r}.json.gz") for r in (0, 1)]
    originals = tmp_path / "originals"
    originals.mkdir()
    for p in paths:
        shutil.copy(p, originals / p.name)
    converted = tmp_path / "converted"
    tracekit.convert(paths, converted, to="chrome-json-ranks", registry=registry)
    assert sorted(p.name for p in converted.iterdir()) == ["rank-0.json", "rank-1.json"]
    a, b = _hta_of_folder(originals), _hta_of_folder(converted)
    x = a.get_temporal_breakdown(visualize=False)
    y = b.get_temporal_breakdown(visualize=False)
    assert x["rank"].tolist() == [0, 1]
    assert y.to_dict("records") == x.to_dict("records")
    x = a.get_comm_comp_overlap(visualize=False)
    y = b.get_comm_comp_overlap(visualize=False)
    assert y.to_dict("records") == x.to_dict("records")
    assert x["comp_comm_overlap_pctg"].tolist() == [11.81, 20.05]
