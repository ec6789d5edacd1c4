"""The exception tree: every error tracekit reports to a user derives from TracekitError."""

from __future__ import annotations

import re
from pathlib import Path

MESSAGE_LIMIT = 300
_LONG_TOKEN = 80


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` as one line of at most ``limit`` characters, long values cut short.

    Line breaks and runs of white space become one space; a single token longer than 80
    characters (a bad value echoed by a parser, say) keeps its first 60 and ``…``.
    """
    words = []
    for word in re.split(r"\s+", text.strip()):
        words.append(word if len(word) <= _LONG_TOKEN else word[:60] + "…")
    line = " ".join(words)
    return line if len(line) <= limit else line[: limit - 1] + "…"


class TracekitError(Exception):
    """Base of all errors tracekit handles; the CLI prints ``error: <message>`` and exits 1.

    ``str()`` is always one line of at most 300 characters (see ``one_line``).
    """

    exit_code = 1

    def __str__(self) -> str:
        text = super().__str__()
        head, sep, rest = text.partition(": ")
        if sep and head and not any(c.isspace() for c in head):
            # A leading "<path>: " names the file: kept whole, the rest cut to fit.
            return f"{head}: {one_line(rest, max(MESSAGE_LIMIT - len(head) - 2, 120))}"
        return one_line(text)


class UsageError(TracekitError):
    """The command line or an API call asked for something impossible (exit 2)."""

    exit_code = 2


class OptionError(UsageError, ValueError):
    """An option given with ``-O key=value`` is unknown or has a bad value.

    Example message: ``reader 'kineto': unknown option 'lim' (valid: keep_flow_events)``.
    """


class UnknownFormatError(UsageError, LookupError):
    """A format name (``--from``/``--to``/``-a``) names no registered component."""


class FormatDetectionError(TracekitError):
    """No reader recognises an input, or several recognise it equally well.

    Example message: ``trace.bin: no reader recognises this file; pass --from FORMAT``.
    """


class PluginError(TracekitError):
    """Something is wrong with a plugin."""


class PluginLoadError(PluginError):
    """A plugin could not be imported or failed while registering its components."""


class PluginConflictError(PluginError):
    """Two plugins register a component of the same kind under the same name."""


class PluginContractError(PluginError):
    """A plugin broke the plugin API: wrong type, bad name, or events off the schema."""


class TraceReadError(TracekitError):
    """An input could not be read. ``str()`` is ``<path>: [<location>: ]<message>``."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        location: str | None = None,
        reader: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.location = location
        self.reader = reader
        parts = [p for p in (self.path, location, message) if p]
        super().__init__(": ".join(parts))

    def __str__(self) -> str:
        # The path is kept whole (it names the file); what follows it is cut to fit.
        rest = ": ".join(p for p in (self.location, self.message) if p)
        if not self.path:
            return one_line(rest)
        if not rest:
            return self.path
        return f"{self.path}: {one_line(rest, max(MESSAGE_LIMIT - len(self.path) - 2, 120))}"


class ReaderCrashError(TraceReadError):
    """A reader raised something other than a TracekitError: a reader bug on odd input.

    The last-resort catch-all in ``tracekit.read`` turns it into one line; the bad-input
    corpus and the fuzz tests fail when any input reaches it.
    """


class TraceWriteError(TracekitError):
    """An output could not be written."""


class OutputExistsError(TraceWriteError):
    """The output exists and ``--force`` (``force=True``) was not given."""


class EmptyOutputError(TraceWriteError):
    """The writer has nothing it can write from the input; no file is left behind.

    Example message: ``x.pftrace: nothing to write: no event has a timestamp``.
    """


class AnalysisError(TracekitError):
    """An analyzer could not run on the given trace."""


class TracekitWarning(UserWarning):
    """Base of tracekit's warnings."""


class LossyConversionWarning(TracekitWarning):
    """Something in the input could not be represented exactly in the output."""
