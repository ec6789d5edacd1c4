"""Flow events (``ph: s/f/t``) bound to the slices they start or end at, and the correlation
that links device work to the host call that launched it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import LAUNCH_FLOWS
from tracekit.plugins.kineto.context import NO_TS, Context, Events
from tracekit.plugins.kineto.events import dictionary, where
from tracekit.plugins.kineto.fields import first_seen, ints, texts
from tracekit.toolkit import equals, starts_with

_OUTCOMES = ("skipped: flow endpoint matches no slice",
             "skipped: no usable id (not an integer)",
             "correlation of the slice it binds to",
             "links (the slices' correlation)",
             "skipped: flow id differs from the slice's correlation",
             "links (flow_id of the slice it binds to)",
             "skipped: the slice already has another flow")
_NO_SLICE, _NO_ID, _FILLED, _SAME, _DIFFERS, _LINKED, _TAKEN = range(len(_OUTCOMES))


def bind_flows(ctx: Context, table: pa.Table, flows: Events) -> pa.Table:
    """Attach s/f/t flow endpoints to the slice they bind to (same pid, tid and ts).

    Launch flows (ac2g) carry the correlation id, which becomes the slice's correlation
    where the tool did not record it; other flows (fwdbwd) become ``flow_id``.
    """
    n = table.num_rows
    flow_id = np.zeros(n, dtype=np.int64)
    has_flow = np.zeros(n, dtype=bool)
    if not len(flows):
        return table.append_column("flow_id", pa.array(flow_id, mask=~has_flow))
    out = ctx.out
    kind, kind_names, launch = _kinds(flows)
    ts, ok = ctx.times(flows.times("ts"), ctx.base_ns)
    pids, tids, ids_ = flows.field("pid"), flows.field("tid"), flows.field("id")
    del flows
    if not ok.all():
        for code, count in zip(*(a.tolist() for a in first_seen(kind[~ok], len(kind_names))),
                               strict=True):
            out.note(kind_names[code], NO_TS, count)
        pids, tids, ids_ = where(pids, ok), where(tids, ok), where(ids_, ok)
        kind, launch, ts = kind[ok], launch[ok], ts[ok]
    ids, _ = ints(ids_)
    id_ok = ids.is_valid().to_numpy(zero_copy_only=False)
    id_arr = ids.fill_null(-1).to_numpy()
    fpid = ctx.ids(pids, "pid", "flows")
    ftid = ctx.ids(tids, "tid", "flows")
    # The slices a flow can bind to, keyed by (pid, tid, ts) as one int64 shared with the
    # flows. Among slices starting at the same instant, the one whose correlation is the
    # flow's id (a launch and the work it launched), else the innermost (shortest) one; the
    # row breaks ties.
    rows = np.flatnonzero(equals(table["kind"], "slice").to_numpy())
    split = len(rows)
    dur = _ints(table["dur_ns"])[rows]
    corr_valid = table["correlation"].is_valid().to_numpy(zero_copy_only=False)
    corr = _ints(table["correlation"])
    pid, _ = _hash_codes(np.concatenate([_ints(table["_pid"])[rows], fpid]))
    tid, tids_ = _hash_codes(np.concatenate([_ints(table["_tid"])[rows], ftid]))
    thread, threads = _hash_codes(pid * tids_ + tid)
    del pid, tid, fpid, ftid
    key = _pairs(thread, threads, np.concatenate([_ints(table["ts_ns"])[rows], ts]))
    del thread
    found, code, bound, slice_code = _lookup(key[:split], dur, rows, key[split:])
    del key
    # Launch flows with an id: the slice with that correlation, where there is one.
    with_corr = corr_valid[rows]
    launches = np.flatnonzero(launch & id_ok & found)
    key = _pairs(np.concatenate([slice_code[with_corr], code[launches]]), len(slice_code),
                 np.concatenate([corr[rows[with_corr]], id_arr[launches]]))
    split = int(with_corr.sum())
    hit, _, best, _ = _lookup(key[:split], dur[with_corr], rows[with_corr], key[split:])
    bound[launches[hit]] = best[hit]
    del key, dur, slice_code, code
    corr = corr.copy()
    corr_valid = corr_valid.copy()
    ok = (bound >= 0) & id_ok
    outcome = np.full(len(bound), _NO_SLICE, dtype=np.int8)
    outcome[~id_ok] = _NO_ID
    # Launch flows: their id is the correlation id of the call and of the device work.
    lrows, lids = bound[ok & launch], id_arr[ok & launch]
    fill = ~corr_valid[lrows]
    corr[lrows[fill]] = lids[fill]
    corr_valid[lrows[fill]] = True
    same = corr[lrows] == lids
    outcome[np.flatnonzero(ok & launch)] = np.where(fill, _FILLED,
                                                    np.where(same, _SAME, _DIFFERS))
    # Other flows (fwdbwd): the slice's flow_id; a second, different id cannot be kept.
    other = np.flatnonzero(ok & ~launch)
    orows, oids = bound[other], id_arr[other]
    order = np.lexsort((oids, orows))
    first = np.ones(len(order), dtype=bool)
    first[1:] = orows[order][1:] != orows[order][:-1]
    keep_id = np.repeat(oids[order][first], np.diff(np.r_[np.flatnonzero(first),
                                                           len(order)]))
    accepted = np.empty(len(order), dtype=bool)
    accepted[order] = oids[order] == keep_id
    flow_id[orows[accepted]] = oids[accepted]
    has_flow[orows[accepted]] = True
    outcome[other] = np.where(accepted, _LINKED, _TAKEN)
    # Account per (phase:cat, outcome), each in order of first appearance.
    kind_rank, kinds_seen = _ranks(kind, len(kind_names))
    result_rank, results_seen = _ranks(outcome, len(_OUTCOMES))
    width = len(results_seen)
    codes, counts = np.unique(kind_rank * width + result_rank, return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist(), strict=True):
        out.note(kind_names[kinds_seen[code // width]],
                 _OUTCOMES[results_seen[code % width]], count)
    idx = table.schema.get_field_index("correlation")
    table = table.set_column(idx, "correlation", pa.array(corr, mask=~corr_valid))
    return table.append_column("flow_id", pa.array(flow_id, mask=~has_flow))


def _kinds(flows: Events) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each flow's ``ph:cat`` (as counted; a missing one reads "None") as a code into the
    names returned, and whether its cat (in lower case) is that of a launch flow; both
    worked out once per distinct (ph, cat)."""
    phs, cats = flows.field("ph"), flows.field("cat")
    if not isinstance(phs, pa.Array):
        phs, cats = texts(phs)[0], texts(cats)[0]
    phs, cats = dictionary(phs), dictionary(cats)
    ph_text = ["None", *phs.dictionary.cast(pa.string()).to_pylist()]
    cat_text = ["None", *cats.dictionary.cast(pa.string()).to_pylist()]
    launch_cat = np.r_[False, pc.is_in(pc.utf8_lower(cats.dictionary.cast(pa.string())),
                                       pa.array(sorted(LAUNCH_FLOWS))).to_numpy(
        zero_copy_only=False)]
    cat_code = _codes(cats)
    pair = _codes(phs) * len(cat_text) + cat_code
    distinct, inverse = np.unique(pair, return_inverse=True)
    width = len(cat_text)
    names = [f"{ph_text[p // width]}:{cat_text[p % width]}" for p in distinct.tolist()]
    unique_names = list(dict.fromkeys(names))
    position = {name: i for i, name in enumerate(unique_names)}
    code = np.array([position[name] for name in names], dtype=np.int64)
    return code[inverse.reshape(-1)], unique_names, launch_cat[cat_code]


def _codes(values: pa.DictionaryArray) -> np.ndarray:
    """Dictionary codes plus one (0 for null)."""
    return values.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column as int64 numpy values (0 where null)."""
    return column.fill_null(0).to_numpy().astype(np.int64, copy=False)


def _hash_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes of the distinct values (hashed, in order of first appearance)."""
    codes = pc.dictionary_encode(pa.array(values, type=pa.int64()))
    return codes.indices.to_numpy().astype(np.int64), len(codes.dictionary)


def _pairs(major: np.ndarray, count: int, minor: np.ndarray) -> np.ndarray:
    """A distinct int64 per distinct (major, minor) pair, ``major`` being codes below
    ``count``: the minor value's offset from the least, or where that would overflow, its
    rank among the distinct minor values."""
    if not len(minor):
        return np.zeros(0, dtype=np.int64)
    low, high = int(minor.min()), int(minor.max())
    if count * (high - low + 1) >= 2**63:
        distinct, minor = np.unique(minor, return_inverse=True)
        low, high = 0, len(distinct) - 1
    return major * (high - low + 1) + (minor.reshape(-1) - low)


def _lookup(keys: np.ndarray, dur: np.ndarray, rows: np.ndarray, wanted: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each ``wanted`` key: whether a row has it, the rank of that key among the rows'
    keys, and of the rows with that key the one of least ``dur``, then least row (-1 where
    none); and each row's key rank. ``rows`` ascend. One sort of the keys (mostly in order
    already: a stable sort takes them as runs), a binary search per wanted key."""
    if not len(keys):
        none = np.full(len(wanted), -1, dtype=np.int64)
        return np.zeros(len(wanted), dtype=bool), none, none.copy(), none[:0]
    order = np.argsort(keys, kind="stable")  # within a key, rows ascend
    ordered = keys[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(first) - 1
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = group
    distinct = ordered[first]
    del ordered
    if len(distinct) == len(keys):
        best = rows[order]
    else:  # of each key's rows, the first of least dur
        by_key = dur[order]
        shortest = np.flatnonzero(by_key == np.minimum.reduceat(by_key, np.flatnonzero(
            first))[group])
        taken = np.ones(len(shortest), dtype=bool)
        taken[1:] = group[shortest][1:] != group[shortest][:-1]
        best = rows[order[shortest[taken]]]
    at = np.minimum(np.searchsorted(distinct, wanted), len(distinct) - 1)
    found = distinct[at] == wanted
    return found, np.where(found, at, -1), np.where(found, best[at], -1), rank


def _ranks(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each code's rank in order of first appearance, and the codes (below ``size``) in that
    order."""
    in_order, _ = first_seen(codes, size)
    rank = np.zeros(size, dtype=np.int64)
    rank[in_order] = np.arange(len(in_order))
    return rank[codes], in_order


def launching_pid(table: pa.Table, pid: np.ndarray, is_dev: np.ndarray) -> np.ndarray:
    """For each device row, the pid of the host API call with the same correlation (else -1);
    ``pid`` is each row's own."""
    corr = table["correlation"]
    valid = corr.is_valid().to_numpy(zero_copy_only=False)
    c = corr.fill_null(-1).to_numpy(zero_copy_only=False)
    is_api = starts_with(table["category"], "api.").to_numpy() & valid
    result = np.full(len(c), -1, dtype=np.int64)
    if not is_api.any():
        return result
    api_c, first = np.unique(c[is_api], return_index=True)
    api_pid = pid[is_api][first]
    want = is_dev & valid
    pos = np.searchsorted(api_c, c[want])
    pos = np.clip(pos, 0, len(api_c) - 1)
    hit = api_c[pos] == c[want]
    result[np.flatnonzero(want)[hit]] = api_pid[pos[hit]]
    return result
