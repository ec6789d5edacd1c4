"""The ``tracekit`` command does not import pandas (about 0.25 CPU s of start-up) on its
common paths, though pyarrow would on its first conversion (see ``tracekit.startup``), nor
pydantic (0.14 CPU s: typer 0.29 builds a pydantic adapter per parameter; pyproject.toml pins
typer below it), nor the protobuf runtime where no Perfetto trace is read (the Perfetto reader
loads it on its first input; the writer encodes its own packets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import shared_path

# Runs the CLI in-process, then says on the last line of stderr whether pandas, pydantic and
# protobuf were imported.
_CLI = """
import json, sys
from tracekit.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "pandas": "pandas" in sys.modules,
                  "pydantic": "pydantic" in sys.modules,
                  "protobuf": "google.protobuf" in sys.modules}), file=sys.stderr)
"""

KINETO = ("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
PERF = ("perf-script", "firefox-profiler", "gzip.perf.gz")
NSYS = ("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
ROCPROF = ("rocprof-v3", "rocprofiler-sdk-docs", "kernel_trace_2024-08.csv")
VTUNE = ("vtune-csv", "vtune-plot", "advanced-hotspots.csv")

# (command, fixture, output name or None, a line the command prints)
COMMANDS = [
    ("convert", KINETO, "out.pftrace", "26,933 slices, 2 instants, 0 counter values, 8 tracks, "
     "8,634 flow endpoints"),
    ("convert", KINETO, "out.json.gz", "26,933 X events, 2 i events, 8,634 flow events"),
    ("convert", KINETO, "out.parquet", "26,935 events rows"),
    ("analyze", KINETO, None, "GPU kernels (cf. nsys cuda_gpu_kern_sum)"),
    ("convert", PERF, "out.pftrace", "420 CPU samples, 1 tracks"),
    ("analyze", PERF, None, "    verdict: none, events: 420, program: CPU-only profile"),
    ("convert", NSYS, "out.json.gz", "1,734 X events, 40 flow events"),
    ("convert", ROCPROF, "out.pftrace", "7 slices, 0 instants, 0 counter values, 4 tracks"),
    ("analyze", VTUNE, None, "    verdict: none, events: 148, program: CPU-only profile"),
]


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "fixture", "output", "line"), COMMANDS,
                         ids=[f"{c[0]}-{c[1][0]}-{c[2] or 'report'}" for c in COMMANDS])
def test_command_does_not_import_pandas_or_pydantic(
        tmp_path: Path, command: str, fixture: tuple[str, ...], output: str | None,
        line: str) -> None:
    args = [command, str(shared_path(*fixture))]
    if output:
        args += ["-o", str(tmp_path / output)]
    elif command == "analyze" and fixture == KINETO:
        args += ["-a", "summary"]
    proc = _python(_CLI, *args)
    *said, last = proc.stderr.splitlines()
    assert json.loads(last) == {"code": 0, "pandas": False, "pydantic": False,
                                "protobuf": False}, proc.stderr
    assert any(line in s for s in [*said, *proc.stdout.splitlines()]), proc.stdout + proc.stderr
    if output:
        assert (tmp_path / output).exists()


@pytest.mark.slow
def test_pandas_stays_usable_after() -> None:
    """pandas is still imported when asked for, and pyarrow's to_pandas still works."""
    pytest.importorskip("pandas")
    proc = _python("""
import sys
import pyarrow as pa
from tracekit.startup import arrow_without_pandas
arrow_without_pandas()
assert pa.array([1.5, None]).to_pylist() == [1.5, None]
assert "pandas" not in sys.modules
import pandas as pd
frame = pa.table({"a": [1.5, None]}).to_pandas()
print(frame["a"].isna().tolist(), pa.Table.from_pandas(frame).column("a").null_count)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[False,", "True]", "1"]


@pytest.mark.slow
def test_pandas_imported_first_is_left_alone() -> None:
    """Where pandas is imported already, pyarrow keeps its pandas semantics (NaN is null)."""
    pytest.importorskip("pandas")
    proc = _python("""
import pandas as pd
import pyarrow as pa
from tracekit.startup import arrow_without_pandas
arrow_without_pandas()
print(pa.array(pd.Series([1.5, None])).null_count)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1"]


@pytest.mark.parametrize(("dists", "spared"), [(["tracekit"], True),
                                                (["tracekit", "acme-tracekit-plugins"], False)])
def test_pandas_spared_only_without_third_party_plugins(
        monkeypatch: pytest.MonkeyPatch, dists: list[str], spared: bool) -> None:
    """A third-party plugin may hand pyarrow pandas objects: then pyarrow keeps its pandas."""
    import tracekit.registry as registry
    import tracekit.startup as startup

    calls: list[bool] = []
    monkeypatch.setattr(startup, "arrow_without_pandas", lambda: calls.append(True))
    monkeypatch.setattr(registry, "iter_entry_points", lambda dists_=None: iter(
        [(d, "1.0", _EntryPoint(d)) for d in dists]))
    registry.load_registry(spare_pandas=True)
    assert calls == ([True] if spared else [])


class _EntryPoint:
    """An entry point whose plugin registers nothing."""

    def __init__(self, name: str) -> None:
        self.name, self.value = name, f"{name}:plugin"

    def load(self) -> object:
        return type("Plugin", (), {})
