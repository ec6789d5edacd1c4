"""A run of ranks: which rank each input is, the collectives matched across ranks, and the
clock offsets that align the ranks on them.

One rule for every component: the ``ranks`` analyzer, the writers that lay a run out by rank
(Parquet ``rank=N/``, Chrome JSON one file per rank, Perfetto one process group per rank) and
the alignment of ranks recorded on different hosts all use these functions.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.columns import equals as _equals
from tracekit.model import ReadLog, Trace

#: ``rank 3``, ``RANK_3``, ``rank-3``, ``rank=3`` (a hive partition), ``sampled_rank-3``; not
#: ``frank3``.
RANK_IN_NAME = re.compile(r"(?i)(?<![a-z])rank[ _=-]?(\d+)")
#: Kernels of a collective library (NCCL, RCCL, HCCL, NVSHMEM, MSCCL++) or named as a
#: collective (NVLS ``multimem_*``, one/two-shot and custom all-reduce, all-to-all
#: dispatch/combine of expert parallelism): the diagnosis analyzers' communication kernels.
COLLECTIVE_KERNEL = (r"(?i)nccl|rccl|^hccl|multimem_|one_?shot_all_?reduce"
                     r"|two_?shot_all_?reduce|cross_device_reduce|custom_?all_?reduce"
                     r"|all_?reduce_?kernel|allgather_kernel|reduce_?scatter_kernel"
                     r"|all_?to_?all|deep_ep::|pplx::|nvshmem|mscclpp|lamport")
DISTRIBUTED = "the trace's distributed info"
FILE_NAME = "the file name"
INPUT_ORDER = "input order"


@dataclass(frozen=True)
class InputRank:
    """The rank of one input of a run, and the rule that gave its number."""

    source: str
    rank: int
    rule: str


def rank_in_name(text: str) -> int | None:
    """The rank a name states (its last ``rank N``), or None.

    Examples
    --------
    >>> rank_in_name("run/rank=3/events.parquet"), rank_in_name("sampled_rank-1.json.gz")
    (3, 1)
    >>> rank_in_name("frank2.json") is None
    True
    """
    found = RANK_IN_NAME.findall(text)
    return int(found[-1]) if found else None


def world_size(trace: Trace) -> int | None:
    """The largest world size the inputs declare (Kineto ``distributedInfo.world_size``), or
    None where none does."""
    sizes = [info["distributed"]["world_size"]
             for info in trace.metadata.get("sources", {}).values()
             if isinstance(info, dict) and isinstance(info.get("distributed"), dict)
             and type(info["distributed"].get("world_size")) is int
             and info["distributed"]["world_size"] > 0]
    return max(sizes, default=None)


def input_ranks(trace: Trace) -> list[InputRank]:
    """Each input of ``trace`` as one rank, in input order.

    Its number is the one rank its processes declare (Kineto ``distributedInfo.rank``), else
    the last ``rank N`` in its name (``rank-3.json``, ``rank3/trace.json``). Where that leaves
    a number unknown or the same for two inputs, every input is numbered by its order.
    """
    sources = trace.sources or (pc.unique(trace.events["source"]).drop_null()
                                .cast(pa.string()).to_pylist()
                                if trace.events.num_rows else [])
    declared: dict[str, set[int]] = {s: set() for s in sources}
    for s, r in zip(trace.processes["source"].to_pylist(), trace.processes["rank"].to_pylist(),
                    strict=True):
        if r is not None and s in declared:
            declared[s].add(int(r))
    out = []
    for s in sources:
        info = trace.metadata.get("sources", {}).get(s, {}) if trace.sources else {}
        dist = info.get("distributed") if isinstance(info, dict) else None
        if isinstance(dist, dict) and type(dist.get("rank")) is int and not declared[s]:
            declared[s].add(dist["rank"])
        if len(declared[s]) == 1:
            out.append(InputRank(s, next(iter(declared[s])), DISTRIBUTED))
            continue
        number = rank_in_name(s) if not declared[s] else None
        out.append(InputRank(s, -1 if number is None else number, FILE_NAME))
    numbers = [r.rank for r in out]
    if -1 in numbers or len(set(numbers)) != len(numbers):
        return [InputRank(r.source, i, INPUT_ORDER) for i, r in enumerate(out)]
    return out


def process_ranks(trace: Trace) -> dict[tuple[str, int], int]:
    """(input, pid) -> rank of each process that has one: its own (Kineto
    ``distributedInfo``, or "name (rank N)" in tracekit's Perfetto output), else where
    several inputs are the ranks of a run, its input's (``input_ranks``)."""
    by_input = {r.source: r.rank for r in input_ranks(trace)} if len(trace.sources) > 1 \
        else {}
    out = {}
    for r in trace.processes.to_pylist():
        number = r["rank"] if r["rank"] is not None else by_input.get(r["source"])
        if number is not None:
            out[(r["source"], r["pid"])] = int(number)
    return out


def not_one_run(world_sizes: Sequence[int | None], declared: Sequence[int]) -> str:
    """Why inputs cannot be ranks of one run, as far as they declare it ('' where nothing
    says so): different world sizes, or one rank number declared by two of them.
    ``world_sizes`` are the inputs' (None where unknown), ``declared`` the rank numbers
    their distributed info gives (one per input that gives one).

    Examples
    --------
    >>> not_one_run([2, 2, 4], [0, 1, 0])
    'they declare different world sizes (2, 4); rank 0 is declared by more than one input'
    >>> not_one_run([2, 2, 2, 2], [0, 1, 0, 1])
    'ranks 0, 1 are each declared by more than one input'
    """
    sizes = sorted({w for w in world_sizes if w})
    twice = sorted({n for n in declared if list(declared).count(n) > 1})
    why = []
    if len(sizes) > 1:
        why.append(f"they declare different world sizes ({', '.join(map(str, sizes))})")
    if len(twice) == 1:
        why.append(f"rank {twice[0]} is declared by more than one input")
    elif twice:
        why.append(f"ranks {', '.join(map(str, twice))} are each declared by more than one "
                   "input")
    return "; ".join(why)


def inputs_not_one_run(trace: Trace) -> str:
    """``not_one_run`` of the inputs of ``trace`` (Kineto ``distributedInfo`` of each)."""
    sizes, declared = [], []
    for info in trace.metadata.get("sources", {}).values():
        dist = info.get("distributed") if isinstance(info, dict) else None
        if isinstance(dist, dict):
            sizes.append(dist.get("world_size") if type(dist.get("world_size")) is int
                         else None)
            if type(dist.get("rank")) is int:
                declared.append(dist["rank"])
    return not_one_run(sizes, declared)


def collective_kernels(events: pa.Table) -> np.ndarray:
    """Per events row: a collective's kernel, the unit collectives are matched by (a timed
    ``gpu.kernel`` slice on a device, named as in ``COLLECTIVE_KERNEL``)."""
    if not events.num_rows:
        return np.zeros(0, dtype=bool)
    mask = _named(events["category"], "^gpu\\.kernel$") & _named(events["name"],
                                                                COLLECTIVE_KERNEL)
    mask &= _named(events["kind"], "^slice$")
    mask &= events["ts_ns"].is_valid().to_numpy(zero_copy_only=False)
    mask &= events["device"].is_valid().to_numpy(zero_copy_only=False)
    return mask


def match_by_order(times: Sequence[np.ndarray]) -> np.ndarray:
    """The collectives of several ranks matched by order: the i-th collective kernel of each
    rank (in start order) is the same collective, as NCCL and RCCL issue collectives in the
    same order on every rank of a communicator. Returns ``[rank, collective]`` of ``times``
    for the first n collectives of each rank, n the fewest any rank ran.

    Examples
    --------
    >>> import numpy as np
    >>> match_by_order([np.array([10, 20, 30]), np.array([12, 25])]).tolist()
    [[10, 20], [12, 25]]
    """
    n = min((len(t) for t in times), default=0)
    if not times:
        return np.zeros((0, 0), dtype=np.int64)
    return np.stack([np.asarray(t[:n], dtype=np.int64) for t in times])


def end_offsets(ends: np.ndarray, reference: int = 0) -> np.ndarray:
    """Per rank, the ns to add to its times so that its matched collectives end when those
    of rank row ``reference`` do: the median over the collectives of (reference's end minus
    its end), rounded to the ns (half to even). A collective ends on every rank once the
    last rank has arrived, so its ends are the same instant seen by different clocks.

    Examples
    --------
    >>> import numpy as np
    >>> end_offsets(np.array([[100, 200, 300], [90, 195, 291]])).tolist()
    [0, 9]
    """
    if ends.shape[1] == 0:
        return np.zeros(ends.shape[0], dtype=np.int64)
    diff = ends[reference][None, :] - ends
    return np.rint(np.median(diff, axis=1)).astype(np.int64)


@dataclass
class Alignment:
    """Ranks aligned on their collectives: per input its rank, the offset added to its
    times and how many collectives it ran; and the trace with its times shifted."""

    ranks: list[InputRank]
    offsets_ns: list[int]
    counts: list[int]
    matched: int
    trace: Trace

    def offset_of(self, source: str) -> int:
        """The ns added to the times of input ``source``."""
        return self.offsets_ns[[r.source for r in self.ranks].index(source)]


#: What a writer's ``align`` option takes: ``""`` (times as recorded) or ``"collectives"``.
ALIGN_CHOICES = ("", "collectives")


def check_align(value: str) -> None:
    """Raise a one-line OptionError unless ``value`` is one of ``ALIGN_CHOICES`` (for the
    ``__post_init__`` of a writer's Options)."""
    from tracekit.errors import OptionError

    if value not in ALIGN_CHOICES:
        raise OptionError(f"option 'align': '{value}' is not known (valid: collectives, or "
                          "empty for none)")


def align_collectives(trace: Trace) -> Alignment:
    """Align the inputs of a run, each one rank on its own host clock, on the ends of their
    matched collectives (``match_by_order`` of each input's ``collective_kernels`` on its
    first device that ran any; ``end_offsets`` against the lowest rank, which keeps its
    times). Ranks recorded in one input share its clock and move together. With fewer than
    two inputs, or an input without collectives, nothing moves (``matched`` is 0).

    The shifted trace records each input's offset as ``alignment_offset_ns`` in its
    ``metadata["sources"]`` entry.
    """
    ranks = input_ranks(trace)
    ends = _collective_ends(trace.events, [r.source for r in ranks])
    counts = [len(e) for e in ends]
    matched = match_by_order(ends)
    if len(ranks) < 2 or matched.shape[1] == 0:
        return Alignment(ranks, [0] * len(ranks), counts, 0, trace)
    lowest = min(range(len(ranks)), key=lambda i: ranks[i].rank)
    offsets = end_offsets(matched, lowest)
    return Alignment(ranks, offsets.tolist(), counts, int(matched.shape[1]),
                     shift_sources(trace, {r.source: int(o) for r, o in
                                           zip(ranks, offsets, strict=True)}))


def shift_sources(trace: Trace, offsets: dict[str, int]) -> Trace:
    """``trace`` with ``offsets[source]`` ns added to the times of each input's events (and
    noted as ``alignment_offset_ns`` in its sources metadata)."""
    events = trace.events
    src = events["source"].combine_chunks()
    names = src.dictionary.cast(pa.string()).to_pylist()
    by_code = np.array([offsets.get(n, 0) for n in names] or [0], dtype=np.int64)
    add = by_code[src.indices.fill_null(0).to_numpy(zero_copy_only=False)]
    ts = events["ts_ns"]
    shifted = pc.add(ts, pa.array(add, pa.int64()))
    i = events.schema.get_field_index("ts_ns")
    metadata = dict(trace.metadata)
    sources = {k: dict(v) if isinstance(v, dict) else v
               for k, v in trace.metadata.get("sources", {}).items()}
    for name, offset in offsets.items():
        if isinstance(sources.get(name), dict):
            sources[name]["alignment_offset_ns"] = int(offset)
    metadata["sources"] = sources
    return dataclasses.replace(trace, events=events.set_column(i, events.schema.field(i), shifted),
                               metadata=metadata)


def rank_trace(trace: Trace, source: str) -> Trace:
    """The part of a run's trace that input ``source`` holds, a whole trace of its own: its
    events (dictionaries cut to the values it uses), processes, threads and devices, the
    stacks its events use with their ancestors and frames, its metadata and read account.
    (For every rank in turn, ``rank_traces`` splits the events once.)"""
    return _part(trace, source, trace.events.filter(_equals(trace.events["source"], source)))


def rank_traces(trace: Trace) -> Iterator[tuple[InputRank, Trace]]:
    """Each input of a run (``input_ranks``) with its ``rank_trace``, one after the other: the
    events are grouped by input once (a slice each where, as read, they already are)."""
    ranks = input_ranks(trace)
    column = trace.events["source"]
    src = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if len(ranks) < 2 or not len(src):
        yield from ((r, rank_trace(trace, r.source)) for r in ranks)
        return
    names = src.dictionary.cast(pa.string()).to_pylist()
    codes = src.indices.fill_null(-1).to_numpy()
    grouped = bool(np.all(codes[1:] >= codes[:-1]))
    order = np.arange(len(codes)) if grouped else np.argsort(codes, kind="stable")
    ordered = codes[order]
    for r in ranks:
        code = names.index(r.source) if r.source in names else -2
        lo, hi = np.searchsorted(ordered, [code, code + 1])
        events = trace.events.slice(int(lo), int(hi - lo)) if grouped else \
            trace.events.take(pa.array(order[lo:hi]))
        yield r, _part(trace, r.source, events)


def _part(trace: Trace, source: str, events: pa.Table) -> Trace:
    events = _compact_dictionaries(events)
    tables = {"events": events}
    for name in ("processes", "threads", "devices"):
        table = trace.table(name)
        tables[name] = table.filter(pc.equal(table["source"], source))
    stacks = trace.stacks
    used = _used_stacks(stacks, events["stack_id"])
    tables["stacks"] = stacks.filter(pa.array(used))
    frames = trace.frames
    tables["frames"] = frames.filter(pc.is_in(frames["frame_id"],
                                              tables["stacks"]["frame_id"].combine_chunks()))
    metadata = {**trace.metadata,
                "sources": {source: trace.metadata.get("sources", {}).get(source, {})}}
    log = ReadLog()
    for key, n in trace.log.outcomes.items():
        if key[0] == source:
            log.note(*key, n)
    return Trace(metadata=metadata, log=log, **tables)


def _compact_dictionaries(table: pa.Table) -> pa.Table:
    """``table`` with each dictionary column's dictionary cut to the values its rows use, in
    their order in the dictionary (a rank's file holds none of the other ranks' names)."""
    for i, f in enumerate(table.schema):
        if not pa.types.is_dictionary(f.type):
            continue
        column = table.column(i).combine_chunks() if table.num_rows else \
            pa.array([], f.type)
        indices = column.indices.fill_null(0).to_numpy()
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        used = np.unique(indices[valid])
        codes = np.searchsorted(used, indices)
        array = pa.DictionaryArray.from_arrays(
            pa.array(codes.astype(np.int32), mask=~valid), column.dictionary.take(pa.array(used)))
        table = table.set_column(i, f, array)
    return table


def _used_stacks(stacks: pa.Table, stack_id: pa.ChunkedArray) -> np.ndarray:
    """Per stacks row: whether ``stack_id`` uses it or one of its descendants (climbing one
    level per round, from the stacks used to their roots)."""
    n = stacks.num_rows
    used = np.zeros(n, dtype=bool)
    ids = stack_id.drop_null().to_numpy() if stack_id.null_count < len(stack_id) else \
        np.zeros(0, dtype=np.int64)
    if not n or not len(ids):
        return used
    own = stacks["stack_id"].to_numpy()
    order = np.argsort(own, kind="stable")

    def rows(wanted: np.ndarray) -> np.ndarray:
        pos = np.clip(np.searchsorted(own[order], wanted), 0, n - 1)
        return order[pos][own[order][pos] == wanted]

    valid = stacks["parent_id"].is_valid().to_numpy(zero_copy_only=False)
    parent = stacks["parent_id"].fill_null(0).to_numpy()
    frontier = rows(np.unique(ids))
    while len(frontier):
        used[frontier] = True
        up = rows(np.unique(parent[frontier][valid[frontier]]))
        frontier = up[~used[up]]
    return used


def _collective_ends(events: pa.Table, sources: list[str]) -> list[np.ndarray]:
    """Per input: the end times of the collectives on its first device that ran any, by
    start."""
    mask = collective_kernels(events)
    rows = np.flatnonzero(mask)
    if not len(rows):
        return [np.zeros(0, dtype=np.int64) for _ in sources]
    take = pa.array(rows)
    src = events["source"].take(take).cast(pa.string()).to_numpy(zero_copy_only=False)
    device = events["device"].take(take).to_numpy()
    start = events["ts_ns"].take(take).to_numpy()
    end = start + events["dur_ns"].take(take).fill_null(0).to_numpy()
    out = []
    for s in sources:
        mine = src == s
        if not mine.any():
            out.append(np.zeros(0, dtype=np.int64))
            continue
        on = mine & (device == device[mine].min())
        order = np.argsort(start[on], kind="stable")
        out.append(end[on][order])
    return out


def _named(column: pa.ChunkedArray, pattern: str) -> np.ndarray:
    """Per row: the value matches ``pattern`` (tested once per dictionary entry)."""
    parts = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            hit = pc.match_substring_regex(chunk.dictionary.cast(pa.string()), pattern)
            parts.append(pc.take(hit.fill_null(False), chunk.indices).fill_null(False)
                         .to_numpy(zero_copy_only=False) if len(chunk.dictionary)
                         else np.zeros(len(chunk), dtype=bool))
        else:
            parts.append(pc.match_substring_regex(chunk, pattern).fill_null(False)
                         .to_numpy(zero_copy_only=False))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)

