"""Harness for damaged inputs: read one input in a separate process with a memory limit and
a time limit, write and analyze what was read, and judge the outcome by the project's rules.

A damaged input may be read (the reader recovered, counting what it skipped) or refused with
a ``TracekitError`` whose message is one line of at most 300 characters naming the file. It
must never reach the catch-all that turns a reader's own exception into "reader 'x' failed"
(``ReaderCrashError``; the same for writers and analyzers), be blamed on the plugin
(``PluginContractError``), escape as another exception, hang, blow up memory, crash the
process, change the input or leave files behind.

The reads run in a worker process (``python tests/badinput.py --serve``) that imports
tracekit once and takes one request per line. It runs under ``RLIMIT_AS`` (4 GiB) and, per
request, ``RLIMIT_CPU`` (10 s more than it has used), so a memory blow-up or a loop fails a
test instead of the machine; CPU time rather than wall time, so that a busy machine does not
make a slow read look like a hang (a request that blocks is stopped after 60 s of wall time).
The worker is restarted after a hang or a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "fixtures" / "bad"
MEMORY_LIMIT = 4 << 30  # bytes of address space for the worker and the CLI runs
TIMEOUT_S = 10.0  # seconds of CPU time per input (SIGXCPU past it)
WALL_FACTOR = 6  # ... and of wall-clock time, times this (for a busy machine, or a block)
MESSAGE_LIMIT = 300
MESSAGE_AFTER_PATH = 120  # a longer path is kept whole, with this much of the message after it
# The catch-alls of tracekit.pipeline (read, write, annotate, analyze): reaching one is a bug.
CATCH_ALL = re.compile(r"\b(?:reader|writer|analyzer) '[^']*' failed\b")
FORBIDDEN = ("ReaderCrashError", "PluginContractError")


def load_index() -> dict[str, dict[str, Any]]:
    """fixtures/bad/index.json: what each corpus entry is and what is expected of it."""
    return json.loads((BAD / "index.json").read_text())


# -- the outcome of one attempt ------------------------------------------------------------

@dataclass
class Outcome:
    """What happened to one input: ``status`` is ``ok`` (read, written and analyzed),
    ``error`` (an exception at ``stage``), ``hang`` or ``died`` (the worker process)."""

    status: str
    stage: str = "read"
    type: str = ""
    bases: list[str] = field(default_factory=list)
    message: str = ""
    root: str = ""  # the exception at the bottom of the __cause__ chain, "Type: message"
    where: str = ""  # the deepest tracekit frame of that exception
    raised_at: str = ""  # its innermost frame (inside a library, often)
    events: int | None = None
    notices: int | None = None  # records the read log says were skipped or warned about
    leftovers: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def signature(self) -> str:
        """A key that groups outcomes with the same cause: status, types and location."""
        if self.status != "error":
            return self.status
        return f"{self.stage}: {self.type} <- {self.root.split(':')[0]} at {self.where}"


def refused_cleanly(bases: list[str], message: str) -> bool:
    """Whether an error is one of the project's own, not a catch-all or a contract error."""
    return "TracekitError" in bases and not any(b in bases for b in FORBIDDEN) and \
        not CATCH_ALL.search(message)


def _message_limit(message: str, name: str) -> int:
    """How long a message may be: ``MESSAGE_LIMIT``, or where it begins with a path (to the
    input ``name``) longer than that leaves room for, the path and ``MESSAGE_AFTER_PATH``."""
    head = message.partition(": ")[0]
    if head.endswith(name):
        return max(MESSAGE_LIMIT, len(head) + 2 + MESSAGE_AFTER_PATH)
    return MESSAGE_LIMIT


def problems(outcome: Outcome, name: str, expect: str = "any",
             mentions: tuple[str, ...] | list[str] = (), noted: bool = False) -> list[str]:
    """What is wrong with ``outcome`` for the input called ``name`` (empty when all is right).

    ``expect`` is ``ok`` (must read), ``error`` (must be refused) or ``any``; ``mentions``
    are words a refusal must contain besides the file name; ``noted``: the input holds a
    value that cannot be represented, so a successful read must say so in its read log.
    """
    found = []
    if outcome.status == "hang":
        found.append(f"hang: no result within {TIMEOUT_S:g} s of CPU time ({outcome.detail})")
    elif outcome.status == "died":
        found.append(f"the process died: {outcome.detail}")
    elif outcome.status == "error":
        what = f"{outcome.stage}: {outcome.type}: {outcome.message}"
        if "TracekitError" not in outcome.bases:
            found.append(f"escaped as a traceback: {outcome.root} at {outcome.where}")
        elif any(b in outcome.bases for b in FORBIDDEN) or CATCH_ALL.search(outcome.message):
            found.append(f"reached the catch-all ({outcome.type}): {outcome.root} at "
                         f"{outcome.where}")
        else:
            limit = _message_limit(outcome.message, name)
            if "\n" in outcome.message or len(outcome.message) > limit:
                found.append(f"message is not one line of <= {limit} chars: "
                             f"{outcome.message[:400]!r}")
            if outcome.stage == "read" and name not in outcome.message:
                found.append(f"message does not name the file {name!r}: {what}")
            if "out of memory" in outcome.message:
                found.append(f"memory blow-up on a small input: {what}")
            if expect == "ok" and outcome.stage == "read":
                found.append(f"expected a successful read: {what} (at {outcome.where})")
            missing = [m for m in mentions if m.lower() not in outcome.message.lower()]
            if outcome.stage == "read" and missing:
                found.append(f"message does not mention {', '.join(map(repr, missing))}: "
                             f"{what}")
    elif expect == "error":
        found.append(f"read succeeded ({outcome.events} events); expected an error")
    elif noted and not outcome.notices:
        found.append(f"read succeeded ({outcome.events} events) with no 'skipped:' or "
                     "'warning:' note in the read log: the damage went unreported")
    if outcome.leftovers:
        found.append(f"left files behind in the output folder: {outcome.leftovers}")
    return found


# -- snapshots: the input must not change ---------------------------------------------------

def snapshot(path: Path) -> dict[str, str]:
    """sha256 (or link target) of ``path`` and of everything under it, symlinks not followed."""
    found: dict[str, str] = {}
    paths = [path] if not path.is_dir() or path.is_symlink() else \
        [path, *sorted(path.rglob("*"))]
    for p in paths:
        key = str(p.relative_to(path.parent))
        if p.is_symlink():
            found[key] = "-> " + os.readlink(p)
        elif p.is_file():
            found[key] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            found[key] = "dir"
    return found


def folder_listing(folder: Path) -> list[str]:
    """Names in ``folder`` (not recursive), sorted."""
    return sorted(os.listdir(folder))


# -- the worker -----------------------------------------------------------------------------

def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


class Worker:
    """A long-lived reading process; ``attempt`` sends it one input and waits for the answer."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.errors: Any = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self.errors, env=env, cwd=ROOT)
        return self.proc

    def stop(self) -> None:
        """Kill the worker (a new one starts on the next attempt)."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def attempt(self, path: Path, format: str | None = None, *, write: bool = True,
                analyze: bool = True, timeout: float = TIMEOUT_S) -> Outcome:
        """Read ``path`` (as ``format``, or detected), then write and analyze the trace."""
        proc = self._start()
        request = {"path": str(path), "format": format, "write": write, "analyze": analyze,
                   "cpu_s": timeout}
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        ready, _, _ = select.select([proc.stdout], [], [], timeout * WALL_FACTOR)
        if not ready:
            self.stop()
            return Outcome("hang", detail=f"no answer within {timeout * WALL_FACTOR:g} s")
        line = proc.stdout.readline()
        if not line:
            return self._died()
        reply = json.loads(line)
        if reply.pop("restart", False):
            self.stop()
        return Outcome(**reply)

    def _died(self) -> Outcome:
        assert self.proc is not None
        code = self.proc.wait()
        self.errors.seek(0)
        tail = self.errors.read()[-600:].decode("utf-8", "replace").strip().replace("\n", " | ")
        self.proc = None
        if code == -signal.SIGXCPU:
            return Outcome("hang", detail="used all its CPU time")
        why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return Outcome("died", detail=f"{why}; stderr: {tail}")


_WORKER: Worker | None = None


def worker() -> Worker:
    """The worker shared by every test of this pytest process."""
    global _WORKER
    if _WORKER is None:
        _WORKER = Worker()
    return _WORKER


def check(path: Path, format: str | None = None, *, expect: str = "any",
          mentions: tuple[str, ...] | list[str] = (), noted: bool = False,
          write: bool = True, analyze: bool = True) -> tuple[Outcome, list[str]]:
    """Attempt ``path`` in the worker; return the outcome and every problem with it,
    including any change to the input (or to the folder holding it)."""
    path = Path(path)
    before, listing = snapshot(path), folder_listing(path.parent)
    outcome = worker().attempt(path, format, write=write, analyze=analyze)
    found = problems(outcome, path.name, expect, mentions, noted)
    if snapshot(path) != before:
        found.append("the input changed")
    if folder_listing(path.parent) != listing:
        found.append(f"files appeared beside the input: "
                     f"{sorted(set(folder_listing(path.parent)) - set(listing))}")
    return outcome, found


# -- the command line -----------------------------------------------------------------------

def run_cli(*args: str, timeout: float = TIMEOUT_S, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """``python -m tracekit ARGS`` under the memory limit and ``timeout`` s of CPU time
    (SIGXCPU kills it past that); ``WALL_FACTOR`` times that of wall time raises
    ``subprocess.TimeoutExpired`` (the caller fails the test with it)."""
    cpu = int(timeout) + 1
    code = ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT})); "
            f"resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu})); "
            "sys.argv[0] = 'tracekit'; runpy.run_module('tracekit', run_name='__main__', "
            "alter_sys=True)")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout * WALL_FACTOR, cwd=cwd)


# -- the worker's side ----------------------------------------------------------------------

def _frames(exc: BaseException) -> tuple[str, str]:
    """(deepest tracekit frame, innermost frame) of ``exc``'s traceback, as file:line fn."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "", ""

    def fmt(f: traceback.FrameSummary) -> str:
        name = f.filename
        with contextlib.suppress(ValueError):
            name = str(Path(name).resolve().relative_to(ROOT))
        return f"{name}:{f.lineno} in {f.name}"

    ours = [f for f in frames if f.filename.startswith(str(ROOT)) and "/.venv/" not in
            f.filename and not f.filename.endswith(("core/pipeline.py", "badinput.py"))]
    return fmt(ours[-1] if ours else frames[-1]), fmt(frames[-1])


def _error(stage: str, exc: BaseException) -> dict[str, Any]:
    root = exc
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    if root is exc and exc.__context__ is not None and not exc.__suppress_context__:
        root = exc.__context__  # raised while handling another: that one is the cause
    where, raised_at = _frames(root)
    if not where:
        where, raised_at = _frames(exc)
    try:
        message = str(exc)
    except Exception as inner:
        message = f"<str() failed: {type(inner).__name__}>"
    try:
        root_text = str(root)
    except Exception:
        root_text = "?"
    root_text = " ".join(root_text.split())[:200]
    return {"status": "error", "stage": stage, "type": type(exc).__name__,
            "bases": [c.__name__ for c in type(exc).__mro__], "message": message,
            "root": f"{type(root).__name__}: {root_text}", "where": where,
            "raised_at": raised_at,
            "restart": isinstance(root, MemoryError) or "out of memory" in message}


def _serve_one(request: dict[str, Any], registry: Any) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import tracekit
    from tracekit.report import render_text, reports_to_json

    try:
        trace = tracekit.read(request["path"], format=request["format"], registry=registry)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _error("read", exc)
    reply: dict[str, Any] = {"status": "ok", "stage": "done", "events": trace.events.num_rows,
                             "notices": sum(trace.log.notices().values())}
    if request["write"]:
        out = Path(tempfile.mkdtemp(prefix="badinput-out-"))
        try:
            tracekit.write(trace, out / "out.pftrace", registry=registry)
        except Exception as exc:
            error = _error("write", exc)
            reply["leftovers"] = folder_listing(out)
            if not refused_cleanly(error["bases"], error["message"]):
                return {**reply, **error}
            # A clean refusal (nothing to draw, say): analyze goes on, as the CLI would.
            reply["detail"] = f"write refused: {error['message']}"
        else:
            reply["leftovers"] = [n for n in folder_listing(out) if n != "out.pftrace"]
        finally:
            shutil.rmtree(out, ignore_errors=True)
    if request["analyze"]:
        names = ["bottleneck", "summary"]
        kinds = trace.events["kind"].cast(pa.string())
        if trace.events.num_rows and pc.any(pc.equal(kinds, "sample")).as_py():
            names.append("hotspots")
        try:
            reports = tracekit.analyze(trace, names, registry=registry)
            render_text(reports)
            reports_to_json(reports, [request["path"]])
        except Exception as exc:
            return {**_error("analyze", exc), "events": trace.events.num_rows}
    return reply


def serve() -> None:
    """Answer requests read from stdin, one JSON object per line, until stdin closes."""
    _limit_memory()
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what a component prints goes to stderr, never into the replies
    sys.stdout = sys.stderr
    import warnings

    warnings.simplefilter("ignore")
    from tracekit.registry import load_registry

    registry = load_registry(dists={"tracekit"}, environ={})
    import resource

    for line in sys.stdin:
        request = json.loads(line)
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(used.ru_utime + used.ru_stime + request["cpu_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        try:
            reply = _serve_one(request, registry)
        except MemoryError:
            reply = {"status": "died", "detail": "MemoryError outside the read",
                     "restart": True}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    serve()
