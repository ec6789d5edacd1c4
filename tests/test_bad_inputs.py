"""The bad-input corpus (fixtures/bad): every damaged file is read and either recovered from
or refused with one clear line, never a traceback, a catch-all error, a hang or a change to
the input; the command line exits 1 with that one line and writes nothing.

Every corpus entry is read in the harness worker (tests/badinput.py: its own process, 4 GiB of
address space, 10 s), once as its reader and once with the format detected; a representative
set also goes through ``tracekit convert`` and ``tracekit analyze`` as a user runs them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from badinput import (
    BAD,
    CATCH_ALL,
    MESSAGE_LIMIT,
    TIMEOUT_S,
    WALL_FACTOR,
    check,
    load_index,
    run_cli,
)
from helpers import sweep

INDEX = load_index()
READERS = ("kineto", "nsys", "perf", "vtune", "rocprof", "rocprof-db", "rocprofv3-json",
           "parquet")
# The fast run (-m "not slow") reads, per reader, the first entry of each expectation (ok, any,
# error); the whole corpus runs without it.
SAMPLE = {min(k for k, m in INDEX.items() if m["reader"] == r and m["expect"] == e)
          for r in READERS for e in ("ok", "any", "error")}


@pytest.fixture
def short_tmp():
    """A new folder with a short path: tracekit cuts tokens over 80 characters out of its
    messages, so a long pytest path would hide the file name (checked apart, below)."""
    folder = Path(tempfile.mkdtemp(prefix="tk-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _copy(key: str, tmp_path: Path) -> Path:
    """The corpus entry ``key`` copied into its own folder under ``tmp_path``."""
    src = BAD / key
    folder = tmp_path / "in"
    folder.mkdir()
    dst = folder / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def _make_bad():
    spec = importlib.util.spec_from_file_location("make_bad", BAD / "make_bad.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the corpus itself ------------------------------------------------------------------------

def test_corpus_matches_its_script_and_stays_small():
    entries, index = _make_bad().build()
    assert index == INDEX, "fixtures/bad is stale: run python fixtures/bad/make_bad.py"
    for key, data in entries.items():
        path = BAD / key
        assert path.exists(), f"{key} is missing: run python fixtures/bad/make_bad.py"
        if index[key]["stable"]:
            assert path.read_bytes() == data, f"{key} differs from what make_bad.py writes"
    on_disk = {str(p.relative_to(BAD)) for p in BAD.glob("*/*") if p.parent.name in READERS}
    assert on_disk == set(entries), "files in fixtures/bad that make_bad.py does not write"
    size = sum(p.stat().st_size for p in BAD.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts)
    assert size < 2_000_000, f"the corpus grew to {size:,} bytes"
    assert set(READERS) == {m["reader"] for m in INDEX.values()}
    for reader in READERS:
        kinds = {m["expect"] for m in INDEX.values() if m["reader"] == reader}
        assert {"ok", "any", "error"} <= kinds, reader


# -- every entry, in the worker --------------------------------------------------------------

@pytest.mark.parametrize("key", sweep(sorted(INDEX), *SAMPLE))
def test_corpus_entry(key, short_tmp):
    meta = INDEX[key]
    path = _copy(key, short_tmp)
    _, found = check(path, meta["reader"], expect=meta["expect"], mentions=meta["mentions"],
                     noted=meta["noted"])
    detected_expect = "ok" if meta["expect"] == "ok" else "any"
    _, detected = check(path, None, expect=detected_expect, write=False, analyze=False)
    found += [f"(format detected) {p}" for p in detected]
    assert not found, f"{key} ({meta['damage']}):\n  " + "\n  ".join(found)


# -- links and directories the corpus cannot hold (git keeps neither well) --------------

def _loops(tmp_path: Path) -> dict[str, Path]:
    self_loop = tmp_path / "loop.pt.trace.json"
    self_loop.symlink_to(self_loop.name)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    looped_dir = tmp_path / "looped_run"
    looped_dir.mkdir()
    shutil.copyfile(BAD / "rocprof" / "ok_kernel_trace.csv", looped_dir / "run_kernel_trace.csv")
    (looped_dir / "again").symlink_to(".", target_is_directory=True)
    dataset = tmp_path / "dir_in_place.parquet"
    shutil.copytree(BAD / "parquet" / "ok_dataset.parquet", dataset)
    (dataset / "events.parquet").unlink()
    (dataset / "events.parquet").mkdir()
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    return {"self_loop": self_loop, "two_link_loop": a, "dir_with_loop": looped_dir,
            "events_is_a_dir": dataset, "empty_dir": empty}


@pytest.mark.parametrize("case,format,expect", [
    ("self_loop", None, "error"), ("self_loop", "kineto", "error"),
    ("two_link_loop", None, "error"), ("two_link_loop", "rocprof", "error"),
    ("dir_with_loop", None, "any"), ("dir_with_loop", "rocprof", "any"),
    ("events_is_a_dir", None, "error"), ("events_is_a_dir", "parquet", "error"),
    ("empty_dir", None, "error"), ("empty_dir", "parquet", "error"),
    ("empty_dir", "rocprof", "error"), ("empty_dir", "kineto", "error"),
])
def test_links_and_directories(short_tmp, case, format, expect):
    path = _loops(short_tmp)[case]
    _, found = check(path, format, expect=expect)
    assert not found, f"{case} as {format or 'detected'}:\n  " + "\n  ".join(found)


# -- the command line ------------------------------------------------------------------------

CLI_CASES = [
    ("kineto/gzip_corrupt_tail.json.gz", None),
    ("kineto/truncated_50.json", "kineto"),
    ("nsys/damaged_pages.sqlite", "nsys"),
    ("perf/header_only.perf", None),
    ("vtune/progress_only.csv", "vtune"),
    ("rocprof-db/wrong_format_text.db", "rocprof-db"),
    ("rocprofv3-json/json_is_a_number.json", "rocprofv3-json"),
    ("parquet/events_wrong_schema.parquet", "parquet"),
]


def _assert_refused(proc: subprocess.CompletedProcess[str], name: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1, proc.stderr[-2000:]
    line = lines[0]
    assert line.startswith("error: ") and len(line) <= MESSAGE_LIMIT + 20, line
    assert name in line, f"the error does not name {name}: {line}"
    assert not CATCH_ALL.search(line), f"reached the catch-all: {line}"
    assert "Traceback" not in proc.stderr


def _sha(path: Path) -> str:
    if path.is_dir():
        return hashlib.sha256(b"".join(
            p.name.encode() + p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        )).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = run_cli(*args)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tracekit {' '.join(args)} hung ({TIMEOUT_S * WALL_FACTOR:g} s)")
    assert proc.returncode != -signal.SIGXCPU, f"tracekit {' '.join(args)} used more than " \
        f"{TIMEOUT_S:g} s of CPU time"
    return proc


@pytest.mark.slow  # runs the CLI in a new process (a second or more of start-up each)
@pytest.mark.parametrize("key,format", CLI_CASES)
def test_convert_refuses_with_one_line_and_writes_nothing(short_tmp, key, format):
    assert INDEX[key]["expect"] == "error" or format is not None
    path = _copy(key, short_tmp)
    before = _sha(path)
    out_dir = short_tmp / "out"
    out_dir.mkdir()
    args = ["convert", str(path), "-o", str(out_dir / "out.pftrace")]
    proc = _run(*args, *(["--from", format] if format else []))
    _assert_refused(proc, path.name)
    assert os.listdir(out_dir) == [], "convert left files in the output folder"
    assert _sha(path) == before, "the input changed"
    assert sorted(os.listdir(path.parent)) == [path.name]


@pytest.mark.slow  # runs the CLI in a new process
@pytest.mark.parametrize("key", ["nsys/other_database.sqlite", "parquet/missing_events.parquet"])
def test_analyze_refuses_with_one_line(short_tmp, key):
    path = _copy(key, short_tmp)
    before = _sha(path)
    proc = _run("analyze", str(path))
    _assert_refused(proc, path.name)
    assert proc.stdout == ""
    assert _sha(path) == before


@pytest.mark.slow  # runs the CLI in a new process
@pytest.mark.parametrize("case", ["self_loop", "empty_dir"])
def test_cli_on_a_symlink_loop_and_an_empty_directory(short_tmp, case):
    path = _loops(short_tmp)[case]
    out_dir = short_tmp / "out"
    out_dir.mkdir()
    proc = _run("convert", str(path), "-o", str(out_dir / "out.json"))
    _assert_refused(proc, path.name)
    assert os.listdir(out_dir) == []


def test_the_file_name_survives_a_long_path(tmp_path):
    """A path longer than the 80 characters a token may keep in a message: the message must
    still end its path with the file name (users have deep folders, and so does pytest)."""
    deep = tmp_path.joinpath(*["a_rather_long_folder_name"] * 6)
    deep.mkdir(parents=True)
    path = deep / "wrong_format_png.json"
    shutil.copyfile(BAD / "kineto" / "wrong_format_png.json", path)
    _, found = check(path, "kineto", expect="error")
    assert not found, "\n".join(found)
