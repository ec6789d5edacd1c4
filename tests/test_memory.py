"""Memory handed back between big steps (tracekit.toolkit.release_free_memory)."""

from __future__ import annotations

import numpy as np
import pytest
from tracekit.memory import _malloc_trim
from tracekit.toolkit import release_free_memory


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(_malloc_trim() is None, reason="the C library has no malloc_trim")
def test_free_heap_pages_go_back_to_the_system() -> None:
    # 192 MiB in 64 KiB blocks (below glibc's mmap threshold: on the heap), then all freed
    # but the last, which keeps the heap's top in place, so that free() alone returns none.
    blocks = [np.ones(8192) for _ in range(3072)]
    keep = blocks.pop()
    del blocks
    before = _rss_bytes()
    release_free_memory()
    after = _rss_bytes()
    assert before - after > 128 << 20, (before, after)
    assert keep.sum() == 8192

