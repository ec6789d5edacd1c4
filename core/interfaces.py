"""The component interfaces plugins implement: Reader, Writer, Analyzer and ReportFormat."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, TYPE_CHECKING, Any, ClassVar

from tracekit.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa
    from tracekit.builder import TraceBuilder
    from tracekit.inputs import Source
    from tracekit.model import Trace
    from tracekit.registry import Registry
    from tracekit.report import Report


@dataclass(frozen=True)
class NoOptions:
    """Options of a component that takes none."""


class Component(ABC):
    """What every reader, writer and analyzer has: a kebab-case name, a description, Options."""

    kind: ClassVar[str] = "component"
    name: ClassVar[str]
    description: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions

    def __init__(self, options: Any = None) -> None:
        self.options = options if options is not None else self.Options()
        if not dataclasses.is_dataclass(self.options):
            raise TypeError(f"{type(self).__name__}.Options must be a dataclass")


class Reader(Component):
    """Reads one input format into the event model.

    ``sniff`` looks at the start of an input and says how sure it is (0..1) that the input is
    its format; the highest weight wins. ``read`` fills a TraceBuilder column-wise.
    """

    kind = "reader"
    extensions: ClassVar[tuple[str, ...]] = ()
    #: Whether ``read`` takes a stream input (stdin, a FIFO): it reads the content once,
    #: through ``source.open()`` or ``source.read_bytes()``, and never opens ``source.path``.
    #: Readers that do not are neither sniffed nor run on streams.
    reads_streams: ClassVar[bool] = False
    #: Whether ``Options`` has a ``columns`` field (event column names, comma-separated) by
    #: which ``read`` reads only those columns, the others as empty: a run analyzed one input
    #: per task asks for what its analyzers declare (``Analyzer.event_columns``).
    reads_columns: ClassVar[bool] = False
    #: Whether ``read`` hands its events to ``out`` in batches as it reads, all of them of one
    #: source, without ``out.adopt``: a writer that takes batches (``Writer.batch_sink``) then
    #: writes each batch as it comes, so that memory follows the batch, not the trace.
    streams_events: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def sniff(cls, source: Source) -> float:
        """Return 0..1: how likely ``source`` is in this reader's format."""

    @classmethod
    def parts(cls, source: Source) -> list[Path]:
        """Optional: the inputs that ``source`` holds whole, each readable alone (the rank
        folders of a run dataset), for analyzing one part per task; none (the default): it
        is one input."""
        return []

    @abstractmethod
    def read(self, source: Source, out: TraceBuilder) -> None:
        """Read ``source`` into ``out``; raise TraceReadError on bad input."""


@dataclass
class WriteResult:
    """What a writer wrote, and what it could not represent (``skipped[reason] = count``)."""

    written: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)


class Writer(Component):
    """Writes a Trace to a byte stream in one output format.

    ``progress`` is where ``write`` reports how far it got (``progress.update(done,
    total)``); it does nothing unless the caller passed one.
    """

    kind = "writer"
    extensions: ClassVar[tuple[str, ...]] = ()
    #: Typed event columns the format holds in fields of its own (where they apply); any
    #: other column reaches the output by the rule of ``tracekit.fields`` (an args key named
    #: as the column) or is counted in ``WriteResult.skipped``. ``check_writer`` checks it.
    native_columns: ClassVar[frozenset[str]] = frozenset()
    #: The ``WriteResult.written`` keys that count event rows: with the rows counted as
    #: skipped they add up to the trace's events (``check_writer`` checks that too).
    event_counts: ClassVar[tuple[str, ...]] = ()
    #: Whether ``batch_sink`` is implemented: the output can be written batch by batch, in
    #: memory that follows the batch, from a reader that ``streams_events``.
    takes_batches: ClassVar[bool] = False
    #: Whether its batch sink writes nothing before ``close``: then it also takes batches
    #: for standard output and FIFOs (others are streamed only into outputs replaced when
    #: the write succeeds, since a failed read would leave half an output in a pipe).
    writes_at_close: ClassVar[bool] = False

    def __init__(self, options: Any = None, progress: Progress | None = None) -> None:
        super().__init__(options)
        self.progress = progress if progress is not None else NO_PROGRESS

    @abstractmethod
    def write(self, trace: Trace, stream: IO[bytes]) -> WriteResult:
        """Write ``trace`` to ``stream``; count everything it cannot represent."""

    def batch_sink(self, stream: Any) -> BatchSink:
        """Where ``takes_batches`` writers write the events of one input to ``stream`` (what
        ``write`` would get) batch by batch, as a reader that ``streams_events`` adds them."""
        raise NotImplementedError(f"writer '{self.name}' does not take batches")


class BatchSink(ABC):
    """A writer's output taking one input's events batch by batch (``Writer.batch_sink``).

    ``add_events`` gets each batch of the event schema as the reader adds it (its
    dictionaries are its own); ``close`` gets the rest of the trace (side tables, metadata,
    read account; no events) once the reader is done, and finishes the output. The output is
    kept only if ``close`` returns: an error on the way calls ``abort`` and removes it. Only
    outputs that replace a file or folder when done are streamed into, never standard output
    or a FIFO, where a failed conversion would leave half a trace, unless the writer
    ``writes_at_close``.
    """

    @abstractmethod
    def add_events(self, batch: pa.RecordBatch) -> None:
        """Write one batch of event rows."""

    def add_table(self, name: str, rows: pa.Table) -> None:  # noqa: B027 - optional hook
        """Optional: rows of the side table ``name`` (stacks, frames ...) as the reader adds
        them in bulk, before the events that name them; ``close`` gets them all again."""

    @abstractmethod
    def close(self, trace: Trace) -> WriteResult:
        """Finish the output with the rest of ``trace``; return what was written in all."""

    def abort(self) -> None:  # noqa: B027 - optional hook
        """Optional: the conversion failed (the output is removed): let go of what the sink
        holds open (files of a directory output)."""


class WholeTraceSink(BatchSink):
    """A sink that keeps every batch and writes the whole trace with ``writer.write`` at
    ``close``: for a writer that takes batches only under some of its options."""

    def __init__(self, writer: Writer, stream: Any) -> None:
        self._writer = writer
        self._stream = stream
        self._batches: list[pa.RecordBatch] = []

    def add_events(self, batch: pa.RecordBatch) -> None:
        self._batches.append(batch)

    def close(self, trace: Trace) -> WriteResult:
        from tracekit.model import events_from_batches

        if self._batches:
            trace = dataclasses.replace(trace, events=events_from_batches(self._batches))
        return self._writer.write(trace, self._stream)


class DirectoryWriter(Writer):
    """A writer whose output is a directory of files (e.g. one Parquet file per table).

    ``write`` gets a fresh, empty directory that replaces the output only on success.
    """

    @abstractmethod
    def write(self, trace: Trace, stream: Any) -> WriteResult:
        """Write ``trace`` into the directory ``stream`` (a ``pathlib.Path``)."""

    @classmethod
    def owns(cls, directory: Path) -> bool:
        """Whether ``directory`` holds only what this writer writes, so that ``--force`` may
        replace it. The default, False, never lets an existing directory be replaced."""
        return False


class TraceKind(StrEnum):
    """What a trace holds, as core tells it once from the events (``tracekit.defaults``), to
    choose what a plain ``tracekit analyze`` runs. Each trace is of exactly one kind, the first
    of these that fits."""

    #: Timed GPU work of several ranks: from more than one input, or launched by more than
    #: one process (a distributed run, or a merged trace of one).
    GPU_RANKS = "gpu-ranks"
    #: Timed GPU work: kernel, copy, memset or graph slices with a timestamp and a device.
    GPU_TIMELINE = "gpu-timeline"
    #: No timed GPU work, but sampled CPU call stacks (``kind`` ``sample``).
    CPU_SAMPLES = "cpu-samples"
    #: Neither, but GPU rows without timestamps (a tool's per-kernel totals).
    GPU_AGGREGATES = "gpu-aggregates"
    #: None of these: host-side events only (framework ops, API calls, annotations).
    HOST_ONLY = "host-only"


@dataclass(frozen=True)
class DefaultFor:
    """Declares that a plain ``tracekit analyze`` (no ``-a``) runs an analyzer on some kinds
    of trace.

    Reports come in ``slot`` order, lowest first. The analyzers of one slot stand in for one
    another: of those installed and declared for the trace's kind, only the ones of the
    highest ``rank`` run. A specialised report (higher rank) thus replaces general ones where
    its plugin is installed, and the general ones remain where it is not.
    """

    kinds: tuple[TraceKind, ...]
    slot: int = 0
    rank: int = 0


class Analyzer(Component):
    """Computes a Report (tables and findings) from a Trace."""

    kind = "analyzer"
    #: When a plain ``tracekit analyze`` runs this analyzer (see DefaultFor); none (the
    #: default): only when it is asked for with ``-a``.
    default_for: ClassVar[tuple[DefaultFor, ...]] = ()
    #: The event categories ``annotations`` emits, each with the title of the timeline track
    #: writers draw it on (e.g. ``{"analysis.gap": "GPU idle gaps (tracekit)"}``).
    tracks: ClassVar[dict[str, str]] = {}
    #: The event columns ``analyze`` and ``per_input`` read; None (the default): any.
    #: ``tracekit analyze`` drops the others before analysis when every analyzer it runs and
    #: the report format declare theirs; a run analyzed one input per task reads only these
    #: where the reader can (``Reader.reads_columns``).
    event_columns: ClassVar[frozenset[str] | None] = None
    #: True for an analyzer that compares its inputs one with another (``diff``): the inputs
    #: then stay apart as read, even files that are captures of one process at different
    #: times, which are otherwise read as that one process (``tracekit.captures``).
    compares_inputs: ClassVar[bool] = False

    @abstractmethod
    def analyze(self, trace: Trace) -> Report:
        """Return the analysis of ``trace``."""

    def annotations(self, trace: Trace) -> pa.Table | None:
        """Optional: event rows that show this analysis on the timeline (``convert
        --annotate``), as columns of the event schema; None (the default) adds nothing."""
        return None

    def per_input(self, trace: Trace) -> Any:
        """Optional, with ``combine``: this analyzer's part of one input of a run (one rank),
        small and picklable, computed where the input was read (``--engine``, ``--jobs``)."""
        raise NotImplementedError

    def combine(self, parts: list[Any]) -> Report:
        """Optional, with ``per_input``: the report of a run from its inputs' parts."""
        raise NotImplementedError

    @classmethod
    def combines_inputs(cls) -> bool:
        """Whether the analyzer implements ``per_input`` and ``combine``."""
        return cls.per_input is not Analyzer.per_input and cls.combine is not Analyzer.combine


class ReportFormat(Component):
    """Renders reports as a file: ``tracekit analyze --format NAME`` (``text``, ``json`` and
    ``csv`` are core's own; plugins register more with ``register_report_formats``)."""

    kind = "report-format"
    #: File name endings of this format, the usual one first (``(".html",)``).
    extensions: ClassVar[tuple[str, ...]] = ()
    #: The media (MIME) type of what ``render`` returns.
    media_type: ClassVar[str] = "application/octet-stream"
    #: The event columns ``render`` reads from its ``trace``; None (the default): any.
    event_columns: ClassVar[frozenset[str] | None] = None

    def analyzers(self, trace: Trace, registry: Registry) -> list[str] | None:
        """Optional: what a plain ``analyze --format NAME`` (no ``-a``) runs on ``trace``;
        None (the default) runs the defaults for the kind of trace."""
        return None

    @abstractmethod
    def render(self, reports: list[Report], inputs: list[str], *, trace: Trace | None = None,
               analyzer_options: tuple[str, ...] = ()) -> bytes:
        """``reports`` of ``inputs`` as this format's bytes. ``trace`` is the events the
        reports were made from (None where they are not at hand: ``analyze --engine``);
        ``analyzer_options`` the ``-O`` pairs the analyzers were given."""
