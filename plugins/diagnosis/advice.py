"""The fixes for each cause, chosen for the class of program (``program.Program``) and for what
the trace shows; each says what it rests on, and none names a mechanism already in use.

The rules are stated in docs/analyzers/diagnosis.md ("Fixes"); the sources are the vendors'
guides (PyTorch performance tuning guide, CUDA C++ Best Practices Guide, HIP programming
guide, Nsight Systems' expert-system rules) and HTA's and TraceLens' recommendations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tracekit.plugins.diagnosis.program import Program
from tracekit.toolkit import format_bytes, format_ns, optimizer_fix

# Pageable copies are worth pinning when they take at least this share of copy time.
PAGEABLE_SHARE_PCT = 10.0
# Overlap hides copies behind kernels, so at most the kernels' time: kernels under this
# share of the host-device copy time put "move less" first, and under the second share
# overlap is not advised at all.
OVERLAP_SECOND_PCT = 50.0
OVERLAP_NONE_PCT = 10.0


@dataclass(frozen=True)
class Fix:
    """One recommendation and the fact in the trace it rests on."""

    text: str
    because: str


@dataclass
class Facts:
    """What the evidence found that the choice of fixes depends on."""

    # compute
    top_kernel: str = ""
    top_kernel_pct: float = 0.0
    top5_kernels_pct: float = 0.0  # the five kernel names that take most compute, together
    elementwise_pct: float = 0.0  # fills left out (fill_pct)
    fill_pct: float = 0.0  # PyTorch's fill kernels (torch.zeros, fill_), % of compute
    layout_pct: float = 0.0
    fp32_no_tensor_core_pct: float = 0.0
    fp64_pct: float = 0.0
    matmul_conv_pct: float = 0.0  # GEMM and convolution kernels, % of compute
    consumer_gpu: str = ""
    shared_memory_gpu: str = ""  # every GPU shares one physical memory with the CPU (an APU)
    compute_capability: float | None = None  # the lowest of the trace's NVIDIA GPUs
    # host gaps (cpu, launch): what the launching thread was doing, innermost range per gap
    gap_places: dict[str, int] = field(default_factory=dict)  # place -> ns of gap
    gap_examples: dict[str, str] = field(default_factory=dict)  # place -> an innermost name
    cpu_gaps: int = 0  # gaps of cause cpu, all devices
    cpu_gap_ns: int = 0
    gap_ops: dict[str, int] = field(default_factory=dict)  # outermost op -> ns of cpu gaps
    gap_samples: str = ""  # the leaf functions of the CPU samples taken in the cpu gaps
    cpu_gap_exchange_ns: int = 0  # of the cpu gaps, the host's time in exchange calls (MPI)
    # transfer
    pageable_copies: int = 0
    pageable_time_pct: float = 0.0
    pinned_copies: int = 0
    large_htod: bool = False  # host-to-device copies of 16 MB and more on average
    copy_kinds: dict[str, int] = field(default_factory=dict)  # kind -> bytes
    copies_on_compute_stream_pct: float = 0.0
    one_copy_engine: bool = False  # every GPU that copies has one copy engine (nsys' count)
    # host-device copies per kind: (count, ns)
    copy_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    copy_medians: dict[str, int] = field(default_factory=dict)  # kind -> median copy's ns
    # kind -> (count, ns) of the copies that take ten times the median or more
    stalled_copies: dict[str, tuple[int, int]] = field(default_factory=dict)
    host_copy_ns: int = 0  # time of the host-to-device and device-to-host copies
    compute_ns: int = 0  # time of the compute kernels: what copies or collectives could hide
    # behind
    # communication: kernel time per collective kind (``COLLECTIVE_KINDS``)
    collective_ns: dict[str, int] = field(default_factory=dict)
    # Collective kernels of WAITING_RATIO times their median or longer: waits for other ranks
    long_collectives: int = 0
    long_collective_ns: int = 0
    max_collective_ns: int = 0
    median_collective_ns: int = 0
    # GPU idle while the launching host waited in exchange calls (gaps.HOST_COMMUNICATION),
    # and the calls that took the most host time ("MPI_Wait, MPI_Allreduce")
    host_exchange_ns: int = 0
    host_exchange_calls: str = ""
    # idle-other: idle time whose launching call the trace does not hold, and all of it
    unattributed_idle_ns: int = 0
    other_idle_ns: int = 0
    no_kernels: bool = False  # GPU work but no kernel: kernel tracing was off
    # The rank the others wait for (the straggler finding): rank, last arrivals, collectives
    straggler: tuple[int, int, int] | None = None
    # queued gaps: how many, their median length (ns)
    queued_gaps: int = 0
    median_queued_gap_ns: int = 0
    # the largest queued gap, when another thread of the process ran host work over it
    queued_place: str = ""
    queued_example: str = ""
    # input: host-caused GPU idle time during data-loading ranges (``dataload``)
    input_wait_ns: int = 0
    # launch: % of linked kernels shorter than their launch call (None: none linked), and
    # the launch and execution rates of the device with the most kernels
    shorter_than_launch_pct: float | None = None
    launches_per_s: int = 0
    gpu_can_run_per_s: int = 0
    # launch gaps, and those of them that a host-device copy ends: (count, ns) each
    launch_gaps: tuple[int, int] = (0, 0)
    launch_gaps_to_copies: tuple[int, int] = (0, 0)
    steps: int = 0  # ProfilerStep ranges (of every process)
    optimizer: str | None = None  # what the optimizer steps run: "fused", "foreach" or None
    # Host ops: attention calls (aten::scaled_dot_product_attention) and concatenations
    # (aten::cat), for a key/value cache grown token by token
    attention_calls: int = 0
    cat_calls: int = 0
    # sync
    host_reads: int = 0
    sync_apis: dict[str, int] = field(default_factory=dict)  # name -> calls
    # what the synchronizing calls run inside: "shape", "read", "copy", "explicit" -> calls
    sync_sources: dict[str, int] = field(default_factory=dict)


# The kind of collective by kernel name (NCCL/RCCL ``ncclKernel_AllReduce_…``,
# ``ncclDevKernel_SendRecv``; serving engines' all-reduce; expert-parallel dispatch/combine).
COLLECTIVE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("all-to-all", re.compile(r"(?i)sendrecv|send_?recv|all_?to_?all|alltoall|deep_ep::|"
                              r"pplx::|dispatch|combine|_send|_recv")),
    ("all-gather", re.compile(r"(?i)all_?gather")),
    ("reduce-scatter", re.compile(r"(?i)reduce_?scatter")),
    ("all-reduce", re.compile(r"(?i)all_?reduce|multimem|one_?shot|two_?shot|lamport")),
    ("broadcast", re.compile(r"(?i)broadcast|bcast")),
    ("reduce", re.compile(r"(?i)reduce")),
)

# Where host time between launches goes, by the innermost range (or its path) covering a gap.
PLACES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("untraced host code", re.compile(r"^untraced host time$")),
    # A benchmark harness flushing the caches between timed runs (PARAM's clear_cache,
    # Triton's do_bench): host work of the harness, not of the workload.
    ("benchmark harness", re.compile(r"(?i)clear_?cache|flush_?(l2_?)?cache|cache_?(flush|"
                                     r"clear)|l2_?flush")),
    ("start-up", re.compile(r"(?i)^(cu|cuda|hip)(Init|CtxCreate|DevicePrimaryCtx|ModuleLoad|"
                            r"LibraryLoad|GetDeviceCount|SetDevice)|^(cublas|cublasLt|cudnn|"
                            r"hipblas|rocblas|miopen|cusparse|cufft)Create|^nvrtc|"
                            r"triton/compiler|^TorchDynamo|_inductor/|compile_fx")),
    ("data loading", re.compile(r"(?i)dataloader|_next_data|__next__|fetch|collate|"
                                r"\bdataset\b|pin_memory")),
    ("optimizer", re.compile(r"(?i)^Optimizer\.|optim|zero_grad|clip_grad")),
    ("backward", re.compile(r"(?i)backward|autograd|reducer|AccumulateGrad")),
    # Not every aten:: op: ops run outside the model too (data preparation), and an innermost
    # aten:: op inside a backward range is backward.
    ("forward", re.compile(r"(?i)\.forward|^nn\.Module|^## forward|model")),
    ("memory management", re.compile(r"^(cuda|hip|cu)(Malloc|Free|MemAlloc|MemFree)")),
    ("synchronizing call", re.compile(r"(?i)synchronize|^(cuda|hip)Memcpy(?!.*Async)|"
                                      r"_local_scalar_dense|aten::item")),
    ("OS call", re.compile(r"^(read|write|open|poll|epoll_wait|futex|ioctl|sem_wait|"
                           r"pthread_|nanosleep|usleep|select|recv|send|fwrite|fread)")),
)


# A matrix multiplication written by hand, by kernel name: matmul, mat_mul, matrixMul,
# matrix_multiplication, [sdhczb]gemm, mm_kernel, as a whole word (``_``, digits and camelCase
# separate words: ``batched_matrix_multiplication``, ``matrixMulCUDA`` and ``batchedGemm``
# match, ``igemm`` and ``gemmk1`` do not).
HANDWRITTEN_GEMM = re.compile(r"(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))"
                              r"(?i:mat(?:rix)?_?mul(?:t(?:iply|iplication)?)?|[sdhczb]?gemm|"
                              r"b?mm_kernel)(?![a-z])")
# Kernels of a vendor library or generator, GEMM or not: cuBLAS(Lt) (``ampere_sgemm_…``,
# ``sm90_xmma_gemm_…``, nvjet, ``gemmSN``/``gemmk1``/``splitKreduce``, MAGMA-derived), CUTLASS,
# cuDNN, TensorRT, hipBLAS(Lt)/rocBLAS/Tensile (``Cijk_…``), composable kernel (``ck::``,
# ``ck_``), MIOpen (``igemm_…``), oneMKL, Triton; tile sizes in the name (``sgemm_128x64``) are
# a generator's naming.
LIBRARY_KERNEL = re.compile(
    r"(?i)cutlass|cublas|cudnn|hipblas|rocblas|tensile|Cijk_|xmma|nvjet|magma|miopen|mkl|"
    r"triton|convolve|gemmSN|gemmk1|splitKreduce|largek|ck::|_ZN2ck|(?<![a-z])(?:ck|trt|igemm)_|"
    r"_trt\b|(?<![a-z0-9])(?:sm\d+|kepler|maxwell|pascal|volta|turing|ampere|ada|hopper|"
    r"blackwell)_|gemm_?\d+x\d+")
# A hand-written GEMM is worth replacing when it is the top kernel with this share of compute.
HANDWRITTEN_GEMM_PCT = 20.0
# A top kernel under this share of compute: no single kernel to tune first (a flat profile).
FLAT_TOP_KERNEL_PCT = 15.0


def handwritten_gemm(name: str) -> bool:
    """Whether a kernel name is a hand-written matrix multiplication, not a library kernel."""
    return bool(HANDWRITTEN_GEMM.search(name)) and not LIBRARY_KERNEL.search(name)


# DistributedDataParallel's forward broadcasting the module's buffers from rank 0
# (broadcast_buffers=True): flatten, c10d::broadcast_, unflatten, before every forward.
DDP_BUFFER_SYNC = re.compile(r"(?i)(un)?flatten_dense_tensors|broadcast|_sync_(module_)?buffers|"
                             r"_distributed_broadcast_coalesced")
DDP_FORWARD = re.compile(r"DistributedDataParallel\.forward")


# A Python frame the profiler recorded (with_stack=True): ``file.py(38): name`` or a built-in.
PYTHON_FRAME = re.compile(r"\.py\(\d+\): |^<built-in ")
# The framework's own Python (PyTorch's modules): per-op overhead, not the program's code.
FRAMEWORK_FRAME = re.compile(r"(^|/)torch/")


def place_of(innermost: str, path: list[str]) -> str:
    """Which kind of host work a gap's context is (``PLACES``), innermost range first."""
    if DDP_BUFFER_SYNC.search(innermost) and any(DDP_FORWARD.search(p) for p in path):
        return "DDP buffer broadcast"
    for name in [innermost, *reversed(path)]:
        for place, pattern in PLACES:
            if pattern.search(name):
                return place
    if PYTHON_FRAME.search(innermost) and not FRAMEWORK_FRAME.search(innermost):
        return "Python code"
    return "host code"


def _runtime(p: Program, call: str) -> str:
    """A GPU runtime call by the program's own API: ``hipMemcpyAsync`` for HIP programs."""
    return ("hip" if p.api == "HIP" else "cuda") + call


def _torch_graphs(p: Program) -> str:
    """How a PyTorch program captures graphs: ``torch.cuda.graphs`` is the API on ROCm too,
    where it records HIP graphs."""
    kind = "HIP graphs" if p.api == "HIP" else "CUDA graphs"
    return (f"{kind} (torch.compile(mode='reduce-overhead') or torch.cuda.graphs"
            + (": the same API on ROCm)" if p.api == "HIP" else ")"))


def _pct(value: float) -> str:
    return f"{value:.0f}%"


# How gaps.gap_context names a gap's untraced stretch (gaps.UNTRACED).
UNTRACED_EXAMPLE = "untraced host time"
# At least this many host-device copies of one kind under this size on average, taking a
# quarter of the copy time, are latency-bound: batching them is the fix, not moving less.
SMALL_COPIES = 10
SMALL_COPY = 64 << 10
# Exchange calls (MPI, collectives) covering this share of the cpu gaps get a fix of their own.
EXCHANGE_IN_CPU_PCT = 10
# Gaps between kernels already queued, this short at the median and at least this many, are
# the GPU's dispatch cost per kernel (a few µs), not a wait for something else.
DISPATCH_GAP_NS = 10_000
DISPATCH_GAPS_MIN = 100
# Reduced precision is advised when matmuls and convolutions take this share of compute.
MATMUL_CONV_PCT = 10.0
# The optimizer's own fix follows another place's when its gaps take this share (%) of the
# longest gaps' time.
SECOND_PLACE_PCT = 25.0
# Places of host time that a larger batch would not spread: it is not paid per launch.
NOT_PER_REQUEST = ("data loading", "memory management", "synchronizing call", "Python code",
                   "untraced host code", "writing output", "benchmark harness")
# A free call to the driver, as the innermost host range of a gap (``_cpu``).
FREE_OUTSIDE_OPS = re.compile(r"^(cuda|hip)Free\b|^cuMemFree")
# Where reduced precision is in use, FP32 GEMMs without tensor cores taking this share of
# compute are left outside it.
FP32_LEFT_PCT = 25.0
# PyTorch's fill kernels (torch.zeros, fill_) taking this share of compute get their own fix.
FILL_PCT = 20.0
# Host gaps this long on average are host computation, not per-op framework overhead.
LONG_HOST_GAP_MS = 1.0

LOADER_FIX = ("load data off the launching thread: DataLoader(num_workers>0, pin_memory=True, "
              "persistent_workers=True, prefetch_factor)")


def fixes_for(cause: str, program: Program, facts: Facts) -> list[Fix]:
    """The fixes for ``cause`` in this program, most useful first."""
    chooser = {"compute": _compute, "communication": _communication, "transfer": _transfer,
               "sync": _sync, "launch": _launch, "cpu": _cpu, "input": _input,
               "idle-other": _idle_other}.get(cause)
    return chooser(program, facts) if chooser else []


def render(fixes: list[Fix], limit: int = 3) -> str:
    """Fixes as one suggestion: ``do X (because Y); do Z (because W)``; fixes one after the
    other for the same reason give it once, after the last of them."""
    shown = fixes[:limit]
    return "; ".join(f.text if i + 1 < len(shown) and shown[i + 1].because == f.because
                     else f"{f.text} ({f.because})" for i, f in enumerate(shown))


def _compute(p: Program, f: Facts) -> list[Fix]:
    out: list[Fix] = []
    top = f"top kernel {f.top_kernel} takes {_pct(f.top_kernel_pct)} of compute"
    if f.layout_pct >= 5 and p.pytorch:
        out.append(Fix("use channels_last (model and inputs .to(memory_format="
                       "torch.channels_last)) so cuDNN stops converting layouts",
                       f"NCHW/NHWC conversion kernels take {_pct(f.layout_pct)} of compute"))
    if f.fp64_pct >= 20 and f.consumer_gpu:
        out.append(Fix(f"{f.consumer_gpu} runs FP64 at a small fraction (1/32 to 1/64) of its "
                       "FP32 rate: use FP32 (or mixed precision) where the numerics allow, or "
                       "a data-center GPU with full-rate FP64",
                       f"FP64 kernels take {_pct(f.fp64_pct)} of compute"))
    pre_ampere = f.compute_capability is not None and f.compute_capability < 8.0
    if p.pytorch:
        fills = Fix("fill fewer tensors: allocate with torch.empty where every value is "
                    "written before it is read, and fill constant tensors (torch.zeros, "
                    "torch.full) once, outside the loop",
                    f"fill kernels take {_pct(f.fill_pct)} of compute")
        # The larger share first: fills before precision when they cost more.
        fills_first = f.fill_pct >= max(FILL_PCT, f.fp32_no_tensor_core_pct)
        if fills_first:
            out.append(fills)
        if "fp8" in p.precisions or "bf16/fp16" in p.precisions:
            # Reduced precision is in use: advice only for FP32 matmuls left outside it.
            if f.fp32_no_tensor_core_pct >= FP32_LEFT_PCT:
                out.append(Fix("run the FP32 matmuls left outside reduced precision on tensor "
                               "cores: bring them under torch.autocast, or set "
                               "torch.backends.cuda.matmul.allow_tf32 = True",
                               f"FP32 GEMMs and convolutions without tensor cores take "
                               f"{_pct(f.fp32_no_tensor_core_pct)} of compute beside the "
                               "reduced-precision kernels"))
        elif f.matmul_conv_pct < MATMUL_CONV_PCT:
            pass  # too few matmuls and convolutions for reduced precision to matter
        elif pre_ampere:
            out.append(Fix("use fp16 mixed precision (torch.autocast('cuda', "
                           "dtype=torch.float16) with a GradScaler for training): this GPU has "
                           "fp16 tensor cores but no "
                           "bf16 or TF32", f"compute capability {f.compute_capability:g}, no "
                           "reduced-precision kernel in the trace"))
        elif f.fp32_no_tensor_core_pct >= 10:
            out.append(Fix("run matmuls and convolutions on tensor cores: "
                           "torch.autocast('cuda', dtype=torch.bfloat16), or TF32: "
                           "torch.backends.cuda.matmul.allow_tf32 = True (convolutions: "
                           "torch.backends.cudnn.allow_tf32, on by default)",
                           f"FP32 GEMMs and convolutions without tensor cores take "
                           f"{_pct(f.fp32_no_tensor_core_pct)} of compute"))
        elif "tf32" not in p.precisions:
            out.append(Fix("try bf16 autocast (torch.autocast) for the matmuls and "
                           "convolutions", "no reduced-precision kernel in the trace"))
        if f.fill_pct >= FILL_PCT and not fills_first:
            out.append(fills)
        if f.elementwise_pct >= 20 and not p.compiled:
            out.append(Fix("fuse the elementwise ops with torch.compile",
                           f"elementwise kernels take {_pct(f.elementwise_pct)} of compute and "
                           "the trace shows no compiled region"))
        if not out:
            tool = "rocprof-compute" if p.api == "HIP" else "Nsight Compute"
            # No "the GPU is busy", nor "a smaller batch": this fix also follows a compute
            # finding of a few percent, in a report whose host fix may ask for larger batches.
            out.append(Fix(f"profile the top kernels ({tool}) to see what limits them "
                           "(memory bandwidth, math throughput, occupancy)", top))
    elif p.framework == "TensorRT":
        if not p.precisions & {"fp8", "bf16/fp16"}:
            out.append(Fix("build the engine with reduced precision (trtexec --fp16, --int8 "
                           "with calibration, or --best)", "no FP16/INT8 kernel in the trace"))
        out.append(Fix("see which layers cost most with trtexec --dumpProfile "
                       "--separateProfileRun", top))
    else:
        tool = "rocprof-compute (Omniperf)" if p.api == "HIP" else "Nsight Compute (ncu)"
        stalls = "wavefront stalls" if p.api == "HIP" else "warp stalls"
        if p.plain and f.top_kernel_pct >= HANDWRITTEN_GEMM_PCT and \
                handwritten_gemm(f.top_kernel):
            out.append(_vendor_gemm(p, f, tool))
        elif f.top_kernel and f.top_kernel_pct < FLAT_TOP_KERNEL_PCT:
            # A flat profile: no one kernel is worth tuning alone.
            out.append(Fix(f"no kernel dominates: profile the top five together with {tool} "
                           "(one launch of each) for what they share: achieved occupancy, "
                           f"memory vs compute throughput, {stalls}",
                           f"{top}, the top five {_pct(f.top5_kernels_pct)}"))
        else:
            out.append(Fix(f"profile {f.top_kernel or 'the top kernel'} with {tool}: achieved "
                           f"occupancy, memory vs compute throughput, {stalls}",
                           top if f.top_kernel else "the GPU is busy with compute kernels"))
        if f.elementwise_pct >= 20:
            out.append(Fix("fuse the short elementwise kernels into their producers",
                           f"elementwise kernels take {_pct(f.elementwise_pct)} of compute"))
    return out


def _vendor_gemm(p: Program, f: Facts, tool: str) -> Fix:
    """Call the vendor BLAS instead of a hand-written GEMM (batched: the strided-batched call)."""
    batched = "batch" in f.top_kernel.lower()
    if p.api == "HIP":
        call = "hipblasGemmStridedBatchedEx" if batched else "hipblasGemmEx"
        libs = f"hipBLASLt (hipblasLtMatmul) or hipBLAS/rocBLAS ({call})"
        units = "matrix cores"
    else:
        call = "cublasGemmStridedBatchedEx" if batched else "cublasGemmEx"
        libs = f"cuBLASLt (cublasLtMatmul) or cuBLAS ({call})"
        units = "tensor cores"
    # A kernel named for the matrix units uses them already: the library's tuning is the
    # case for it then.
    uses = "" if re.search(r"(?i)matrix_?core|mfma|wmma|tensor_?core", f.top_kernel) else \
        f" and using its {units}"
    return Fix(f"replace the hand-written matrix multiplication {f.top_kernel} with the vendor "
               f"BLAS: {libs}, tuned per GPU{uses}; then profile what remains with {tool}",
               f"top kernel {f.top_kernel} takes {_pct(f.top_kernel_pct)} of compute and is "
               "not a library kernel")


# Places that are all the framework's per-op host work: weighed together against the others,
# since one fix (graphs, compiling, larger batches) serves them all.
PER_OP_PLACES = ("forward", "backward", "host code")


def _gap_place(f: Facts) -> tuple[str, str]:
    """The place of the longest gaps that takes most of their time (the per-op places
    weighed together), and an example of it."""
    if not f.gap_places:
        return "", ""
    weight = {k: v for k, v in f.gap_places.items() if k not in PER_OP_PLACES}
    per_op = {k: v for k, v in f.gap_places.items() if k in PER_OP_PLACES}
    if per_op:
        weight[max(per_op, key=lambda k: per_op[k])] = sum(per_op.values())
    place = max(weight, key=lambda k: weight[k])
    return place, f.gap_examples.get(place, place)


def _place_share(f: Facts, place: str) -> float:
    """The share (%) of the longest gaps' time in ``place``, the per-op places together."""
    total = sum(f.gap_places.values())
    mine = sum(v for k, v in f.gap_places.items() if k in PER_OP_PLACES) \
        if place in PER_OP_PLACES else f.gap_places.get(place, 0)
    return 100 * mine / total if total else 0.0


def _cpu(p: Program, f: Facts) -> list[Fix]:
    place, example = _gap_place(f)
    share = _pct(_place_share(f, place)) if place else ""
    if place in PER_OP_PLACES and sum(1 for k in f.gap_places if k in PER_OP_PLACES) > 1:
        because = (f"of the longest host gaps between launches, {share} of the time is in "
                   f"framework ops ({', '.join(k for k in PER_OP_PLACES if k in f.gap_places)})"
                   f", e.g. {example}")
    elif place == "untraced host code" and example.startswith(UNTRACED_EXAMPLE):
        example = example.removeprefix(UNTRACED_EXAMPLE).strip()  # said by the place already
        because = (f"of the longest host gaps between launches, {share} of the time is in "
                   f"{place} {example}")
    elif place:
        because = (f"of the longest host gaps between launches, {share} of the time is in "
                   f"{place}, e.g. {example}")
    else:
        because = "the host works between launches while the GPU waits"
    out: list[Fix] = []
    if place == "start-up":
        return [Fix("measure the steady state: warm up before profiling (torch.profiler "
                     "schedule(wait=, warmup=)) or cut the window with -O window=/steps=",
                     because)]
    if place == "DDP buffer broadcast":
        return [Fix("DistributedDataParallel broadcasts the module's buffers from rank 0 before "
                    "every forward (broadcast_buffers=True, the default): pass "
                    "broadcast_buffers=False where the ranks may keep their own buffers "
                    "(BatchNorm running statistics are used only in eval mode); graphs and "
                    "compilation do not remove this host work", because)]
    if place == "writing output":
        return [Fix("move the output out of the loop between launches: buffer it and write "
                    "once per step or at the end (a character or a line at a time costs a call "
                    "each), or write it from another thread while the GPU runs", because)]
    if place == "benchmark harness":
        return [Fix("this host time is the benchmark harness flushing caches between timed "
                    "runs, not the workload: judge the timed region alone (-O window=START:END "
                    "around it)", because)]
    if place == "untraced host code" and f.gap_samples:
        out.append(Fix("make the host code the CPU samples in these gaps land in faster, or "
                       "run it beside the GPU work instead of between launches: "
                       f"{f.gap_samples}", because))
    elif place == "untraced host code":
        out.append(Fix("find the host time no recorded op covers: " + (
            "record Python frames (torch.profiler(with_stack=True)) or sample the process "
            "(py-spy, perf); usual culprits in the step loop are logging, metric reads "
            "(.item(), .cpu()), data preparation in Python and garbage collection"
            if p.pytorch else "sample the process (perf record -g) over the same window"),
            because))
    if place == "Python code":
        out.append(Fix("make the Python code the step runs between launches cheaper, run it "
                       "less often (every N steps), or move it off the launching thread so it "
                       "runs while the GPU works", because))
    if p.pytorch:
        if place in ("untraced host code", "Python code"):
            pass
        elif place == "data loading":  # the trace shows the loader, whatever the mode
            out.append(loader_fixes(example, because)[0])
        elif place == "optimizer":
            out.append(Fix(optimizer_fix(example, implementation=f.optimizer), because))
        elif place == "synchronizing call":
            out.append(Fix("remove the host read or synchronize inside the step (.item(), "
                           ".cpu(), torch.cuda.synchronize())", because))
        elif place == "memory management" and FREE_OUTSIDE_OPS.search(example) and \
                "aten::" not in example:
            # PyTorch's caching allocator frees to the driver only in empty_cache() (or to
            # retry a failed allocation, inside an op): a free outside any op is empty_cache.
            out.append(Fix("remove torch.cuda.empty_cache() from the loop: it hands the cached "
                           "blocks back to the driver (cudaFree), so each later allocation is a "
                           "cudaMalloc again", because))
        elif place == "memory management":
            out.append(Fix("keep allocations out of the step: reuse tensors; the caching "
                           "allocator should make cudaMalloc/cudaFree rare after warm-up",
                           because))
        elif _long_host_work(f):
            # Inference has no DataLoader as a rule: the inputs come from requests.
            ahead = ("prepare the next inputs on another thread while the GPU runs"
                     if p.mode == "inference" else
                     "prepare them in DataLoader workers (num_workers>0)")
            out.append(Fix("take the host computation between launches off the launch "
                           "path: create or compute those tensors on the GPU "
                           f"(device='cuda'), compute them once outside the loop, or {ahead} "
                           "so they are ready when the step starts", _long_host_work(f)))
        else:
            for first in (_reads_block_graphs(p, f), _grown_cache(p, f)):
                if first and not p.graphs:
                    out.append(first)
            out.append(Fix("cut framework overhead per op: " + (
                f"capture the step in {_torch_graphs(p)}" if not p.graphs else
                "capture more of the step in the "
                "graphs already used") + (", compile the model with torch.compile"
                                          if not p.compiled else "") +
                ", larger batches so each op does more work", because))
        if place != "optimizer" and _place_share(f, "optimizer") >= SECOND_PLACE_PCT:
            out.append(Fix(optimizer_fix(f.gap_examples.get("optimizer", ""),
                                         implementation=f.optimizer),
                           f"{_pct(_place_share(f, 'optimizer'))} of the longest gaps' time is "
                           "in the optimizer step"))
        if p.mode == "inference" and place not in NOT_PER_REQUEST:
            out.append(Fix(f"{_more_per_step(p)} so each launch does more work",
                           "inference: throughput grows with batch while host cost per step "
                           "stays"))
    elif place != "Python code":
        out.append(Fix("take the host work off the path between launches: launch "
                       "asynchronously on streams and overlap the CPU work with the GPU "
                       "(double buffering), or move it to the GPU", because))
        if place == "memory management":
            out.append(Fix("allocate once outside the loop and reuse the buffers (or a "
                           f"stream-ordered pool, {_runtime(p, 'MallocAsync')})", because))
    if f.cpu_gap_ns and f.cpu_gap_exchange_ns * 100 >= f.cpu_gap_ns * EXCHANGE_IN_CPU_PCT:
        calls = f" ({f.host_exchange_calls})" if f.host_exchange_calls else ""
        out.append(Fix(
            "overlap the exchange with GPU work: " + (
                "non-blocking MPI_Isend/Irecv while the kernels run, and CUDA-aware MPI "
                "(GPUDirect) instead of staging through host copies" if p.mpi else
                "start the collectives asynchronously (async_op=True) and wait late"),
            f"{_pct(100 * f.cpu_gap_exchange_ns / f.cpu_gap_ns)} of the host time in these "
            f"gaps is in exchange calls{calls}"))
    return out


def _long_host_work(f: Facts) -> str:
    """Why the host gaps are host computation, not per-op overhead, or ''. The gaps average
    ``LONG_HOST_GAP_MS`` or more (per-op framework overhead is µs, which CUDA graphs remove;
    these are not) and framework ops of the launching thread cover at least half of them."""
    if not f.cpu_gaps or f.cpu_gap_ns < f.cpu_gaps * LONG_HOST_GAP_MS * 1_000_000:
        return ""
    if sum(f.gap_ops.values()) * 2 < f.cpu_gap_ns:
        return ""
    top = sorted(f.gap_ops.items(), key=lambda kv: -kv[1])[:3]
    ops = ", ".join(f"{name} {format_ns(ns)}" for name, ns in top)
    return (f"{f.cpu_gaps} host gap{'s' if f.cpu_gaps != 1 else ''} of "
            f"{format_ns(f.cpu_gap_ns // f.cpu_gaps)} on average; the launching thread runs "
            f"{ops} in them")


def loader_fixes(example: str, because: str) -> list[Fix]:
    """PyTorch's fixes for waiting on the DataLoader, by the iterator its range names
    (``example``): single-process (``num_workers=0``) wants workers; multi-process has them,
    so more of them or cheaper samples; neither named, both."""
    cheaper = ("decode and augment on the GPU (DALI, torchvision.transforms.v2 on tensors), "
               "pre-processed or memory-mapped data")
    if "_MultiProcessingDataLoaderIter" in example:
        return [Fix("the DataLoader's workers cannot keep up: more workers (num_workers up to "
                    "the free CPU cores), a larger prefetch_factor, persistent_workers=True, "
                    f"or cheaper samples: {cheaper}", because)]
    if "_SingleProcessDataLoaderIter" in example:
        first = ("give the DataLoader worker processes (it loads in the training process: "
                 "num_workers=0): DataLoader(num_workers>0, pin_memory=True, "
                 "persistent_workers=True, prefetch_factor)")
        then = "if the workers cannot keep up either"
    else:
        first, then = LOADER_FIX, "if workers are already used"
    return [Fix(first, because), Fix(f"{then}, make each sample cheaper: {cheaper}",
                                     "the loader, not the model, sets the step time")]


def _input(p: Program, f: Facts) -> list[Fix]:
    because = (f"the GPU waits {format_ns(f.input_wait_ns)} while the launching process runs "
               "data-loading ranges")
    place, example = _gap_place(f)
    if place == "data loading":
        because += f"; the largest: {example}"
    if p.pytorch:
        return loader_fixes(example, because)
    return [Fix("load the next batch while the GPU computes: a loader thread or process "
                "with a queue, double-buffered pinned staging buffers and asynchronous "
                "copies", because)]


def _launch(p: Program, f: Facts) -> list[Fix]:
    because = _launch_because(f)
    out: list[Fix] = []
    copies, copy_ns = f.launch_gaps_to_copies
    if copy_ns * 2 >= f.launch_gaps[1] > 0:
        # The GPU waits for the next copy call, not the next kernel: graphs do not batch
        # pageable copies, one copy of the whole batch does.
        out.append(Fix(
            "copy once per step instead of piece by piece: " + (
                "build the batch on the host (torch.stack / torch.cat of CPU tensors, in pinned "
                "memory) and move it with one .to(device, non_blocking=True)" if p.pytorch else
                f"gather the pieces into one pinned host buffer and issue one "
                f"{_runtime(p, 'MemcpyAsync')}"),
            f"{copies:,} of the {f.launch_gaps[0]:,} launch gaps "
            f"({_pct(100 * copy_ns / f.launch_gaps[1])} of their time) end in a host-device "
            "copy issued right after the one before"))
        if copy_ns * 4 >= f.launch_gaps[1] * 3:
            return out
    for first in (_reads_block_graphs(p, f), _grown_cache(p, f)):
        if first and not p.graphs:
            out.append(first)
    if p.graphs:
        seen = p.evidence.get("graphs")
        out.append(Fix("graphs are in use: capture the launches still outside them, and fuse "
                       "the short kernels inside", f"graph launches seen ({seen}); {because}"))
    elif p.pytorch:
        out.append(Fix(f"launch fewer kernels: {_torch_graphs(p)}" + (
                           "" if p.compiled else ", torch.compile to fuse ops"), because))
        if p.mode == "inference":
            out.append(Fix(_more_per_step(p), "inference: the launch cost is per step, the "
                           "work grows with the batch"))
        else:
            out.append(Fix("larger batches per step", because))
    else:
        api = "hipGraph" if p.api == "HIP" else "CUDA graph"
        out.append(Fix(f"fuse the short kernels or give each more work, and replay repeated "
                       f"sequences as a {api} (stream capture)", because))
    return out


# Host reads of device values per recorded step from which a step cannot be captured whole in
# a graph: a read at the end (logging the loss) leaves the rest capturable, two or more are
# inside the step.
STEP_READS_BLOCK_GRAPHS = 2


# Attention calls, and concatenations per attention call, that mark a key/value cache grown
# by torch.cat each token (two per layer and token: keys and values).
GROWN_CACHE_ATTENTION = 16
GROWN_CACHE_CATS_PER_ATTENTION = 2


def _grown_cache(p: Program, f: Facts) -> Fix | None:
    """Where graphs are the fix for an inference loop whose attention calls each come with
    two torch.cat (a key/value cache grown token by token): the cache must be static first."""
    if not p.pytorch or p.mode != "inference" or f.attention_calls < GROWN_CACHE_ATTENTION \
            or f.cat_calls < GROWN_CACHE_CATS_PER_ATTENTION * f.attention_calls:
        return None
    return Fix("make the key/value cache static before capturing: a cache grown by torch.cat "
               "each token changes the shapes a graph would hold; preallocate it at full "
               "length and write each token in place (index_copy_; Hugging Face: "
               "cache_implementation='static'), then capture the decode step",
               f"{f.cat_calls:,} aten::cat beside {f.attention_calls:,} attention calls: a "
               "cache grown token by token")


def _reads_block_graphs(p: Program, f: Facts) -> Fix | None:
    """Where graphs are the fix but the step reads device values between its launches: a
    graph cannot capture a synchronizing read, so the reads must go first."""
    # Ops whose output size comes from the data (x[mask]) read it back too.
    reads = f.host_reads + f.sync_sources.get("shape", 0)
    if not p.pytorch or not f.steps or reads < STEP_READS_BLOCK_GRAPHS * f.steps:
        return None
    return Fix("take the reads of device values out of the step before capturing it: a graph "
               "cannot capture .item(), .cpu(), an if on a GPU tensor or an op whose output "
               "size comes from the data (x[mask]), and each read drains the queue the "
               "launches would fill; a check or a metric can stay on the device "
               "(torch.where) or be read every N steps; a read that sets a shape (split sizes "
               "of an all-to-all) leaves graphs for the parts between reads",
               f"{reads:,} host reads of device values in {f.steps} steps")


def _more_per_step(p: Program) -> str:
    """More work per inference step: a serving engine batches requests continuously; any
    other loop without a backward pass, larger batches."""
    if p.engine:
        return "serve more requests per step (larger or continuous batches)"
    return "larger batches per step (for a server, more requests per step: continuous batching)"


def _named(name: str) -> str:
    """A kernel or op name without its argument list, for a reason in parentheses."""
    return name.split("(", 1)[0] or name


def _launch_because(f: Facts) -> str:
    """Why launching is the limit, in the trace's own figures where it has them."""
    short = "" if f.shorter_than_launch_pct is None else \
        f"{_pct(f.shorter_than_launch_pct)} of the kernels are shorter than their launch calls"
    if f.launches_per_s and f.gpu_can_run_per_s > f.launches_per_s:
        return (f"{short + ': ' if short else ''}the host launches {f.launches_per_s:,} "
                f"kernels/s where the GPU could run {f.gpu_can_run_per_s:,}/s")
    return "the GPU waited for the next launch in these gaps" + (f" ({short})" if short else "")


def _size(n: int) -> str:
    """Bytes moved, or that the tool recorded none."""
    return format_bytes(n) if n else "size not recorded"


def _transfer(p: Program, f: Facts) -> list[Fix]:
    if f.no_kernels:
        return [Fix("record the kernels before judging the copies: with no kernel in the "
                    "trace, the copies' share is of a span they bound themselves, and a copy "
                    "in and one out is what any GPU program needs", "no kernel in the trace")]
    kinds = ", ".join(f"{k} {_size(v)}" for k, v in
                      sorted(f.copy_kinds.items(), key=lambda kv: -kv[1])[:3])
    out: list[Fix] = []
    if f.pageable_copies and f.pageable_time_pct >= PAGEABLE_SHARE_PCT:
        how = "pin_memory=True / tensor.pin_memory()" if p.pytorch else \
            ("hipHostMalloc" if p.api == "HIP" else "cudaHostAlloc / cudaHostRegister")
        out.append(Fix(f"pin the host buffers ({how}) so copies run at full bandwidth and can "
                       "be asynchronous", f"{f.pageable_copies} copies from or to pageable "
                       f"memory take {_pct(f.pageable_time_pct)} of copy time"))
    # Copies between host and device, by their count: a tool may record no sizes.
    host_side = any(f.copy_kinds.get(k) or f.copy_counts.get(k, (0, 0))[0]
                    for k in ("HtoD", "DtoH"))
    kinds = ", ".join(f"{k} {_size(f.copy_kinds.get(k, 0))}" for k in ("HtoD", "DtoH")
                      if f.copy_kinds.get(k) or f.copy_counts.get(k, (0, 0))[0]) or kinds
    if host_side and f.shared_memory_gpu:
        how = ("create the tensors on the GPU (device='cuda') and keep them there"
               if p.pytorch else
               "allocate with hipMalloc (the CPU can use it too) or, with XNACK on "
               "(HSA_XNACK=1), let the kernels use the host's own buffers" if p.api == "HIP"
               else "allocate with cudaMallocManaged (or mapped, pinned host memory) and use "
               "the same buffers on both sides")
        out.append(Fix(f"drop the copies: {how}", f"{f.shared_memory_gpu} shares one memory "
                       f"with the CPU: each copy ({kinds}) moves data within it"))
        return out  # moving less, or overlapping, is moot where the copies can go
    for kind, (count, ns) in sorted(f.copy_counts.items()):
        size = f.copy_kinds.get(kind, 0) / count if count else 0
        if not (count >= SMALL_COPIES and size < SMALL_COPY and f.host_copy_ns
                and ns * 4 >= f.host_copy_ns):
            continue
        median = f.copy_medians.get(kind, 0)
        stalled, stalled_ns = f.stalled_copies.get(kind, (0, 0))
        if stalled_ns * 2 >= ns:
            # A few copies that wait make the time, not the per-copy latency batching saves.
            out.append(Fix(f"see what the longest {kind} copies wait for (the work before "
                           "them on their stream, or the host's side of the copy): a copy of "
                           f"{format_bytes(size)} takes {format_ns(median)} (median)",
                           f"{stalled:,} of {count:,} {kind} copies take "
                           f"{format_ns(stalled_ns)}, {_pct(100.0 * stalled_ns / ns)} of "
                           f"their {format_ns(ns)}"))
            continue
        out.append(Fix(f"batch the small {kind} copies into fewer, larger ones (gather the "
                       "values into one buffer, or keep them on the GPU): each copy pays a "
                       "fixed latency whatever its size",
                       f"{count:,} {kind} copies of {format_bytes(size)} on average take "
                       f"{format_ns(ns)}, {format_ns(median)} each (median)"))
    if host_side:
        pinned = " pinned" if f.pinned_copies and not f.pageable_copies else ""
        resident = ("keep weights and data resident on the GPU" if p.mode else
                    "keep the data on the GPU between steps and copy back only the results "
                    "the host needs")
        move_less = Fix(f"move less between host and device: {resident}" + (
                            f"; large{pinned} host-to-device copies during inference may be "
                            "weights offloaded and fetched again"
                            if p.mode == "inference" and f.large_htod else ""),
                        f"copies: {kinds}" + (", already pinned" if f.pinned_copies and not
                                              f.pageable_copies else "")
                        + ("; one copy engine: host-to-device and device-to-host copies "
                           "take turns, never both at once" if f.one_copy_engine and
                           f.copy_kinds.get("HtoD") and f.copy_kinds.get("DtoH") else ""))
        hideable_pct = 100.0 * f.compute_ns / f.host_copy_ns if f.host_copy_ns else 100.0
        little_to_hide = hideable_pct < OVERLAP_SECOND_PCT
        if f.copies_on_compute_stream_pct >= 50 and hideable_pct >= OVERLAP_NONE_PCT:
            how = ".to(device, non_blocking=True) on a side stream" if p.pytorch else \
                f"{_runtime(p, 'MemcpyAsync')} on a separate stream with events"
            because = (f"{_pct(f.copies_on_compute_stream_pct)} of copy time is on streams "
                       f"that also run the kernels ({kinds})")
            if little_to_hide:
                because += (f"; it hides at most {format_ns(f.compute_ns)} of the "
                            f"{format_ns(f.host_copy_ns)} of copies, the kernels' time")
            overlap = Fix(f"overlap the copies with compute: {how}", because)
            out.extend([move_less, overlap] if little_to_hide else [overlap, move_less])
        else:
            out.append(move_less)
    elif any(k != "copy" for k in f.copy_kinds):
        kinds = ", ".join(f"{k} {format_bytes(v)}" for k, v in
                          sorted(f.copy_kinds.items(), key=lambda kv: -kv[1])[:3] if k != "copy")
        out.append(Fix("avoid device-to-device copies: no .contiguous()/.clone() of large "
                       "tensors in the step, write results in place" if p.pytorch else
                       "avoid device-to-device copies: compute in place or alias buffers",
                       f"copies: {kinds}"))
    elif f.copy_kinds:  # only copy kernels whose direction the trace does not record
        record = ("rocprofv3 --hip-trace --memory-copy-trace" if p.api == "HIP"
                  else "nsys --trace=cuda")
        out.append(Fix(f"record the copy calls ({record}) to see which way these copies go "
                       "and how much they move; if they are device-to-device, computing in "
                       "place or aliasing buffers can avoid them",
                       "the trace records copy kernels but neither their direction nor their "
                       "size"))
    return out


def _sync(p: Program, f: Facts) -> list[Fix]:
    apis = ", ".join(f"{n} ×{c}" for n, c in sorted(f.sync_apis.items(),
                                                     key=lambda kv: -kv[1])[:3])
    out: list[Fix] = []
    if p.pytorch:
        shape = f.sync_sources.get("shape", 0)
        if shape * 2 >= sum(f.sync_sources.values()) > 0:
            out.append(Fix("keep shapes static: boolean-mask indexing x[mask] (aten::nonzero), "
                           "unique, masked_select or repeat_interleave read their output size "
                           "back and wait; use torch.where(mask, x, 0) or (x * mask).sum(), or "
                           "give the size (repeat_interleave(output_size=), "
                           "torch.nonzero_static)",
                           f"{shape:,} synchronizing calls run inside ops whose output size "
                           "depends on the data"))
        if f.host_reads:
            out.append(Fix("keep values on the device: no .item(), .cpu(), .tolist() or "
                           "printing of device tensors in the step (read metrics every N "
                           "steps)", f"{f.host_reads} host reads of device values"))
        if apis:
            out.append(Fix("drop explicit torch.cuda.synchronize() and blocking copies from "
                           "the step; use non_blocking=True copies and events",
                           f"synchronizing calls: {apis}"))
    else:
        out.append(Fix("replace blocking calls in the loop with stream-ordered ones: "
                       "cudaMemcpyAsync into pinned memory, events instead of "
                       "cudaDeviceSynchronize, and synchronize only where the host needs "
                       "the result" if p.api != "HIP" else "replace blocking calls in the "
                       "loop with hipMemcpyAsync, events and stream synchronization only where "
                       "the host needs the result", f"synchronizing calls: {apis or 'seen'}"))
    return out or [Fix("remove per-step synchronization", "the GPU waits after host syncs")]


def collective_kind(name: str) -> str:
    """The kind of collective a communication kernel performs, by its name."""
    for kind, pattern in COLLECTIVE_KINDS:
        if pattern.search(name):
            return kind
    return "other"


def _host_exchange_fixes(p: Program, f: Facts) -> list[Fix]:
    """The GPU idles while its host blocks in exchange calls: the exchange is on the path
    between GPU work, or the rank waits there for slower ranks (its own trace cannot tell
    which)."""
    because = (f"the GPU idles {format_ns(f.host_exchange_ns)} while its host waits in "
               f"{f.host_exchange_calls or 'exchange calls'}")
    if p.mpi:
        overlap = Fix("overlap the exchange with GPU work: post non-blocking MPI_Isend/"
                      "MPI_Irecv (or MPI_Iallreduce) before launching the work that does not "
                      "need the data, launch it, then MPI_Wait; use CUDA-aware MPI / GPUDirect "
                      "so device buffers are sent without staging copies", because)
    else:
        overlap = Fix("take the blocking collective off the launching thread: issue it "
                      "asynchronously (async_op=True, then wait() just before the result is "
                      "needed) on a GPU backend (NCCL/RCCL) so it overlaps the GPU's work",
                      because)
    return [overlap, Fix("check for load imbalance: time in a blocking exchange is also "
                         "waiting for the slowest rank; compare the ranks' compute per step "
                         "(tracekit analyze r0 r1 … -a ranks) and balance the work",
                         "a rank's own trace cannot tell sending from waiting")]


def _communication(p: Program, f: Facts) -> list[Fix]:
    if p.world_size_declared and p.world_size == 1 and p.collectives:
        return [Fix("the run has one rank (world_size 1): its collectives exchange nothing; "
                    "run it without the process group and its wrapper (DDP, FSDP), or with "
                    "the ranks it is meant for",
                    f"collectives ({_named(p.evidence.get('collectives', 'seen'))}) in a run of "
                    "world_size 1")]
    if f.straggler is not None:
        rank, last, count = f.straggler
        return [Fix(f"much of this time is the ranks waiting for rank {rank} (the straggler "
                    "finding): make its work match the others', not the exchange",
                    f"rank {rank} arrives last at {last} of {count} collectives")]
    if f.host_exchange_ns <= sum(f.collective_ns.values()) and (
            waiting := _waiting_fix(f)) is not None:
        return [waiting]  # it sends to the ranks analysis itself
    fixes = _communication_fixes(p, f)
    # A collective ends when the last rank arrives: one rank's collective time holds its
    # wait for the others, which its own trace cannot tell from transfer time.
    together = ("analyze every rank's trace together (tracekit analyze r0.json r1.json … -a "
                "bottleneck -a ranks): a collective ends when the last rank arrives, so part "
                "of this time may be waiting for a slower rank (a straggler), not the transfer")
    if p.world_size > p.processes:
        fixes.append(Fix(together,
                         f"the input holds {p.processes} of the run's {p.world_size} ranks"))
    elif not p.world_size_declared and p.processes == 1 and p.collectives:
        fixes.append(Fix(together, "the input holds one process of a run with collectives"))
    return fixes


#: A collective kernel this many times the median one is a wait for the other ranks.
WAITING_RATIO = 10


def _waiting_fix(f: Facts) -> Fix | None:
    """Collective kernels far longer than the median one, holding half the collective time
    or more: the rank waits in them for the others (a late rank, or ranks out of step)."""
    total = sum(f.collective_ns.values())
    if not total or f.long_collective_ns * 2 < total:
        return None
    return Fix(f"{f.long_collectives:,} collective kernels run {WAITING_RATIO}× the median "
               "one or longer and hold most of the communication time: this rank waits in "
               "them for the others (a slower rank, or ranks that reach the collective out of "
               "step), which no overlap or bandwidth can fix; find the late rank (tracekit "
               "analyze r0.json r1.json … -a ranks) and what delays it",
               f"{_pct(100 * f.long_collective_ns / total)} of collective time in "
               f"{f.long_collectives:,} kernels; longest {format_ns(f.max_collective_ns)} "
               f"against a median of {format_ns(f.median_collective_ns)}")


def _communication_fixes(p: Program, f: Facts) -> list[Fix]:
    total = sum(f.collective_ns.values())
    if f.host_exchange_ns > total:
        return _host_exchange_fixes(p, f)
    kind, ns = max(f.collective_ns.items(), key=lambda kv: kv[1]) if total else ("", 0)
    # The kind with the most time sets the fix (the largest lever), the others are named.
    split = ", ".join(f"{'unknown kind' if k == 'other' else k} {_pct(100 * v / total)}"
                      for k, v in sorted(f.collective_ns.items(), key=lambda kv: -kv[1])[1:3]
                      if v * 100 >= total) if total else ""
    main = (f"{kind} kernels take {_pct(100 * ns / total)} of communication time"
            + (f", then {split}" if split else "")) if total else ""
    if kind == "all-to-all":
        return [Fix("the exchange is all-to-all / point-to-point (embedding or expert-parallel "
                    "dispatch): pipeline it with compute (start the next batch's sparse "
                    "all-to-all while this batch's dense part runs, e.g. TorchRec's "
                    "TrainPipelineSparseDist), send less (fp16/int8 embeddings or "
                    "activations on the wire) and balance the shards so no rank waits for "
                    "the largest", main)]
    if kind in ("all-gather", "reduce-scatter") and p.mode == "training":
        return [Fix("sharded training (all-gather/reduce-scatter): prefetch the next "
                    "layer's all-gather (FSDP forward_prefetch, backward_prefetch="
                    "BACKWARD_PRE, limit_all_gathers), wrap larger units so collectives are "
                    "fewer and larger, or shard within a node only (HYBRID_SHARD)", main)]
    if p.mpi and not p.pytorch:
        return [Fix("overlap MPI with computation (non-blocking MPI_Isend/Irecv, halo "
                    "exchange while interior work runs) and use CUDA-aware MPI / GPUDirect",
                    f"MPI calls seen ({p.evidence.get('mpi')})")]
    if p.mode == "training" and f.compute_ns * 2 < total:
        return [Fix("send less, less often: overlap can hide at most the compute time "
                    f"({format_ns(f.compute_ns)} against {format_ns(total)} of collectives): "
                    "accumulate gradients over more micro-batches per all-reduce (no_sync), "
                    "compress or lower the precision of what is sent (bf16 gradients, DDP comm "
                    "hooks), or use fewer ranks for a model this size",
                    f"compute kernels {format_ns(f.compute_ns)}, collective kernels "
                    f"{format_ns(total)}")]
    if p.mode == "training":
        wrapper = ("DDP's buckets (bucket_cap_mb, gradient_as_bucket_view=True)" if p.ddp
                   and not p.fsdp else "FSDP backward_prefetch/forward_prefetch" if p.fsdp
                   and not p.ddp else "DDP bucket_cap_mb, FSDP backward_prefetch/"
                   "forward_prefetch")
        return [Fix(f"overlap gradient communication with backward: {wrapper}, collectives "
                    "on their own stream; fewer, larger collectives",
                    f"training with collectives ({_named(p.evidence.get('collectives', 'seen'))})"
                    + (f"; {main}" if split else ""))]
    one_shot = "one-shot all-reduce" + (" (NVLS on NVSwitch systems)" if p.api != "HIP" else "")
    if p.mode == "inference":
        return [Fix("communication sits on the critical path of each step: fuse the "
                    f"collective with its neighbours (all-reduce + norm), use {one_shot} for "
                    "small messages, or trade tensor parallelism for fewer, larger collectives",
                    "inference with collectives in every step")]
    return [Fix("the collectives sit on the critical path: run them on their own stream "
                "beside independent work, and batch small ones into fewer, larger calls "
                f"({one_shot} for small messages)",
                f"collectives ({_named(p.evidence.get('collectives', 'seen'))}) with little "
                "overlap")]


def _idle_other(p: Program, f: Facts) -> list[Fix]:
    if f.no_kernels:
        record = ("rocprofv3 --kernel-trace --memory-copy-trace --hip-trace" if p.api == "HIP"
                  else "nsys --trace=cuda, or torch.profiler with CUDA activities")
        return [Fix(f"record the kernels too ({record}): this trace holds copies and no "
                    "kernel, so the GPU's time between them may be kernels that were not "
                    "traced, not idle time", "no kernel in the trace")]
    if f.unattributed_idle_ns * 2 > f.other_idle_ns:
        record = ("rocprofv3 --kernel-trace --hip-trace (rocprof --hip-trace)" if p.api == "HIP"
                  else "nsys --trace=cuda, or torch.profiler with CPU and CUDA activities")
        return [Fix(f"record the host side too ({record}): without the launching calls no "
                    "gap can be told apart as launch overhead, host work, sync or a queue",
                    f"the launching call of {_pct(100 * f.unattributed_idle_ns / f.other_idle_ns)}"
                    " of the idle time is not in the trace")]
    out: list[Fix] = []
    if f.queued_place:
        shorten = (optimizer_fix(f.queued_example, implementation=f.optimizer) +
                   ", so that its step launches its "
                   "kernels sooner" if f.queued_place == "optimizer" and p.pytorch
                   else "shorten it or move it off the step's critical path")
        out.append(Fix(f"the queued work waits for host work on another thread: {shorten}",
                       # The evidence quotes the gap whole; the reason names the range.
                       f"the largest queued gap waits on {f.queued_example.split(' (')[0]} on "
                       "another thread"))
    if f.queued_gaps >= DISPATCH_GAPS_MIN and f.median_queued_gap_ns < DISPATCH_GAP_NS:
        out.append(Fix("fewer, larger kernels (fusion): the GPU pays a dispatch cost per "
                       "kernel even when the next one is already queued"
                       + (", inside a graph too" if p.graphs else ""),
                       f"{f.queued_gaps:,} gaps between queued kernels, "
                       f"{format_ns(f.median_queued_gap_ns)} long at the median"))
    out.append(Fix("look at the largest gaps ('tracekit analyze -a gaps'): cross-stream "
                   f"waits ({_runtime(p, 'StreamWaitEvent')}) or a launch queue that drains",
                   "the GPU idles with work already queued, or the trace does not say who "
                   "launched it"))
    return out
