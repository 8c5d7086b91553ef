"""Node filtering and choice for one task, shared by the actions.

Everything here works on whole-cluster arrays: the resource fit is one comparison over the
node table, plugin predicates return masks, and scores are computed only for candidates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tidesched.framework.decisions import FitErrors
    from tidesched.framework.predicate_cache import PredicateErrorCache
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo


def feasible_nodes(ssn: "Session", task: "TaskInfo", check_resources: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Nodes where the task could go now or once releasing resources are freed:
    request ≤ FutureIdle (when ``check_resources``) and every plugin predicate passes; and the
    resource fit alone (None without the check), for ``no_node_errors``."""
    passed = ssn.predicate_mask(task)
    if not check_resources:
        return passed.copy(), None
    fit = ssn.table.fits_cached(task, "future")
    return passed & fit, fit


def best_node(ssn: "Session", task: "TaskInfo", candidates: np.ndarray) -> int | None:
    """Highest NodeOrder score among the candidate rows; ties go to the first node by name
    (Volcano picks randomly among ties; we stay deterministic, ACT-6)."""
    scores = ssn.node_order_all(task)
    if scores is not None:
        # Every scorer row-local: one cached vector, rescored only where rows changed.
        return _best_row(scores, candidates)
    idx = np.flatnonzero(candidates)
    if len(idx) == 0:
        return None
    if len(idx) == 1:
        return int(idx[0])
    scores = ssn.node_order(task, idx)
    return int(idx[int(np.argmax(scores))])


def _best_row(scores: np.ndarray, candidates: np.ndarray) -> int | None:
    """The first candidate row with the highest score, None without candidates. Scores are
    finite, so -inf marks the rows outside the candidates: one argmax answers both "any
    candidate?" and "which is best?"."""
    if not len(scores):
        return None
    masked = np.where(candidates, scores, -np.inf)
    row = int(np.argmax(masked))
    return row if masked[row] != -np.inf else None


def choose_node(ssn: "Session", task: "TaskInfo", within: np.ndarray | None = None,
                errors: "PredicateErrorCache | None" = None) -> tuple[int | None, bool, np.ndarray]:
    """The allocate action's choice: the node the pod is nominated to when it may go there,
    else the best node where the task fits now (idle), else the
    best where it fits once releasing resources are freed (future: pipeline), else None;
    whether it fits now; and the future fit, for ``no_node_errors``. ``within``: only these
    nodes (a HyperNode's). ``errors``: the placement's predicate error cache (nodes a sibling
    of the same role failed on are out; this pod's failures are added)."""
    table = ssn.table
    feasible, fit = feasible_nodes(ssn, task)
    assert fit is not None
    if within is not None:
        feasible = feasible & within
    if errors is not None:
        known = errors.failed(task)
        if known is not None:
            feasible = feasible & ~known
    idle_fit = feasible & table.fits_cached(task, "idle")
    if task.pod.claims:  # devices of claims being released only later: a pipeline, as resources
        idle_fit &= ssn.claims_now(task)
    nominated = ssn.topology.nominated_node(task)
    if nominated:
        # Volcano tries a pod's status.nominatedNodeName (where a preemption meant it to go)
        # first: when it passes, it is the only candidate.
        row = table.index.get(nominated)
        if row is not None and feasible[row]:
            return row, bool(idle_fit[row]), fit  # only that node was tried: nothing failed
    if errors is not None:
        errors.record(task, within, feasible)
    scores = ssn.node_order_all(task)
    if scores is not None:
        for candidates, now in ((idle_fit, True), (feasible, False)):
            row = _best_row(scores, candidates)
            if row is not None:
                return row, now, fit
        return None, False, fit
    if idle_fit.any():
        return best_node(ssn, task, idle_fit), True, fit
    return best_node(ssn, task, feasible), False, fit


def no_node_errors(ssn: "Session", task: "TaskInfo", fit: np.ndarray | None) -> "FitErrors":
    """Why no node took the task (every predicate run again for its reasons: this is the
    rare path, the fast path keeps no reasons)."""
    return ssn.fit_errors(task, ssn.predicate(task), fit)
