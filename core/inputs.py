"""Input files: existence checks, gzip detection by magic bytes, and the head that readers sniff.

An input is a file, a directory (for multi-file formats), or a stream: ``-`` (standard input),
a FIFO, a character device or ``/dev/fd/N`` (``<(zcat x.json.gz)``). A stream is read once,
front to back; its first bytes are kept for sniffing and replayed to the reader.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tracekit.errors import TraceReadError

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
HEAD_SIZE = 64 * 1024
_CHUNK = 4 * 1024 * 1024


class _Replay(io.RawIOBase):
    """A raw stream that yields ``prefix`` and then the rest of ``rest``."""

    def __init__(self, prefix: bytes, rest: io.RawIOBase | io.BufferedIOBase) -> None:
        self._prefix = memoryview(prefix)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._rest.readinto(buffer)

    def close(self) -> None:
        self._rest.close()
        super().close()


class Source:
    """One input as readers see it: its path, whether it is gzip, and its first bytes.

    ``head`` holds up to 64 KiB of the (decompressed) content, for sniffing. An input can also
    be a directory (``is_dir``), for formats made of several files; its ``head`` is empty.
    ``is_stream`` inputs (stdin, FIFOs, devices) have no size and can be opened once; only
    readers that declare ``reads_streams`` are offered them.
    """

    def __init__(self, path: str | Path) -> None:
        given = os.fspath(path)
        self.is_dir = False
        self.is_stream = False
        self._stream: _Replay | None = None
        if given == STDIN:
            self.path = Path("<stdin>")
            self.name = "stdin"
            self._open_stream(sys.stdin.buffer)
            return
        self.path = Path(path)
        self.name = self.path.name
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise TraceReadError(_stat_problem(exc), path=self.path) from None
        if stat.S_ISDIR(st.st_mode):
            # A directory is one input for readers of multi-file formats; head stays empty.
            self.is_dir = True
            self.size, self.compression, self.head = 0, None, b""
            return
        if not stat.S_ISREG(st.st_mode):
            try:
                raw = open(self.path, "rb", buffering=0)  # noqa: SIM115 - kept for open()
            except OSError as exc:
                raise TraceReadError(exc.strerror or str(exc), path=self.path) from exc
            self._open_stream(raw)
            return
        try:
            self.size = st.st_size
            with open(self.path, "rb") as f:
                magic = f.read(2)
        except OSError as exc:
            raise TraceReadError(exc.strerror or str(exc), path=self.path) from exc
        if self.size == 0:
            raise TraceReadError("file is empty", path=self.path)
        self.compression = "gzip" if magic == GZIP_MAGIC else None
        self.head = self._read_head()

    def _open_stream(self, raw: io.RawIOBase | io.BufferedIOBase) -> None:
        self.is_stream = True
        self.size = 0
        prefix = bytearray()
        try:
            while len(prefix) < HEAD_SIZE and (chunk := raw.read(HEAD_SIZE - len(prefix))):
                prefix += chunk
        except OSError as exc:
            raise TraceReadError(exc.strerror or str(exc), path=self.path) from exc
        if not prefix:
            raise TraceReadError("is empty (nothing was read from it)", path=self.path)
        self.compression = "gzip" if prefix[:2] == GZIP_MAGIC else None
        self._stream = _Replay(bytes(prefix), raw)
        if self.compression:
            try:
                self.head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(
                    bytes(prefix), HEAD_SIZE)
            except zlib.error:
                self.head = b""
        else:
            self.head = bytes(prefix[:HEAD_SIZE])

    def _read_head(self) -> bytes:
        with self.open() as stream:
            try:
                return stream.read(HEAD_SIZE)
            except (EOFError, OSError, zlib.error):
                return b""  # unreadable beyond the start; read() reports the exact problem

    def _raw(self) -> IO[bytes]:
        if self.is_dir:
            raise TraceReadError("is a directory, not a trace file", path=self.path)
        if self.is_stream:
            if self._stream is None:
                raise TraceReadError("is a stream and was read already", path=self.path)
            stream, self._stream = self._stream, None
            return io.BufferedReader(stream, _CHUNK)
        return open(self.path, "rb")

    def open(self) -> IO[bytes]:
        """Open the content for reading, decompressed (once, for a stream)."""
        raw = self._raw()
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=raw, mode="rb")
        return raw

    def read_bytes(self, progress: Callable[[int, int], None] | None = None) -> bytes:
        """Return the whole decompressed content; ``progress(done, total)`` in file bytes."""
        out = io.BytesIO()
        with read_errors(self.path), self._raw() as raw:
            stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if self.compression else raw
            while chunk := stream.read(_CHUNK):
                out.write(chunk)
                if progress and not self.is_stream:
                    progress(raw.tell(), self.size)
        return out.getvalue()

    def __repr__(self) -> str:
        return f"Source({os.fspath(self.path)!r}, compression={self.compression!r})"


@contextmanager
def read_errors(path: Path, reader: str | None = None) -> Iterator[None]:
    """Turn what reading a (possibly gzipped) input raises into one TraceReadError naming
    ``path``: a truncated or corrupt gzip stream, or an OS error."""
    try:
        yield
    except EOFError as exc:
        raise TraceReadError("gzip data is truncated (the file ends early)", path=path,
                             reader=reader) from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceReadError(f"corrupt gzip data: {exc}", path=path, reader=reader) from exc
    except OSError as exc:
        raise TraceReadError(exc.strerror or str(exc), path=path, reader=reader) from exc


def _stat_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (a link that points back to itself)"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)
