"""Filters on event columns: string tests run once per dictionary entry, not once per row.

The event model's ``kind``, ``category``, ``name`` and ``source`` columns are dictionary
encoded: a few distinct strings for millions of rows. Casting such a column to strings to
compare it materializes every row; these helpers test the dictionary and map the answer
through the codes instead. Plain string columns work too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

Column = pa.ChunkedArray | pa.Array


def _per_entry(column: Column, test: Callable[[pa.Array], pa.Array]) -> pa.ChunkedArray:
    """``test`` (strings -> booleans) applied to each distinct value; null rows are False."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = []
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            hit = pc.fill_null(test(chunk.dictionary), False)
            out.append(pc.fill_null(pc.take(hit, chunk.indices), False) if len(chunk.dictionary)
                       else pa.array(np.zeros(len(chunk), dtype=bool)))
        else:
            out.append(pc.fill_null(test(chunk), False))
    return pa.chunked_array(out, pa.bool_())


def equals(column: Column, value: str) -> pa.ChunkedArray:
    """Per row: ``column == value`` (False for nulls).

    Examples
    --------
    >>> import pyarrow as pa
    >>> kind = pa.chunked_array([pa.array(["slice", "sample", "slice"]).dictionary_encode()])
    >>> equals(kind, "slice").to_pylist()
    [True, False, True]
    """
    return _per_entry(column, lambda strings: pc.equal(strings, value))


def is_in(column: Column, values: Iterable[str]) -> pa.ChunkedArray:
    """Per row: is the value one of ``values``? (False for nulls)."""
    wanted = pa.array(list(values), pa.string())
    return _per_entry(column, lambda strings: pc.is_in(strings.cast(pa.string()), wanted))


def starts_with(column: Column, prefix: str) -> pa.ChunkedArray:
    """Per row: does the value start with ``prefix``? (False for nulls).

    Examples
    --------
    >>> import pyarrow as pa
    >>> category = pa.array(["gpu.kernel", "host.op", None, "gpu.memcpy"]).dictionary_encode()
    >>> starts_with(category, "gpu.").to_pylist()
    [True, False, False, True]
    """
    return _per_entry(column, lambda strings: pc.starts_with(strings.cast(pa.string()), prefix))


#: Host ranges that load input data (PyTorch's DataLoader iterator, its fetch and collate,
#: a Dataset's ``__getitem__``): a regular expression over names, for ``matches``.
DATA_LOADING_RANGE = r"(?i)dataloader|_next_data|collate|\bdataset\b"
#: Host ranges of torch.compile compiling (TorchDynamo's tracing, AOTAutograd, Inductor's code
#: generation): the phases PyTorch times with ``dynamo_timed``, its outermost ``dynamo`` and
#: ``entire_frame_compile`` ranges, ``compile_fx…``. Not the compiled code running
#: (``Torch-Compiled Region``, ``CompiledFunction``, Python frames under ``torch/_inductor/``
#: or ``triton/``, which every call of a compiled model has) nor the guard check of each call
#: (``TorchDynamo Cache Lookup``).
COMPILE_RANGE = (r"\(dynamo_timed\)$|^(dynamo|entire_frame_compile|backend_compile"
                 r"|inductor_compile|async_compile\.wait)$|^compile_fx")
#: Host ranges of an exchange between ranks: PyTorch's ``record_param_comms``, ``c10d::`` ops
#: and the process groups' own ranges (``nccl:all_reduce``, ``gloo:all_reduce``, ``mpi:``,
#: ``ucc:``, ``xccl:``), and MPI's blocking calls (``MPI_Wait``, ``MPI_Allreduce``,
#: ``MPI_Recv`` ...; not set-up calls such as ``MPI_Init`` or ``MPI_Comm_rank``); device work
#: launched inside one is communication.
COLLECTIVE_RANGE = (
    r"^record_param_comms$|^c10d::|^(nccl|gloo|mpi|ucc|xccl):|^c10d_functional::"
    r"|^_c10d_functional::|^P?MPI_(Wait|Waitall|Waitany|Waitsome|Test|Testall|Testany|Testsome"
    r"|Barrier|Allreduce|Reduce|Bcast|Allgather|Allgatherv|Gather|Gatherv|Scatter|Scatterv"
    r"|Alltoall|Alltoallv|Alltoallw|Reduce_scatter|Reduce_scatter_block|Scan|Exscan|Send|Ssend"
    r"|Bsend|Rsend|Recv|Sendrecv|Sendrecv_replace|Probe|Mprobe|Win_fence|Win_wait"
    r"|Win_complete)$")


def matches(column: Column, pattern: str) -> pa.ChunkedArray:
    """Per row: does the value contain a match of the regular expression ``pattern`` (RE2
    syntax, as ``pyarrow.compute.match_substring_regex``)? (False for nulls).

    Examples
    --------
    >>> import pyarrow as pa
    >>> name = pa.array(["enumerate(DataLoader)#__next__", "aten::mm", None]).dictionary_encode()
    >>> matches(name, "(?i)dataloader").to_pylist()
    [True, False, False]
    """
    return _per_entry(column, lambda strings: pc.match_substring_regex(
        strings.cast(pa.string()), pattern))


def any_true(mask: pa.ChunkedArray | pa.Array) -> bool:
    """Whether any row of a boolean mask is true (False for no rows)."""
    return bool(pc.any(mask).as_py()) if len(mask) else False


def arg_strings(args: Column, key: str) -> pa.ChunkedArray:
    """Per row: the string value of ``key`` in its ``args`` JSON object, else null.

    Readers write ``args`` as flat JSON objects; the first ``"key": "..."`` pair of a row is
    taken, its JSON escapes decoded.

    Examples
    --------
    >>> import pyarrow as pa
    >>> arg_strings(pa.array(['{"event":"cycles:u","cpu":3}', '{"cpu":1}', None]),
    ...             "event").to_pylist()
    ['cycles:u', None, None]
    """
    pattern = '"' + re.escape(key) + r'"\s*:\s*"(?P<v>(?:[^"\\]|\\.)*)"'
    chunks = args.chunks if isinstance(args, pa.ChunkedArray) else [args]
    out = []
    for chunk in chunks:
        values = pc.struct_field(pc.extract_regex(chunk.cast(pa.string()), pattern), "v")
        escaped = pc.fill_null(pc.match_substring(values, "\\"), False)
        if pc.any(escaped).as_py():
            decoded = [orjson.loads(f'"{v}"') if e else v
                       for v, e in zip(values.to_pylist(), escaped.to_pylist(), strict=True)]
            values = pa.array(decoded, pa.string())
        out.append(values)
    return pa.chunked_array(out, pa.string())
