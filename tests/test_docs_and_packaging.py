"""Packaging and docs that must not drift from the code."""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from decimal import Decimal
from importlib import metadata

import pyarrow as pa
import tracekit
from helpers import ROOT
from independent import load
from tracekit import hookspecs, model_doc
from tracekit.schemas import event_model

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIRS = {"tracekit": "core", "tracekit.plugins": "plugins", "tracekit.schemas": "schemas"}


def test_every_subpackage_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = set()
    for package, folder in PACKAGE_DIRS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *rel)))
    assert found == listed, "list new subpackages in pyproject's [tool.setuptools] packages"


def test_every_builtin_plugin_has_an_entry_point():
    eps = PYPROJECT["project"]["entry-points"]["tracekit"]
    modules = {p.stem for p in (ROOT / "plugins").glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in (ROOT / "plugins").glob("*/__init__.py")}
    assert set(eps) == modules
    assert all(v == f"tracekit.plugins.{k}" for k, v in eps.items())


def test_installed_metadata_is_current():
    installed = {ep.name: ep.value for ep in metadata.distribution("tracekit").entry_points
                 if ep.group == "tracekit"}
    assert installed == PYPROJECT["project"]["entry-points"]["tracekit"], \
        "entry points changed: run pip install -e . again"


def test_event_model_doc_is_generated_from_the_schema():
    assert (ROOT / "docs" / "event-model.md").read_text() == model_doc.render(), \
        "regenerate: python -m tracekit.model_doc > docs/event-model.md"


def test_arrow_schema_follows_the_model_data():
    spec = event_model()["tables"]["events"]["columns"]
    schema = tracekit.EVENTS_SCHEMA
    assert schema.names == [c["name"] for c in spec]
    assert schema.field("ts_ns").type == pa.int64()
    assert schema.field("ts_ns").metadata[b"unit"] == b"ns"
    assert schema.field("name").type == pa.dictionary(pa.int32(), pa.string())
    assert schema.metadata[b"tracekit.schema_version"] == b"1"


def test_every_hook_is_documented():
    text = (ROOT / "docs" / "plugins" / "hooks.md").read_text()
    specs = [name for name, f in vars(hookspecs).items()
             if callable(f) and hasattr(f, f"{hookspecs.PROJECT}_spec")]
    assert {"register_readers", "register_writers", "register_analyzers",
            "register_report_formats", "register_commands"} <= set(specs)
    for name in specs:
        arg = "app" if name == "register_commands" else "register"
        assert f"## {name}({arg})" in text, name


def test_getting_started_python_runs(tmp_path, monkeypatch):
    """Every Python block of docs/getting-started.md, run as written on the bundled trace."""
    text = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            exec(compile(block, f"getting-started.md python block {i + 1}", "exec"), {})
    _, events = load(ROOT / "fixtures" / "scenarios" / "matmul_loop.pt.trace.json.gz")
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    total = sum(int(Decimal(str(e["dur"])) * 1000) for e in kernels)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{len(kernels)} kernels, {total} ns"
    assert lines[-1] == "kineto"
    assert (tmp_path / "matmul_loop.pftrace").stat().st_size > 0


def test_toolkit_page_is_generated_from_the_docstrings():
    from tracekit import _docgen

    assert (ROOT / "docs" / "plugins" / "toolkit.md").read_text() == _docgen.render(), \
        "regenerate: python -m tracekit._docgen > docs/plugins/toolkit.md"


def test_every_toolkit_name_is_in_one_section_and_documented():
    from tracekit import toolkit

    listed = [name for _, _, names in toolkit.SECTIONS for name in names]
    assert sorted(listed) == sorted(set(toolkit.__all__) - {"SECTIONS", "CONSTANTS"})
    for name in listed:
        obj = getattr(toolkit, name)
        documented = name in toolkit.CONSTANTS if isinstance(obj, (int, str, bytes, tuple)) \
            or name == "NO_PROGRESS" else bool(obj.__doc__)
        assert documented, f"tracekit.toolkit.{name} has no documentation"


def test_toolkit_examples_run():
    import doctest

    from tracekit import columns

    result = doctest.testmod(columns)
    assert result.attempted == 11 and result.failed == 0
