"""A quiet-by-default progress line on stderr for work that takes more than about a second."""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

_DELAY_S = 1.0
_REFRESH_S = 0.1


class Progress:
    """Shows ``<phase> <percent>`` on stderr, only on a terminal and only after a second.

    Use as a context manager; call :meth:`phase` when the work changes and :meth:`update` as it
    advances. Disabled, it costs one attribute check per call.
    """

    def __init__(self, enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        # Until the first phase: importing, loading the plugins (about a second).
        self._label = "starting"
        self._done = 0.0
        self._total = 0.0
        self._start = self._phase_start = time.monotonic()
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def phase(self, label: str, total: float = 0) -> None:
        """Start a new phase of work, with ``total`` units if known."""
        self._label, self._done, self._total = label, 0.0, float(total)
        self._phase_start = time.monotonic()

    def update(self, done: float, total: float | None = None) -> None:
        """Report that ``done`` units of the current phase are finished."""
        self._done = done
        if total is not None:
            self._total = float(total)

    def _run(self) -> None:
        while not self._stop.wait(_REFRESH_S):
            if time.monotonic() - self._start < _DELAY_S:
                continue
            self.stream.write(f"\r\033[K{self._line(time.monotonic())}")
            self.stream.flush()
            self._shown = True

    def _line(self, now: float) -> str:
        """The line at monotonic time ``now``: phase, percent, time since the start and, once
        the phase is a second old, the time left at its pace so far."""
        line = f"{self._label}"
        line += f" {100 * self._done / self._total:5.1f}%" if self._total else " ..."
        line += f"  {now - self._start:5.1f}s"
        spent = now - self._phase_start
        if self._total and 0 < self._done < self._total and spent >= _DELAY_S:
            left = spent * (self._total - self._done) / self._done
            line += f"  ETA {int(left) // 60}:{int(left) % 60:02d}"
        return line


NO_PROGRESS = Progress(enabled=False)
