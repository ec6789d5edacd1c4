"""Output targets: what a path names, and writing to it without destroying anything.

The rules (``docs/cli.md``, "Outputs"):

- ``-`` is standard output.
- A regular file (or a symlink to one, whose target is replaced and the link kept) is written
  to a temporary file beside it, fsynced, and renamed over it; an existing one only with
  ``force``. A new file gets the permissions the umask gives; a replaced one keeps its mode.
- A character device, FIFO or ``/dev/fd/N`` (or a symlink to one) is opened and streamed
  into, never renamed over. Block devices and sockets are refused.
- A directory output replaces an existing directory only with ``force`` and only when its
  writer says it wrote it (``DirectoryWriter.owns``): tracekit never deletes files it did not
  write.
- A failed, interrupted (SIGINT) or terminated (SIGTERM, see ``tracekit.cli``) write leaves no
  temporary file and no partial output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tracekit.errors import OutputExistsError, TracekitError, TraceWriteError, UsageError

STDIO = "-"


@dataclass(frozen=True)
class Target:
    """What an output path names once symlinks are followed.

    ``kind`` is ``"stdout"``, ``"new"`` (nothing there yet), ``"file"``, ``"directory"`` or
    ``"stream"`` (a character device or FIFO); ``path`` is where the bytes go (a symlink's
    target), ``given`` what the user wrote.
    """

    given: str
    path: Path
    kind: str
    mode: int | None = None

    @property
    def is_stream(self) -> bool:
        """Whether the output is written as a stream (stdout, a device, a FIFO)."""
        return self.kind in ("stdout", "stream")


def resolve_output(path: str | os.PathLike[str]) -> Target:
    """Classify the output ``path``; raise TraceWriteError for what must never be written."""
    given = os.fspath(path)
    if given == STDIO:
        return Target(given, Path(STDIO), "stdout")
    p = Path(given)
    try:
        real = Path(os.path.realpath(p, strict=False))
    except OSError as exc:  # a symlink loop, on Pythons that raise for it
        raise TraceWriteError(f"{given}: {exc.strerror or exc}") from exc
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if p.is_symlink() and not _dangling_target_ok(p):
            raise TraceWriteError(f"{given}: a symlink that cannot be followed") from None
        return Target(given, real, "new")
    except OSError as exc:
        if exc.errno is not None and exc.errno == 40:  # ELOOP
            raise TraceWriteError(f"{given}: symlink loop") from exc
        raise TraceWriteError(f"{given}: {exc.strerror or exc}") from exc
    if _names_a_descriptor(given) and not (stat.S_ISDIR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        # /dev/stdout, /dev/fd/N, /proc/self/fd/N: whatever the descriptor is open on (even a
        # file the shell redirected to) is written through it, never renamed over.
        return Target(given, p, "stream")
    if stat.S_ISREG(st.st_mode):
        return Target(given, real, "file", stat.S_IMODE(st.st_mode))
    if stat.S_ISDIR(st.st_mode):
        return Target(given, real, "directory")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return Target(given, p, "stream")
    what = "a block device" if stat.S_ISBLK(st.st_mode) else (
        "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    raise TraceWriteError(f"{given}: is {what}; tracekit writes only files, directories, "
                          "character devices and FIFOs")


def _names_a_descriptor(given: str) -> bool:
    absolute = os.path.abspath(given)
    return absolute.startswith(("/dev/", "/proc/"))


def _dangling_target_ok(link: Path) -> bool:
    """A dangling symlink may be written through when its target's folder exists."""
    try:
        target = Path(os.path.realpath(link))
    except OSError:
        return False
    return target.parent.is_dir() and not target.is_symlink()


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same existing file or directory."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_not_input(target: Target, inputs: list[str | os.PathLike[str]]) -> None:
    """Refuse an output that is one of the inputs (it would be destroyed by its own output)."""
    if target.kind not in ("file", "directory"):
        return
    for item in inputs:
        if os.fspath(item) != STDIO and same_file(target.path, item):
            raise UsageError(f"{target.given}: is also an input; write to another path")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def preflight(path: str | os.PathLike[str], *, force: bool = False, directory: bool = False,
              owns: Callable[[Path], bool] = lambda _: False,
              inputs: list[str | os.PathLike[str]] | None = None) -> Target:
    """Check that ``path`` may be written (a file, or with ``directory`` a directory of
    files), before any work is done; return its Target. Raises OutputExistsError when only
    ``force`` would allow it, TraceWriteError or UsageError when nothing would: an output
    that is one of ``inputs`` first, which ``force`` would not allow either."""
    target = resolve_output(path)
    if inputs:
        check_not_input(target, inputs)
    if directory:
        if target.is_stream:
            raise UsageError(f"{target.given}: this format is a directory of files; it cannot "
                             "be written to a stream")
        if target.kind == "file":
            raise TraceWriteError(f"{target.given}: exists and is a file, not a directory")
        if target.kind == "directory" and not owns(target.path):
            raise TraceWriteError(f"{target.given}: exists and is not a tracekit output; "
                                  "tracekit never deletes files it did not write")
    elif target.kind == "directory":
        raise TraceWriteError(f"{target.given}: is a directory; name a file")
    if target.kind in ("file", "directory") and not force:
        raise OutputExistsError(f"{target.given}: already exists; pass --force (-f) to "
                                "replace it")
    if target.kind in ("new", "file", "directory") and not target.path.parent.is_dir():
        raise TraceWriteError(f"{target.given}: directory {target.path.parent} does not exist")
    return target


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str], *, force: bool = False) -> Iterator[IO[bytes]]:
    """Yield a binary stream for the output ``path``, following the rules of this module.

    For a regular file the content replaces ``path`` only if the block succeeds; for stdout,
    a device or a FIFO the bytes go straight there.
    """
    target = preflight(path, force=force)
    if target.kind == "stdout":
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    if target.kind == "stream":
        try:
            stream = open(target.path, "wb", buffering=1 << 20)  # noqa: SIM115
        except OSError as exc:
            raise TraceWriteError(f"{target.given}: {exc.strerror or exc}") from exc
        with stream:
            yield stream
        return
    with _replacing_file(target) as stream:
        yield stream


def write_bytes(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """Write ``data`` to the output ``path`` (``-``: standard output) by ``open_output``'s
    rules; a failed write (a full disk, a quota) is a TraceWriteError naming the output, and a
    file output is left as it was."""
    try:
        with open_output(path, force=force) as stream:
            stream.write(data)
    except (TracekitError, BrokenPipeError):
        raise
    except OSError as exc:
        where = "standard output" if os.fspath(path) == "-" else os.fspath(path)
        raise TraceWriteError(f"{where}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _replacing_file(target: Target) -> Iterator[IO[bytes]]:
    directory = target.path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.path.name}.", suffix=".tmp",
                                   dir=directory)
    except OSError as exc:
        raise TraceWriteError(f"{target.given}: cannot create a file there: "
                              f"{exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, target.mode if target.mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        if target.kind == "new":
            _place_new(tmp, target)
        else:
            os.replace(tmp, target.path)
        _fsync_directory(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _place_new(tmp: str, target: Target) -> None:
    """Rename ``tmp`` to a path that did not exist, failing if one appeared meanwhile."""
    try:
        os.link(tmp, target.path)  # no-clobber: fails if the path exists by now
    except FileExistsError:
        raise OutputExistsError(f"{target.given}: appeared while writing; pass --force (-f) "
                                "to replace it") from None
    except OSError:  # no hard links on this file system: a plain rename
        os.replace(tmp, target.path)
        return
    os.unlink(tmp)


@contextlib.contextmanager
def open_output_directory(path: str | os.PathLike[str], *, force: bool = False,
                          owns: Callable[[Path], bool] = lambda _: False) -> Iterator[Path]:
    """Yield an empty directory that becomes the output ``path`` only if the block succeeds.

    An existing directory is replaced only with ``force`` and when ``owns(directory)`` says it
    is an output of the same writer; it is moved aside first and removed only after the new
    one is in place.
    """
    target = preflight(path, force=force, directory=True, owns=owns)
    parent = target.path.parent
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise TraceWriteError(f"{target.given}: cannot create a directory there: "
                              f"{exc.strerror or exc}") from exc
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        if target.kind == "directory":
            old = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.", suffix=".old",
                                        dir=parent))
            os.replace(target.path, old / "previous")
            os.replace(tmp, target.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target.path)
        _fsync_directory(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
