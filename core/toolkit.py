"""The toolkit for component authors: what a reader, writer or analyzer may use from core.

Import from here, ``from tracekit.toolkit import equals, grouped_stats``, and from the
``tracekit`` package itself (the interfaces, ``Trace``, ``TraceBuilder``, the errors, ``read``
and friends); in tests, ``tracekit.testing`` (docs/plugins/testing.md). Everything else in
``tracekit`` is private and may change without notice: tracekit's own plugins import nothing
else either (a test checks it).
The reference page, docs/plugins/toolkit.md, is generated from these docstrings
(``python -m tracekit._docgen``).

Everything here works column-wise on Arrow and numpy arrays: none of it loops in Python over
events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit import fields, intervals, json_objects
from tracekit.captures import untraced_ns
from tracekit.columns import (
    COLLECTIVE_RANGE,
    COMPILE_RANGE,
    DATA_LOADING_RANGE,
    any_true,
    arg_strings,
    equals,
    is_in,
    matches,
    starts_with,
)
from tracekit.defaults import default_analyzers, trace_kind
from tracekit.factorize import factorize, first_rows
from tracekit.gcpause import gc_paused
from tracekit.inputs import HEAD_SIZE, decode_text, read_errors
from tracekit.links import launch_links, mix64
from tracekit.memory import release_free_memory
from tracekit.model import SYNTHETIC_ID_MAX, TABLE_NAMES
from tracekit.optimizers import (
    FOREACH_OPTIMIZERS,
    FUSED_OPTIMIZERS,
    OPTIMIZER_STEP_RANGE,
    in_optimizer_steps,
    optimizer_fix,
    optimizer_implementation,
)
from tracekit.outputs import check_not_input, open_output, preflight, write_bytes
from tracekit.pipeline import default_registry
from tracekit.progress import NO_PROGRESS, Progress
from tracekit.ranks import (
    ALIGN_CHOICES,
    COLLECTIVE_KERNEL,
    Alignment,
    InputRank,
    align_collectives,
    check_align,
    collective_kernels,
    end_offsets,
    input_ranks,
    inputs_not_one_run,
    match_by_order,
    not_one_run,
    process_ranks,
    rank_in_name,
    rank_trace,
    rank_traces,
    shift_sources,
    world_size,
)
from tracekit.report import (
    format_bytes,
    format_evidence,
    format_ns,
    percent,
    report_table,
    short_name,
    short_names,
    table_subject,
)
from tracekit.stacks import (
    SAMPLE_COLUMNS,
    SAMPLE_EVENT_ARG,
    TIME_EVENTS,
    CallSites,
    StackTree,
    aggregate_rows,
    aggregate_sources,
    base_function,
    demangle,
    event_base,
    idle_comm_rows,
    idle_rows,
    is_kernel,
    sample_events,
    sample_weights,
    sampled_events,
    thread_names,
    time_event,
    weight_unit,
)
from tracekit.stats import (
    FEW_SAMPLES,
    STAT_COLUMNS,
    few_samples_note,
    grouped_stats,
    plural,
    share_margin,
    share_margins,
)
from tracekit.window import (
    STEP_RANGE,
    STEPS_HELP,
    WINDOW_HELP,
    restrict,
    source_spans,
    step_ranges,
    time_span,
    window_of,
)

if TYPE_CHECKING:
    from tracekit.sqlite import (
        SQLITE_MAGIC,
        SqliteInput,
        gzipped_sqlite,
        int_or_none,
        table_names,
        text_or_none,
    )
    from tracekit.sqlite import column as sqlite_column

# The SQLite helpers load the ADBC driver (and pyarrow.dataset with it): only on first use.
_SQLITE = {"SQLITE_MAGIC": "SQLITE_MAGIC", "SqliteInput": "SqliteInput",
           "int_or_none": "int_or_none", "table_names": "table_names",
           "text_or_none": "text_or_none", "sqlite_column": "column",
           "gzipped_sqlite": "gzipped_sqlite"}


def __getattr__(name: str) -> Any:
    if name not in _SQLITE:
        raise AttributeError(f"module 'tracekit.toolkit' has no attribute {name!r}")
    from tracekit import sqlite

    value = getattr(sqlite, _SQLITE[name])
    globals()[name] = value
    return value

#: Sections of the reference page: title, what they are for, and their names in order.
SECTIONS: list[tuple[str, str, list[str]]] = [
    ("Column filters", "Per-row masks on event columns; dictionary columns (``kind``, "
     "``category``, ``name``, ``source``) are tested once per distinct value, never cast "
     "to strings row by row.", ["equals", "is_in", "starts_with", "matches", "any_true",
                                  "arg_strings", "DATA_LOADING_RANGE", "COLLECTIVE_RANGE",
                                  "COMPILE_RANGE"]),
    ("Typed columns in writers", "``fields`` is a namespace: the rule by which every writer "
     "keeps the typed columns its format has no field for (``Writer.native_columns``), and "
     "``fields.restore`` for readers of what a writer carried in args. ``check_writer`` in "
     "``tracekit.testing`` checks a writer against it. ``json_objects.merge_objects`` is "
     "``fields.merge`` column-wise, for writers that hold every args text as one JSON object.",
     ["fields", "json_objects"]),
    ("Interval unions", "``intervals`` is a namespace: ``from tracekit.toolkit import "
     "intervals as iv``, then ``iv.union(starts, ends)``.", ["intervals"]),
    ("Statistics", "", ["grouped_stats", "STAT_COLUMNS", "share_margin", "share_margins",
                        "few_samples_note", "FEW_SAMPLES", "plural"]),
    ("Ids", "", ["factorize", "first_rows", "mix64", "SYNTHETIC_ID_MAX", "TABLE_NAMES"]),
    ("Launch links", "", ["launch_links"]),
    ("Call stacks and samples", "", [
        "CallSites", "StackTree", "sample_events", "sampled_events", "aggregate_rows",
        "aggregate_sources",
        "SAMPLE_EVENT_ARG",
        "SAMPLE_COLUMNS", "sample_weights", "weight_unit", "time_event", "TIME_EVENTS",
        "event_base", "demangle", "base_function", "is_kernel", "thread_names", "idle_rows",
        "idle_comm_rows"]),
    ("SQLite inputs", "", ["SqliteInput", "sqlite_column", "table_names", "int_or_none",
                           "text_or_none", "SQLITE_MAGIC", "gzipped_sqlite"]),
    ("Runs of ranks", "One rule for every component that looks across the ranks of a run: "
     "which rank each input is, which kernels are collectives and how they match across "
     "ranks, and the offsets that align ranks recorded on different hosts.",
     ["input_ranks", "InputRank", "process_ranks", "rank_in_name", "not_one_run",
      "inputs_not_one_run",
      "rank_trace", "rank_traces",
      "collective_kernels",
      "COLLECTIVE_KERNEL", "match_by_order", "end_offsets", "align_collectives", "Alignment",
      "check_align", "ALIGN_CHOICES",
      "shift_sources", "world_size", "untraced_ns"]),
    ("Advice", "Fixes that several analyzers give, worded once.",
     ["optimizer_fix", "optimizer_implementation", "in_optimizer_steps", "OPTIMIZER_STEP_RANGE",
      "FOREACH_OPTIMIZERS", "FUSED_OPTIMIZERS"]),
    ("Reports", "Building report tables and the numbers in findings.",
     ["report_table", "percent", "short_name", "format_ns", "format_bytes",
      "short_names", "format_evidence", "table_subject"]),
    ("Reading and progress", "", ["Progress", "NO_PROGRESS", "HEAD_SIZE", "read_errors",
                                   "decode_text", "gc_paused", "release_free_memory"]),
    ("Outputs", "For plugin commands that write files: the rules ``tracekit convert`` "
     "follows (no partial outputs, ``--force`` to replace, never an input).",
     ["preflight", "open_output", "write_bytes", "check_not_input"]),
    ("Windows", "For analyzers that look at a part of a trace: ``-O window=START:END`` and "
     "``-O steps=A:B``, with the same rules and help everywhere.",
     ["restrict", "window_of", "time_span", "source_spans", "step_ranges", "STEP_RANGE",
      "WINDOW_HELP", "STEPS_HELP"]),
    ("Running", "For plugin commands: the registry the command line uses, and what a plain "
     "``analyze`` would run on a trace.", ["default_registry", "trace_kind",
                                            "default_analyzers"]),
]

#: What the constants mean (functions and classes carry their own docstrings).
CONSTANTS: dict[str, str] = {
    "STAT_COLUMNS": "The columns ``grouped_stats`` returns besides the key, in order.",
    "FEW_SAMPLES": "Under this many samples a profile's shares are rough (``few_samples_note``).",
    "SYNTHETIC_ID_MAX": "pid, tid and stream ids at or below this are synthetic: a reader "
    "gave them to a name that is not a number (schema ``conventions.synthetic_id_max``); "
    "writers show them by name.",
    "SAMPLE_EVENT_ARG": "The ``args`` key that names a sample's event where a source sampled "
    "several (their counts: ``metadata['sample_events']`` of the source).",
    "SAMPLE_COLUMNS": "The event columns ``sample_events`` keeps.",
    "TIME_EVENTS": "Sampled events whose weight is CPU time or cycles, in the order "
    "``time_event`` prefers them.",
    "SQLITE_MAGIC": "The first 16 bytes of every SQLite database file (sniff ``source.head`` "
    "for them).",
    "NO_PROGRESS": "A disabled ``Progress``: the default wherever none is given.",
    "HEAD_SIZE": "How many bytes of an input ``Source.head`` holds for sniffing.",
    "TABLE_NAMES": "The tables of the event model, in order (``Trace.table(name)``).",
    "ALIGN_CHOICES": "What a writer's ``align`` option takes: empty (times as recorded) or "
    "``collectives`` (``align_collectives``); ``check_align`` refuses anything else.",
    "WINDOW_HELP": "The ``-O window=`` help line of analyzers that take it (``restrict``).",
    "STEPS_HELP": "The ``-O steps=`` help line of analyzers that take it (``restrict``).",
    "COLLECTIVE_RANGE": "The regular expression (for ``matches``) of host ranges of an "
    "exchange between ranks: ``record_param_comms``, ``c10d::`` ops, ``nccl:``/``gloo:``/"
    "``mpi:``/``ucc:``/``xccl:`` process-group ranges, MPI's blocking calls (``MPI_Wait``, "
    "``MPI_Allreduce``, ``MPI_Recv`` ...).",
    "COMPILE_RANGE": "The regular expression (for ``matches``) of host ranges of torch.compile "
    "compiling: the phases PyTorch times with ``dynamo_timed``, ``dynamo``, "
    "``entire_frame_compile``, ``compile_fx…``; not the compiled code running (nor its Python "
    "frames under ``torch/_inductor/`` or ``triton/``) nor the guard check of each call.",
    "STEP_RANGE": "The regular expression (for ``matches``) of PyTorch's step ranges, "
    "``ProfilerStep#N`` (N its group).",
    "OPTIMIZER_STEP_RANGE": "The regular expression (for ``matches``) of host ranges of an "
    "optimizer step, which PyTorch names after the class (``Optimizer.step#AdamW.step``).",
    "FOREACH_OPTIMIZERS": "torch.optim's optimizers with a foreach (multi-tensor) "
    "implementation, lower-case class names.",
    "FUSED_OPTIMIZERS": "Those of ``FOREACH_OPTIMIZERS`` with fused kernels (CUDA, and the CPU "
    "since PyTorch 2.4).",
    "DATA_LOADING_RANGE": "The regular expression (for ``matches``) of host ranges that load "
    "input data: PyTorch's DataLoader iterator, its fetch and collate, a Dataset.",
    "COLLECTIVE_KERNEL": "The regular expression (searched in kernel names, any case) of "
    "collective libraries' kernels and kernels named as collectives.",
}

__all__ = [
    "ALIGN_CHOICES",
    "COLLECTIVE_KERNEL",
    "COLLECTIVE_RANGE",
    "COMPILE_RANGE",
    "CONSTANTS",
    "DATA_LOADING_RANGE",
    "FEW_SAMPLES",
    "FOREACH_OPTIMIZERS",
    "FUSED_OPTIMIZERS",
    "HEAD_SIZE",
    "NO_PROGRESS",
    "OPTIMIZER_STEP_RANGE",
    "SAMPLE_COLUMNS",
    "SAMPLE_EVENT_ARG",
    "SECTIONS",
    "SQLITE_MAGIC",
    "STAT_COLUMNS",
    "STEPS_HELP",
    "STEP_RANGE",
    "SYNTHETIC_ID_MAX",
    "TABLE_NAMES",
    "TIME_EVENTS",
    "WINDOW_HELP",
    "Alignment",
    "CallSites",
    "InputRank",
    "Progress",
    "SqliteInput",
    "StackTree",
    "aggregate_rows",
    "aggregate_sources",
    "align_collectives",
    "any_true",
    "arg_strings",
    "base_function",
    "check_align",
    "check_not_input",
    "collective_kernels",
    "decode_text",
    "default_analyzers",
    "default_registry",
    "demangle",
    "end_offsets",
    "equals",
    "event_base",
    "factorize",
    "few_samples_note",
    "fields",
    "first_rows",
    "format_bytes",
    "format_evidence",
    "format_ns",
    "gc_paused",
    "grouped_stats",
    "gzipped_sqlite",
    "idle_comm_rows",
    "idle_rows",
    "in_optimizer_steps",
    "input_ranks",
    "inputs_not_one_run",
    "int_or_none",
    "intervals",
    "is_in",
    "is_kernel",
    "json_objects",
    "launch_links",
    "match_by_order",
    "matches",
    "mix64",
    "not_one_run",
    "open_output",
    "optimizer_fix",
    "optimizer_implementation",
    "percent",
    "plural",
    "preflight",
    "process_ranks",
    "rank_in_name",
    "rank_trace",
    "rank_traces",
    "read_errors",
    "release_free_memory",
    "report_table",
    "restrict",
    "sample_events",
    "sample_weights",
    "sampled_events",
    "share_margin",
    "share_margins",
    "shift_sources",
    "short_name",
    "short_names",
    "source_spans",
    "sqlite_column",
    "starts_with",
    "step_ranges",
    "table_names",
    "table_subject",
    "text_or_none",
    "thread_names",
    "time_event",
    "time_span",
    "trace_kind",
    "untraced_ns",
    "weight_unit",
    "window_of",
    "world_size",
    "write_bytes",
]
