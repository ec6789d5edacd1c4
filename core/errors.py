"""The exception tree: every error tracekit reports to a user derives from TracekitError."""

from __future__ import annotations

from pathlib import Path


class TracekitError(Exception):
    """Base of all errors tracekit handles; the CLI prints ``error: <message>`` and exits 1."""

    exit_code = 1


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


class TraceWriteError(TracekitError):
    """An output could not be written."""


class AnalysisError(TracekitError):
    """An analyzer could not run on the given trace."""


class TracekitWarning(UserWarning):
    """Base of tracekit's warnings."""


class LossyConversionWarning(TracekitWarning):
    """Something in the input could not be represented exactly in the output."""
