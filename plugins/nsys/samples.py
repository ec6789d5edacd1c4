"""CPU samples: COMPOSITE_EVENTS + SAMPLING_CALLCHAINS to cpu.sample rows sharing one
call-site tree (stacks) and one frame table, built level by level with numpy; the same tree
builder serves the OS runtime calls' OSRT_CALLCHAINS."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.nsys.db import (
    UNKNOWN_NAME,
    ExportDatabase,
    MissingColumn,
    col,
    decode_pid,
    decode_tid,
    table_args,
)

SAMPLES = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
OSRT_CALLCHAINS = "OSRT_CALLCHAINS"


@dataclass
class ChainTree:
    """Call chains (one per chain id) as a call-site tree: stacks and frames tables, and per
    chain id its leaf call site and leaf frame; ``skipped`` rows had no id or depth."""

    chain_ids: np.ndarray  # sorted
    leaf_stack: np.ndarray
    leaf_frame: np.ndarray
    stacks: pa.Table
    frames: pa.Table
    skipped: int = 0

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(found, leaf stack, leaf frame) for each id."""
        if not len(self.chain_ids):
            zeros = np.zeros(len(ids), dtype=np.int64)
            return np.zeros(len(ids), dtype=bool), zeros, zeros
        pos = np.clip(np.searchsorted(self.chain_ids, ids), 0, len(self.chain_ids) - 1)
        return self.chain_ids[pos] == ids, self.leaf_stack[pos], self.leaf_frame[pos]


_RAW_ADDRESS = r"^0[xX][0-9a-fA-F]{1,16}$"


def frame_table(db: ExportDatabase, symbol: np.ndarray,
                module: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Frames for (symbol, module) StringIds pairs; and per pair, whether its symbol is
    missing (NULL or not in StringIds).

    nsys writes an unresolved symbol as its address (``0x7f72bf047558``) or as nothing.
    Such a frame is named after its module, as Nsight Systems shows it
    (``[libcuda.so.1]``), so that a module's unresolved frames merge in flame graphs;
    the address stays in ``address`` (as int64: kernel addresses are negative).
    """
    name = db.names(pa.array(symbol)).cast(pa.string())
    path = db.names(pa.array(module)).cast(pa.string())
    missing = pc.is_null(name)
    unresolved = pc.or_(pc.fill_null(pc.match_substring_regex(name, _RAW_ADDRESS), False),
                        pc.fill_null(pc.equal(name, ""), False))
    base = pc.replace_substring_regex(path, r"^.*/", "")
    bracketed = pc.and_(pc.starts_with(base, "["), pc.ends_with(base, "]"))
    label = pc.if_else(bracketed, base, pc.binary_join_element_wise("[", base, "]", ""))
    by_module = pc.and_(pc.or_(missing, unresolved), pc.fill_null(pc.not_equal(base, ""),
                                                                  False))
    named = pc.if_else(by_module, label, pc.fill_null(name, UNKNOWN_NAME))
    raw = pc.fill_null(pc.match_substring_regex(name, _RAW_ADDRESS), False)
    address = [_address(v) if r else None
               for v, r in zip(name.to_pylist(), raw.to_pylist(), strict=True)]
    frames = pa.table({"name": named, "module": path, "address": pa.array(address, pa.int64())})
    return frames, missing.to_numpy(zero_copy_only=False)


def _address(text: str) -> int:
    """A 64-bit address as int64 (two's complement above 2**63)."""
    value = int(text, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def chain_tree(db: ExportDatabase, table: str, stack_base: int = 0,
               frame_base: int = 0) -> ChainTree:
    """Build the tree of a callchain table (id, symbol, module, stackDepth), ids numbered
    from ``stack_base`` and ``frame_base`` so that several tables share one trace.

    ``stackDepth`` 0 is the leaf (the function executing); the root is the deepest entry.
    Equal paths from the root share stack ids, so a million rows share their frames.
    """
    lost = 0  # the rows of a table without a column it needs: skipped, counted
    if table in db.tables:
        try:
            db.require(table, "id", "symbol", "module", "stackDepth")
        except MissingColumn as missing:
            lost = db.count(table)
            db.note(table, f"skipped: column {missing.column} is missing", lost)
    if table in db.tables and not lost:
        chain = db.arrow(f"SELECT id, symbol, module, stackDepth FROM {table}")
    else:
        chain = db.arrow("SELECT 0 AS id, 0 AS symbol, 0 AS module, 0 AS stackDepth WHERE 0")
    keep = pc.and_(pc.is_valid(col(chain, "id")), pc.is_valid(col(chain, "stackDepth")))
    skipped = chain.num_rows - (pc.sum(keep).as_py() or 0)
    if skipped:
        chain = chain.filter(keep)
        db.note(table, "skipped: call-chain row without id or stackDepth", skipped)
    ids = col(chain, "id").to_numpy(zero_copy_only=False)
    depth = col(chain, "stackDepth").to_numpy(zero_copy_only=False)
    # -1 is no StringIds id: a NULL symbol or module reads as a missing one.
    symbol = col(chain, "symbol").fill_null(-1).to_numpy(zero_copy_only=False)
    module = col(chain, "module").fill_null(-1).to_numpy(zero_copy_only=False)
    # Frames: distinct (symbol, module) pairs.
    pairs, frame_of_row = np.unique(np.stack([symbol, module]), axis=1, return_inverse=True)
    frame_of_row = frame_of_row.reshape(-1)
    named, missing = frame_table(db, pairs[0], pairs[1])
    db.note(table, "warning: frame symbol missing (NULL or not in StringIds)",
            int(missing[frame_of_row].sum()) if len(frame_of_row) else 0)
    frame_of_row = frame_of_row + frame_base
    frames = pa.table({
        "frame_id": np.arange(pairs.shape[1], dtype=np.int64) + frame_base,
        "name": named["name"], "module": named["module"], "address": named["address"],
    })
    # Order each chain's frames root first: by id, then depth descending.
    order = np.lexsort((-depth, ids))
    ids_o, frame_o = ids[order], frame_of_row[order]
    starts = np.flatnonzero(np.r_[True, ids_o[1:] != ids_o[:-1]]) if len(ids_o) else \
        np.array([], dtype=np.int64)
    level = np.arange(len(ids_o)) - np.repeat(starts, np.diff(np.r_[starts, len(ids_o)]))
    # Walk down the levels: a call site is (parent call site, frame).
    parent_of_row = np.full(len(ids_o), -1, dtype=np.int64)
    stack_of_row = np.empty(len(ids_o), dtype=np.int64)
    stack_parent, stack_frame = [], []
    next_id = stack_base
    for k in range(int(level.max(initial=-1)) + 1):
        rows = np.flatnonzero(level == k)
        if k:
            parent_of_row[rows] = stack_of_row[rows - 1]
        keys, inverse = np.unique(np.stack([parent_of_row[rows], frame_o[rows]]), axis=1,
                                  return_inverse=True)
        stack_of_row[rows] = next_id + inverse.reshape(-1)
        stack_parent.append(keys[0])
        stack_frame.append(keys[1])
        next_id += keys.shape[1]
    parent = np.concatenate(stack_parent) if stack_parent else np.array([], dtype=np.int64)
    stacks = pa.table({
        "stack_id": np.arange(stack_base, next_id, dtype=np.int64),
        "parent_id": pa.array(parent, mask=parent < 0),
        "frame_id": np.concatenate(stack_frame) if stack_frame else np.array([], np.int64),
    })
    # Each chain's stack is the one of its leaf (its last row, root first).
    leaf_rows = np.r_[starts[1:] - 1, len(ids_o) - 1] if len(starts) else starts
    return ChainTree(ids_o[starts], stack_of_row[leaf_rows], frame_o[leaf_rows], stacks,
                     frames, skipped + lost)


def samples(db: ExportDatabase) -> tuple[dict, ChainTree]:
    """Return (event columns, the samples' call-chain tree)."""
    db.require(SAMPLES, "start")
    ev = db.arrow(f"SELECT * FROM {SAMPLES} ORDER BY id")
    tree = chain_tree(db, CALLCHAINS)
    sample_id = col(ev, "id").fill_null(-1).to_numpy(zero_copy_only=False)
    has_chain, leaf, leaf_frame = tree.lookup(sample_id)
    frame_names = tree.frames["name"].combine_chunks()
    name = pa.DictionaryArray.from_arrays(pa.array(np.where(has_chain, leaf_frame, 0)
                                                   .astype(np.int32), mask=~has_chain),
                                          frame_names if len(frame_names) else
                                          pa.array([""], pa.string()))
    gtid = col(ev, "globalTid")
    n = ev.num_rows
    out = {
        "kind": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), ["sample"]),
        "category": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                                   ["cpu.sample"]),
        "name": pc.fill_null(name.cast(pa.string()), "[no call stack]").dictionary_encode(),
        "ts_ns": col(ev, "start"), "pid": decode_pid(gtid), "tid": decode_tid(gtid),
        "value": pa.array(np.ones(n)), "stack_id": pa.array(leaf, mask=~has_chain),
        "args": table_args(ev, ("cpu", "threadState", "cpuCycles")),
    }
    return out, tree
