"""What rocprof v1's outputs (results.json, results.db) share: the kind of device work a
name stands for, and the byte count a HIP call's argument text gives its work."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

# The ops trace names copies and fills by what the runtime did; zero-length "Unknown command
# type" ops are barrier packets (in the real files each is launched by hipStreamSynchronize
# or hipDeviceSynchronize), as are "Marker" ones (formats.md 2.1).
# The patterns are anchored: kernel names such as Kokkos's ViewFill or copyBuffer stay kernels.
_WORK_BY_NAME = ((re.compile(r"^(?:Copy|Memcpy)[A-Za-z]*$"), "gpu.memcpy"),
                 (re.compile(r"^Fill[A-Za-z]*$"), "gpu.memset"),
                 (re.compile(r"^(?:Unknown command type|Marker.*|Barrier.*)$"), "gpu.sync"))
_SIZE = re.compile(r"\bsizeBytes\((\d+)\)")


# Copy op names say their direction: CopyHostToDevice, hipMemcpyDeviceToHost ...
COPY_WORDS = (("HostToDevice", "HtoD"), ("DeviceToHost", "DtoH"), ("DeviceToDevice", "DtoD"),
              ("HostToHost", "HtoH"))


def work_category(name: str, default: str) -> str:
    """The category of one device op by its name; ``default`` for kernels."""
    return next((c for pattern, c in _WORK_BY_NAME if pattern.search(name)), default)


def work_categories(names: pa.Array, default: str) -> pa.Array:
    """``work_category`` over a column, once per distinct name."""
    codes = pc.fill_null(names, "").dictionary_encode()
    return pa.array([work_category(v, default) for v in codes.dictionary.to_pylist()],
                    pa.string()).take(codes.indices)


def copy_kind_of(names: pa.Array) -> pa.Array:
    """HtoD, DtoH, DtoD or HtoH from op names such as CopyHostToDevice (else null)."""
    out = pa.nulls(len(names), pa.string())
    for word, kind in COPY_WORDS:
        out = pc.if_else(pc.fill_null(pc.match_substring(names, word), False), kind, out)
    return out


def size_of_call(args_text: str | None) -> int | None:
    """``sizeBytes(N)`` from a HIP call's argument text (copies, memsets), if present."""
    m = _SIZE.search(args_text or "")
    return int(m.group(1)) if m else None


def size_of_calls(args: pa.Array) -> pa.Array:
    """``size_of_call`` over a column of call args (text or JSON holding the text)."""
    found = pc.extract_regex(pc.cast(args, pa.string()), r"\bsizeBytes\((?P<n>\d+)\)")
    return pc.struct_field(found, "n").cast(pa.int64())
