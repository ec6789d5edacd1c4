"""The bottleneck's index of host ranges (the host context of GPU gaps) against brute force."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from tracekit.plugins.diagnosis.activity import Codes
from tracekit.plugins.diagnosis.gaps import HostRanges

HOST = ["host.op", "api.runtime", "host.python"]


@pytest.mark.slow
def test_host_ranges_during_a_window_equal_a_scan_of_every_row():
    rng = np.random.default_rng(1)
    for _ in range(8):
        n = int(rng.integers(10, 5000))
        ts = rng.integers(0, 10**6, n)
        # A few long ranges among short ones: the index scans the longest whole.
        dur = np.where(rng.random(n) < 0.02, rng.integers(0, 10**6, n), rng.integers(0, 2000, n))
        pid, tid = rng.integers(1, 3, n), rng.integers(1, 4, n)
        cat = rng.choice([*HOST, "gpu.kernel"], n)
        src = rng.choice(["a", "b"], n)
        events = pa.table({"source": pa.array(src).dictionary_encode(),
                           "category": pa.array(cat).dictionary_encode(),
                           "ts_ns": pa.array(ts), "dur_ns": pa.array(dur),
                           "pid": pa.array(pid), "tid": pa.array(tid)})
        ranges = HostRanges(SimpleNamespace(events=events, category=Codes(events["category"])))
        host = np.isin(cat, HOST)
        for _ in range(30):
            lo = int(rng.integers(0, 10**6))
            hi = lo + int(rng.integers(1, 50000))
            s, p, t = str(rng.choice(["a", "b"])), int(rng.integers(1, 3)), int(rng.integers(1, 4))
            same = bool(rng.random() < 0.5)
            thread = (tid == t) if same else (tid != t)
            want = np.flatnonzero(host & (src == s) & (pid == p) & thread & (ts < hi)
                                  & (ts + dur > lo))
            rows, starts, ends = ranges.during(s, p, lo, hi, t, same)
            assert np.array_equal(rows, want)
            assert np.array_equal(starts, ts[want])
            assert np.array_equal(ends, ts[want] + dur[want])
