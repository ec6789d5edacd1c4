"""Shared pytest fixtures."""

from __future__ import annotations

import pytest
from tracekit.registry import load_registry


@pytest.fixture(scope="session")
def registry():
    """Only tracekit's own plugins, whatever else is installed."""
    return load_registry(dists={"tracekit"}, environ={})
