"""Links between events that writers draw as flows: launch links from ``correlation``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads ids so that keys of different sources never collide."""
    with np.errstate(over="ignore"):
        x = x.astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def launch_links(events: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (key, linked, on_device).

    ``key`` identifies (source, pid, correlation): correlation ids are per process, so a host
    call and device work link only within one process of one input. ``linked`` is true where
    both a host row and a device row carry the key; ``on_device`` tells the two ends apart.
    """
    src = events["source"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    pid = events["pid"].fill_null(-1).to_numpy().astype(np.uint64)
    valid = events["correlation"].is_valid().to_numpy(zero_copy_only=False)
    corr = events["correlation"].fill_null(0).to_numpy().astype(np.uint64)
    on_device = events["device"].is_valid().to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):
        key = mix64(src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ mix64(pid) ^ corr)
    # Keys with both ends, by one sort of the rows that have one: np.intersect1d and np.isin
    # take a slow path on 100k+ distinct values (numpy 2.4).
    rows = np.flatnonzero(valid)
    linked = np.zeros(len(key), dtype=bool)
    if not len(rows):
        return key, linked, on_device
    order = rows[np.argsort(key[rows], kind="stable")]
    sorted_keys = key[order]
    group = np.cumsum(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) - 1
    device_end = on_device[order]
    has_device = np.zeros(group[-1] + 1, dtype=bool)
    has_host = np.zeros(group[-1] + 1, dtype=bool)
    has_device[group[device_end]] = True
    has_host[group[~device_end]] = True
    linked[order] = (has_device & has_host)[group]
    return key, linked, on_device
