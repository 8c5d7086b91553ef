"""Scheduler plugins, one module per plugin, registered under their config names."""

from __future__ import annotations

import importlib

from tidesched.framework.plugin import PLUGINS

_MODULES = (
    "priority",
    "gang",
    "conformance",
    "predicates",
    "nodeorder",
    "binpack",
    "drf",
    "proportion",
    "overcommit",
    "capacity",
    "capacity_card",
    "nodegroup",
    "cardprotect",
    "sla",
)


_loaded = False


def load_all() -> dict[str, type]:
    """Import every plugin module so that it registers itself; returns the registry. Every
    session asks: after the first time, the import machinery is not walked again."""
    global _loaded
    if not _loaded:
        for mod in _MODULES:
            importlib.import_module(f"tidesched.plugins.{mod}")
        _loaded = True
    return PLUGINS
