"""The ``perf script --header`` block (``# key : value`` lines) into source metadata."""

from __future__ import annotations

from typing import Any

KEYS = {"captured on": "captured_on", "hostname": "hostname", "os release": "os_release",
        "perf version": "perf_version", "arch": "arch", "nrcpus online": "nrcpus_online",
        "nrcpus avail": "nrcpus_avail", "cpudesc": "cpu", "cmdline": "command_line",
        "total memory": "total_memory"}


def header_metadata(lines: list[str]) -> dict[str, Any]:
    """What the header says about the run: host, perf version, command line, events."""
    meta: dict[str, Any] = {}
    events = []
    for line in lines:
        key, sep, value = line.lstrip("#").partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "event":
            events.append(value)
        elif key in KEYS and value:
            meta[KEYS[key]] = value
    if events:
        meta["event_descriptions"] = events
    return meta
