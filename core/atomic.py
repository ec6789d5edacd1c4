"""Write outputs through a temporary file that is renamed into place only on success."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tracekit.errors import TraceWriteError


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[IO[bytes]]:
    """Yield a binary stream whose content replaces ``path`` only if the block succeeds.

    A failed or interrupted run leaves no partial file behind (and no temporary file).
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise TraceWriteError(f"{path}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TraceWriteError(f"{path}: cannot create a file there: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield an empty directory that replaces ``path`` only if the block succeeds."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise TraceWriteError(f"{path}: directory {parent} does not exist")
    if path.exists() and not path.is_dir():
        raise TraceWriteError(f"{path}: exists and is not a directory")
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=parent))
            os.replace(path, old / "previous")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
