"""Scheduler actions, run in the configured order within a session (ACT-1..6).

Each action is a function ``execute(session) -> None`` registered under Volcano's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from tidesched.framework.config import Arguments
    from tidesched.framework.session import Session

ACTIONS: dict[str, Callable[["Session"], None]] = {}
# Per action, a function that reads (and so validates) every argument of its
# ``configurations`` entry; run when a config is loaded (CONF-3), not only in a session.
ARGUMENT_CHECKS: dict[str, Callable[["Arguments"], object]] = {}


def register_action(name: str) -> Callable[[Callable[["Session"], None]], Callable[["Session"], None]]:
    def deco(fn: Callable[["Session"], None]) -> Callable[["Session"], None]:
        ACTIONS[name] = fn
        return fn

    return deco


def load_all() -> None:
    """Import every action module so that it registers itself."""
    from tidesched.actions import allocate, backfill, enqueue, preempt, reclaim  # noqa: F401
