"""Input files: existence checks, gzip detection by magic bytes, and the head that readers sniff."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tracekit.errors import TraceReadError

GZIP_MAGIC = b"\x1f\x8b"
HEAD_SIZE = 64 * 1024
_CHUNK = 4 * 1024 * 1024


class Source:
    """One input as readers see it: its path, whether it is gzip, and its first bytes.

    ``head`` holds up to 64 KiB of the (decompressed) content, for sniffing. An input can also
    be a directory (``is_dir``), for formats made of several files; its ``head`` is empty.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = self.path.name
        if not self.path.exists():
            raise TraceReadError("no such file", path=self.path)
        self.is_dir = self.path.is_dir()
        if self.is_dir:
            # A directory is one input for readers of multi-file formats; head stays empty.
            self.size, self.compression, self.head = 0, None, b""
            return
        try:
            self.size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                magic = f.read(2)
        except OSError as exc:
            raise TraceReadError(exc.strerror or str(exc), path=self.path) from exc
        if self.size == 0:
            raise TraceReadError("file is empty", path=self.path)
        self.compression = "gzip" if magic == GZIP_MAGIC else None
        self.head = self._read_head()

    def _read_head(self) -> bytes:
        with self.open() as stream:
            try:
                return stream.read(HEAD_SIZE)
            except (EOFError, OSError, zlib.error):
                return b""  # unreadable beyond the start; read() reports the exact problem

    def open(self) -> IO[bytes]:
        """Open the content for reading, decompressed."""
        if self.is_dir:
            raise TraceReadError("is a directory, not a trace file", path=self.path)
        raw = open(self.path, "rb")  # noqa: SIM115 - the caller closes the returned stream
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=raw, mode="rb")
        return raw

    def read_bytes(self, progress: Callable[[int, int], None] | None = None) -> bytes:
        """Return the whole decompressed content; ``progress(done, total)`` in file bytes."""
        if self.is_dir:
            raise TraceReadError("is a directory, not a trace file", path=self.path)
        out = io.BytesIO()
        try:
            with open(self.path, "rb") as raw:
                stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if self.compression else raw
                while chunk := stream.read(_CHUNK):
                    out.write(chunk)
                    if progress:
                        progress(raw.tell(), self.size)
        except EOFError as exc:
            raise TraceReadError("gzip data is truncated (the file ends early)",
                                 path=self.path) from exc
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise TraceReadError(f"corrupt gzip data: {exc}", path=self.path) from exc
        except OSError as exc:
            raise TraceReadError(exc.strerror or str(exc), path=self.path) from exc
        return out.getvalue()

    def __repr__(self) -> str:
        return f"Source({os.fspath(self.path)!r}, compression={self.compression!r})"
