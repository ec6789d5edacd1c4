"""Parse ``-O key=value`` pairs into a component's frozen Options dataclass."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable
from typing import Any

from tracekit.errors import OptionError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def addressed_key(component: type, key: str) -> tuple[str, bool] | None:
    """Which option of ``component`` a key names, and whether it named the component.

    ``reader.limit``, ``kineto.limit`` (kind or name) and plain ``limit`` all address the
    ``limit`` option of the kineto reader; a prefix of another component returns None, and so
    does a plain key that the component does not declare.
    """
    prefix, dot, bare = key.partition(".")
    if dot:
        return (bare, True) if prefix in (component.kind, component.name) else None
    declared = {f.name for f in dataclasses.fields(component.Options)}
    return (key, False) if key.replace("-", "_") in declared else None


def parse_options(component: type, pairs: Iterable[str], *, label: str | None = None) -> Any:
    """Build ``component.Options`` from ``key=value`` strings (hyphens in keys allowed; a
    ``kind.`` or ``name.`` prefix naming this component is allowed too)."""
    options_cls = component.Options
    label = label or f"{component.kind} '{component.name}'"
    fields = {f.name: f for f in dataclasses.fields(options_cls)}
    hints = typing.get_type_hints(options_cls)
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        addressed = addressed_key(component, key)
        key = (addressed[0] if addressed else key).replace("-", "_")
        if not sep:
            raise OptionError(f"{label}: option '{pair}' is not of the form key=value")
        if key not in fields:
            valid = ", ".join(fields) or "none"
            raise OptionError(f"{label}: unknown option '{key}' (valid: {valid})")
        values[key] = _convert(label, key, raw, hints[key], fields[key].metadata.get("min", 0))
    return options_cls(**values)


def _convert(label: str, key: str, raw: str, hint: Any, least: float = 0) -> Any:
    """``raw`` as the option's type; a number must be finite and at least ``least`` (the
    field's ``metadata["min"]``, 0 where it says none)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    target = args[0] if args and typing.get_origin(hint) is not None else hint
    try:
        if target is bool:
            low = raw.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError("expected true or false")
        if target in (int, float):
            try:
                value = target(raw)
            except ValueError:
                raise ValueError("expected a whole number" if target is int else
                                 "expected a number") from None
            if not math.isfinite(value) or value < least:
                raise ValueError(f"expected a number of at least {least:g}")
            return value
        return raw
    except ValueError as exc:
        raise OptionError(f"{label}: option '{key}={raw}': {exc}") from None


def describe_options(component: type) -> list[tuple[str, str, Any, str]]:
    """Return (name, type, default, help) for each option of ``component``."""
    hints = typing.get_type_hints(component.Options)
    rows = []
    for f in dataclasses.fields(component.Options):
        hint = hints[f.name]
        rows.append((f.name, getattr(hint, "__name__", str(hint)), f.default,
                     f.metadata.get("help", "")))
    return rows
