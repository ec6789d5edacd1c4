"""Shared pytest fixtures."""

from __future__ import annotations

import sys

import pytest
from tracekit.registry import load_registry

# jsonschema imports rfc3987_syntax, when installed, to check the "iri" formats: that builds a
# Lark parser and takes 3-5 s, the largest part of collecting the suite. The report schema uses
# no such format (and validate() checks formats only when asked), so the tests go without it.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

# Where PYTHONDONTWRITEBYTECODE is set (container images often set it), every run would compile
# tracekit and rewrite the asserts of every test module anew: about 3 s of CPU per collection.
# The caches go to __pycache__ (ignored by git) and are checked against the sources, so writing
# them changes nothing but the time.
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def registry():
    """Only tracekit's own plugins, whatever else is installed."""
    return load_registry(dists={"tracekit"}, environ={})
