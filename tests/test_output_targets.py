"""Outputs never destroy what the user did not ask to replace (issue 13).

Every case runs in a temporary folder with regular files, symlinks, FIFOs and pipes of its own;
no test points at a real device file.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import tracekit
from helpers import FIXTURES
from tracekit.errors import OutputExistsError, TraceWriteError, UsageError
from tracekit.outputs import resolve_output

TRACE = FIXTURES / "scenarios" / "item_sync.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace(registry):
    return tracekit.read(TRACE, registry=registry)


def _cli(*args: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          cwd=cwd, timeout=120, **kw)


def _no_temporaries(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_new_file_gets_the_permissions_of_the_umask(tmp_path, trace, registry):
    old = os.umask(0o027)
    try:
        tracekit.write(trace, tmp_path / "a.json", registry=registry)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640


def test_existing_file_is_replaced_only_with_force_and_keeps_its_mode(tmp_path, trace,
                                                                      registry):
    out = tmp_path / "a.pftrace"
    out.write_bytes(b"precious")
    out.chmod(0o604)
    with pytest.raises(OutputExistsError, match=r"a.pftrace: already exists; pass --force"):
        tracekit.write(trace, out, registry=registry)
    assert out.read_bytes() == b"precious"
    tracekit.write(trace, out, registry=registry, force=True)
    assert out.read_bytes()[:1] != b"p" and out.stat().st_size > 1000
    assert stat.S_IMODE(out.stat().st_mode) == 0o604
    _no_temporaries(tmp_path)


@pytest.mark.slow  # runs the CLI in a new process
def test_cli_refuses_an_existing_output_before_reading(tmp_path):
    out = tmp_path / "a.pftrace"
    out.write_bytes(b"precious")
    proc = _cli("convert", str(TRACE), "-o", str(out))
    assert proc.returncode == 1
    assert proc.stderr.decode().strip() == (f"error: {out}: already exists; pass --force (-f) "
                                            "to replace it")
    assert out.read_bytes() == b"precious"
    assert _cli("convert", str(TRACE), "-o", str(out), "-f", "-q").returncode == 0
    assert out.read_bytes()[:8] != b"precious"


def test_symlink_to_a_file_replaces_the_target_and_keeps_the_link(tmp_path, trace, registry):
    target = tmp_path / "real.json"
    target.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    tracekit.write(trace, link, registry=registry, force=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes().startswith(b'{"schemaVersion"')


def test_dangling_symlink_creates_its_target(tmp_path, trace, registry):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "made.json")
    tracekit.write(trace, link, registry=registry)
    assert link.is_symlink() and (tmp_path / "made.json").stat().st_size > 1000


def _drain(path: str, into: list[bytes]) -> threading.Thread:
    def run() -> None:
        with open(path, "rb") as f:
            into.append(f.read())
    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("through_link", [False, True])
def test_fifo_output_is_streamed_into_never_replaced(tmp_path, trace, registry, through_link):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = fifo
    if through_link:
        out = tmp_path / "link.json"
        out.symlink_to(fifo)
    got: list[bytes] = []
    reader = _drain(str(fifo), got)
    tracekit.write(trace, out, format="chrome-json", registry=registry)
    reader.join(10)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert not through_link or out.is_symlink()
    expected = tmp_path / "expected.json"
    tracekit.write(trace, expected, registry=registry)
    assert got == [expected.read_bytes()]
    _no_temporaries(tmp_path)


def test_dev_fd_output_writes_through_the_descriptor(tmp_path, trace, registry):
    read_fd, write_fd = os.pipe()
    path = f"/dev/fd/{write_fd}"
    assert resolve_output(path).kind == "stream"
    got: list[bytes] = []
    with os.fdopen(read_fd, "rb") as r:
        thread = threading.Thread(target=lambda: got.append(r.read()))
        thread.start()
        tracekit.write(trace, path, format="chrome-json", registry=registry)
        os.close(write_fd)
        thread.join(10)
    assert got[0].startswith(b'{"schemaVersion"')


def test_unrelated_directory_is_never_replaced(tmp_path, trace, registry):
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    for force in (False, True):
        with pytest.raises(TraceWriteError, match="is not a tracekit output; tracekit never "
                                                  "deletes files it did not write"):
            tracekit.write(trace, folder, format="parquet", registry=registry, force=force)
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    with pytest.raises(TraceWriteError, match=r"a\.pftrace: is a directory; name a file"):
        (tmp_path / "a.pftrace").mkdir()
        tracekit.write(trace, tmp_path / "a.pftrace", registry=registry, force=True)


def test_tracekit_dataset_is_replaced_only_with_force(tmp_path, trace, registry):
    out = tmp_path / "t.parquet"
    tracekit.write(trace, out, registry=registry)
    with pytest.raises(OutputExistsError):
        tracekit.write(trace, out, registry=registry)
    tracekit.write(trace, out, registry=registry, force=True)
    assert tracekit.read(out, registry=registry).events.num_rows == trace.events.num_rows
    (out / "notes.txt").write_text("mine")  # no longer only what tracekit wrote
    with pytest.raises(TraceWriteError, match="not a tracekit output"):
        tracekit.write(trace, out, registry=registry, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    _no_temporaries(tmp_path)


@pytest.mark.slow  # runs the CLI in a new process
def test_output_that_is_an_input_is_refused(tmp_path):
    source = tmp_path / "in.json"
    source.write_bytes(TRACE.read_bytes())
    link = tmp_path / "alias.json"
    link.symlink_to(source)
    before = source.read_bytes()
    for out in (source, link):
        proc = _cli("convert", str(source), "-o", str(out), "--to", "chrome-json", "-f")
        assert proc.returncode == 2
        assert proc.stderr.decode().strip() == (f"error: {out}: is also an input; write to "
                                                "another path")
    assert source.read_bytes() == before


def test_stdout_output_needs_a_format(tmp_path, trace, registry):
    with pytest.raises(UsageError, match="-o - writes to standard output: pass --to FORMAT"):
        tracekit.convert(TRACE, "-", registry=registry)


@pytest.mark.slow  # runs the CLI in a new process
def test_dash_writes_standard_output(tmp_path, trace, registry):
    proc = _cli("convert", str(TRACE), "-o", "-", "--to", "chrome-json", "-q")
    expected = tmp_path / "e.json"
    tracekit.write(trace, expected, registry=registry)
    assert proc.returncode == 0 and proc.stdout == expected.read_bytes()
    assert not (tmp_path / "-").exists() and not Path("-").exists()


@pytest.mark.slow  # runs the CLI in a new process
def test_closed_pipe_on_stdout_ends_quietly(tmp_path):
    proc = subprocess.run(
        f"{sys.executable} -m tracekit convert {TRACE} -o - --to chrome-json -q | head -c 10",
        shell=True, capture_output=True, timeout=120)
    assert proc.stdout == b'{"schemaVe' and b"Traceback" not in proc.stderr


_SLOW_WRITER = textwrap.dedent("""
    import sys, time
    import tracekit
    from tracekit import pipeline
    from tracekit.registry import load_registry

    class Slow(tracekit.Writer):
        name = "slow"
        extensions = (".slow",)
        def write(self, trace, stream):
            stream.write(b"partial")
            stream.flush()
            time.sleep(60)
            return tracekit.WriteResult()

    class Plugin:
        @tracekit.hookimpl
        def register_writers(self, register):
            register(Slow)

    pipeline._default_registry = load_registry(dists={"tracekit"}, environ={},
                                               extra=[Plugin()])
    from tracekit.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slow  # runs the CLI in a new process
@pytest.mark.parametrize("sig,code,message", [(signal.SIGTERM, 143, "error: terminated"),
                                              (signal.SIGINT, 130, "error: interrupted")])
def test_signals_leave_no_temporary_file(tmp_path, sig, code, message):
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_WRITER)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), "convert", str(TRACE), "-o",
                             "out.slow", "-q"], cwd=work, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(work.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p.name.endswith(".tmp") for p in work.iterdir()] == [True]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert err.decode().strip() == message
    assert list(work.iterdir()) == []


def test_device_paths_are_classified_as_streams_without_writing(tmp_path):
    """Only the classification is checked here: nothing is written to a real device."""
    assert resolve_output("/dev/null").kind == "stream"
    assert resolve_output("/dev/stdout").kind == "stream"
    link = tmp_path / "out.pftrace"
    link.symlink_to("/dev/null")
    target = resolve_output(link)
    assert target.kind == "stream" and target.path == link
    assert resolve_output("-").kind == "stdout"


def test_a_failed_report_write_is_one_error_and_keeps_the_old_file(tmp_path, monkeypatch,
                                                                  capsys):
    """A full disk while a report is written (simulated: the file's fsync fails with ENOSPC):
    one error naming the output, the file it would have replaced as it was, no temporary file
    left; the same for the command, as one line and exit code 1."""
    import errno

    from tracekit.cli import main
    from tracekit.outputs import write_bytes

    out = tmp_path / "report.txt"
    out.write_text("the report before")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(TraceWriteError, match=r"report\.txt: No space left on device$"):
        write_bytes(out, b"a new report", force=True)
    assert out.read_text() == "the report before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]
    capsys.readouterr()
    code = main(["analyze", str(FIXTURES / "torch-cpu" / "adamw_cpu.pt.trace.json.gz"), "-o",
                 str(out), "-f", "-q"])
    assert code == 1 and out.read_text() == "the report before"
    assert capsys.readouterr().err.splitlines() == [
        f"error: {out}: No space left on device"]
