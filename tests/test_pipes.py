"""tracekit in a pipe: ``-``, FIFOs and ``/dev/fd/N`` as inputs, read once as streams (issue 13)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.errors import UsageError

TORCH = FIXTURES / "scenarios" / "item_sync.pt.trace.json.gz"
PERF = FIXTURES / "perf-recorded" / "burn.perf"


def _cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], input=stdin,
                          capture_output=True, cwd=cwd, timeout=120)


def _events_without_source(trace: tracekit.Trace) -> pa.Table:
    return trace.events.drop_columns(["source"])


@pytest.mark.slow  # runs the CLI in a new process
@pytest.mark.parametrize("path,compressed", [(TORCH, True), (TORCH, False), (PERF, False)])
def test_stdin_reads_like_the_file(tmp_path, registry, path, compressed):
    data = path.read_bytes()
    if path.suffix == ".gz" and not compressed:
        data = gzip.decompress(data)
    out = tmp_path / "out.parquet"
    proc = _cli("convert", "-", "-o", str(out), "-q", stdin=data)
    assert proc.returncode == 0, proc.stderr
    piped = tracekit.read(out, registry=registry)
    direct = tracekit.read(path, registry=registry)
    assert piped.sources == ["stdin"]
    assert _events_without_source(piped).equals(_events_without_source(direct))


@pytest.mark.slow  # runs the CLI in a new process
def test_perf_script_piped_to_folded_on_stdout(registry, tmp_path):
    proc = _cli("convert", "-", "-o", "-", "--to", "folded", "-q", stdin=PERF.read_bytes())
    assert proc.returncode == 0, proc.stderr
    expected = tmp_path / "e.folded"
    tracekit.write(tracekit.read(PERF, registry=registry), expected, registry=registry)
    assert proc.stdout == expected.read_bytes() and proc.stdout.count(b"\n") == 3


@pytest.mark.slow  # runs the CLI in a new process
def test_process_substitution_input(tmp_path, registry):
    out = tmp_path / "out.parquet"
    proc = subprocess.run(["bash", "-c", f"{sys.executable} -m tracekit convert "
                           f"<(zcat {TORCH}) -o {out} -q"], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    direct = tracekit.read(TORCH, registry=registry)
    assert tracekit.read(out, registry=registry).events.num_rows == direct.events.num_rows


def test_fifo_input(tmp_path, registry):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(TORCH.read_bytes())
    thread = threading.Thread(target=feed)
    thread.start()
    trace = tracekit.read(fifo, registry=registry)
    thread.join(10)
    direct = tracekit.read(TORCH, registry=registry)
    assert _events_without_source(trace).equals(_events_without_source(direct))


@pytest.mark.slow  # runs the CLI in a new process
def test_stream_into_a_reader_that_needs_a_file():
    proc = _cli("analyze", "-", "--from", "nsys", stdin=b"SQLite format 3\0" + bytes(100))
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith(
        "error: <stdin>: the nsys reader needs a file it can open by name; save the input to "
        "a file first (readers of streams: ")


@pytest.mark.slow  # runs the CLI in a new process
def test_stream_that_no_reader_recognises():
    proc = _cli("analyze", "-", stdin=b"\x00\x01binary, no format" + bytes(100))
    assert proc.returncode == 1
    line = proc.stderr.decode().strip()
    assert line.startswith("error: <stdin>: no reader recognises this stream (from a stream "
                           "only formats that are read front to back: ")
    assert "kineto" in line and "perf" in line and "\n" not in line


@pytest.mark.slow  # runs the CLI in a new process
def test_a_stream_of_a_format_read_from_files_only_says_to_save_it():
    """An SQLite export or a rocprof CSV piped in: the error says what it looks like and to
    save it to a file, not to pass --from (which would say the same after a second try)."""
    proc = _cli("analyze", "-", stdin=b"SQLite format 3\0" + bytes(100))
    assert proc.returncode == 2  # usage, as for --from nsys and for rocprof's CSV below
    assert proc.stderr.decode().strip() == (
        "error: <stdin>: this looks like Nsight Systems SQLite export (nsys export --type "
        "sqlite), which tracekit reads from a file only (its reader 'nsys' seeks): save the "
        "stream to a file and give that")
    csv = shared_path("rocprof-v3", "rocprofiler-sdk-docs", "kernel_trace_2024-07.csv")
    proc = _cli("analyze", "-", stdin=csv.read_bytes())
    assert proc.returncode == 2
    assert proc.stderr.decode().strip().startswith(
        "error: <stdin>: rocprof CSV is read from its file or folder (with the other files of "
        "its run), not from standard input; save it to a file first")


@pytest.mark.slow  # runs the CLI in a new process
def test_empty_stdin():
    proc = _cli("analyze", "-", stdin=b"")
    assert proc.returncode == 1
    assert proc.stderr.decode().strip() == "error: <stdin>: is empty (nothing was read from it)"


def test_dash_twice_is_refused(registry):
    with pytest.raises(UsageError, match=r"'-' \(standard input\) is given more than once"):
        tracekit.read(["-", "-"], registry=registry)


@pytest.mark.slow  # runs the CLI in a new process
def test_rocprofv3_json_from_stdin(tmp_path, registry):
    from helpers import shared_path

    path = shared_path("bonus", "rocprofv3-json", "tracelens_908_results.json.gz")
    out = tmp_path / "out.parquet"
    proc = _cli("convert", "-", "-o", str(out), "-q", stdin=path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    piped = tracekit.read(out, registry=registry)
    assert piped.events.num_rows == tracekit.read(path, registry=registry).events.num_rows


@pytest.mark.slow  # runs the CLI in a new process
@pytest.mark.parametrize("run", ["shashank_mi300a", "kokkos_2021_gfx906"])
def test_rocprof_v1_json_from_stdin(tmp_path, registry, run):
    """A rocprof v1 results.json piped in reads as the file does (it read as a generic
    Chrome trace with no GPU activity before), and a rocprof CSV on stdin is still refused."""
    from helpers import shared_path

    path = shared_path("rocprof-v1", run, "results.json")
    out = tmp_path / "out.parquet"
    proc = _cli("convert", "-", "-o", str(out), "-q", stdin=path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    piped = tracekit.read(out, registry=registry)
    direct = tracekit.read(path, registry=registry)
    assert piped.metadata["sources"]["stdin"]["format"] == "rocprof v1 results.json"
    assert _events_without_source(piped).equals(_events_without_source(direct))
    if run == "shashank_mi300a":
        csv = shared_path("rocprof-v1", run, "output_vec_add_gpu.csv").read_bytes()
        proc = _cli("analyze", "-", "--from", "rocprof", stdin=csv)
        assert proc.returncode == 2  # as for any reader that needs a file
        assert proc.stderr.decode().strip() == (
            "error: <stdin>: rocprof CSV is read from its file or folder (with the other files "
            "of its run), not from standard input; save it to a file first (rocprof's v1 "
            "results.json can be piped)")
