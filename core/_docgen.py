"""Generate docs/plugins/toolkit.md from the docstrings of ``tracekit.toolkit``.

``python -m tracekit._docgen > docs/plugins/toolkit.md``; a test fails when the page is stale.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from types import ModuleType
from typing import Any

from tracekit import toolkit

_LITERAL = re.compile(r"``([^`]+)``")
_ROLE = re.compile(r":(?:func|class|meth|attr|data):`~?([^`]+)`")


def _markdown(doc: str | None) -> list[str]:
    """A docstring as Markdown: ``x`` as `x`, numpydoc section heads in bold, examples in
    a code block."""
    if not doc:
        return []
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    in_code = False
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt and set(nxt) == {"-"} and len(nxt) == len(line):  # a numpydoc section head
            out += [f"**{line}**", ""]
            i += 2
            continue
        if line.startswith(">>>") and not in_code:
            out += ["```pycon"]
            in_code = True
        elif in_code and not line.strip():
            out += ["```"]
            in_code = False
        out.append(line if in_code else _ROLE.sub(r"`\1`", _LITERAL.sub(r"`\1`", line)))
        i += 1
    if in_code:
        out.append("```")
    return out


class _Written:
    """An annotation shown as it is written in the source (they are strings here)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(obj: Any, returns: bool = True) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    empty = inspect.Signature.empty

    def written(annotation: Any) -> Any:
        return _Written(annotation) if isinstance(annotation, str) else annotation

    def default(value: Any) -> Any:
        # A function's repr holds its address, which changes from run to run.
        return _Written("...") if callable(value) and not isinstance(value, type) else value

    params = [p.replace(annotation=written(p.annotation), default=default(p.default))
              for p in sig.parameters.values()]
    result = written(sig.return_annotation) if returns else empty
    return str(sig.replace(parameters=params, return_annotation=result))


def _function(name: str, obj: Any, level: str = "###") -> list[str]:
    return [f"{level} `{name}{_signature(obj)}`", "", *_markdown(obj.__doc__), ""]


def _class(name: str, cls: type, level: str = "###") -> list[str]:
    out = [f"{level} class `{name}{_signature(cls, returns=False)}`", "",
           *_markdown(cls.__doc__), ""]
    for attr, member in vars(cls).items():
        if attr.startswith("_") or not (inspect.isfunction(member)
                                        or isinstance(member, (classmethod, staticmethod))):
            continue
        function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        out += _function(f"{name}.{attr}", function, level + "#")
    return out


def _assignments(module: ModuleType) -> dict[str, tuple[str, str]]:
    """Per module-level assignment that has a ``#:`` comment above it: the comment's text and
    the value as it is written."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else node.target if isinstance(node, ast.AnnAssign) and node.value else None
        if not isinstance(target, ast.Name):
            continue
        comment: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#:"):
            comment.insert(0, lines[row].lstrip()[2:].strip())
            row -= 1
        if comment:
            found[target.id] = (" ".join(comment),
                                ast.get_source_segment(source, node.value) or "...")
    return found


def _namespace(name: str, module: ModuleType) -> list[str]:
    """A module exported whole: its docstring, then what its ``__all__`` names in the order
    they are defined (without ``__all__``, its public functions)."""
    out = [f"### `{name}`", "", *_markdown(module.__doc__), ""]
    public = getattr(module, "__all__", None)
    constants = _assignments(module)
    for attr, member in vars(module).items():
        if public is None:
            if attr.startswith("_") or not inspect.isfunction(member) \
                    or member.__module__ != module.__name__:
                continue
        elif attr not in public:
            continue
        if inspect.isfunction(member):
            out += _function(f"{name}.{attr}", member, "####")
        elif inspect.isclass(member):
            out += _class(f"{name}.{attr}", member, "####")
        elif attr in constants:
            doc, written = constants[attr]
            value = repr(member) if isinstance(member, (int, str, bytes, tuple)) else written
            out += [f"#### `{name}.{attr} = {value}`", "", *_markdown(doc), ""]
        else:
            raise ValueError(f"{module.__name__}.{attr} is public but has no #: comment")
    return out


def render() -> str:
    """Return the Markdown reference page of ``tracekit.toolkit``."""
    out = ["# The toolkit for component authors", "",
           "<!-- Generated by `python -m tracekit._docgen > docs/plugins/toolkit.md` from the "
           "docstrings of core/toolkit.py; do not edit. -->", "",
           *_markdown(toolkit.__doc__), ""]
    for title, intro, names in toolkit.SECTIONS:
        out += [f"## {title}", ""]
        if intro:
            out += [*_markdown(intro), ""]
        for name in names:
            obj = getattr(toolkit, name)
            if isinstance(obj, ModuleType):
                out += _namespace(name, obj)
            elif inspect.isclass(obj):
                out += _class(name, obj)
            elif callable(obj) and not isinstance(obj, bytes):
                out += _function(name, obj)
            else:
                value = repr(obj) if isinstance(obj, (int, str, bytes, tuple)) else \
                    type(obj).__name__
                out += [f"### `{name} = {value}`", "", *_markdown(toolkit.CONSTANTS[name]), ""]
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
