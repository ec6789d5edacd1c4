"""What program a trace records: framework, training or inference, eager, compiled or graphs,
how many processes, which collectives and precisions. The diagnosis chooses its advice for
this class, and never advises a mechanism the trace shows in use.

Every rule reads names the trace holds (docs/analyzers/diagnosis.md, "Knowing the program"):

- **PyTorch**: ``aten::``/``c10d::`` ops, ``ProfilerStep#N``, a Kineto trace.
- **training**: autograd (``autograd::engine``, ``...Backward0``), an optimizer step
  (``Optimizer.step``), ``## backward ##`` ranges, DDP's reducer.
- **inference**: a framework with none of those, or a serving engine (``vllm::``,
  ``sglang``, ``tensorrt_llm``), or TensorRT.
- **compiled**: Inductor's Triton kernels (``triton_poi_``/``triton_red_``/``triton_per_``...)
  or ``Torch-Compiled Region``/``CompiledFxGraph``/``CompiledFunction`` ranges.
- **graphs**: ``cudaGraphLaunch``/``hipGraphLaunch``/``cuGraphLaunch`` calls or whole-graph
  rows.
- **plain CUDA/HIP program**: GPU work launched through the runtime with no framework op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit import Finding, Trace
from tracekit.toolkit import equals, is_in, world_size

_HOST = ("host.op", "host.annotation", "host.python", "host.profiler")
_API = ("api.runtime", "api.driver")
_KERNEL = ("gpu.kernel", "gpu.graph")

TRAINING = re.compile(r"autograd::engine|Backward\d*$|^Optimizer\.(step|zero_grad)|"
                      r"^## backward ##$|reducer::|\.backward$|^torch\.optim\.")
# Backward kernels, for traces that hold only GPU work (cuDNN, ATen, MIOpen, fbgemm).
TRAINING_KERNEL = re.compile(r"(?i)dgrad|wgrad|bn_bw|backward|igemm_wrw|igemm_bwd|"
                             r"BatchNormBwd|_grad_input|GradGammaBeta|bwd_kernel")
# PyTorch's own kernels (ATen), for traces that hold only GPU work (rocprof, nsys kernel-only).
ATEN_KERNEL = re.compile(r"\bat::native::|\bat_cuda_detail::|\bat::cuda::")
GGML = re.compile(r"^(void )?(mul_mat_q|mul_mat_vec|quantize_mmq|quantize_q8|k_bin_bcast|"
                  r"rms_norm_f32|soft_max_f32|flash_attn_ext)")
DDP = re.compile(r"^DistributedDataParallel\.forward|reducer::|^torch\.distributed\.ddp")
FSDP = re.compile(r"FullyShardedDataParallel|^FSDP::|fsdp::")
SERVING = re.compile(r"(?i)^vllm[:.]|vllm/|sglang|tensorrt_llm|text_generation_server")
COMPILED = re.compile(r"^triton_(poi|red|per|tem|for|unk)_|^Torch-Compiled Region|"
                      r"CompiledFxGraph|^CompiledFunction|^TorchDynamo|^AOTDispatcher")
GRAPH_LAUNCH = re.compile(r"^(cuda|hip|cu)(GraphLaunch|StreamBeginCapture|GraphInstantiate)")
TENSORRT = re.compile(r"(?i)tensorrt|^trt_|myelin|^ExecutionContext::(enqueue|execute)|"
                      r"genericReformat::")
KOKKOS = re.compile(r"^Kokkos::")
MPI = re.compile(r"^MPI_|^P?MPI_")
COLLECTIVE = re.compile(r"(?i)^nccl[:A-Z]|^rccl|^c10d::|record_param_comms|^hccl")
# The names that say which collective: PyTorch's record_param_comms wraps every one.
NAMED_COLLECTIVE = re.compile(r"(?i)^nccl[:A-Z]|^rccl|^c10d::|^hccl")
# cuBLAS's Hopper-and-later GEMMs (nvjet) spell their types after the prefix, one letter each,
# the inputs' first: h fp16, t bf16, s fp32, q fp8 — nvjet_sm90_hsh_… is fp16, …_tst_… bf16,
# …_qqtst_… fp8 (recorded in fixtures/torch-cuda/gemm_dtypes).
NVJET_TYPES = r"^nvjet_(?:sm\d+_)?"
PRECISION = {
    "fp8": re.compile(r"(?i)fp8|e4m3|e5m2|mxfp4|nvfp4|f8f6f4|" + NVJET_TYPES + "q"),
    # Tensile/hipBLASLt GEMMs name their data type after the layouts: Cijk_Alik_Bljk_B_BS…
    # (bf16), …_HHS_… (fp16); S is fp32.
    "bf16/fp16": re.compile(r"(?i)bf16|fp16|f16|half|h884|h1688|h16816|hmma|_BBS_|_HHS_|"
                            r"^Cijk_A\w{3}_B\w{3}_[BH]|" + NVJET_TYPES + "[ht]"),
    "tf32": re.compile(r"(?i)tf32|s1688gemm|s16816gemm|xmma.*tf32"),
    "fp64": re.compile(r"(?i)fp64|dgemm|double|d884|dmma"),
}


@dataclass
class Program:
    """The class of program a trace records, with what each part of it rests on."""

    gpu: bool
    framework: str | None = None  # "PyTorch", "TensorRT", "Kokkos"
    api: str | None = None  # "CUDA", "HIP"
    engine: str | None = None  # a serving engine: "vLLM", "SGLang", "TensorRT-LLM"
    mode: str | None = None  # "training", "inference"; None for a non-ML program
    compiled: bool = False
    graphs: bool = False
    processes: int = 1
    world_size: int = 1
    world_size_declared: bool = False  # the trace said its world size (Kineto distributedInfo)
    host_ops: bool = False  # the trace holds host ops or ranges (not only GPU work)
    collectives: bool = False
    mpi: bool = False
    precisions: set[str] = field(default_factory=set)
    #: Calls that drew dropout's random mask (ops, or kernels where no op was traced), and
    #: the name of the most frequent: dropout in training mode.
    dropout_masks: int = 0
    dropout_mask: str | None = None
    ddp: bool = False  # DistributedDataParallel's ranges or reducer ops
    fsdp: bool = False  # FullyShardedDataParallel's
    #: Host ops that autograd recorded (Kineto's ``Sequence number`` arg): grad mode was on.
    autograd_ops: int = 0
    autograd_nodes: int = 0  # the distinct sequence numbers: the nodes autograd recorded
    host_op_calls: int = 0
    evidence: dict[str, str] = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        """A GPU program with no framework: plain CUDA/HIP."""
        return self.gpu and self.framework is None

    @property
    def pytorch(self) -> bool:
        return self.framework == "PyTorch"

    def label(self) -> str:
        """One line for the report header, e.g. ``PyTorch training (eager, 2 ranks, NCCL)``."""
        if not self.gpu:
            return "CPU-only " + ("PyTorch program" if self.pytorch else "profile")
        how = []
        if self.plain:
            head = f"plain {self.api or 'GPU'} program"
            how.append("no ML framework")
        else:
            who = self.engine or self.framework
            head = f"{who} {self.mode or 'program'}"
        if self.pytorch and (self.compiled or self.host_ops):
            # Eager is told from host ops without compiled regions; kernels alone cannot.
            how.append("compiled" if self.compiled else "eager")
        if self.graphs:
            how.append(f"{'HIP' if self.api == 'HIP' else 'CUDA'} graphs")
        ranks = max(self.world_size, self.processes)
        if ranks > 1:
            how.append(f"{ranks} {'ranks' if self.world_size > 1 else 'processes'}")
        if self.mpi:
            how.append("MPI")
        if self.collectives:
            how.append("RCCL collectives" if self.api == "HIP" else
                       "NCCL collectives" if self.api == "CUDA" else "NCCL/RCCL collectives")
        return head + (f" ({', '.join(how)})" if how else "")

    def as_evidence(self) -> dict[str, Any]:
        """The class as report evidence: a label and what it rests on."""
        return {"program": self.label(), **self.grounds()}

    def grounds(self) -> dict[str, str]:
        """What each part of the class was told from, by the part: ``framework_from:
        aten::mm`` (a name the trace holds, not the framework's)."""
        return {f"{k}_from": v for k, v in self.evidence.items()}


# What dropout calls only in training mode, to draw its random mask: the ops (CPU and GPU),
# and the kernels of a trace that recorded no ops.
DROPOUT_MASK_OP = re.compile(r"aten::(native_dropout|bernoulli_|_fused_dropout)")
DROPOUT_MASK_KERNEL = re.compile(r"fused_dropout_kernel|native_dropout|bernoulli_tensor")

# The per-op counters that emit_nvtx (and record_shapes) append to range names
# ("aten::view, op_id = 314290"): a name per call, not the op's.
RANGE_COUNTERS = r", (seq|op_id|sizes|input_op_ids) = .*$"


def _distinct(trace: Trace) -> dict[str, list[tuple[str, int]]]:
    """Distinct event names per category with their counts, the most frequent first (one
    group-by, not a pass per event). Names lose the per-call counters of emit_nvtx first
    (RANGE_COUNTERS), so that the calls of one op count together."""
    ev = trace.events
    if not ev.num_rows:
        return {}
    name = ev["name"].combine_chunks()
    if pa.types.is_dictionary(name.type):  # the counters are stripped once per distinct name
        stripped = pc.replace_substring_regex(name.dictionary, RANGE_COUNTERS, "")
        recoded = stripped.dictionary_encode()  # names that became equal share a code
        name = pa.DictionaryArray.from_arrays(recoded.indices.take(name.indices),
                                              recoded.dictionary)
    else:
        name = pc.replace_substring_regex(name.cast(pa.string()), RANGE_COUNTERS, "")
    # Single-threaded: in order of first appearance, which breaks ties in the count, so that
    # the evidence is the same from run to run.
    pairs = pa.table({"category": ev["category"], "name": name}).group_by(
        ["category", "name"], use_threads=False).aggregate([([], "count_all")])
    counts = pairs["count_all"].to_numpy()
    order = np.argsort(-counts, kind="stable")
    cats = pairs["category"].cast(pa.string()).to_numpy(zero_copy_only=False)[order]
    names = pairs["name"].cast(pa.string()).to_numpy(zero_copy_only=False)[order]
    out: dict[str, list[tuple[str, int]]] = {}
    for c, n, k in zip(cats.tolist(), names.tolist(), counts[order].tolist(), strict=True):
        out.setdefault(c or "", []).append((n or "", k))
    return out


def _most_first(names: dict[str, list[tuple[str, int]]], categories: tuple[str, ...]
                ) -> list[str]:
    """The names of ``categories``, the most frequent first, so that the name a rule finds,
    its evidence, is the one the program calls most: ``c10d::allreduce_`` rather than the
    one ``broadcast_`` at start-up."""
    found = [pair for c in categories for pair in names.get(c, [])]
    return [name for name, _ in sorted(found, key=lambda pair: -pair[1])]  # stable


def _first(pattern: re.Pattern[str], names: list[str]) -> str | None:
    return next((n for n in names if pattern.search(n)), None)


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def classify(trace: Trace) -> Program:
    """The class of program ``trace`` records (see the module docstring for the rules)."""
    cached = trace.cache.get("diagnosis.program")
    if cached is not None and cached[0] is trace.events:
        return cached[1]
    program = _classify(trace)
    trace.cache["diagnosis.program"] = (trace.events, program)
    return program


def _classify(trace: Trace) -> Program:
    names = _distinct(trace)
    host, api, kernels = (_most_first(names, c) for c in (_HOST, _API, _KERNEL))
    gpu_work = any(names.get(c) for c in ("gpu.kernel", "gpu.graph", "gpu.memcpy",
                                          "gpu.memset"))
    p = Program(gpu=gpu_work, host_ops=bool(host))
    ev = p.evidence
    # A Kineto-layout file is a PyTorch profiler trace unless tracekit wrote it from
    # another tool's input (its "converted_from").
    readers = {m.get("reader") for m in trace.metadata.get("sources", {}).values()
               if isinstance(m, dict) and not any(
                   "PyTorch" not in str(t) for t in m.get("converted_from") or ())}
    torch_op = _first(re.compile(r"^(aten|c10d|vllm)::|^ProfilerStep#"), host)
    if torch_op or ("kineto" in readers and host):
        p.framework = "PyTorch"
        ev["framework"] = _short(torch_op or "a PyTorch profiler trace")
    elif (trt := _first(TENSORRT, host + kernels)) is not None:
        p.framework, p.mode = "TensorRT", "inference"
        ev["framework"] = _short(trt)
    elif (kk := _first(KOKKOS, host + kernels)) is not None:
        p.framework = "Kokkos"
        ev["framework"] = _short(kk)
    elif (ggml := _first(GGML, kernels)) is not None:
        p.framework, p.mode = "llama.cpp (ggml)", "inference"
        ev["framework"] = _short(ggml)
    elif (aten := _first(ATEN_KERNEL, kernels)) is not None:
        p.framework = "PyTorch"
        ev["framework"] = _short(aten)
    if api:
        hip = sum(n.startswith(("hip", "hsa")) for n in api)
        p.api = "HIP" if hip * 2 > len(api) else "CUDA"
    elif any(n.startswith(("Cijk_", "__amd")) for n in kernels):
        p.api = "HIP"
    elif (vendor := _gpu_vendor(trace)) is not None:  # kernel-only traces name no runtime call
        p.api = "HIP" if vendor == "amd" else "CUDA"
    if (serving := _first(SERVING, host)) is not None:
        p.engine = "vLLM" if "vllm" in serving.lower() else (
            "SGLang" if "sglang" in serving.lower() else "TensorRT-LLM")
        p.mode = "inference"
        ev["engine"] = _short(serving)
    if p.framework == "PyTorch" and p.mode is None:
        trained = _first(TRAINING, host) or _first(TRAINING_KERNEL, kernels)
        p.mode = "training" if trained else "inference"
        ev["mode"] = _short(trained) if trained else "no backward pass or optimizer step"
    compiled = _first(COMPILED, host + kernels)
    if compiled:
        p.compiled = True
        ev["compiled"] = _short(compiled)
    graph = _first(GRAPH_LAUNCH, api) or next(iter(_most_first(names, ("gpu.graph",))), None)
    if graph:
        p.graphs = True
        ev["graphs"] = _short(graph)
    p.ddp = _first(DDP, host) is not None
    p.fsdp = _first(FSDP, host) is not None
    collective = _first(NAMED_COLLECTIVE, host + kernels) or _first(COLLECTIVE, host + kernels)
    if collective:
        p.collectives = True
        ev["collectives"] = _short(collective)
    mpi = _first(MPI, host + api + _most_first(names, ("host.os",)))
    if mpi:
        p.mpi = True
        ev["mpi"] = _short(mpi)
    for label, pattern in PRECISION.items():
        hit = _first(pattern, kernels)
        if hit:
            p.precisions.add(label)
    if p.framework == "PyTorch":
        masks = [(n, k) for n, k in names.get("host.op", []) if DROPOUT_MASK_OP.fullmatch(n)] \
            or [(n, k) for n, k in names.get("gpu.kernel", []) if DROPOUT_MASK_KERNEL.search(n)]
        if masks:
            p.dropout_masks, p.dropout_mask = sum(k for _, k in masks), _short(masks[0][0])
        if p.mode == "inference":
            p.autograd_ops, p.autograd_nodes, p.host_op_calls = _autograd_ops(trace)
    declared = world_size(trace)
    p.world_size, p.world_size_declared = declared or 1, declared is not None
    p.processes = _gpu_processes(trace)
    return p


#: Fewer recorded ops than this in an inference run, or a smaller share of its host ops, are
#: not called grad mode left on (vLLM's capture pass: 48 of 3,819, its custom TopK and
#: SortTokens ops, while every aten op ran without).
AUTOGRAD_MIN = 10
AUTOGRAD_MIN_PCT = 10.0


def dropout_finding(program: Program) -> Finding | None:
    """In a PyTorch inference run, dropout that draws random masks: the model was left in
    training mode (``model.eval()`` was not called), which also keeps batch norm on the
    batch's statistics. In eval mode ``aten::dropout`` passes its input through and draws
    no mask (no ``aten::native_dropout``, ``aten::bernoulli_``)."""
    if not program.pytorch or program.mode != "inference" or not program.dropout_masks:
        return None
    return Finding(
        "warning", f"dropout is active in an inference run ({program.dropout_masks:,} "
        f"{program.dropout_mask} calls draw random masks): the model is in training mode",
        {"dropout_mask_calls": program.dropout_masks, "mask_op": program.dropout_mask,
         "mode_from": program.evidence.get("mode", "")},
        "call model.eval() before inference (and run it under torch.inference_mode()): dropout "
        "then passes its input through, batch norm uses its running statistics, and the "
        "outputs are deterministic")


def _autograd_ops(trace: Trace) -> tuple[int, int, int]:
    """Host ops that autograd numbered, as the readers counted them (``autograd_ops`` of each
    input: PyTorch gives an op a ``Sequence number`` only where grad mode is on, never under
    ``torch.no_grad()`` or ``torch.inference_mode()``), the distinct numbers among them (the
    nodes it recorded), and host ops in all."""
    sources = [m for m in trace.metadata.get("sources", {}).values() if isinstance(m, dict)]
    recorded = sum(m.get("autograd_ops") or 0 for m in sources)
    if not recorded:
        return 0, 0, 0
    nodes = sum(m.get("autograd_nodes") or 0 for m in sources)
    ev = trace.events
    return recorded, nodes, int(pc.sum(equals(ev["category"], "host.op").cast(pa.int64()))
                                .as_py() or 0)


def autograd_finding(program: Program) -> Finding | None:
    """In a PyTorch inference run, ops that autograd recorded (at least ``AUTOGRAD_MIN``, and
    ``AUTOGRAD_MIN_PCT`` of its host ops):
    inference ran with grad mode on, building a graph and keeping activations for a backward
    pass that never comes."""
    if not program.pytorch or program.mode != "inference" or \
            program.autograd_ops < AUTOGRAD_MIN or program.autograd_nodes < 2 or \
            program.autograd_ops * 100 < AUTOGRAD_MIN_PCT * program.host_op_calls:
        return None  # one number (0) for all: grad mode on, but no input required grad
    return Finding(
        "warning", f"autograd records the inference ({program.autograd_ops:,} of "
        f"{program.host_op_calls:,} host ops carry an autograd sequence number, "
        f"{program.autograd_nodes:,} distinct): it runs with grad mode on",
        {"autograd_ops": program.autograd_ops, "autograd_nodes": program.autograd_nodes,
         "host_ops": program.host_op_calls,
         "mode_from": program.evidence.get("mode", "")},
        "run inference under torch.inference_mode() (or torch.no_grad()): with grad mode on, "
        "autograd checks every op, and where the parameters require grad (nn.Module's "
        "default) it records a graph and keeps activations for a backward pass that never "
        "comes")


def _gpu_processes(trace: Trace) -> int:
    """How many (input, process) pairs call the GPU runtime (at least one)."""
    ev = trace.events
    if not ev.num_rows:
        return 1
    is_api = is_in(ev["category"], _API)
    rows = ev.select(["source", "pid"]).filter(is_api)  # not every column's rows
    if not rows.num_rows:
        return 1
    pairs = rows.group_by(["source", "pid"], use_threads=False).aggregate([])
    return max(1, int(np.count_nonzero(pairs["pid"].is_valid().to_numpy(
        zero_copy_only=False))))


def _gpu_vendor(trace: Trace) -> str | None:
    """``amd`` or ``nvidia`` when every GPU of the trace is of that vendor."""
    if "vendor" not in trace.devices.column_names:
        return None
    vendors = {v for v in trace.devices.column("vendor").to_pylist() if v}
    return vendors.pop() if len(vendors) == 1 and vendors <= {"amd", "nvidia"} else None
