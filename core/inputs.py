"""Input files: existence checks, gzip detection by magic bytes, the head that readers sniff,
and the expansion of a run folder (or a glob pattern) into the traces inside it.

An input is a file, a directory (for multi-file formats), or a stream: ``-`` (standard input),
a FIFO, a character device or ``/dev/fd/N`` (``<(zcat x.json.gz)``). A stream is read once,
front to back; its first bytes are kept for sniffing and replayed to the reader.
"""

from __future__ import annotations

import errno
import glob
import gzip
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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


def decode_text(raw: bytes) -> tuple[str, int]:
    """``raw`` as UTF-8 text, invalid bytes replaced by U+FFFD, and how many lines held
    invalid bytes (for the reader to count, so that nothing is changed silently)."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    bad = 0
    for line in raw.split(b"\n"):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
    return raw.decode("utf-8", "replace"), bad


def _stat_problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (a link that points back to itself)"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)


@dataclass
class Expanded:
    """Inputs with every run folder replaced by the traces inside it (see ``expand``)."""

    paths: list[str] = field(default_factory=list)
    #: run folder (as given) -> files in it that were not read, each with the reason
    skipped: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per run folder with files left out: how many, and the first few."""
        out = []
        for folder, files in self.skipped.items():
            shown = ", ".join(f"{name} ({why})" for name, why in files[:3])
            more = f" and {len(files) - 3} more" if len(files) > 3 else ""
            out.append(f"{folder}: {len(files)} file{'s' if len(files) != 1 else ''} not read: "
                       f"{shown}{more}")
        return out


def expand(paths: Sequence[str | Path], recognises: Callable[[Source], bool]) -> Expanded:
    """Expand the inputs of a run: ``paths`` with each folder that ``recognises`` does not
    accept as one input (a folder of one trace per rank, not an nsys or rocprof output
    folder) replaced by the files inside it that it accepts, recursively, sorted by path with
    numbers by value (``rank-2`` before ``rank-10``); the files it does not accept are listed
    in ``skipped`` with why (hidden files and folders are not looked into).
    A path that does not exist but holds ``*``, ``?`` or ``[`` is a glob pattern (quoted on
    the command line, or from Python), expanded the same way.
    """
    out = Expanded()
    for given in map(os.fspath, paths):
        if given != STDIN and not os.path.lexists(given) and glob.has_magic(given):
            matches = sorted(glob.glob(given, recursive=True), key=_natural)
            if not matches:
                raise TraceReadError("no such file, and no file matches it as a pattern",
                                     path=given)
        else:
            matches = [given]
        for path in matches:
            if given == STDIN or not os.path.isdir(path) or recognises(Source(path)):
                out.paths.append(path)
                continue
            found, skipped = _walk(Path(path), recognises)
            if not found:  # not a run either: the reader (or detection) says what it is not
                out.paths.append(path)
                continue
            if skipped:
                out.skipped[path] = skipped
            out.paths.extend(found)
    return out


def _walk(top: Path, recognises: Callable[[Source], bool]) -> tuple[list[str],
                                                                      list[tuple[str, str]]]:
    """The inputs in run folder ``top`` and the files left out, with why."""
    found: list[str] = []
    skipped: list[tuple[str, str]] = []
    seen = {os.path.realpath(top)}
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            entries = sorted(folder.iterdir(), key=lambda p: _natural(p.name))
        except OSError as exc:
            raise TraceReadError(exc.strerror or str(exc), path=folder) from exc
        folders = []
        for entry in entries:
            name = os.fspath(entry.relative_to(top))
            if entry.name.startswith("."):
                skipped.append((name, "hidden"))
            elif entry.is_dir():
                if os.path.realpath(entry) in seen:
                    continue  # a link back into the run: its files are listed once
                seen.add(os.path.realpath(entry))
                if _recognised(entry, recognises, skipped, name):
                    found.append(os.fspath(entry))
                else:
                    folders.append(entry)
            elif not entry.is_file():
                skipped.append((name, "not a regular file"))
            elif _recognised(entry, recognises, skipped, name):
                found.append(os.fspath(entry))
        pending.extend(folders)
    # As ``find | sort`` lists them, numbers by value.
    found.sort(key=lambda p: [_natural(part) for part in Path(p).relative_to(top).parts])
    skipped.sort(key=lambda f: [_natural(part) for part in Path(f[0]).parts])
    return found, skipped


def _recognised(path: Path, recognises: Callable[[Source], bool],
                skipped: list[tuple[str, str]], name: str) -> bool:
    """Whether ``path`` is one input; a file that is not is added to ``skipped``."""
    try:
        source = Source(path)
    except TraceReadError as exc:
        skipped.append((name, exc.message))
        return False
    if recognises(source):
        return True
    if not source.is_dir:
        skipped.append((name, "no reader recognises it"))
    return False


def _natural(text: str) -> list[Any]:
    """Sort key that orders the numbers in names by value: ``rank-2`` before ``rank-10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
