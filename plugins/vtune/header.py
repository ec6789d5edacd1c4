"""Which delimiter a VTune report uses, and why a header that looks like VTune's cannot be read.

``-csv-delimiter`` takes any character (formats.md section 3.1: comma, tab, semicolon, colon
...). Comma, tab and semicolon are found as before: whichever splits the header into the most
fields. Any other ASCII punctuation is accepted only when it is unambiguous: it alone splits
the header into a VTune header of two or more named columns and every report line into as
many fields. VTune's column names hold colons themselves (``CPU Time:Effective Time``), so a
colon report is readable only where those names are quoted.
"""

from __future__ import annotations

import csv
import string

GROUPINGS = ("Function", "Function Stack", "Module", "Process", "Thread", "Package",
             "Source File", "Computing Task", "Process/Thread", "Function (Full)", "Core",
             "Call Stack", "Source Line", "Basic Block", "Source Function")
METRIC_HINTS = ("CPU Time", "Hardware Event Count", "Memory Bound", "Instructions Retired",
                "Clockticks", "Computing Task:")
STANDARD = (",", "\t", ";")
NAMES = {",": "comma", "\t": "tab", ";": "semicolon", ":": "colon", "|": "pipe"}
# Other single characters -csv-delimiter may be given (the quote cannot be a delimiter here).
OTHERS = tuple(c for c in string.punctuation if c not in ",;\"")


class CsvLineError(Exception):
    """A line the csv module cannot split (a field over its size limit)."""


def split_line(line: str, delimiter: str) -> list[str]:
    try:
        return next(csv.reader([line], delimiter=delimiter))
    except csv.Error as exc:
        raise CsvLineError(str(exc)) from None


def name(delimiter: str) -> str:
    """The delimiter as metadata names it: ``comma``, ``tab`` ... or the character quoted."""
    return NAMES.get(delimiter, repr(delimiter))


def kind_of(header: list[str]) -> str | None:
    """The report a header starts: summary, timeline, tree, grouped, or None."""
    if len(header) < 2:
        return None
    first = header[0].strip()
    if first == "Hierarchy Level":
        return "summary"
    if first == "timeBin":
        return "timeline"
    if first in ("Function Stack", "Call Stack"):
        return "tree"
    if first in GROUPINGS or any(h.startswith(METRIC_HINTS) for h in header[1:]):
        return "grouped"
    return None


def find(lines: list[tuple[int, str]], partial: bool) -> tuple[str, list[str], str] | str | None:
    """``(delimiter, header, kind)`` of the report whose first line is ``lines[0]``; a
    one-line reason where a VTune header is there but cannot be read; None where there is no
    VTune header. ``partial``: the last line may be cut (a sniffed head), so it is not
    measured. Raises CsvLineError for a header the csv module cannot split."""
    first = lines[0][1]
    delimiter = max(STANDARD, key=lambda d: len(split_line(first, d)))
    header = split_line(first, delimiter)
    kind = kind_of(header)
    if kind is not None:
        return delimiter, header, kind
    body = lines[1:-1] if partial else lines[1:]
    fits, misfits = [], []
    for d in (*STANDARD, *OTHERS):
        if d == delimiter or d not in first:
            continue
        try:
            header = split_line(first, d)
        except CsvLineError:
            continue
        kind = kind_of(header)
        if kind is None or not all(h.strip() for h in header):
            continue
        bad = None if kind == "summary" else _first_misfit(body, d, len(header), kind)
        if bad is None:
            fits.append((d, header, kind))
        else:
            misfits.append((d, len(header), *bad))
    if len(fits) == 1:
        return fits[0]
    if fits:
        return ("the header reads as a VTune report with more than one delimiter (" +
                ", ".join(name(d) for d, _, _ in fits) + "); export with -csv-delimiter tab")
    if misfits:
        d, width, no, got = misfits[0]
        return (f"header read with the {name(d)} delimiter, but line {no} has {got} fields "
                f"where it has {width} (an unquoted {name(d)} in a name or cell?); export "
                "with -csv-delimiter tab")
    return None


def _first_misfit(body: list[tuple[int, str]], delimiter: str, width: int,
                  kind: str) -> tuple[int, int] | None:
    for no, line in body:
        text = line.lstrip(" ") if kind == "tree" else line
        try:
            got = len(split_line(text, delimiter))
        except CsvLineError:
            return no, 0
        if got != width:
            return no, got
    return None


def split_names_hint(header: list[str], delimiter: str, got: int) -> str:
    """Why a line of ``got`` fields does not fit a comma header, where the header's names
    hold unquoted commas (``GPU Memory Bandwidth, GB/sec:Read``): the header then has names
    that begin with the space after such a comma. Empty where that is not the case."""
    if delimiter != ",":
        return ""
    pieces = [h for h in header[1:] if h.startswith(" ") and h.strip()]
    if not pieces:
        return ""
    joined = next(header[i - 1] + "," + h for i, h in enumerate(header) if h in pieces)
    return (f": {len(pieces)} header names begin with a space after a comma ({joined!r}): "
            f"names with an unquoted comma split the header ({len(header)} - {len(pieces)} = "
            f"{len(header) - len(pieces)} columns); export with -csv-delimiter tab")
