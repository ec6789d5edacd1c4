"""Plugin discovery, isolation, conflicts, and a real third-party plugin installed with pip."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tracekit
from helpers import FIXTURES, ROOT
from independent import load
from tracekit.errors import PluginConflictError, UnknownFormatError
from tracekit.registry import iter_entry_points, load_registry

EXAMPLE = ROOT / "docs" / "plugins" / "example"


class _Plugin:
    def __init__(self, name: str, reader: type | None = None, fail: bool = False) -> None:
        self.__name__ = name
        self._reader, self._fail = reader, fail

    @tracekit.hookimpl
    def register_readers(self, register):
        if self._fail:
            raise ValueError("boom")
        register(self._reader)


def _reader(name: str) -> type:
    class R(tracekit.Reader):
        @classmethod
        def sniff(cls, source):
            return 0.0

        def read(self, source, out):
            pass

    R.name = name
    return R


def test_builtins_come_from_entry_points(registry):
    assert {"kineto"} <= set(registry.readers) and {"perfetto"} <= set(registry.writers)
    assert registry.owner("reader", "kineto") == "kineto"
    assert all(p.builtin and p.status == "ok" for p in registry.plugins)


def test_conflicting_names_name_both_plugins():
    reg = load_registry(dists={"tracekit"}, environ={},
                        extra=[_Plugin("first", _reader("dup")), _Plugin("second", _reader("dup"))])
    broken = {p.name: p.error for p in reg.plugins if p.error}
    assert broken == {"second": "reader 'dup' is registered by both 'first' and 'second'"}
    with pytest.raises(PluginConflictError, match="'first' and 'second'"):
        reg.get("reader", "dup")
    assert "kineto" in reg.readers


def test_failing_register_hook_is_isolated():
    reg = load_registry(dists={"tracekit"}, environ={}, extra=[_Plugin("bad", fail=True)])
    [bad] = [p for p in reg.plugins if p.name == "bad"]
    assert bad.status == "broken" and "boom" in bad.error
    assert "kineto" in reg.readers
    # Asking for a component the broken plugin may have held names why it is missing.
    with pytest.raises(UnknownFormatError, match=r"no analyzer named 'x' \(known: .*\); "
                       r"plugin 'bad' failed to load: ValueError: boom$"):
        reg.get("analyzer", "x")


@pytest.mark.parametrize("name,error", [("Bad_Name", "kebab-case"), ("ok-name", None)])
def test_component_names_are_checked(name, error):
    reg = load_registry(dists={"tracekit"}, environ={}, extra=[_Plugin("p", _reader(name))])
    [p] = [p for p in reg.plugins if p.name == "p"]
    assert (error in p.error) if error else p.error is None


def test_disable_builtin_plugin():
    reg = load_registry(dists={"tracekit"}, environ={"TRACEKIT_DISABLE_PLUGINS": "kineto"})
    assert "kineto" not in reg.readers
    with pytest.raises(UnknownFormatError, match="no reader named 'kineto'"):
        reg.get("reader", "kineto")


def test_trace_plugins_says_what_became_of_each(capsys):
    load_registry(dists={"tracekit"}, environ={})
    assert capsys.readouterr().err == ""
    load_registry(dists={"tracekit"}, extra=[_Plugin("bad", fail=True)],
                  environ={"TRACEKIT_TRACE_PLUGINS": "1", "TRACEKIT_DISABLE_PLUGINS": "folded"})
    lines = capsys.readouterr().err.splitlines()
    by_plugin = {line.split()[2]: line for line in lines}
    builtins = len(list(iter_entry_points({"tracekit"})))
    assert len(lines) == len(by_plugin) == builtins + 1
    assert all(line.startswith("tracekit: plugin ") for line in lines)
    assert by_plugin["folded"] == ("tracekit: plugin folded (tracekit 0.1.0, tracekit.plugins."
                                   "folded): disabled by TRACEKIT_DISABLE_PLUGINS or "
                                   "TRACEKIT_LOAD_PLUGINS")
    assert re.fullmatch(r"tracekit: plugin kineto \(tracekit 0\.1\.0, tracekit\.plugins\.kineto\)"
                        r": imported in \d+\.\d ms; registered reader kineto", by_plugin["kineto"])
    assert by_plugin["bad"].endswith("): broken: ValueError: boom")


def test_options_dataclass_parsing():
    @dataclass(frozen=True)
    class Opts:
        limit: int = 3
        args: bool = True

    comp = type("C", (), {"Options": Opts, "kind": "writer", "name": "x"})
    from tracekit.options import parse_options

    assert parse_options(comp, ["limit=5", "args=off"]) == Opts(5, False)
    with pytest.raises(tracekit.OptionError, match="valid: limit, args"):
        parse_options(comp, ["lim=1"])


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin and a broken one, pip-installed into a private directory."""
    site = tmp_path_factory.mktemp("site")
    for project in (EXAMPLE, FIXTURES / "plugins" / "tracekit-broken"):
        # Built from a copy: setuptools writes build/ and *.egg-info into the project, and two
        # test workers building the same folder at once break each other's builds.
        copy = shutil.copytree(project, tmp_path_factory.mktemp("project") / project.name)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(site),
                        str(copy)], check=True, capture_output=True, timeout=300)
    return site


def _tracekit(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, env=environ, timeout=300)


@pytest.mark.slow
def test_pip_installed_plugin_is_listed_and_works(plugin_site, tmp_path):
    listing = json.loads(_tracekit(plugin_site, "plugins", "--json").stdout)
    status = {p["name"]: p for p in listing}
    assert status["csvtrace"]["status"] == "ok"
    assert status["csvtrace"]["components"] == ["reader csvtrace"]
    assert status["csvtrace"]["commands"] == ["csvtrace-total"]
    text = _tracekit(plugin_site, "plugins").stdout
    assert "reader csvtrace, command csvtrace-total" in text
    assert status["broken"]["status"] == "broken"
    assert "this plugin is broken on purpose" in status["broken"]["error"]
    out = tmp_path / "spans.pftrace"
    proc = _tracekit(plugin_site, "convert", str(EXAMPLE / "spans.csv"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "2 slices" in proc.stderr
    # Every command but 'plugins' (which lists the errors) says which plugin failed to load.
    [warning] = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warning.startswith("tracekit: warning: plugin 'broken' failed to load: ")
    assert "this plugin is broken on purpose" in warning
    assert "warning" not in _tracekit(plugin_site, "plugins").stderr


@pytest.mark.slow
def test_plugin_command_runs(plugin_site):
    proc = _tracekit(plugin_site, "csvtrace-total", str(EXAMPLE / "spans.csv"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "2 spans, 112.5 us\n"
    unknown = _tracekit(plugin_site, "no-such-command")
    assert unknown.returncode == 2 and "No such command 'no-such-command'" in unknown.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args,out", [(["--version"], "tracekit 0.1.0\n"),
                                      (["--help"], "Usage: tracekit [OPTIONS] COMMAND"),
                                      (["convert", "--help"], "Usage: tracekit convert")])
def test_start_imports_neither_pyarrow_nor_plugins(plugin_site, args, out):
    environ = {**os.environ, "PYTHONPATH": str(plugin_site)}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracekit", *args],
                          capture_output=True, text=True, env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(out)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "tracekit.cli" in imported
    heavy = {m for m in imported if m.split(".")[0] in ("pyarrow", "numpy", "pluggy",
                                                        "tracekit_csvtrace", "tracekit_broken")
             or m.startswith(("tracekit.plugins", "tracekit.pipeline", "tracekit.registry"))}
    assert heavy == set()


@pytest.mark.slow
def test_import_tracekit_loads_the_model_on_first_use():
    code = ("import sys, tracekit; assert 'pyarrow' not in sys.modules; "
            "from tracekit import Trace, read; assert 'pyarrow' in sys.modules; "
            "assert Trace is tracekit.model.Trace and 'Trace' in dir(tracekit); "
            "print(tracekit.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "0.1.0\n"


@pytest.mark.slow
def test_disabled_third_party_plugin(plugin_site, tmp_path):
    proc = _tracekit(plugin_site, "convert", str(EXAMPLE / "spans.csv"), "-o",
                     str(tmp_path / "x.pftrace"), TRACEKIT_DISABLE_PLUGINS="csvtrace")
    assert proc.returncode == 1
    assert "no reader recognises this file" in proc.stderr


@pytest.mark.slow
def test_example_plugin_own_tests_pass(plugin_site):
    env = {**os.environ, "PYTHONPATH": str(plugin_site)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(EXAMPLE / "tests")], capture_output=True, text=True, env=env,
                          cwd=EXAMPLE, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_testing_helpers_with_builtin_components():
    from tracekit.plugins.kineto import KinetoReader
    from tracekit.plugins.perfetto import PerfettoWriter
    from tracekit.testing import check_reader, check_writer, sample_trace

    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    trace = check_reader(KinetoReader, path)
    _, events = load(path)
    kinds = trace.events["kind"].cast("string").to_pylist()
    assert kinds.count("slice") == sum(e.get("ph") == "X" for e in events)
    data, result = check_writer(PerfettoWriter, sample_trace())
    assert data and result.written["slices"] == 4 and result.written["flow endpoints"] == 2


def _dist_info(root: Path, name: str, version: str, entry_points: str) -> None:
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_entry_points_come_once_per_distribution_first_on_the_path(tmp_path, monkeypatch):
    # The same distribution on sys.path twice (an older copy after the first): its entry
    # points come once, with the first copy's version; a distribution without a tracekit
    # entry point is not listed; ``dists`` compares names normalized (PEP 503).
    _dist_info(tmp_path / "a", "tk-dup", "2.0", "[tracekit]\nfirst = tk_dup.first\n")
    _dist_info(tmp_path / "b", "tk-dup", "1.0", "[tracekit]\nold = tk_dup.old\n")
    _dist_info(tmp_path / "a", "tk-other", "1.0", "[console_scripts]\nx = tk_other:main\n")
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    found = [(d, v, ep.name) for d, v, ep in iter_entry_points({"TK_Dup", "tk-other"})]
    assert found == [("tk-dup", "2.0", "first")]
    assert ("tk-dup", "2.0", "first") in [(d, v, ep.name) for d, v, ep in iter_entry_points()]
