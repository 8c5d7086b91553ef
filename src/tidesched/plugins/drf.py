"""drf plugin (Volcano plugins/drf): Dominant Resource Fairness between jobs.

A job's *share* is its dominant share: ``max_r allocated_r / total_r`` over the resource
dimensions the cluster has (``total`` is the session's cluster total). Allocated counts the
job's tasks in Allocated/Binding/Bound/Running at session open and then follows the
Statement events (a Pipelined task counts once it is staged, an evicted one stops counting).

Hooks registered:

- ``job_order``: the job with the smaller share goes first (equal shares: no opinion).
- ``preemptable``: a candidate victim is accepted when the preemptor job's share *after*
  adding the preemptor's request is at most the victim job's share *after* removing the
  victim (and every earlier candidate of that job already considered), within 1e-6.
  Votes Permit.
- event handlers ``allocate`` / ``deallocate``: keep each job's allocated resources and
  share current.

With ``enableHierarchy: true`` (hierarchical DRF) two more hooks are registered:

- ``queue_order``: walk the queue hierarchy from the root; at the first level where the two
  queues' nodes differ, a non-saturated node goes before a saturated one, then the smaller
  ``share / weight`` goes first.
- ``reclaimable``: a reclaimee is a victim when, after hypothetically giving the reclaimer
  its request and taking the reclaimee's request away, the reclaimer's queue still orders
  strictly before the reclaimee's queue.

  The hierarchy of a queue comes from its annotations ``volcano.sh/hierarchy``
  (``root/a/b``) and ``volcano.sh/hierarchy-weights`` (``1/50/50``) when both are set;
  otherwise it is derived from ``spec.parent`` (empty parent = ``root``), one path segment
  per queue name with the queue's weight. A parent cycle disables the plugin for the
  session (as upstream, nothing is registered) and is reported as a Warning event.

Volcano's namespace order was removed upstream and is not implemented.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from tidesched.framework.plugin import PERMIT, EventHandler, Plugin
from tidesched.model.resource import CPU, MEMORY, Resource, share as _share
from tidesched.framework.job_memo import job_memo

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

# Shares closer than this count as equal when deciding preemption (upstream shareDelta).
SHARE_DELTA = 1e-6

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
ROOT = "root"


# The cluster total's (name, amount) list of the last session (see on_session_open).
_LAST_COLS: list[list[tuple[str, float]]] = []


@dataclass(slots=True)
class DrfAttr:
    """Allocated resources of a job (or hierarchy node) and its dominant share."""

    allocated: Resource
    share: float = 0.0
    dominant: str = ""
    # A memo's attribute that other sessions share: never changed, replaced by a clone first.
    shared: bool = field(default=False, compare=False, repr=False)

    def clone(self) -> "DrfAttr":
        return DrfAttr(self.allocated.clone(), self.share, self.dominant)


def dominant_share(allocated: Resource, total: Resource, names: list[str]) -> tuple[str, float]:
    """(dominant resource, share) of ``allocated`` against ``total`` over ``names``."""
    best = 0.0
    dominant = ""
    for name in names:
        s = _share(allocated.get(name), total.get(name))
        if s > best:
            best = s
            dominant = name
    return dominant, best


def dominant_share_fn(total: Resource, names: list[str]) -> "Callable[[Resource], tuple[str, float]]":
    """``dominant_share`` against a fixed ``total``, with the total's amounts read once: it
    runs for every job at every session open."""
    cols = [(name, total.get(name)) for name in names]

    def dominant(allocated: Resource) -> tuple[str, float]:
        best = 0.0
        dominant = ""
        scalars = allocated.scalars
        for name, tot in cols:
            if name == CPU:
                a = allocated.milli_cpu
            elif name == MEMORY:
                a = allocated.memory
            elif name in scalars:
                a = scalars[name]
            else:
                a = allocated.get(name)  # pods reads max_task_num; a missing scalar is 0
            if tot == 0:
                s = 0.0 if a == 0 else 1.0
            else:
                s = a / tot
            if s > best:
                best = s
                dominant = name
        return dominant, best

    return dominant


# ---------------------------------------------------------------------------------------------
# Hierarchical DRF tree
# ---------------------------------------------------------------------------------------------


class _HNode:
    """A node of the hierarchical-DRF tree. Inner nodes are hierarchy path segments; leaves
    are jobs (``children is None``) whose ``attr`` is the job's own DrfAttr."""

    __slots__ = ("parent", "attr", "request", "weight", "saturated", "label", "children")

    def __init__(self, label: str, weight: float, attr: DrfAttr, request: Resource,
                 children: dict[str, "_HNode"] | None, parent: "_HNode | None" = None) -> None:
        self.parent = parent
        self.attr = attr
        self.request = request
        self.weight = weight
        self.saturated = False
        self.label = label
        self.children = children

    def clone(self, parent: "_HNode | None" = None) -> "_HNode":
        node = _HNode(self.label, self.weight, self.attr.clone(), self.request.clone(), None, parent)
        node.saturated = self.saturated
        if self.children is not None:
            node.children = {k: c.clone(node) for k, c in self.children.items()}
        return node


def _new_root() -> _HNode:
    return _HNode(ROOT, 1.0, DrfAttr(Resource()), Resource(), {})


def _parse_weight(text: str) -> float:
    try:
        w = float(text)
    except ValueError:
        w = 0.0
    if math.isnan(w) or w < 1:
        return 1.0  # upstream: weights below 1 (or unparsable) count as 1
    return w


def queue_hierarchies(queues: dict[str, "QueueInfo"]) -> dict[str, tuple[str, str]]:
    """Queue name -> (hierarchy path, weights path). Raises ValueError on a parent cycle
    or a missing parent."""
    out: dict[str, tuple[str, str]] = {}
    visiting: set[str] = set()

    def build(name: str) -> tuple[str, str]:
        if name in out:
            return out[name]
        q = queues.get(name)
        if q is None:
            if name == ROOT:
                return (ROOT, "1")  # the root segment exists even without a "root" Queue
            raise ValueError(f"parent queue {name!r} does not exist")
        ann = q.queue.meta.annotations
        h, w = ann.get(HIERARCHY_ANNOTATION, ""), ann.get(HIERARCHY_WEIGHTS_ANNOTATION, "")
        if h and w:
            out[name] = (h, w)
            return out[name]
        if name == ROOT:
            out[name] = (ROOT, "1")
            return out[name]
        if name in visiting:
            raise ValueError(f"queue hierarchy contains a cycle at {name!r}")
        visiting.add(name)
        ph, pw = build(q.parent or ROOT)
        weight = q.weight if q.weight >= 1 else 1
        out[name] = (f"{ph}/{name}", f"{pw}/{weight}")
        visiting.discard(name)
        return out[name]

    for name in sorted(queues):
        build(name)
    return out


class DrfPlugin(Plugin):
    name = "drf"

    def on_session_open(self, ssn: "Session") -> None:
        total = ssn.total_resource.clone()
        names = total.resource_names()
        self.total = total
        self.names = names
        opt = ssn.config.plugin(self.name)
        hierarchy = opt is not None and opt.enabled("hierarchy")

        paths: dict[str, tuple[str, str]] = {}
        if hierarchy:
            try:
                paths = queue_hierarchies(ssn.queues)
            except ValueError as exc:
                ssn.event("Queue", "", "", "Warning", "InvalidQueueHierarchy",
                          f"drf: hierarchical DRF disabled for this session: {exc}")
                return

        dominant = dominant_share_fn(total, names)
        cols = [(name, total.get(name)) for name in names]
        # The same total as the last session: its very list, so each job's memo compares by identity.
        if _LAST_COLS and _LAST_COLS[0] == cols:
            cols = _LAST_COLS[0]
        else:
            _LAST_COLS[:] = [cols]
        attrs: dict[str, DrfAttr] = {}
        zero_dominant, zero_share = dominant(Resource())
        for job in ssn.jobs.values():
            alloc = job.allocated
            if not alloc.milli_cpu and not alloc.memory and not alloc.scalars and not alloc.max_task_num:
                # Holds nothing (finished jobs pile up over a long simulation): the share of nothing.
                attrs[job.uid] = DrfAttr(Resource(), zero_share, zero_dominant)
                continue
            # Depends on allocated and the cluster total only: kept while they stay.
            memo = job_memo(job)
            ds = memo.get("drf")
            if ds is None or (ds[0] is not cols and ds[0] != cols):
                d, share = dominant(alloc)
                ds = memo["drf"] = (cols, DrfAttr(alloc.clone(), share, d, shared=True))
            attrs[job.uid] = ds[1]
        self.attrs = attrs

        def own(uid: str) -> DrfAttr | None:
            """The job's attribute, made this session's own before a change."""
            attr = attrs.get(uid)
            if attr is not None and attr.shared:
                attr = attrs[uid] = attr.clone()
            return attr

        def share_of(res: Resource) -> float:
            return dominant(res)[1]

        def update(attr: DrfAttr) -> None:
            attr.dominant, attr.share = dominant(attr.allocated)

        # -- job order --------------------------------------------------------------------
        def job_order(l: "JobInfo", r: "JobInfo") -> int:
            ls, rs = attrs[l.uid].share, attrs[r.uid].share
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        ssn.add_fn("job_order", self.name, job_order)
        ssn.add_order_key(self.name, lambda job: attrs[job.uid].share)

        # -- preemptable --------------------------------------------------------------------
        def preemptable(preemptor: "TaskInfo", preemptees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            latt = attrs.get(preemptor.job)
            if latt is None:
                return [], PERMIT
            ls = share_of(latt.allocated.clone().add(preemptor.resreq))
            remaining: dict[str, Resource] = {}
            victims: list[TaskInfo] = []
            for t in preemptees:
                alloc = remaining.get(t.job)
                if alloc is None:
                    ratt = attrs.get(t.job)
                    if ratt is None:
                        continue
                    alloc = remaining[t.job] = ratt.allocated.clone()
                # Every candidate considered lowers its job's allocation, victim or not
                # (upstream subtracts in place before comparing).
                alloc.sub(t.resreq)
                rs = share_of(alloc)
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        ssn.add_fn("preemptable", self.name, preemptable)

        # -- hierarchical DRF -----------------------------------------------------------------
        tree: HierarchicalDrf | None = None
        if hierarchy:
            tree = HierarchicalDrf(total, names, paths)
            for job in ssn.jobs.values():
                tree.total_allocated.add(attrs[job.uid].allocated)
                tree.attach(tree.root, job, attrs[job.uid])
            tree.recompute(tree.root, tree.total_allocated)
            self.tree = tree

            def queue_order(l: "QueueInfo", r: "QueueInfo") -> int:
                assert tree is not None
                ret = tree.compare_queues(tree.root, l.name, r.name)
                return -1 if ret < 0 else (1 if ret > 0 else 0)

            ssn.add_fn("queue_order", self.name, queue_order)

            def reclaimable(reclaimer: "TaskInfo", reclaimees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
                assert tree is not None
                ljob = ssn.jobs.get(reclaimer.job)
                if ljob is None or ljob.uid not in attrs:
                    return [], PERMIT
                root = tree.root.clone()
                total_alloc = tree.total_allocated.clone()
                lattr = DrfAttr(attrs[ljob.uid].allocated.clone().add(reclaimer.resreq))
                total_alloc.add(reclaimer.resreq)
                update(lattr)
                tree.attach(root, ljob, lattr)
                tree.recompute(root, total_alloc)
                victims: list[TaskInfo] = []
                for t in reclaimees:
                    rjob = ssn.jobs.get(t.job)
                    if rjob is None or rjob.uid not in attrs or rjob.queue not in ssn.queues:
                        continue
                    # Take the reclaimee away, compare the queues, then put it back.
                    total_alloc.sub(t.resreq)
                    rattr = DrfAttr(attrs[rjob.uid].allocated.clone().sub(t.resreq))
                    update(rattr)
                    tree.attach(root, rjob, rattr)
                    tree.recompute(root, total_alloc)
                    ret = tree.compare_queues(root, ljob.queue, rjob.queue)
                    total_alloc.add(t.resreq)
                    rattr.allocated.add(t.resreq)
                    update(rattr)
                    tree.attach(root, rjob, rattr)
                    tree.recompute(root, total_alloc)
                    if ret < 0:
                        victims.append(t)
                return victims, PERMIT

            ssn.add_fn("reclaimable", self.name, reclaimable)

        # -- event handlers -------------------------------------------------------------------
        def on_allocate(task: "TaskInfo") -> None:
            attr = own(task.job)
            if attr is None:
                return
            attr.allocated.add(task.resreq)
            update(attr)
            if tree is not None:
                job = ssn.jobs[task.job]
                tree.total_allocated.add(task.resreq)
                tree.attach(tree.root, job, attr)
                tree.recompute(tree.root, tree.total_allocated)

        def on_deallocate(task: "TaskInfo") -> None:
            attr = own(task.job)
            if attr is None:
                return
            attr.allocated.sub(task.resreq)
            update(attr)
            if tree is not None:
                job = ssn.jobs[task.job]
                tree.total_allocated.sub(task.resreq)
                tree.attach(tree.root, job, attr)
                tree.recompute(tree.root, tree.total_allocated)

        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    # Read by tests and diagnostics.
    def job_share(self, job_uid: str) -> float:
        return self.attrs[job_uid].share


class HierarchicalDrf:
    """The hierarchical-DRF tree of one session (upstream hdrf): queues' hierarchy paths are
    inner nodes, jobs are leaves. An inner node's allocation is its children's allocations
    rescaled to the smallest dominant share among its non-saturated children, so a
    child that asks for little does not make its siblings look richer than they are."""

    def __init__(self, total: Resource, names: list[str], paths: dict[str, tuple[str, str]]) -> None:
        self.total = total
        self.names = names
        self.paths = paths
        self.root = _new_root()
        self.total_allocated = Resource()

    def attach(self, root: _HNode, job: "JobInfo", attr: DrfAttr) -> None:
        """Create the path of the job's queue if needed and (re)place the job's leaf."""
        hierarchy, weights = self.paths.get(job.queue, (f"{ROOT}/{job.queue}", "1/1"))
        segs = hierarchy.split("/")
        wts = weights.split("/")
        node = root
        for i in range(1, len(segs)):
            assert node.children is not None
            child = node.children.get(segs[i])
            if child is None:
                w = _parse_weight(wts[i]) if i < len(wts) else 1.0
                child = _HNode(segs[i], w, DrfAttr(Resource()), Resource(), {}, node)
                node.children[segs[i]] = child
            node = child
        assert node.children is not None
        node.children[job.uid] = _HNode(job.uid, 1.0, attr, job.total_request.clone(), None, node)

    def recompute(self, root: _HNode, total_allocated: Resource) -> None:
        # A resource is still "demanding" while the cluster has some of it left.
        demanding = {n for n in self.names if total_allocated.get(n) < self.total.get(n)}
        self._update(root, demanding)

    def _saturated_leaf(self, node: _HNode, demanding: set[str]) -> bool:
        alloc, req = node.attr.allocated, node.request
        for name in alloc.resource_names():
            a, r = alloc.get(name), req.get(name)
            if a != 0 and r != 0 and a >= r:
                return True  # the job got everything it asked for of this resource
            if name not in demanding and r != 0:
                return True  # the job needs a resource the cluster has run out of
        return False

    def _update(self, node: _HNode, demanding: set[str]) -> None:
        if node.children is None:
            node.saturated = self._saturated_leaf(node, demanding)
            return
        mdr = 1.0
        for child in node.children.values():
            self._update(child, demanding)
            if child.attr.share != 0 and not child.saturated:
                _, s = dominant_share(child.attr.allocated, self.total, self.names)
                mdr = min(mdr, s)
        allocated = Resource()
        saturated = True
        for child in node.children.values():
            if not child.saturated:
                saturated = False
            if child.attr.share != 0:
                if child.saturated:
                    allocated.add(child.attr.allocated)
                else:
                    allocated.add(child.attr.allocated.clone().multi(mdr / child.attr.share))
        node.attr.allocated = allocated
        node.attr.dominant, node.attr.share = dominant_share(allocated, self.total, self.names)
        node.saturated = saturated

    def compare_queues(self, root: _HNode, lqueue: str, rqueue: str) -> float:
        """< 0 when ``lqueue`` should go first, > 0 when ``rqueue`` should."""
        lpath = self.paths.get(lqueue, (f"{ROOT}/{lqueue}", ""))[0].split("/")
        rpath = self.paths.get(rqueue, (f"{ROOT}/{rqueue}", ""))[0].split("/")
        lnode: _HNode | None = root
        rnode: _HNode | None = root
        depth = min(len(lpath), len(rpath))
        for i in range(depth):
            if lnode is None or rnode is None:
                return 0  # a queue without jobs has no node; no opinion
            # Saturated nodes go last so that demanding ones are served first.
            if not lnode.saturated and rnode.saturated:
                return -1
            if lnode.saturated and not rnode.saturated:
                return 1
            lv = lnode.attr.share / lnode.weight
            rv = rnode.attr.share / rnode.weight
            if lv != rv:
                return lv - rv
            if i < depth - 1:
                lnode = lnode.children.get(lpath[i + 1]) if lnode.children is not None else None
                rnode = rnode.children.get(rpath[i + 1]) if rnode.children is not None else None
        return 0
