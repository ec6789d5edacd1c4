"""Run one task per input in parallel: local processes by default, or a Dask cluster.

Reading and per-input analysis of a run of many traces (one per rank) are independent, so each
input is read and summarized where it is, and only the small per-input results come back. The
default engine is a pool of local processes (no server); ``engine="dask"`` starts a Dask
``LocalCluster``, and a ``scheduler`` address uses a running Dask cluster (the ``dask`` extra:
``pip install 'tracekit[dask]'``). Memory is bounded by the inputs being worked on at once
(``jobs`` of them), whatever the number of inputs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any, TypeVar

from tracekit.errors import UsageError
from tracekit.inputs import STDIN, Expanded

T = TypeVar("T")
ENGINES = ("local", "dask")
#: A plain ``analyze`` of more inputs than this takes them one per task (see ``plan``).
MANY_INPUTS = 8


def default_jobs(inputs: int) -> int:
    """Workers for ``inputs`` inputs: one per CPU, no more than inputs."""
    return max(1, min(inputs, os.cpu_count() or 1))


def map_inputs(task: Callable[[Any], T], inputs: Sequence[Any], *, engine: str = "local",
               jobs: int | None = None, scheduler: str | None = None,
               done: Callable[[int], None] | None = None) -> list[T]:
    """``[task(x) for x in inputs]``, run in parallel; results in input order.

    ``task`` must be picklable (a module-level function or a ``functools.partial`` of one);
    the first exception raised by a task is raised here. ``done(n)`` is called as tasks
    finish, with the number finished so far.
    """
    if engine not in ENGINES:
        raise UsageError(f"unknown engine '{engine}' (choose from {', '.join(ENGINES)})")
    if scheduler is not None or engine == "dask":
        return _on_dask(task, inputs, jobs, scheduler, done)
    workers = jobs or default_jobs(len(inputs))
    if workers <= 1 or len(inputs) <= 1:
        results = []
        for n, x in enumerate(inputs, 1):
            results.append(task(x))
            if done:
                done(n)
        return results
    # spawn, not fork: the parent's pyarrow thread pools must not be copied mid-use.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(task, x): i for i, x in enumerate(inputs)}
        out: list[Any] = [None] * len(inputs)
        for n, future in enumerate(as_completed(futures), 1):
            out[futures[future]] = future.result()
            if done:
                done(n)
        return out


def _on_dask(task: Callable[[Any], T], inputs: Sequence[Any], jobs: int | None,
             scheduler: str | None, done: Callable[[int], None] | None) -> list[T]:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise UsageError("the dask engine needs Dask: pip install 'tracekit[dask]'") from None
    if scheduler is not None:
        client = Client(scheduler)
        cluster = None
    else:
        # A cluster of our own: its nannies' shutdown chatter is not the user's business.
        logging.getLogger("distributed").setLevel(logging.ERROR)
        cluster = LocalCluster(n_workers=jobs or default_jobs(len(inputs)),
                               threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        futures = client.map(task, list(inputs), pure=False)
        for n, _ in enumerate(dask_completed(futures), 1):
            if done:
                done(n)
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def plan(paths: Sequence[Any], analyzers: Sequence[str] = (), *, engine: str | None = None,
         jobs: int | None = None, scheduler: str | None = None,
         registry: Any = None) -> str | None:
    """The engine ``tracekit analyze`` runs ``paths`` (inputs already expanded, see
    ``tracekit.pipeline.expand_inputs``) on, or None to read them all into one process.

    ``engine``, ``jobs`` or ``scheduler`` given: per input, on that engine. Otherwise a run of
    more than ``MANY_INPUTS`` inputs is analyzed per input in local processes when every
    named analyzer (or, none named, the defaults for runs) combines inputs: memory then holds
    a few inputs whatever their number, and the inputs are read in parallel. Fewer inputs,
    or an analyzer that needs the whole run at once (``-a bottleneck``), are read into one
    process: the verdict over the whole run, with the ``ranks`` report beside it. (A large run
    whose inputs turn out to hold no GPU work is read into one process too, for the CPU
    report: see ``analyze_planned``.)
    """
    if engine or jobs or scheduler:
        return engine or "local"
    if len(paths) <= MANY_INPUTS:
        return None
    if analyzers:
        from tracekit.pipeline import default_registry

        registry = registry or default_registry()
        if not all(registry.get("analyzer", n).combines_inputs() for n in analyzers):
            return None
    return "local"


def analyze_planned(inputs: Sequence[Any], analyzers: Sequence[str] = (), *,
                    from_: str | None = None, options: Sequence[str] = (),
                    engine: str | None = None, jobs: int | None = None,
                    scheduler: str | None = None, registry: Any = None,
                    progress: Any = None) -> list[Any] | None:
    """What ``tracekit analyze`` does first: the reports of ``inputs`` analyzed one input
    per task when ``plan`` says so (an engine asked for, or a large run), or None when they
    are to be read into one process (``tracekit.pipeline.analyze_inputs``).

    ``analyzers`` empty: the defaults for runs of several ranks (``combining_defaults``).
    Where ``plan`` chose per-input analysis by itself, the first report says so and how to
    get the whole-run verdict instead; and when, so chosen with no analyzer named, no input
    holds timed GPU work (perf scripts, VTune reports), the GPU-rank defaults have nothing to
    say: None, so that the run is read whole and gets the defaults of its kind (the CPU
    report), as a run of fewer inputs does.
    """
    from tracekit.pipeline import default_registry, expand_inputs

    registry = registry or default_registry()
    run = expand_inputs(inputs, format=from_, registry=registry)
    chosen = plan(run.paths, analyzers, engine=engine, jobs=jobs, scheduler=scheduler,
                  registry=registry)
    if chosen is None:
        return None
    total = len(run.paths)
    if progress is not None:
        progress.phase(f"analyzing {total} inputs", total)
    # The run-wide defaults are for GPU ranks; whether any input holds GPU work is only known
    # once read, so each task says so (no cost to a GPU run).
    own_choice = not (engine or jobs or scheduler)
    reports, gpu = _run(run, list(analyzers) or combining_defaults(registry), from_=from_,
                        options=options, engine=chosen, jobs=jobs, scheduler=scheduler,
                        registry=registry, done=progress.update if progress else None,
                        check_gpu=own_choice and not analyzers)
    if gpu is False:
        return None  # CPU-only inputs: read whole, for the CPU report as a smaller run gets
    if reports and own_choice:
        reports[0].notes.append(planned_note(total, registry))
    return reports


def planned_note(inputs: int, registry: Any = None) -> str:
    """What the report says when ``plan`` chose per-input analysis by itself; it names the
    analyzers a run read whole would get (declared for runs of several ranks)."""
    from tracekit.defaults import default_analyzers
    from tracekit.interfaces import TraceKind
    from tracekit.pipeline import default_registry

    whole = default_analyzers(TraceKind.GPU_RANKS, registry or default_registry())
    return (f"{inputs} inputs: each read and summarized in a task of its own (local "
            f"processes), so that memory holds a few inputs at once; the verdict over the "
            "whole run needs it read into one process: name the analyzers ("
            + " ".join(f"-a {n}" for n in whole) + ")")


def combining_defaults(registry: Any = None) -> list[str]:
    """The analyzers a plain ``analyze --engine`` runs: those declared a default for runs of
    several ranks that combine inputs."""
    from tracekit.interfaces import TraceKind
    from tracekit.pipeline import default_registry

    registry = registry or default_registry()
    return sorted(n for n, c in registry.analyzers.items() if c.combines_inputs()
                  and any(TraceKind.GPU_RANKS in d.kinds for d in c.default_for))


def analyze_run(inputs: Sequence[Any] | Expanded, names: Sequence[str], *,
                from_: str | None = None,
                options: Sequence[str] = (), engine: str = "local", jobs: int | None = None,
                scheduler: str | None = None, registry: Any = None,
                done: Callable[[int], None] | None = None) -> list[Any]:
    """Analyze a run of many inputs (one per rank) in parallel, one input per task.

    Every named analyzer must combine inputs (``Analyzer.per_input`` and
    ``Analyzer.combine``): each task reads one input and returns the analyzers' small
    per-input parts, and the reports are combined here. No task holds more than one input.
    ``inputs`` are expanded as ``tracekit.read`` does (a run folder, a glob pattern), unless
    they are an ``Expanded`` already.
    """
    return _run(inputs, names, from_=from_, options=options, engine=engine, jobs=jobs,
                scheduler=scheduler, registry=registry, done=done)[0]


def _run(inputs: Sequence[Any] | Expanded, names: Sequence[str], *, from_: str | None,
         options: Sequence[str], engine: str, jobs: int | None, scheduler: str | None,
         registry: Any, done: Callable[[int], None] | None,
         check_gpu: bool = False) -> tuple[list[Any], bool | None]:
    """``analyze_run``'s reports, and (``check_gpu``) whether any input holds timed GPU work
    (None unchecked)."""
    from functools import partial

    from tracekit.defaults import GPU_WORK_COLUMNS
    from tracekit.pipeline import default_registry, expand_inputs, route_options, source_names

    registry = registry or default_registry()
    classes = [registry.get("analyzer", n) for n in names]
    single = [c.name for c in classes if not c.combines_inputs()]
    if single:
        able = sorted(n for n, c in registry.analyzers.items() if c.combines_inputs())
        raise UsageError(f"analyzer '{single[0]}' reads the whole trace at once; run it "
                         "without --engine/--jobs (analyzers that combine inputs: "
                         f"{', '.join(able) or 'none installed'})")
    reader_cls = registry.get("reader", from_) if from_ else None
    reader_opts, analyzer_opts = route_options(list(options), reader_cls, classes)
    wanted = [c.event_columns for c in classes]
    if check_gpu:
        wanted.append(GPU_WORK_COLUMNS)
    columns = "" if any(w is None for w in wanted) else ",".join(sorted(set().union(*wanted)))
    task = partial(_parts_of_input, names=tuple(names),
                   reader_options=tuple(reader_opts), analyzer_options=tuple(analyzer_opts),
                   columns=columns, check_gpu=check_gpu)
    run = inputs if isinstance(inputs, Expanded) else \
        expand_inputs(inputs, format=from_, registry=registry)
    if STDIN in run.paths:
        raise UsageError("standard input ('-') cannot be split into tasks; save it to a file")
    source_names(run.paths)  # refuses an input given twice before the parts are keyed by path
    split = _split_parts(run.paths, from_, registry)
    # Absolute paths: a cluster's workers do not share this process's working directory.
    jobs_in = [(os.path.abspath(p), name, split[p]) for p, name in
               zip(split, source_names(list(split)), strict=True)]
    results = map_inputs(task, jobs_in, engine=engine, jobs=jobs, scheduler=scheduler,
                         done=done)
    parts = [r[0] for r in results]
    analyzers = _analyzers(classes, analyzer_opts)
    reports = [a.combine([p[i] for p in parts]) for i, a in enumerate(analyzers)]
    if reports:
        reports[0].notes.extend(run.notes())
    return reports, any(r[1] for r in results) if check_gpu else None


def _analyzers(classes: list[Any], options: Sequence[str]) -> list[Any]:
    from tracekit.options import parse_options
    from tracekit.pipeline import split_options

    routed = split_options(list(options), classes) if options else [[] for _ in classes]
    return [cls(parse_options(cls, opts)) for cls, opts in zip(classes, routed, strict=True)]


def _split_parts(paths: Sequence[Any], from_: str | None, registry: Any) -> dict[Any, str]:
    """Each input, or the parts it holds whole where its reader says (``Reader.parts``: the
    rank folders of a run dataset), so that each rank is a task of its own; in order, each
    with the name of its reader, so that workers read with it instead of sniffing again."""
    from tracekit.inputs import Source
    from tracekit.pipeline import detect_format

    out: dict[Any, str] = {}
    for path in paths:
        source = Source(path)
        reader = registry.get("reader", from_) if from_ else detect_format(source, registry)
        out.update(dict.fromkeys(reader.parts(source) or [path], reader.name))
    return out


def _parts_of_input(job: tuple[str, str, str], *, names: tuple[str, ...],
                    reader_options: tuple[str, ...], analyzer_options: tuple[str, ...],
                    columns: str = "", check_gpu: bool = False) -> tuple[list[Any], bool]:
    """Read one input with the reader named in ``job`` and return each analyzer's part of it
    (runs in a worker), and (``check_gpu``) whether it holds timed GPU work; of the events
    only ``columns`` where the reader can read some (``Reader.reads_columns``)."""
    from tracekit.defaults import has_gpu_work
    from tracekit.pipeline import default_registry, read_one

    path, name, reader_name = job
    registry = default_registry()
    reader = registry.get("reader", reader_name)
    if columns and reader.reads_columns and \
            not any(o.split("=")[0].endswith("columns") for o in reader_options):
        reader_options = (*reader_options, f"columns={columns}")
    trace = read_one(path, format=reader, options=reader_options, registry=registry, name=name)
    classes = [registry.get("analyzer", n) for n in names]
    return ([a.per_input(trace) for a in _analyzers(classes, analyzer_options)],
            check_gpu and has_gpu_work(trace))
