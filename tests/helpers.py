"""Helpers for tests: where the real inputs are, and how to require or skip them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "fixtures"
FIXTURES = ROOT / "fixtures"


def shared_path(*parts: str) -> Path:
    """A file under ../shared/fixtures; skip (or fail in CI) when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("TRACEKIT_REQUIRE_SHARED") == "1":
            pytest.fail(f"{path} is missing and TRACEKIT_REQUIRE_SHARED=1")
        pytest.skip(f"{path} is not here (clone ../shared beside the checkout)")
    return path


def sweep(values: list, *fast: object) -> list:
    """``values`` as test parameters, all but those in ``fast`` marked slow: a sweep over every
    fixture runs whole without ``-m "not slow"`` and on a small representative with it."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)),
                         marks=() if v in fast else pytest.mark.slow) for v in values]


def torch_traces() -> list[str]:
    """Relative paths of every PyTorch trace under ../shared/fixtures/torch-trace."""
    base = SHARED / "torch-trace"
    if not base.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("*.json*"))




def read_text(tmp_path: Path, registry, text: str, name: str, format: str):
    """Write ``text`` to ``tmp_path/name`` and read it with the reader called ``format``."""
    import tracekit

    path = tmp_path / name
    path.write_text(text)
    return tracekit.read(path, format=format, registry=registry)


def read_through_fifo(data: bytes, tmp_path: Path, registry):
    """``data`` read by tracekit from a FIFO that a thread writes into: input it can read
    only once, front to back, as from a pipe."""
    import threading

    import tracekit

    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=fifo.write_bytes, args=(data,))
    feeder.start()
    try:
        return tracekit.read(fifo, registry=registry)
    finally:
        feeder.join(10)


def event_rows(trace) -> list[dict]:
    """The events of ``trace`` as dicts, dictionary columns as strings and ``args`` parsed."""
    import orjson
    import pyarrow as pa

    ev = trace.events
    cols = {c: (ev[c].cast(pa.string()) if pa.types.is_dictionary(ev[c].type) else ev[c])
            .to_pylist() for c in ev.column_names}
    rows = [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]
    for r in rows:
        r["args"] = orjson.loads(r["args"]) if r["args"] else {}
    return rows
