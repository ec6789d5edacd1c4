"""Schemas shipped with tracekit: the event model (as data) and the report JSON Schema."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

EVENT_MODEL_FILE = "event_model_v1.json"
REPORT_SCHEMA_FILE = "report.schema.json"


@cache
def event_model() -> dict[str, Any]:
    """Return the event model definition (tables, columns, categories)."""
    return json.loads(resources.files(__name__).joinpath(EVENT_MODEL_FILE).read_text("utf-8"))


@cache
def report_schema() -> dict[str, Any]:
    """Return the JSON Schema that ``tracekit analyze --format json`` output follows."""
    return json.loads(resources.files(__name__).joinpath(REPORT_SCHEMA_FILE).read_text("utf-8"))
