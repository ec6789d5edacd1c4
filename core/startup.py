"""Process start-up: keep pyarrow from importing pandas in the ``tracekit`` command."""

from __future__ import annotations

import sys
from typing import Any


class _NoPandas:
    """A ``sys.meta_path`` finder under which ``import pandas`` fails."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ImportError("pandas is not imported by the tracekit command")


def arrow_without_pandas() -> None:
    """Have pyarrow go on as where pandas is not installed, unless pandas is imported already.

    pyarrow imports pandas (about 0.25 CPU s) the first time it converts numpy arrays or
    Python objects, or converts to numpy, only to recognise pandas objects, which tracekit
    never hands it. Its Python side and its C++ side each try the import once and remember the
    outcome: both are made to try here, with the import failing. pandas stays importable;
    pyarrow's ``to_pandas`` and ``from_pandas`` still import it when called. For the command
    only, not ``import tracekit``: a library user may hand pyarrow pandas objects.
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    shim = getattr(pa.lib, "_pandas_api", None)
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        if shim is not None:
            shim.have_pandas  # noqa: B018 - the Python side's one attempt
        pa.nulls(1, pa.int64()).to_numpy(zero_copy_only=False)  # the C++ side's
    finally:
        sys.meta_path.remove(blocker)
