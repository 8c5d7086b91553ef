"""Volcano's predicate error cache by task role (util.PredicateHelper), behind a switch.

Volcano v1.15.1: within one placement of a job's pods (one allocate turn of a job, or of a
sub-group within a HyperNode: one helper per ``allocateResourcesForTasks`` call), a node that
failed the predicates (the resource fit on future idle included) for one pod is taken as failed
for every later pod of the same job and the same ``volcano.sh/task-spec`` role, without asking
again; pods without a role never share (volcano-sh/volcano#3527). Pods of one role may differ —
one has a bound volume pinned to a node, another a node selector — and then a node one pod could
not use stays closed to its siblings in that turn (differential seed 3039: a gang whose first
pod's local volume ruled out a node the other pods needed found no room and stayed Inqueue).

tidesched's own rule (EXT-4, ``plugins/predicates.py``) is to share nothing between pods whose
templates differ, whatever their role says: each pod's predicates are answered for that pod.
Volcano's rule is chosen per config, under ``configurations: - name: allocate``:

* ``predicateErrorCacheByRole`` (tidesched's, default false): true gives Volcano's rule above;
* ``predicateErrorCacheEnable`` (Volcano's, default true): false turns Volcano's cache off, so
  with it the switch above changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

ENABLE = "predicateErrorCacheEnable"
BY_ROLE = "predicateErrorCacheByRole"


def check_arguments(args: "Arguments") -> bool:
    """allocate's arguments, checked when the config loads: whether Volcano's cache by role is on."""
    enable = args.get_bool(ENABLE, True)
    by_role = args.get_bool(BY_ROLE, False)
    return enable and by_role


def enabled(ssn: "Session") -> bool:
    """Whether allocate shares predicate failures between pods of one job and role."""
    return check_arguments(ssn.config.action_arguments("allocate"))


class PredicateErrorCache:
    """Nodes that failed for a (job, role) during one placement of a job's pods."""

    __slots__ = ("on", "_failed")

    def __init__(self, on: bool) -> None:
        self.on = on
        self._failed: dict[tuple[str, str], np.ndarray] = {}

    def failed(self, task: "TaskInfo") -> np.ndarray | None:
        """The rows already failed by a pod of the task's job and role; None when none did."""
        if not self.on or not task.role:
            return None
        return self._failed.get((task.job, task.role))

    def record(self, task: "TaskInfo", evaluated: np.ndarray | None, passed: np.ndarray) -> None:
        """Remember the rows the task was tried on (``evaluated``: None for every node) that it
        did not pass."""
        if not self.on or not task.role:
            return
        failed = ~passed if evaluated is None else evaluated & ~passed
        if not failed.any():
            return  # Volcano keeps an entry only once some node failed
        key = (task.job, task.role)
        known = self._failed.get(key)
        self._failed[key] = failed if known is None else known | failed
