"""The queue tree from ``spec.parent`` (CAP-2), the one place it is worked out: the capacity
plugin's hierarchy and the web view's queue list both read it.

:func:`resolve_parents` gives every queue the parent it hangs under. A queue without a parent
hangs under ``root``; a queue whose parent does not exist, and every queue on a parent cycle,
is hung under ``root`` too and reported, never followed, so nothing loops and nothing raises
however the queues are written. It works iteratively: neither a cycle nor a very deep chain can
recurse. ``root`` is the name the caller gives the top of the tree (Volcano's queue ``root``, or
``""`` for a list whose top level has no queue of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MISSING_PARENT = "MissingParent"
CYCLE = "Cycle"


@dataclass(frozen=True, slots=True)
class ParentProblem:
    """Why ``queue`` was hung under the root: its parent ``detail`` does not exist
    (``MISSING_PARENT``), or it is on the cycle ``detail`` (``CYCLE``, e.g. ``a -> b -> a``)."""

    queue: str
    kind: str
    detail: str


def resolve_parents(parents: Mapping[str, str], root: str) -> tuple[dict[str, str | None], list[ParentProblem]]:
    """Each queue's parent in the tree (``None`` for ``root`` itself), and the problems found,
    in the order they were found (queues visited in name order). ``parents``: queue name →
    ``spec.parent`` ("" for none)."""
    known = set(parents) | {root}
    resolved: dict[str, str | None] = {root: None}
    problems: list[ParentProblem] = []
    for start in sorted(parents):
        path: list[str] = []
        on_path: set[str] = set()
        cur = start
        while cur not in resolved:
            if cur in on_path:
                cycle = path[path.index(cur):]
                text = " -> ".join([*cycle, cur])
                for name in cycle:
                    resolved[name] = root
                    problems.append(ParentProblem(name, CYCLE, text))
                break
            path.append(cur)
            on_path.add(cur)
            parent = parents.get(cur) or root
            if parent == cur:
                continue  # a self-parent is a cycle of one; the check above catches it next
            if parent not in known:
                resolved[cur] = root
                problems.append(ParentProblem(cur, MISSING_PARENT, parent))
                break
            cur = parent
        # Everything still on the path hangs under its own (now resolved) parent.
        for name in reversed(path):
            if name not in resolved:
                resolved[name] = parents.get(name) or root
    return resolved, problems


def children_of(resolved: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Each parent's children in name order (only parents that have some)."""
    children: dict[str, list[str]] = {}
    for name, parent in resolved.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    return {p: sorted(kids) for p, kids in children.items()}
