"""Equal node scores broken as vc-scheduler broke them, for the differential's explainer
(``benchmarks/differential.py``).

Among nodes of equal score Volcano takes one at random (``SelectBestNode``; preempt and reclaim
try nodes in the order its parallel scoring happened to leave them), tidesched the first by name.
When a world has several such ties, a few random draws rarely give vc-scheduler's run back, so
the replay reads the nodes vc-scheduler chose from its own log (``-v=4``: every task it
allocated or pipelined, in order, ``statement.go``) and, wherever tidesched's rules leave that
node among the equally best, takes it; elsewhere tidesched's own choice stands. The victims it
tried (``Try to preempt/reclaim Task``) come first among a node's tasks, as Go's map order gave
them to its plugins. Where the world lifts scheduling gates, the two runs may have had different
numbers of sessions before; once the replay lifts them it follows the choices of vc-scheduler's
sessions after the lift. If that replay gives vc-scheduler's outcome, the difference was Volcano's
luck, not a rule.
"""

from __future__ import annotations

import collections
import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo

# statement.go: "After allocated Task <ns/pod> to Node <node>: ..." / "After pipelined Task ...".
_CHOICE = re.compile(r"After (?:allocated|pipelined) Task <([^>]+)> to Node <([^>]+)>")
# preempt.go / reclaim.go: "Try to preempt Task <ns/pod> for Task <...>", "Try to reclaim Task ...".
_VICTIM = re.compile(r"Try to (?:preempt|reclaim) Task <([^>]+)> for Tasks? <")
# allocate.go: "Task <ns/pod> has external scheduling gate, skip it."; session.go: "Open Session ...".
_GATED = re.compile(r"Task <([^>]+)> has external scheduling gate")
_SESSION = "Open Session "


def vc_victims(log: str | Path) -> list[str]:
    """The pods vc-scheduler tried as victims, in its log's order (first try of each)."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return []
    return list(dict.fromkeys(m.group(1) for m in _VICTIM.finditer(text)))


def vc_choices(log: str | Path) -> dict[str, list[str]]:
    """Pod key (``ns/name``) -> the nodes vc-scheduler chose for it, in its log's order."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return {}
    return _choices(text)


def _choices(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = collections.defaultdict(list)
    for m in _CHOICE.finditer(text):
        out[m.group(1)].append(m.group(2))
    return dict(out)


def vc_choices_after_lift(log: str | Path, lifted: Iterable[str]) -> dict[str, list[str]] | None:
    """The choices of the sessions vc-scheduler opened once the gates of ``lifted`` (pod names)
    were gone: from the first session after the last one that still skipped one of them as
    gated (``allocate.go``: "Task <ns/pod> has external scheduling gate"). None when the log
    shows no such pod gated (nothing to realign on)."""
    names = set(lifted)
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return None
    last = max((m.end() for m in _GATED.finditer(text) if m.group(1).split("/", 1)[-1] in names), default=None)
    if last is None:
        return None
    start = text.find(_SESSION, last)
    return _choices(text[start:]) if start >= 0 else {}


class Guide:
    """The choices still to be followed, and how many ties went vc-scheduler's way."""

    def __init__(self, choices: dict[str, list[str]], victims: list[str] | None = None,
                 after_lift: dict[str, list[str]] | None = None) -> None:
        self.left = {k: collections.deque(v) for k, v in choices.items()}
        # The choices of vc-scheduler's sessions after the gates were lifted: the replay goes on
        # with these once it lifts them, since the two runs need not have had as many sessions
        # before (a choice of vc-scheduler's extra sessions would otherwise be taken for a later one).
        self.after_lift = after_lift
        # Volcano walks a node's tasks in Go map order (the gang plugin lets the first ones go):
        # the victims vc-scheduler tried come first, in its order.
        self.victim_rank = {k: i for i, k in enumerate(victims or [])}
        self.followed = 0
        self.ssn: Any = None
        self.task: TaskInfo | None = None

    def pick(self, tied: np.ndarray) -> int | None:
        """Of the equally best rows ``tied``, the one vc-scheduler chose next for the current
        task, else None (tidesched's first by name stands)."""
        if self.task is None or self.ssn is None or not len(tied):
            return None
        want = self.left.get(self.task.key)
        if not want:
            return None
        names = self.ssn.table.names
        for row in tied:
            if names[int(row)] == want[0]:
                if int(row) != int(tied[0]):
                    self.followed += 1
                return int(row)
        return None

    def lifted(self) -> None:
        """The replay lifted the gates: vc-scheduler's choices from its first session after."""
        if self.after_lift is not None:
            self.left = {k: collections.deque(v) for k, v in self.after_lift.items()}

    def consume(self, task: "TaskInfo", node: str) -> None:
        """tidesched placed ``task`` on ``node``: vc-scheduler's next choice for it is used up
        when it was that node (else it stays for the task's next placement)."""
        want = self.left.get(task.key)
        if want and want[0] == node:
            want.popleft()


def _top(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    masked = np.where(candidates, scores, -np.inf)
    if not len(masked):
        return np.zeros(0, dtype=np.int64)
    top = masked.max()
    return np.zeros(0, dtype=np.int64) if top == -np.inf else np.flatnonzero(masked == top)


@contextlib.contextmanager
def following(guide: Guide) -> Iterator[Guide]:
    """Within the block, tidesched's choices follow ``guide`` where Volcano's are random: allocate's
    and backfill's best node among equal scores, the order preempt tries nodes of equal score
    in, the order reclaim's walk tries nodes in, and the order of a node's tasks as victim
    candidates (Volcano's: Go map order)."""
    import tidesched.actions.allocate as allocate_action
    import tidesched.actions.backfill as backfill
    import tidesched.actions.preempt as preempt
    import tidesched.actions.reclaim.gang as gang
    import tidesched.actions.reclaim.steps as steps
    import tidesched.framework.placement as placement
    from tidesched.framework.statement import Statement

    import differential_objects
    saved_choose, saved_best_row, saved_best_node = placement.choose_node, placement._best_row, placement.best_node
    saved_rows, saved_alloc, saved_pipe = preempt._rows_by_score, Statement.allocate, Statement.pipeline
    saved_backfill, saved_gang = backfill.best_node, gang.best_node
    saved_walk = steps.walk_rows
    saved_tasks = {m: m.node_tasks_sorted for m in (steps, preempt)}
    saved_lift = differential_objects.lift_local_gates

    def lift_local_gates(world: Any, pods: Any) -> bool:
        done = saved_lift(world, pods)
        if done:
            guide.lifted()
        return done

    def best_row(scores: np.ndarray, candidates: np.ndarray) -> int | None:
        tied = _top(scores, candidates)
        row = guide.pick(tied)
        return row if row is not None else saved_best_row(scores, candidates)

    def choose_node(ssn: Any, task: Any, *args: Any, **kwargs: Any) -> Any:
        guide.ssn, guide.task = ssn, task
        try:
            return saved_choose(ssn, task, *args, **kwargs)
        finally:
            guide.task = None

    def best_node(ssn: Any, task: Any, candidates: np.ndarray) -> int | None:
        scores = ssn.node_order_all(task)
        if scores is None:
            idx = np.flatnonzero(candidates)
            scores = np.full(len(candidates), -np.inf)
            if len(idx):
                scores[idx] = np.asarray(ssn.node_order(task, idx), dtype=float)
        guide.ssn, guide.task = ssn, task
        try:
            row = guide.pick(_top(scores, candidates))
        finally:
            guide.task = None
        return row if row is not None else saved_best_node(ssn, task, candidates)

    def rows_by_score(ssn: Any, task: Any, candidates: np.ndarray) -> list[int]:
        rows = saved_rows(ssn, task, candidates)
        want = guide.left.get(task.key)
        if not want or len(rows) < 2:
            return rows
        scores = dict(zip(rows, ssn.node_order(task, np.asarray(rows))))
        names = ssn.table.names
        first = next((r for r in rows if names[r] == want[0]), None)
        if first is None or scores[first] != scores[rows[0]] or first == rows[0]:
            return rows
        guide.followed += 1
        return [first, *(r for r in rows if r != first)]

    def walk_rows(ssn: Any, task: Any, candidates: np.ndarray) -> list[int]:
        # Volcano's reclaim tries nodes in no fixed order: vc-scheduler's node first is one of them.
        rows = saved_walk(ssn, task, candidates)
        want = guide.left.get(task.key)
        names = ssn.table.names
        first = next((r for r in rows if want and names[r] == want[0]), None)
        if first is None or first == rows[0]:
            return rows
        guide.followed += 1
        return [first, *(r for r in rows if r != first)]

    def node_tasks(original: Any) -> Any:
        def ordered(ssn: Any, row: int, accept: Any = None) -> list[Any]:
            tasks = original(ssn, row, accept)
            rank = guide.victim_rank
            out = sorted(tasks, key=lambda t: rank.get(t.key, len(rank)))  # stable: key order otherwise
            if [t.key for t in out] != [t.key for t in tasks]:
                guide.followed += 1
            return out
        return ordered

    def allocate(self: Any, task: Any, node: str, *a: Any, **k: Any) -> Any:
        guide.consume(task, node)
        return saved_alloc(self, task, node, *a, **k)

    def pipeline(self: Any, task: Any, node: str, *a: Any, **k: Any) -> Any:
        guide.consume(task, node)
        return saved_pipe(self, task, node, *a, **k)

    try:
        placement.choose_node, placement._best_row, placement.best_node = choose_node, best_row, best_node
        allocate_action.choose_node = choose_node
        backfill.best_node, gang.best_node = best_node, best_node
        preempt._rows_by_score = rows_by_score
        steps.walk_rows = walk_rows
        differential_objects.lift_local_gates = lift_local_gates
        for m, fn in saved_tasks.items():
            m.node_tasks_sorted = node_tasks(fn)
        Statement.allocate, Statement.pipeline = allocate, pipeline  # type: ignore[method-assign]
        yield guide
    finally:
        placement.choose_node, placement._best_row, placement.best_node = saved_choose, saved_best_row, saved_best_node
        allocate_action.choose_node = saved_choose
        backfill.best_node, gang.best_node = saved_backfill, saved_gang
        preempt._rows_by_score = saved_rows
        steps.walk_rows = saved_walk
        differential_objects.lift_local_gates = saved_lift
        for m, fn in saved_tasks.items():
            m.node_tasks_sorted = fn
        Statement.allocate, Statement.pipeline = saved_alloc, saved_pipe  # type: ignore[method-assign]
