"""Flow events (``ph: s/f/t``) bound to the slices they start or end at, and the correlation
that links device work to the host call that launched it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.plugins.kineto.categories import LAUNCH_FLOWS
from tracekit.plugins.kineto.context import NO_TS, Context, Events
from tracekit.plugins.kineto.fields import ints, texts


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
    kinds, cats = _kinds(flows)
    ts, ok = ctx.times(flows.times("ts"), ctx.base_ns)
    if not ok.all():
        ctx.count(None, kinds.to_pylist(), ~ok, NO_TS)
        flows, ts = flows.where(ok), ts[ok]
        kinds, cats = kinds.filter(pa.array(ok)), cats.filter(pa.array(ok))
    launch = pc.is_in(cats, pa.array(sorted(LAUNCH_FLOWS))).to_numpy(zero_copy_only=False)
    ids, _ = ints(flows.field("id"))
    id_ok = ids.is_valid().to_numpy(zero_copy_only=False)
    id_arr = ids.fill_null(-1).to_numpy()
    ftab = pa.table({
        "_pid": ctx.ids(flows.field("pid"), "pid", "flows"),
        "_tid": ctx.ids(flows.field("tid"), "tid", "flows"),
        "ts_ns": pa.array(ts, type=pa.int64()),
        "_flow": pa.array(np.arange(len(flows), dtype=np.int64)),
        "_fid": pa.array(id_arr),
        "_launch": pa.array(launch, type=pa.bool_()),
    })
    slices = pa.table({
        "_pid": table["_pid"], "_tid": table["_tid"], "ts_ns": table["ts_ns"],
        "_row": pa.array(np.arange(n, dtype=np.int64)),
        "_dur": pc.fill_null(table["dur_ns"], 0),
        "_kind": table["kind"].cast(pa.string()),
        "_corr": table["correlation"],
    }).filter(pc.equal(pc.field("_kind"), "slice"))
    # Among slices starting at the same instant, the one whose correlation is the flow's
    # id (a launch and the work it launched), else the innermost (shortest) one; the row
    # breaks ties. Each join is against one slice per key, so that a file repeating the
    # same events many times cannot multiply the rows.
    at = ["_pid", "_tid", "ts_ns"]
    bound = np.full(len(flows), -1, dtype=np.int64)
    innermost = _first_per_key(slices, at, ["_dur", "_row"])
    _bind(bound, ftab.join(innermost.select([*at, "_row"]), keys=at, join_type="inner"))
    by_corr = _first_per_key(slices.filter(pc.is_valid(slices["_corr"])),
                             [*at, "_corr"], ["_dur", "_row"])
    launches = ftab.filter(pc.and_(ftab["_launch"], pa.array(id_ok))) \
        .rename_columns({"_fid": "_corr"})
    _bind(bound, launches.join(by_corr.select([*at, "_corr", "_row"]),
                               keys=[*at, "_corr"], join_type="inner"))
    corr_valid = table["correlation"].is_valid().to_numpy(zero_copy_only=False).copy()
    corr = table["correlation"].fill_null(0).to_numpy().copy()
    ok = (bound >= 0) & id_ok
    outcome = np.full(len(flows), "skipped: flow endpoint matches no slice", dtype=object)
    outcome[~id_ok] = "skipped: no usable id (not an integer)"
    # Launch flows: their id is the correlation id of the call and of the device work.
    lrows, lids = bound[ok & launch], id_arr[ok & launch]
    fill = ~corr_valid[lrows]
    corr[lrows[fill]] = lids[fill]
    corr_valid[lrows[fill]] = True
    same = corr[lrows] == lids
    outcome[np.flatnonzero(ok & launch)] = np.where(
        fill, "correlation of the slice it binds to",
        np.where(same, "links (the slices' correlation)",
                 "skipped: flow id differs from the slice's correlation"))
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
    outcome[other] = np.where(accepted, "links (flow_id of the slice it binds to)",
                              "skipped: the slice already has another flow")
    # Account per (phase:cat, outcome) without a Python tuple per flow.
    kind = kinds.dictionary_encode()
    result = pa.array(outcome, type=pa.string()).dictionary_encode()
    width = len(result.dictionary)
    combined = kind.indices.to_numpy().astype(np.int64) * width + \
        result.indices.to_numpy().astype(np.int64)
    codes, counts = np.unique(combined, return_counts=True)
    kinds, results = kind.dictionary.to_pylist(), result.dictionary.to_pylist()
    for code, count in zip(codes.tolist(), counts.tolist(), strict=True):
        out.note(kinds[code // width], results[code % width], count)
    idx = table.schema.get_field_index("correlation")
    table = table.set_column(idx, "correlation", pa.array(corr, mask=~corr_valid))
    return table.append_column("flow_id", pa.array(flow_id, mask=~has_flow))

def _kinds(flows: Events) -> tuple[pa.Array, pa.Array]:
    """Each flow's ``ph:cat`` (as counted; a missing one reads "None") and its cat in lower
    case (empty when missing)."""
    phs, cats = flows.field("ph"), flows.field("cat")
    if isinstance(phs, pa.Array):
        phs, cats = phs.cast(pa.string()), cats.cast(pa.string())
    else:
        phs = pa.array(texts(phs)[0], type=pa.string())
        cats = pa.array(texts(cats)[0], type=pa.string())
    kinds = pc.binary_join_element_wise(phs.fill_null("None"), cats.fill_null("None"), ":")
    return kinds, pc.utf8_lower(cats.fill_null(""))


def _first_per_key(table: pa.Table, keys: list[str], order: list[str]) -> pa.Table:
    """The first row of each distinct ``keys`` value, ``order`` deciding which is first."""
    table = table.sort_by([(k, "ascending") for k in [*keys, *order]])
    first = np.ones(table.num_rows, dtype=bool)
    if table.num_rows > 1:
        same = np.ones(table.num_rows - 1, dtype=bool)
        for key in keys:
            column = table[key].to_numpy()
            same &= column[1:] == column[:-1]
        first[1:] = ~same
    return table.filter(pa.array(first))


def _bind(bound: np.ndarray, joined: pa.Table) -> None:
    """Set ``bound[flow] = row`` for each (flow, row) pair of a join."""
    bound[joined["_flow"].to_numpy()] = joined["_row"].to_numpy()


def launching_pid(table: pa.Table, is_dev: np.ndarray) -> np.ndarray:
    """For each device row, the pid of the host API call with the same correlation (else -1)."""
    corr = table["correlation"]
    valid = corr.is_valid().to_numpy(zero_copy_only=False)
    c = corr.fill_null(-1).to_numpy(zero_copy_only=False)
    pid = table["_pid"].fill_null(-1).to_numpy()
    cat = table["category"].cast(pa.string())
    is_api = pc.starts_with(cat, "api.").to_numpy(zero_copy_only=False) & valid
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
