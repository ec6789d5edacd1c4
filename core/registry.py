"""Plugin discovery over the ``tracekit`` entry-point group, and the registry of components.

Built-in plugins are found exactly like third-party ones: through entry points in the
installed distributions' metadata. A plugin that fails to import or register is isolated:
it is recorded with its error and everything else keeps working.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, cast

import pluggy
from tracekit import hookspecs
from tracekit.errors import (
    PluginConflictError,
    PluginContractError,
    PluginError,
    PluginLoadError,
    UnknownFormatError,
)
from tracekit.interfaces import Analyzer, Component, Reader, ReportFormat, Writer

ENTRY_POINT_GROUP = "tracekit"
BUILTIN_DIST = "tracekit"
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
KINDS: dict[str, tuple[str, type[Component]]] = {
    "reader": ("register_readers", Reader),
    "writer": ("register_writers", Writer),
    "analyzer": ("register_analyzers", Analyzer),
    "report-format": ("register_report_formats", ReportFormat),
}


@dataclass
class PluginInfo:
    """One discovered plugin (an entry point) and what became of it."""

    name: str
    dist: str
    version: str
    value: str
    error: str | None = None
    disabled: bool = False
    components: list[tuple[str, str]] = field(default_factory=list)
    #: Commands the plugin added to the command line (once they were registered).
    commands: list[str] = field(default_factory=list)

    @property
    def builtin(self) -> bool:
        """Whether the plugin ships with tracekit itself."""
        return self.dist == BUILTIN_DIST

    @property
    def status(self) -> str:
        """``ok``, ``disabled`` or ``broken``."""
        return "disabled" if self.disabled else ("broken" if self.error else "ok")


class Registry:
    """The components every loaded plugin registered, by kind and name."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: list[PluginInfo] = []
        self.components: dict[str, dict[str, type[Component]]] = {k: {} for k in KINDS}
        self.owners: dict[tuple[str, str], str] = {}
        self.conflicts: dict[tuple[str, str], list[str]] = {}
        #: Whether ``register_commands`` ran (each plugin's ``commands`` are then known).
        self.commands_known = False
        #: Where plugin loading is narrated (``TRACEKIT_TRACE_PLUGINS``); None: nowhere.
        self.trace: Callable[[str], None] | None = None

    # -- lookup --------------------------------------------------------------------------
    def get(self, kind: str, name: str) -> type[Any]:
        """Return the component class of ``kind`` called ``name``."""
        if (kind, name) in self.conflicts:
            a, b = self.conflicts[(kind, name)][:2]
            raise PluginConflictError(f"{kind} '{name}' is registered by both '{a}' and '{b}'; "
                                      f"disable one with TRACEKIT_DISABLE_PLUGINS")
        try:
            return self.components[kind][name]
        except KeyError:
            known = ", ".join(sorted(self.components[kind])) or "none"
            broken = [p for p in self.plugins if p.error]
            # The component may be one a plugin that failed to load would have registered.
            why = "".join(f"; plugin '{p.name}' failed to load: {p.error}" for p in broken)
            raise UnknownFormatError(f"no {kind} named '{name}' (known: {known}){why}") from None

    @property
    def readers(self) -> dict[str, type[Reader]]:
        """Registered readers by name."""
        return cast("dict[str, type[Reader]]", self.components["reader"])

    @property
    def writers(self) -> dict[str, type[Writer]]:
        """Registered writers by name."""
        return cast("dict[str, type[Writer]]", self.components["writer"])

    @property
    def analyzers(self) -> dict[str, type[Analyzer]]:
        """Registered analyzers by name."""
        return cast("dict[str, type[Analyzer]]", self.components["analyzer"])

    @property
    def report_formats(self) -> dict[str, type[ReportFormat]]:
        """Report formats plugins registered, by name (core's own are in
        ``tracekit.report.report_formats``)."""
        return cast("dict[str, type[ReportFormat]]", self.components["report-format"])

    def owner(self, kind: str, name: str) -> str:
        """Name of the plugin that registered a component."""
        return self.owners[(kind, name)]

    # -- loading -------------------------------------------------------------------------
    def add_plugin(self, info: PluginInfo, obj: object | None) -> None:
        """Register a loaded plugin object (module or instance) and its components."""
        self.plugins.append(info)
        if obj is None:
            return
        try:
            self.pm.register(obj, name=info.name)
            unknown = [impl for impl in _hookimpl_names(obj) if not hasattr(self.pm.hook, impl)]
            if unknown:
                raise PluginContractError(f"unknown hook '{unknown[0]}' (hooks: "
                                          f"{', '.join(n for n, _ in KINDS.values())}, "
                                          "register_commands)")
            for kind, (hook, _) in KINDS.items():
                for impl in getattr(self.pm.hook, hook).get_hookimpls():
                    if impl.plugin is obj:
                        impl.function(register=self._register_callback(kind, info))
        except Exception as exc:  # a broken plugin must never break tracekit
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            self._forget(info)
            info.error = str(exc) if isinstance(exc, PluginError) \
                else f"{type(exc).__name__}: {exc}"

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[[type[Any]], None]:
        _, base = KINDS[kind]

        def register(cls: type[Any]) -> None:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise PluginContractError(f"plugin '{info.name}' registered {cls!r} as a {kind}, "
                                          f"but it is not a subclass of tracekit.{base.__name__}")
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not NAME_RE.match(name):
                raise PluginContractError(f"plugin '{info.name}': {kind} {cls.__name__} has name "
                                          f"{name!r}; names are kebab-case like 'my-format'")
            key = (kind, name)
            if kind == "report-format" and name in _core_report_formats():
                raise PluginContractError(f"plugin '{info.name}': report format '{name}' is "
                                          "one of tracekit's own; pick another name")
            if key in self.owners:
                self.conflicts.setdefault(key, [self.owners[key]]).append(info.name)
                raise PluginConflictError(f"{kind} '{name}' is registered by both "
                                          f"'{self.owners[key]}' and '{info.name}'")
            self.components[kind][name] = cls
            self.owners[key] = info.name
            info.components.append(key)

        return register

    def _forget(self, info: PluginInfo) -> None:
        for kind, name in info.components:
            self.components[kind].pop(name, None)
            self.owners.pop((kind, name), None)
        info.components.clear()

    def register_commands(self, app: Any) -> list[str]:
        """Let plugins add CLI commands to the typer ``app``; return errors of plugins that
        failed. Each plugin's ``PluginInfo.commands`` names the commands it added."""
        errors = []
        infos = {info.name: info for info in self.plugins}
        for impl in self.pm.hook.register_commands.get_hookimpls():
            before = len(app.registered_commands)
            try:
                impl.function(app=app)
            except Exception as exc:
                errors.append(f"plugin '{impl.plugin_name}': register_commands failed: {exc}")
            info = infos.get(impl.plugin_name)
            if info is not None:
                info.commands = [_command_name(c) for c in app.registered_commands[before:]]
                if self.trace and info.commands:
                    self.trace(f"plugin {info.name}: added commands {', '.join(info.commands)}")
        self.commands_known = True
        return errors


def _core_report_formats() -> set[str]:
    from tracekit.report import CORE_FORMATS  # pyarrow: only once a plugin registers a format

    return set(CORE_FORMATS)


def _command_name(command: Any) -> str:
    """The name typer gives a registered command (its function's, in kebab-case)."""
    return command.name or command.callback.__name__.lower().replace("_", "-")


def _hookimpl_names(obj: object) -> list[str]:
    marker = f"{hookspecs.PROJECT}_impl"
    return [n for n in dir(obj) if hasattr(getattr(obj, n, None), marker)]


def _split_env(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def iter_entry_points(dists: Iterable[str] | None = None,
                      ) -> Iterable[tuple[str, str, metadata.EntryPoint]]:
    """Yield (distribution, version, entry point) for each ``tracekit`` entry point.

    A distribution that appears twice on ``sys.path`` is seen once (the first). Only the
    distributions that declare a ``tracekit`` entry point have their metadata read: reading
    every installed distribution's (its name and version) cost 0.1-0.2 s per command in an
    environment of 160 packages.
    """
    wanted = {_normalized(d) for d in dists} if dists is not None else None
    named: dict[int, tuple[str, str]] = {}  # per distribution: its metadata, read once
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is None:
            continue
        if id(ep.dist) not in named:
            meta = ep.dist.metadata
            named[id(ep.dist)] = ((meta["Name"] or "").strip(), meta["Version"] or "")
        dist_name, version = named[id(ep.dist)]
        if dist_name and (wanted is None or _normalized(dist_name) in wanted):
            yield dist_name, version, ep


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_registry(*, dists: Iterable[str] | None = None, extra: Iterable[object] = (),
                  environ: Mapping[str, str] | None = None,
                  spare_pandas: bool = False) -> Registry:
    """Discover and load plugins into a new Registry.

    ``dists`` restricts discovery to the named distributions (tests use ``{"tracekit"}``);
    ``extra`` registers plugin objects directly. ``TRACEKIT_DISABLE_PLUGINS`` (plugin or
    distribution names, comma-separated) blocks plugins; ``TRACEKIT_LOAD_PLUGINS`` loads only
    the named third-party plugins. ``TRACEKIT_TRACE_PLUGINS=1`` prints on stderr what becomes
    of each plugin: where it comes from, how long its import took, what it registered or why
    it failed. ``spare_pandas=True``: when every plugin found is tracekit's own, pyarrow is
    kept from importing pandas (``tracekit.startup``) before any plugin is imported; a
    third-party plugin may hand pyarrow pandas objects, so then it is not.
    """
    env = os.environ if environ is None else environ
    disabled = _split_env(env.get("TRACEKIT_DISABLE_PLUGINS"))
    allow = _split_env(env.get("TRACEKIT_LOAD_PLUGINS"))
    registry = Registry()
    if env.get("TRACEKIT_TRACE_PLUGINS"):
        registry.trace = _to_stderr
    found_builtin = False
    found = list(iter_entry_points(dists))
    if spare_pandas and all(dist_name == BUILTIN_DIST for dist_name, _, _ in found):
        from tracekit.startup import arrow_without_pandas

        arrow_without_pandas()
    for dist_name, version, ep in found:
        found_builtin |= dist_name == BUILTIN_DIST
        info = PluginInfo(ep.name, dist_name, version, ep.value)
        if {ep.name, dist_name} & disabled or (
                allow and dist_name != BUILTIN_DIST and not {ep.name, dist_name} & allow):
            info.disabled = True
            registry.add_plugin(info, None)
            registry.pm.set_blocked(ep.name)
            _narrate(registry, info, None)
            continue
        started = time.perf_counter()
        try:
            obj = ep.load()
        except Exception as exc:  # includes SyntaxError inside the plugin's module
            info.error = (f"could not import plugin '{ep.name}' from {dist_name} {version}: "
                          f"{type(exc).__name__}: {exc}")
            registry.add_plugin(info, None)
            _narrate(registry, info, time.perf_counter() - started)
            continue
        seconds = time.perf_counter() - started
        registry.add_plugin(info, obj)
        _narrate(registry, info, seconds)
    if not found_builtin and (dists is None or BUILTIN_DIST in set(dists)):
        raise PluginLoadError("tracekit's built-in plugins are not registered; "
                              "install the package: pip install -e .")
    for i, obj in enumerate(extra):
        name = getattr(obj, "__name__", None) or f"{type(obj).__name__}-{i}"
        info = PluginInfo(name, "<extra>", "", repr(obj))
        registry.add_plugin(info, obj)
        _narrate(registry, info, None)
    return registry


def _to_stderr(line: str) -> None:
    print(f"tracekit: {line}", file=sys.stderr, flush=True)


def _narrate(registry: Registry, info: PluginInfo, import_s: float | None) -> None:
    """One line on what became of a plugin, where plugin loading is traced."""
    if registry.trace is None:
        return
    where = f"plugin {info.name} ({info.dist} {info.version}".rstrip() + f", {info.value})"
    took = f" imported in {import_s * 1000:.1f} ms;" if import_s is not None else ""
    if info.disabled:
        registry.trace(f"{where}: disabled by TRACEKIT_DISABLE_PLUGINS or TRACEKIT_LOAD_PLUGINS")
    elif info.error:
        registry.trace(f"{where}:{took} broken: {info.error}")
    else:
        made = ", ".join(f"{kind} {name}" for kind, name in info.components) or "nothing"
        registry.trace(f"{where}:{took} registered {made}")
