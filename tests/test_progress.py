"""The progress line: percent, time since the start, and the time left at the phase's pace."""

from __future__ import annotations

import io

from tracekit.progress import Progress


def test_the_line_gives_the_time_left_at_the_pace_of_the_phase(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("tracekit.progress.time.monotonic", lambda: clock[0])
    progress = Progress(enabled=True, stream=io.StringIO())
    clock[0] = 130.0
    progress.phase("reading t.perf", 1000)
    clock[0] = 135.0
    progress.update(250)  # a quarter in 5 s: 15 s left
    assert progress._line(clock[0]) == "reading t.perf  25.0%   35.0s  ETA 0:15"
    progress.update(200, 400)  # a new total: half done in 5 s
    assert progress._line(clock[0]) == "reading t.perf  50.0%   35.0s  ETA 0:05"
    clock[0] = 130.5  # under a second into the phase: no estimate yet
    assert progress._line(clock[0]).endswith("30.5s")


def test_no_time_left_without_a_total_or_before_any_work(monkeypatch):
    monkeypatch.setattr("tracekit.progress.time.monotonic", lambda: 10.0)
    progress = Progress(enabled=True, stream=io.StringIO())
    assert progress._line(11.5) == "starting ...    1.5s"  # before the first phase
    progress.phase("analyzing")
    assert progress._line(75.0) == "analyzing ...   65.0s"
    progress.phase("writing", 10)
    assert progress._line(200.0) == "writing   0.0%  190.0s"
    progress.update(10)
    assert progress._line(200.0) == "writing 100.0%  190.0s"
