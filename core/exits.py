"""How a ``tracekit`` command ends: every TracekitError as one line and its exit code, and
SIGINT, SIGTERM and a closed standard output as clean exits."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

import typer
import typer.core
from tracekit.errors import TracekitError


class Terminated(BaseException):
    """Raised by the SIGTERM handler so that outputs being written are cleaned up."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


class OneLineErrors(typer.core.TyperGroup):
    """Turns every TracekitError, plugin commands' included, into one line and an exit code;
    SIGINT and SIGTERM unwind (removing temporary outputs) and exit 130 and 143."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TracekitError as exc:
            if (ctx.obj or {}).get("debug"):
                traceback.print_exc()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            raise typer.Exit(130) from None
        except Terminated:
            typer.echo("error: terminated", err=True)
            raise typer.Exit(143) from None
        except BrokenPipeError:
            # The reader of our standard output went away (``| head``): stop quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(141) from None


def run(app: typer.Typer, args: list[str]) -> int:
    """Run ``app`` on ``args`` with SIGTERM unwinding; return the exit code."""
    previous = _on_sigterm(_terminate)
    try:
        app(args=args, prog_name="tracekit")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        _on_sigterm(previous)
    return 0


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM where that is possible (the main thread only)."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, TypeError):  # not the main thread, or no previous Python handler
        return None
