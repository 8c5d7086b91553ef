"""Queue attributes and the queue tree of the ``capacity`` plugin (CAP-1, CAP-2).

This module holds the data side of the plugin: one :class:`QueueAttr` per queue with its
deserved / allocated / request / elastic / inqueue / capability / realCapability / guarantee
vectors and its share, the tree built from ``spec.parent`` (cycles and missing parents are
reported, never followed), the flat and hierarchical limit computations, and the few
dimension-wise comparisons the hooks need.

Everything is plain :class:`Resource` arithmetic (floats and a dict). Per-queue ancestor
lists are computed once per session, so a per-task check costs O(tree depth).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidesched.model.quantity import format_amount
from tidesched.model.queue_tree import CYCLE, children_of, resolve_parents
from tidesched.model.resource import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

if TYPE_CHECKING:
    from tidesched.model.infos import QueueInfo

ROOT = "root"

# Why a queue cannot take work (CAP-2): set on the queue and on every queue below it.
BROKEN_MISSING_PARENT = "MissingParent"
BROKEN_CYCLE = "Cycle"


class QueueAttr:
    """The capacity plugin's view of one queue in one session."""

    __slots__ = (
        "allocated",
        "ancestors",
        "broken",
        "broken_reason",
        "capability",
        "chain",
        "children",
        "deserved",
        "deserved_dims",
        "elastic",
        "guarantee",
        "info",
        "inqueue",
        "name",
        "real_capability",
        "request",
        "share",
    )

    def __init__(self, name: str, info: QueueInfo | None) -> None:
        self.name = name
        self.info = info  # None for an implicit root
        # Ancestor names from the root down to the parent (Volcano order); empty for the root.
        self.ancestors: list[str] = []
        # This queue and its ancestors, leaf first: the order every hierarchical check walks.
        self.chain: list[QueueAttr] = [self]
        self.children: list[str] = []
        self.deserved = Resource()
        self.deserved_dims: tuple[tuple[str, float], ...] = ()
        self.allocated = Resource()
        self.request = Resource()
        self.elastic = Resource()
        self.inqueue = Resource()
        self.capability = Resource()
        self.real_capability = Resource()
        self.guarantee = Resource()
        self.share = 0.0
        self.broken = ""  # BROKEN_* when the queue's place in the tree is unknown
        self.broken_reason = ""

    def __repr__(self) -> str:
        return f"QueueAttr({self.name}, share={self.share:.3f})"

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def freeze_deserved(self) -> None:
        """Cache the deserved dimensions the share is computed over."""
        d = self.deserved
        self.deserved_dims = tuple((n, d.get(n)) for n in d.resource_names())

    def update_share(self) -> None:
        """share = max over deserved dimensions of allocated/deserved; no deserved ⇒ 1 (seed §4.1).

        Inlined (Volcano helpers.Share: x/0 is 1, 0/0 is 0): it runs on every queue of the
        chain at every allocation."""
        dims = self.deserved_dims
        if not dims:
            self.share = 1.0
            return
        alloc = self.allocated
        best = 0.0
        for name, want in dims:
            if name == CPU:
                have = alloc.milli_cpu
            elif name == MEMORY:
                have = alloc.memory
            else:
                have = alloc.scalars.get(name, 0.0)
            s = have / want if want else (1.0 if have else 0.0)
            if s > best:  # noqa: PLR1730 - cheaper than max() on this per-allocation path
                best = s
        self.share = best


# ---------------------------------------------------------------------------- comparisons


def _dims_of(req: Resource) -> list[str]:
    """Dimensions a request asks for (> 0), ``pods`` excluded."""
    out: list[str] = []
    if req.milli_cpu > 0:
        out.append(CPU)
    if req.memory > 0:
        out.append(MEMORY)
    for name, v in req.scalars.items():
        if v > 0 and name != PODS:
            out.append(name)
    return out


def first_exceeded(used: Resource, limit: Resource, req: Resource) -> str | None:
    """The first dimension requested by ``req`` where ``used`` is above ``limit`` (a scalar
    missing from ``limit`` is 0), or None. No tolerance, as Volcano's quota checks."""
    if req.milli_cpu > 0 and used.milli_cpu > limit.milli_cpu:
        return CPU
    if req.memory > 0 and used.memory > limit.memory:
        return MEMORY
    if req.scalars:
        us = used.scalars
        ls = limit.scalars
        for name, q in req.scalars.items():
            if q > 0 and name != PODS and us.get(name, 0.0) > ls.get(name, 0.0):
                return name
    return None


def first_exceeded_sum(used: Resource, req: Resource, limit: Resource) -> str | None:
    """``first_exceeded(used + req, limit, req)`` without building the sum (the per-task check)."""
    if req.milli_cpu > 0 and used.milli_cpu + req.milli_cpu > limit.milli_cpu:
        return CPU
    if req.memory > 0 and used.memory + req.memory > limit.memory:
        return MEMORY
    if req.scalars:
        us = used.scalars
        ls = limit.scalars
        for name, q in req.scalars.items():
            if q > 0 and name != PODS and us.get(name, 0.0) + q > ls.get(name, 0.0):
                return name
    return None


def any_dim_within(future: Resource, deserved: Resource, req: Resource) -> bool:
    """True when, on some dimension the request uses (and that is not zero on both sides),
    ``future`` ≤ ``deserved`` within MIN_RESOURCE: the Preemptive rule (CAP-3, seed §5.2)."""
    for name in _dims_of(req):
        f = future.get(name)
        d = deserved.get(name)
        if f < MIN_RESOURCE and d < MIN_RESOURCE:
            continue
        if f < d or f - d < MIN_RESOURCE:
            return True
    return False


def greater_on_relevant(allocated: Resource, deserved: Resource, req: Resource) -> bool:
    """True when ``allocated`` > ``deserved`` on a dimension the request uses and the deserved
    covers (cpu/memory at least MIN_RESOURCE, a scalar listed in deserved)."""
    if req.milli_cpu > 0 and deserved.milli_cpu >= MIN_RESOURCE and allocated.milli_cpu > deserved.milli_cpu:
        return True
    if req.memory > 0 and deserved.memory >= MIN_RESOURCE and allocated.memory > deserved.memory:
        return True
    ds = deserved.scalars
    for name, q in req.scalars.items():
        if q > 0 and name != PODS and name in ds and allocated.scalars.get(name, 0.0) > ds[name]:
            return True
    return False


def intersects(a: Resource, b: Resource) -> bool:
    """Both resources hold at least MIN_RESOURCE of some common dimension (``pods`` ignored)."""
    if a.milli_cpu >= MIN_RESOURCE and b.milli_cpu >= MIN_RESOURCE:
        return True
    if a.memory >= MIN_RESOURCE and b.memory >= MIN_RESOURCE:
        return True
    if a.scalars and b.scalars:
        bs = b.scalars
        for name, v in a.scalars.items():
            if v >= MIN_RESOURCE and name != PODS and bs.get(name, 0.0) >= MIN_RESOURCE:
                return True
    return False


def keeps_guarantee(allocated: Resource, victim: Resource, guarantee: Resource) -> bool:
    """Removing ``victim`` keeps ``allocated`` at or above ``guarantee`` on every dimension the
    victim frees (within MIN_RESOURCE). Dimensions the victim does not use are not made worse
    by its eviction and so do not block it (a queue short of its GPU guarantee may still lose
    an over-deserved CPU task)."""
    for name in _dims_of(victim):
        g = guarantee.get(name)
        if g <= 0:
            continue
        left = allocated.get(name) - victim.get(name)
        if not (g < left or g - left < MIN_RESOURCE):
            return False
    return True


def exceeding_names(used: Resource, limit: Resource) -> list[str]:
    """Dimensions where ``used`` > ``limit`` by more than MIN_RESOURCE; a scalar missing on
    the right is 0 (for sums that must fit under a parent's value)."""
    names: list[str] = []
    if used.milli_cpu - limit.milli_cpu >= MIN_RESOURCE:
        names.append(CPU)
    if used.memory - limit.memory >= MIN_RESOURCE:
        names.append(MEMORY)
    for name in sorted(used.scalars):
        if name != PODS and used.scalars[name] - limit.scalars.get(name, 0.0) >= MIN_RESOURCE:
            names.append(name)
    return names


def describe(res: Resource, names: Iterable[str]) -> str:
    """``cpu 12, memory 4Gi`` in natural units for the given dimensions."""
    return ", ".join(f"{n} {format_amount(n, res.get(n))}" for n in names)


# ---------------------------------------------------------------------------- limits


def min_keep_missing(res: Resource, cap: Resource) -> Resource:
    """Lower ``res`` to ``cap`` dimension-wise in place; scalars ``cap`` does not list stay
    (Volcano MinDimensionResource with Infinity)."""
    res.milli_cpu = min(res.milli_cpu, cap.milli_cpu)
    res.memory = min(res.memory, cap.memory)
    cs = cap.scalars
    for name, v in res.scalars.items():
        c = cs.get(name)
        if c is not None and c < v:
            res.scalars[name] = c
    return res


def with_guarantee(budget: Resource, others_guarantee: Resource, own_guarantee: Resource) -> Resource:
    """ExceededPart(budget, Σguarantee) + own guarantee: what a queue may reach when every
    other queue's guarantee is held back. Never negative (Volcano panics here when the
    guarantees exceed the budget: issues #3127, #3929, #4104)."""
    return budget.exceeded_part(others_guarantee).add(own_guarantee)


def capability_from_spec(spec_cap: Resource, base: Resource) -> Resource:
    """A capability with unset dimensions taken from ``base``: cpu/memory ≤ 0 and scalars
    not listed (seed §3.2 "capability 继承"; Volcano treats cpu/memory ≤ 0 as unset)."""
    cap = spec_cap.clone()
    if cap.milli_cpu <= 0:
        cap.milli_cpu = base.milli_cpu
    if cap.memory <= 0:
        cap.memory = base.memory
    for name, v in base.scalars.items():
        if name not in cap.scalars:
            cap.scalars[name] = v
    return cap


def unlimited_cpu_memory(spec_cap: Resource) -> Resource:
    """Flat-mode capability: cpu or memory ≤ 0 means no limit on that dimension (Volcano)."""
    cap = spec_cap.clone()
    if cap.milli_cpu <= 0:
        cap.milli_cpu = math.inf
    if cap.memory <= 0:
        cap.memory = math.inf
    return cap


# ---------------------------------------------------------------------------- tree


@dataclass(slots=True)
class TreeProblem:
    """An inconsistency found while building the tree; becomes a Warning event on a Queue."""

    queue: str
    reason: str
    message: str


@dataclass(slots=True)
class Tree:
    attrs: dict[str, QueueAttr]
    root: QueueAttr
    implicit_root: bool
    problems: list[TreeProblem] = field(default_factory=list)
    # Queue names from the root down, parents before children.
    top_down: list[str] = field(default_factory=list)


def build_tree(parents: Mapping[str, str], infos: Mapping[str, QueueInfo]) -> Tree:
    """Build the queue tree from ``spec.parent`` (empty ⇒ root).

    A queue whose parent does not exist, and every queue on a parent cycle, is hung under the
    root for accounting (its usage still counts towards the cluster) and marked broken, as are
    the queues below it; nothing loops and nothing raises.
    """
    attrs: dict[str, QueueAttr] = {name: QueueAttr(name, infos.get(name)) for name in parents}
    implicit_root = ROOT not in attrs
    if implicit_root:
        attrs[ROOT] = QueueAttr(ROOT, None)
    root = attrs[ROOT]
    tree = Tree(attrs=attrs, root=root, implicit_root=implicit_root)

    # Each queue's resolved parent (None for the root): model.queue_tree, as the web view's.
    resolved, problems = resolve_parents(parents, ROOT)
    for problem in problems:
        a = attrs[problem.queue]
        if problem.kind == CYCLE:
            a.broken = BROKEN_CYCLE
            a.broken_reason = f"the queue hierarchy has a cycle ({problem.detail})"
            tree.problems.append(TreeProblem(
                problem.queue, "QueueHierarchyCycle",
                f"queue {problem.queue} is on a parent cycle ({problem.detail}); it is treated as a child "
                "of root and receives no new work until the cycle is removed",
            ))
        else:
            a.broken = BROKEN_MISSING_PARENT
            a.broken_reason = f"its parent queue {problem.detail} does not exist"
            tree.problems.append(TreeProblem(
                problem.queue, "QueueParentNotFound",
                f"parent queue {problem.detail} of queue {problem.queue} does not exist; the queue is treated "
                "as a child of root and receives no new work until the parent exists",
            ))

    # Ancestor lists root-first, parents before children (breadth-first from the root).
    children = children_of(resolved)
    order = [ROOT]
    i = 0
    while i < len(order):
        name = order[i]
        i += 1
        kids = children.get(name, [])
        attrs[name].children = kids
        parent_attr = attrs[name]
        for kid in kids:
            a = attrs[kid]
            a.ancestors = [*parent_attr.ancestors, name]
            a.chain = [a, *parent_attr.chain]
            if parent_attr.broken and not a.broken:
                a.broken = parent_attr.broken
                a.broken_reason = (f"its ancestor queue {name} cannot be placed in the hierarchy "
                                   f"({parent_attr.broken_reason})")
            order.append(kid)
    tree.top_down = order
    return tree


def queue_level(l: QueueAttr, r: QueueAttr) -> int:
    """Index of the deepest common entry of two ancestor lists (Volcano getQueueLevel)."""
    level = 0
    la, ra = l.ancestors, r.ancestors
    for i in range(min(len(la), len(ra))):
        if la[i] != ra[i]:
            break
        level = i
    return level


def compare_share(l: QueueAttr, r: QueueAttr) -> int:
    """Smaller share first; on equal shares a queue with deserved goes before a best-effort
    one (seed §4.2 compareShareWithDeserved)."""
    if l.share == r.share:
        lh = bool(l.deserved_dims)
        rh = bool(r.deserved_dims)
        if lh == rh:
            return 0
        return -1 if lh else 1
    return -1 if l.share < r.share else 1
