"""Memory the allocators hold free, handed back to the system between big steps."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pyarrow as pa


def release_free_memory() -> None:
    """Hand back to the system what Arrow's pool and the C heap hold free.

    Both keep freed pages for reuse, so a step that frees a large working set (a decoded
    document, a phase's temporaries) leaves the process's resident memory at its high point
    while the next step allocates more elsewhere. Call it between such steps, not in a loop:
    it walks the whole heap. The C heap is trimmed where the C library is glibc
    (``malloc_trim``); elsewhere only Arrow's pool is released.
    """
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes  # only where memory is released: a few ms of start-up otherwise

    try:  # the symbols the process has loaded, the C library's among them
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # none to look in, or a C library without it
        return None
