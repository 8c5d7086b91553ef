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
)


def load_all() -> dict[str, type]:
    """Import every plugin module so that it registers itself; returns the registry."""
    for mod in _MODULES:
        importlib.import_module(f"tidesched.plugins.{mod}")
    return PLUGINS
