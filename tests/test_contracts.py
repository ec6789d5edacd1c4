"""Contracts between core and components: components declare, core reads the declarations.

Core never names a built-in component; what a plain ``analyze`` runs comes from the
analyzers' ``default_for`` declarations, so it keeps working without any one plugin.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib

import pytest
import tracekit
from helpers import FIXTURES, ROOT, shared_path
from independent import load
from tracekit.defaults import default_analyzers, trace_kind
from tracekit.registry import load_registry

GPU_TRACE = FIXTURES / "scenarios" / "matmul_loop.pt.trace.json.gz"
HOST_TRACE = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
PERF_TRACE = FIXTURES / "perf-recorded" / "burn.perf"


def _builtin_names(registry: tracekit.Registry) -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    plugins = set(pyproject["project"]["entry-points"]["tracekit"])
    components = {name for by_name in registry.components.values() for name in by_name}
    return plugins | components


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, nodes) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def name_uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Where code (not docstrings or comments) depends on a component by name: a string that
    is a name, quotes one (``'kineto'``) or asks for one (``-a bottleneck``), or an import
    from ``tracekit.plugins``."""
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    quoted = re.compile(rf"'({alternatives})'|-a ({alternatives})(?![\w-])")
    tree = ast.parse(source)
    docs = _docstrings(tree)
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs:
            value = node.value
            if value in names or value.startswith("tracekit.plugins") or quoted.search(value):
                uses.append((node.lineno, value))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "tracekit.plugins"):
            uses.append((node.lineno, f"from {node.module} import"))
        elif isinstance(node, ast.Import):
            uses += [(node.lineno, f"import {a.name}") for a in node.names
                     if a.name.startswith("tracekit.plugins")]
    return sorted(uses)


def test_the_name_check_finds_what_it_must(registry):
    names = _builtin_names(registry)
    code = ('"""Runs \'bottleneck\' by default."""\n'
            'DEFAULT = ["bottleneck"]  # summary\n'
            'HELP = "default: -a summary"\n'
            'MSG = "try \'kineto\'"\n'
            'OK = "No progress and no summary."\n'
            'from tracekit.plugins.perf import parser\n')
    assert name_uses(code, names) == [
        (2, "bottleneck"), (3, "default: -a summary"), (4, "try 'kineto'"),
        (6, "from tracekit.plugins.perf import")]


def test_no_builtin_name_in_core(registry):
    names = _builtin_names(registry)
    assert {"bottleneck", "summary", "hotspots", "cpu", "kineto", "chrome_json"} <= names
    found = {f"{path.name}:{line}: {text!r}"
             for path in sorted((ROOT / "core").glob("*.py"))
             for line, text in name_uses(path.read_text(), names)}
    assert found == set(), "core depends on built-in components by name"


def _without(*plugins: str) -> tracekit.Registry:
    return load_registry(dists={"tracekit"},
                         environ={"TRACEKIT_DISABLE_PLUGINS": ",".join(plugins)})


@pytest.fixture(scope="module")
def traces(registry) -> dict[str, tracekit.Trace]:
    return {p.name: tracekit.read(p, registry=registry)
            for p in (GPU_TRACE, HOST_TRACE, PERF_TRACE)}


def test_trace_kinds(traces):
    kinds = {name: trace_kind(t) for name, t in traces.items()}
    assert kinds == {GPU_TRACE.name: "gpu-timeline", HOST_TRACE.name: "host-only",
                     PERF_TRACE.name: "cpu-samples"}


def test_trace_kind_of_aggregates():
    path = shared_path("rocprof-v1", "gunrock_mi300_gfx942", "results.stats.csv")
    assert trace_kind(tracekit.read(path, registry=_without())) == "gpu-aggregates"


@pytest.mark.parametrize("disabled,expected", [
    ((), {"gpu-ranks": ["bottleneck", "ranks"], "gpu-timeline": ["bottleneck"],
          "cpu-samples": ["bottleneck", "cpu"],
          "gpu-aggregates": ["bottleneck", "summary"], "host-only": ["bottleneck", "cpu"]}),
    (("diagnosis",), {"gpu-ranks": ["summary"], "gpu-timeline": ["summary"],
                      "cpu-samples": ["cpu"],
                      "gpu-aggregates": ["summary"], "host-only": ["cpu"]}),
    (("cpu_profile",), {"gpu-ranks": ["bottleneck", "ranks"], "gpu-timeline": ["bottleneck"],
                        "cpu-samples": ["bottleneck", "hotspots", "summary"],
                        "gpu-aggregates": ["bottleneck", "summary"],
                        "host-only": ["bottleneck", "summary"]}),
    (("diagnosis", "cpu_profile", "summary", "hotspots"), {
        "gpu-ranks": [], "gpu-timeline": [], "cpu-samples": [], "gpu-aggregates": [],
        "host-only": []}),
])
def test_defaults_follow_the_declarations_of_what_is_installed(disabled, expected):
    registry = _without(*disabled) if disabled else _without()
    chosen = {kind.value: default_analyzers(kind, registry) for kind in tracekit.TraceKind}
    assert chosen == expected


def test_plain_analyze_without_the_diagnosis_plugin(traces):
    registry = _without("diagnosis")
    gpu = tracekit.analyze(traces[GPU_TRACE.name], registry=registry)
    assert [r.analyzer for r in gpu] == ["summary"]
    _, events = load(GPU_TRACE)
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == 100
    table = gpu[0].tables["kernels"]
    assert dict(zip(table["name"].to_pylist(), table["count"].to_pylist(), strict=True)) == {
        kernels[0]["name"]: 100}
    [cpu] = tracekit.analyze(traces[PERF_TRACE.name], registry=registry)
    assert cpu.analyzer == "cpu" and cpu.findings[0].evidence["verdict"] == "cpu-profile"
    assert cpu.findings[0].evidence["samples"] == 346


def test_plain_analyze_with_nothing_to_run_says_so(traces):
    registry = _without("diagnosis", "cpu_profile", "summary", "hotspots")
    with pytest.raises(tracekit.UsageError, match=r"no installed analyzer is a default for "
                       r"this trace \(host-only\); pass -a NAME"):
        tracekit.analyze(traces[HOST_TRACE.name], registry=registry)


def test_declared_sample_events_pick_the_rows(registry, tmp_path):
    from tracekit.stacks import sample_events, sampled_events, weight_unit

    path = tmp_path / "two.perf"
    path.write_text("a 1 1.000001:     250000 cpu-clock:\n\t 1 f (/x)\n\n"
                    "a 1 1.000002:       1000 instructions:\n\t 1 g (/x)\n\n"
                    "a 1 1.000003:     250000 cpu-clock:\n\t 1 h (/x)\n")
    trace = tracekit.read(path, registry=registry)
    assert sampled_events(trace) == ["cpu-clock", "instructions"]
    rows, _ = sample_events(trace, "instructions")
    assert rows["name"].to_pylist() == ["g"]
    rows, _ = sample_events(trace, None)
    assert rows["name"].to_pylist() == ["f", "h"]
    assert weight_unit(trace, rows, "cpu-clock") == "ns"
    assert weight_unit(trace, rows, "instructions") == "instructions"


# -- built-in plugins use the public API, as a third-party plugin must (issue 18 item 5) -------

#: Modules a plugin may import from tracekit besides its own package: the public API and the
#: schema files (data).
PUBLIC = ("tracekit", "tracekit.toolkit")

#: Built-in plugins built on another, through that package's own surface (its ``__all__``,
#: never its modules): the HTML report draws the diagnosis plugin's device timelines and
#: launch delays (both ship in the tracekit distribution).
BUILT_ON = {"html_report": {"diagnosis"}, "cpu_profile": {"diagnosis"}}

#: Plugin modules allowed to import core's private modules for now: none (keep the mechanism,
#: and the check below that an entry is still needed, for a plugin caught mid-change).
PRIVATE_IMPORTS_PENDING: set[str] = set()


@functools.cache
def _toolkit_names() -> set[str]:
    """``tracekit.toolkit.__all__``, read from the source (importing it loads pyarrow)."""
    tree = ast.parse((ROOT / "core" / "toolkit.py").read_text())
    [names] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and [getattr(t, "id", None) for t in node.targets] == ["__all__"]]
    return set(ast.literal_eval(names))


def private_imports(source: str, package: str) -> list[tuple[int, str]]:
    """Where the code of plugin ``package`` (``perf``, ``parquet``) reaches past the public API:
    an import of a core module other than ``tracekit``, ``tracekit.toolkit`` and
    ``tracekit.schemas``, a name they do not export (``from tracekit import fields``, a
    submodule), ``tracekit.model.Trace`` as an attribute, or another plugin's package."""
    exported = {"tracekit": set(tracekit.__all__), "tracekit.toolkit": _toolkit_names()}
    allowed = {package, *BUILT_ON.get(package, ())}

    def private(module: str) -> bool:
        parts = module.split(".")
        if parts[0] != "tracekit" or module in PUBLIC or parts[:2] == ["tracekit", "schemas"]:
            return False
        if parts[:2] != ["tracekit", "plugins"] or len(parts) < 3 or parts[2] not in allowed:
            return True
        # Its own package freely; a plugin it is built on through that package's surface only.
        return parts[2] != package and len(parts) > 3

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: inside the plugin's own package
                continue
            if private(module):
                found.append((node.lineno, f"from {module} import"))
            elif module in exported:
                found += [(node.lineno, f"from {module} import {a.name}") for a in node.names
                          if a.name not in exported[module]]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if private(a.name)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "tracekit" and node.attr not in exported["tracekit"] \
                and node.attr not in ("toolkit", "schemas"):
            found.append((node.lineno, f"tracekit.{node.attr}"))
    return sorted(found)


def test_the_private_import_check_finds_what_it_must():
    code = ("import tracekit\n"
            "from tracekit import Trace, fields\n"
            "from tracekit.toolkit import equals, SqliteInput, _SQLITE\n"
            "from tracekit.model import Trace\n"
            "import tracekit.stacks\n"
            "x = tracekit.model.SCHEMAS, tracekit.Trace, tracekit.toolkit.equals\n"
            "from tracekit.plugins.perf import parser\n"
            "from tracekit.plugins.diagnosis.timeline import device_timelines\n"
            "from tracekit.plugins.diagnosis import device_timelines\n"
            "from tracekit.plugins.html_report.figures import layout\n"
            "from tracekit.schemas import perfetto_pb2\n"
            "from . import figures\n")
    # html_report is built on the diagnosis: its package surface (line 9), not its modules.
    assert private_imports(code, "html_report") == [
        (2, "from tracekit import fields"), (3, "from tracekit.toolkit import _SQLITE"),
        (4, "from tracekit.model import"), (5, "import tracekit.stacks"),
        (6, "tracekit.model"), (7, "from tracekit.plugins.perf import"),
        (8, "from tracekit.plugins.diagnosis.timeline import")]
    assert private_imports(code, "perf")[-3:] == [
        (8, "from tracekit.plugins.diagnosis.timeline import"),
        (9, "from tracekit.plugins.diagnosis import"),
        (10, "from tracekit.plugins.html_report.figures import")]


@pytest.mark.slow  # parses every plugin module: about a second
def test_plugins_import_only_the_public_api():
    plugins = ROOT / "plugins"
    found, clean = [], []
    for path in sorted(plugins.rglob("*.py")):
        rel = path.relative_to(plugins).as_posix()
        uses = private_imports(path.read_text(), rel.split("/")[0].removesuffix(".py"))
        if rel in PRIVATE_IMPORTS_PENDING:
            if not uses:
                clean.append(rel)
            continue
        found += [f"plugins/{rel}:{line}: {text}" for line, text in uses]
    assert found == [], "plugins use core's private modules; import from tracekit or " \
        "tracekit.toolkit (export what is missing there, with a docstring)"
    assert clean == [], "these now import only public names: remove them from " \
        "PRIVATE_IMPORTS_PENDING"


def threaded_group_bys(source: str) -> list[int]:
    """Lines of ``.group_by(...)`` calls, and of table joins (``.join(..., join_type=...)``),
    without ``use_threads=False``: Arrow's threaded grouping and joining give their rows in no
    stable order, so whatever follows that order (the first name a rule finds, a table's rows)
    could change from run to run."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and (node.func.attr == "group_by" or (node.func.attr == "join" and any(
                      k.arg == "join_type" for k in node.keywords)))
                  and not any(k.arg == "use_threads" and isinstance(k.value, ast.Constant)
                              and k.value.value is False for k in node.keywords))


def test_the_group_by_check_finds_what_it_must():
    code = ("a = t.group_by('x').aggregate([])\n"
            "b = t.group_by(['x', 'y'], use_threads=False).aggregate([])\n"
            "c = t.group_by('x', use_threads=True)\n"
            "d = _group_by(rows)\n"
            "e = a.join(b, 'k', join_type='inner')\n"
            "f = ','.join(names)\n")
    assert threaded_group_bys(code) == [1, 3, 5]


@pytest.mark.slow  # parses every module: about a second
def test_every_group_by_is_deterministic():
    """merged_4rank's 'framework' evidence flipped between aten::item and aten::view from
    run to run while program.py grouped names with threads."""
    found = [f"{path.relative_to(ROOT)}:{line}"
             for folder in ("core", "plugins") for path in sorted((ROOT / folder).rglob("*.py"))
             for line in threaded_group_bys(path.read_text())]
    assert found == []
