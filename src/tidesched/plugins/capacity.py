"""capacity plugin (Volcano plugins/capacity; seed 001, CAP-1..3): queue quotas from
``deserved`` / ``guarantee`` / ``capability``, flat or as a tree of queues.

Queue attributes (per session, see ``capacity_tree``):

- **Flat** (CAP-1): deserved = ``spec.deserved`` clamped to [guarantee, realCapability];
  realCapability = min(capability, ExceededPart(cluster total, Σ guarantee) + guarantee)
  (capability cpu/memory ≤ 0 or unset ⇒ no limit there); share = max over deserved
  dimensions of allocated/deserved, 1 for a best-effort queue (no deserved).
- **Hierarchical** (CAP-2, ``enableHierarchy: true``): the tree comes from ``spec.parent``
  (empty ⇒ ``root``); the root's capability and deserved default to the cluster total for
  every dimension they leave unset (seed §3.2 step 4), its guarantee is its children's sum;
  a child's unset capability dimensions are inherited from its parent; a child's
  realCapability = min(capability, ExceededPart(parent realCapability, Σ sibling guarantees)
  + own guarantee); deserved = max(deserved, guarantee). Usage (allocated, request, inqueue,
  elastic) of a queue is added to every ancestor.
- Inqueue reservations: an Inqueue PodGroup with minResources reserves
  max(0, minResources − allocated) per dimension, a Running one the same once its allocated
  tasks reach minMember; elastic = ExceededPart(job allocated, minResources).

Hooks:

- QueueOrder: higher ``spec.priority`` first, then smaller share (ties: a queue with deserved
  before a best-effort queue). Hierarchical: leaves before inner queues, and two leaves
  compare the shares of their ancestors just below their lowest common ancestor (seed §4.3).
- VictimQueueOrder (hierarchical): victims in queues sharing a deeper ancestor with the
  preemptor's queue first (seed §9).
- JobEnqueueable (CAP-3): queue Open, a leaf with a valid place in the tree, and on every
  level leaf→root minResources + allocated + inqueue − elastic ≤ realCapability on the
  dimensions minResources asks for. JobEnqueued adds minResources to inqueue on the queue
  and every ancestor.
- Allocatable (CAP-3): queue Open, leaf, and allocated + request ≤ realCapability on the
  requested dimensions at every level leaf→root; with ``SchedulingGatesQueueAdmission``, the
  leaf also counts what it holds for pods its gate admitted and not yet placed
  (``capacity_reservations``).
- Preemptive (CAP-3, seed §5.2): queue Open, leaf, allocated + request ≤ its realCapability,
  and allocated + request ≤ deserved on at least one requested dimension (with
  ``ancestorReclaimLevel`` N: or on an ancestor up to N levels up, root excluded).
- Reclaimable (CAP-3, seed §5.1), victims taken in victim order: skip a victim sharing no
  dimension with the reclaimer; skip one whose removal would take its queue below its
  guarantee on a dimension it frees; take it if its request shares no dimension with its
  queue's deserved ("immediate victim"), else only while the queue's running allocated
  exceeds deserved on a dimension it uses. With ``ancestorReclaimLevel`` N (hierarchical),
  the victim's ancestors up to N levels that the reclaimer does not share (root excluded)
  must also exceed their deserved, and an immediate victim under a shared ancestor is only
  taken when the reclaimer's queue has a deserved on what it asks for. In a tree, when an
  ancestor of the reclaimer's queue has no room left for the task, only victims below that
  ancestor qualify (any other eviction frees nothing there, REL-2).
- UnifiedEvictable (gangpreempt: every candidate; gangreclaim: the Reclaimable rule without
  the reclaimer's dimensions and ancestor levels, as Volcano's).
- PrePredicate: refuses tasks of queues that cannot take work (not a leaf, broken tree).
- SimulateInit / SimulateAddTask / SimulateRemoveTask / SimulateAllocatable: the Allocatable
  rule against a copy-on-write copy of the queues' allocated, for dry-run preemption.
- EventHandler: allocate/deallocate add/subtract the task's request on its queue and every
  ancestor, and refresh their shares (seed §7.2).

Robustness (REL-1): guarantees or capabilities above the cluster, a missing ``root``, a parent
that does not exist, parent cycles, zero or absent dimensions never raise; the session goes on
and the queue concerned gets a Warning event saying what is inconsistent. Where Volcano
stops the whole session (a job in a non-leaf queue, a broken tree) only the affected jobs are
refused, with a reason.

Where we differ from Volcano, on purpose: an unset root capability is the cluster total, not
infinite (the seed, and flat mode, bound admission by the cluster too); the guarantee check
looks at the dimensions the victim frees (Volcano compares every guarantee dimension, so a
queue short of an unused GPU guarantee could never lose an over-deserved CPU task); a
queue's realCapability is never negative; shares of ancestors are refreshed on every
allocation (Volcano refreshes only the leaf; the seed's §7.2 table shows all three).

Reasons: a refused enqueue writes a Warning event on the PodGroup, a refused allocation on the
Pod, naming the queue (and, in a tree, the ancestor whose limit blocks), the resource, the
amount requested, the total it would reach and the limit, in natural units (DEC-11). They are
written at session close, once per object, and only for objects still pending then.

DRA queue quota (``capacity.DynamicResourceAllocationEnable``, Queue keys ``deviceclass/<class>``
and ``<name>.deviceclass/<class>``): ``capacity_dra.py``, asked from Allocatable, JobEnqueueable,
JobEnqueued and the event handler.

Why one module of about 700 lines: it is one plugin, its hooks in the order Volcano's
``capacity.go`` registers them; the queue tree and the resource arithmetic they share are in
``capacity_tree.py`` already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidesched.framework.gates import deduct_gated
from tidesched.framework.arguments import ConfigError
from tidesched.framework.plugin import GANG_RECLAIM, PERMIT, REJECT, EventHandler, EvictionContext, Plugin
from tidesched.model.quantity import format_amount
from tidesched.model.resource import MIN_RESOURCE, Resource, exceeded_part, max_resource
from tidesched.model.status import ALLOCATED_STATUSES, PodGroupPhase, QueueState, TaskStatus
from tidesched.plugins.capacity_dra import DraQuota
from tidesched.plugins.capacity_reservations import GateReservations
from tidesched.plugins.capacity_tree import (
    ROOT,
    QueueAttr,
    Tree,
    any_dim_within,
    build_tree,
    capability_from_spec,
    compare_share,
    describe,
    exceeding_names,
    first_exceeded,
    first_exceeded_sum,
    greater_on_relevant,
    intersects,
    keeps_guarantee,
    min_keep_missing,
    queue_level,
    unlimited_cpu_memory,
    with_guarantee,
)

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

ANCESTOR_RECLAIM_LEVEL = "ancestorReclaimLevel"
STATE_KEY = "capacity"

REASON_QUOTA = "InsufficientQuota"
REASON_NOT_OPEN = "QueueNotOpen"
REASON_NOT_LEAF = "QueueNotLeaf"
REASON_BROKEN = "QueueHierarchyInvalid"


def _desc(l: int, r: int) -> int:
    return 0 if l == r else (-1 if l > r else 1)


def inqueue_reservation(min_resources: Resource, allocated: Resource) -> Resource:
    """What an admitted job still holds in its queue: max(0, minResources − allocated) per
    dimension; a scalar the job has not been allocated at all is reserved in full."""
    out = Resource(max(0.0, min_resources.milli_cpu - allocated.milli_cpu),
                   max(0.0, min_resources.memory - allocated.memory))
    alloc_s = allocated.scalars
    for name, v in min_resources.scalars.items():
        have = alloc_s.get(name)
        if have is None:
            out.scalars[name] = v
        elif v - have > 0:
            out.scalars[name] = v - have
    return out


class CapacityPlugin(Plugin):
    name = "capacity"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.hierarchy = False
        for tier in ssn.tiers:
            for opt in tier.plugins:
                if opt.name == self.name:
                    self.hierarchy = opt.enabled("hierarchy")
        self.ancestor_level = self._ancestor_level(ssn)
        self.reservations = GateReservations.for_session(ssn)  # None unless the feature is on
        self.total = ssn.total_resource.clone()
        self._warned: set[tuple[str, str]] = set()
        # Refusal reasons, written at close for objects still pending: uid -> (object, reason, message).
        self._pod_reasons: dict[str, tuple[TaskInfo, str, str]] = {}
        self._job_reasons: dict[str, tuple[JobInfo, str, str]] = {}

        if self.hierarchy:
            self.tree: Tree | None = self._build_hierarchical(ssn)
            self.attrs = self.tree.attrs
        else:
            self.tree = None
            self.attrs = self._build_flat(ssn)
        for attr in self.attrs.values():
            attr.update_share()
        # Volcano v1.15's DRA queue quota (capacity_dra.py), None unless its argument is on.
        self.dra_quota = DraQuota.open(ssn, self.arguments)
        self._register(ssn)

    # ------------------------------------------------------------------ configuration

    def _ancestor_level(self, ssn: Session) -> int:
        try:
            level = self.arguments.get_int(ANCESTOR_RECLAIM_LEVEL, 0)
        except ConfigError as exc:
            ssn.event("Plugin", "", self.name, "Warning", "InvalidArgument",
                      f"{exc}; {ANCESTOR_RECLAIM_LEVEL} 0 is used")
            return 0
        if level < 0:
            ssn.event("Plugin", "", self.name, "Warning", "InvalidArgument",
                      f"{ANCESTOR_RECLAIM_LEVEL} must not be negative, got {level}; 0 is used")
            return 0
        return level

    def _warn_queue(self, queue: str, reason: str, message: str) -> None:
        if (queue, reason) in self._warned:
            return
        self._warned.add((queue, reason))
        self.ssn.event("Queue", "", queue, "Warning", reason, message)

    # ------------------------------------------------------------------ building

    def _accumulate_jobs(self, ssn: Session, attrs: dict[str, QueueAttr]) -> None:
        """Each queue's own usage from its jobs (allocated, request, inqueue, elastic)."""
        for job in ssn.jobs.values():
            attr = attrs.get(job.queue)
            if attr is None:
                continue
            attr.allocated.add(job.allocated)
            attr.request.add(job.allocated)
            for t in job.tasks.values():
                if t.status == TaskStatus.PENDING:
                    attr.request.add(t.resreq)
            min_res = job.min_resources
            if min_res is not None:
                phase = job.phase
                if phase == PodGroupPhase.INQUEUE:
                    attr.inqueue.add(deduct_gated(job, inqueue_reservation(min_res, job.allocated)))
                elif phase == PodGroupPhase.RUNNING:
                    allocated_tasks = sum(job.status_count[s] for s in ALLOCATED_STATUSES)
                    if allocated_tasks >= job.min_available:
                        attr.inqueue.add(deduct_gated(job, inqueue_reservation(min_res, job.allocated)))
            attr.elastic.add(exceeded_part(job.allocated, min_res if min_res is not None else Resource()))

    def _build_flat(self, ssn: Session) -> dict[str, QueueAttr]:
        attrs = {name: QueueAttr(name, q) for name, q in ssn.queues.items()}
        total_guarantee = Resource()
        for q in ssn.queues.values():
            total_guarantee.add(q.queue.guarantee)
        # Guarantees the cluster cannot hold (Volcano panics here: #3127, #3929, #4261).
        over = exceeding_names(total_guarantee, self.total)
        if over:
            for name, q in ssn.queues.items():
                mine = [n for n in over if q.queue.guarantee.get(n) > 0]
                if mine:
                    self._warn_queue(
                        name, "GuaranteeExceedsCluster",
                        f"the queues' guarantees add up to {describe(total_guarantee, mine)} but the cluster has "
                        f"{describe(self.total, mine)}; not every guarantee can be honoured",
                    )
        for name, attr in attrs.items():
            spec = ssn.queues[name].queue
            attr.guarantee = spec.guarantee.clone()
            real = with_guarantee(self.total, total_guarantee, attr.guarantee)
            if spec.capability_set:
                attr.capability = unlimited_cpu_memory(spec.capability)
                min_keep_missing(real, attr.capability)
            attr.real_capability = real
            self._check_guarantee_within_capability(attr, spec.capability_set)
            deserved = min_keep_missing(spec.deserved.clone(), real)
            attr.deserved = max_resource(deserved, attr.guarantee)
            attr.freeze_deserved()
        self._accumulate_jobs(ssn, attrs)
        return attrs

    def _check_guarantee_within_capability(self, attr: QueueAttr, capability_set: bool) -> None:
        if not capability_set:
            return
        over = exceeding_names(attr.guarantee, attr.capability)
        if over:
            self._warn_queue(
                attr.name, "GuaranteeExceedsCapability",
                f"guarantee {describe(attr.guarantee, over)} is above capability {describe(attr.capability, over)}",
            )

    def _build_hierarchical(self, ssn: Session) -> Tree:
        parents = {name: q.parent for name, q in ssn.queues.items()}
        tree = build_tree(parents, ssn.queues)
        attrs = tree.attrs
        for p in tree.problems:
            self._warn_queue(p.queue, p.reason, p.message)
        if tree.implicit_root:
            tops = [c for c in tree.root.children]
            self._warn_queue(
                ROOT, "RootQueueMissing",
                f"enableHierarchy is on but no queue named root exists; an implicit root with the cluster's "
                f"resources as capability is the parent of {', '.join(tops) or 'no queue'}",
            )
        for name, attr in attrs.items():
            info = ssn.queues.get(name)
            if info is not None:
                attr.guarantee = info.queue.guarantee.clone()
        self._accumulate_jobs(ssn, attrs)
        # A queue's usage counts at every ancestor (seed §3.2 "向上传播 Delta"): deepest queues
        # first, each adding its subtree total to its parent.
        for name in reversed(tree.top_down):
            attr = attrs[name]
            if len(attr.chain) > 1:
                parent = attr.chain[1]
                parent.allocated.add(attr.allocated)
                parent.request.add(attr.request)
                parent.inqueue.add(attr.inqueue)
                parent.elastic.add(attr.elastic)

        root = tree.root
        root_info = ssn.queues.get(ROOT)
        if root_info is not None and root_info.queue.capability_set:
            root.capability = capability_from_spec(root_info.queue.capability, self.total)
        else:
            root.capability = self.total.clone()
        root.real_capability = root.capability.clone()
        if root_info is not None and root_info.queue.deserved_set:
            root.deserved = root_info.queue.deserved.clone()
        else:
            root.deserved = self.total.clone()
        for name in tree.top_down:
            self._settle_children(attrs, attrs[name])
        for attr in attrs.values():
            attr.freeze_deserved()
        return tree

    def _settle_children(self, attrs: dict[str, QueueAttr], parent: QueueAttr) -> None:
        """Deserved floor, capability inheritance and realCapability of a queue's children,
        with consistency warnings (Volcano checkHierarchicalQueue; seed §3.2 step 5)."""
        if not parent.children:
            return
        kids = [attrs[c] for c in parent.children]
        total_guarantee = Resource()
        total_deserved = Resource()
        for kid in kids:
            spec = kid.info.queue if kid.info is not None else None
            spec_deserved = spec.deserved if spec is not None else Resource()
            kid.deserved = max_resource(spec_deserved, kid.guarantee)
            total_deserved.add(kid.deserved)
            total_guarantee.add(kid.guarantee)
            spec_cap = spec.capability if spec is not None else Resource()
            kid.capability = capability_from_spec(spec_cap, parent.capability)
            over = [n for n in exceeding_names(kid.capability, parent.capability)]
            if over:
                self._warn_queue(
                    kid.name, "CapabilityExceedsParent",
                    f"capability {describe(kid.capability, over)} is above the capability of parent queue "
                    f"{parent.name} ({describe(parent.capability, over)}); the parent's limit applies",
                )
            if spec is not None and spec.capability_set:
                self._check_guarantee_within_capability(kid, True)
        if parent.name == ROOT:
            parent.guarantee = total_guarantee.clone()
        for kid in kids:
            real = with_guarantee(parent.real_capability, total_guarantee, kid.guarantee)
            kid.real_capability = min_keep_missing(real, kid.capability)
        child_names = ", ".join(parent.children)
        over = exceeding_names(total_deserved, parent.deserved)
        if over:
            self._warn_queue(
                parent.name, "ChildrenDeservedExceedParent",
                f"the deserved of its children ({child_names}) add up to {describe(total_deserved, over)}, "
                f"above this queue's deserved {describe(parent.deserved, over)}",
            )
        if parent.name != ROOT:
            over = exceeding_names(total_guarantee, parent.guarantee)
            if over:
                self._warn_queue(
                    parent.name, "ChildrenGuaranteeExceedParent",
                    f"the guarantees of its children ({child_names}) add up to {describe(total_guarantee, over)}, "
                    f"above this queue's guarantee {describe(parent.guarantee, over)}",
                )
        over = exceeding_names(total_guarantee, parent.real_capability)
        if over:
            where = "the cluster" if parent.name == ROOT else f"queue {parent.name}"
            self._warn_queue(
                parent.name, "GuaranteeExceedsCapacity",
                f"the guarantees of its children ({child_names}) add up to {describe(total_guarantee, over)} but "
                f"{where} can hold only {describe(parent.real_capability, over)}; not every guarantee can be honoured",
            )

    # ------------------------------------------------------------------ checks shared by hooks

    def _unusable(self, queue: QueueInfo, attr: QueueAttr | None) -> tuple[str, str] | None:
        """(reason, message) when the queue cannot take new work at all."""
        if queue.state != QueueState.OPEN:
            return REASON_NOT_OPEN, f"Queue <{queue.name}> is not open (state {queue.state})"
        if attr is None:
            return REASON_BROKEN, f"Queue <{queue.name}> is unknown to the capacity plugin"
        if self.hierarchy:
            if attr.broken:
                return REASON_BROKEN, f"Queue <{queue.name}> cannot take work: {attr.broken_reason}"
            if attr.children:
                kids = ", ".join(attr.children)
                msg = (f"Queue <{queue.name}> is not a leaf queue (children: {kids}); "
                       "jobs may only be submitted to leaf queues")
                return REASON_NOT_LEAF, msg
        return None

    def _quota_message(self, leaf: QueueAttr, level: QueueAttr, dim: str, requested: float, total: float) -> str:
        who = f"Queue <{level.name}>"
        if level is not leaf:
            who += f" (ancestor of <{leaf.name}>)"
        limit = level.real_capability.get(dim)
        msg = (f"{who} has insufficient <{dim}> quota: requested {format_amount(dim, requested)}, "
               f"total would be {format_amount(dim, total)}, but capability is {format_amount(dim, limit)}")
        info = level.info
        configured = info.queue.capability.get(dim) if info is not None else 0.0
        if configured > 0 and configured - limit >= MIN_RESOURCE:
            msg += f" (effective limit; configured {format_amount(dim, configured)})"
        return msg

    def _with_held(self, leaf: QueueAttr, allocated: Resource, task: TaskInfo) -> Resource:
        """``allocated`` plus what the leaf queue holds for other pods its gate admitted."""
        held = self.reservations.held_for_others(leaf.name, task) if self.reservations is not None else None
        return allocated if held is None else allocated.clone().add(held)

    def _allocatable_on(
        self, attr: QueueAttr, allocated_of: Callable[[QueueAttr], Resource], task: TaskInfo
    ) -> tuple[QueueAttr, str] | None:
        """The first level (leaf→root) whose realCapability the task would exceed, with the dimension."""
        req = task.resreq
        for level in attr.chain if self.hierarchy else (attr,):
            dim = first_exceeded_sum(allocated_of(level), req, level.real_capability)
            if dim is not None:
                return level, dim
        return None

    # ------------------------------------------------------------------ hooks

    def _register(self, ssn: Session) -> None:
        attrs = self.attrs
        hierarchy = self.hierarchy

        if hierarchy:
            ssn.add_fn("queue_order", self.name, self._queue_order_hierarchical)
            ssn.add_fn("victim_queue_order", self.name, self._victim_queue_order)
        else:
            ssn.add_fn("queue_order", self.name, self._queue_order_flat)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            attr = attrs.get(queue.uid)
            bad = self._unusable(queue, attr)
            if bad is not None:
                self._pod_reasons[task.uid] = (task, bad[0], bad[1])
                return False
            assert attr is not None
            if self.dra_quota is not None and (why := self.dra_quota.allocatable(queue.name, task)):
                self._pod_reasons[task.uid] = (task, REASON_QUOTA, why)
                return False
            req = task.resreq
            leaf_used = self._with_held(attr, attr.allocated, task)
            for level in attr.chain if hierarchy else (attr,):
                used = leaf_used if level is attr else level.allocated
                dim = first_exceeded_sum(used, req, level.real_capability)
                if dim is not None:
                    break
            else:
                if self.reservations is not None:  # admitted: held until it is placed
                    self.reservations.hold_if_opted_in(attr.name, task)
                return True
            amount = req.get(dim)
            msg = self._quota_message(attr, level, dim, amount, used.get(dim) + amount)
            self._pod_reasons[task.uid] = (task, REASON_QUOTA, msg)
            return False

        ssn.add_fn("allocatable", self.name, allocatable)

        def enqueueable(job: JobInfo) -> int:
            queue = ssn.queues.get(job.queue)
            if queue is None:
                return REJECT
            attr = attrs.get(queue.uid)
            bad = self._unusable(queue, attr)
            if bad is not None:
                self._job_reasons[job.uid] = (job, bad[0], bad[1])
                return REJECT
            assert attr is not None
            if self.dra_quota is not None and (why := self.dra_quota.enqueueable(job)):
                self._job_reasons[job.uid] = (job, REASON_QUOTA, why)
                return REJECT
            if job.min_resources is None:
                return PERMIT
            min_req = job.min_resources
            for level in attr.chain if hierarchy else (attr,):
                r = min_req.clone().add(level.allocated).add(level.inqueue).sub(level.elastic)
                dim = first_exceeded(r, level.real_capability, min_req)
                if dim is not None:
                    msg = self._quota_message(attr, level, dim, min_req.get(dim), r.get(dim))
                    self._job_reasons[job.uid] = (job, REASON_QUOTA, msg)
                    return REJECT
            return PERMIT

        ssn.add_fn("job_enqueueable", self.name, enqueueable)

        def enqueued(job: JobInfo) -> None:
            if self.dra_quota is not None:
                self.dra_quota.enqueued(job)
            attr = attrs.get(job.queue)
            if attr is None or job.min_resources is None:
                return
            reserved = deduct_gated(job, job.min_resources)
            for level in attr.chain if hierarchy else (attr,):
                level.inqueue.add(reserved)

        ssn.add_fn("job_enqueued", self.name, enqueued)

        def preemptive(queue: QueueInfo, task: TaskInfo) -> bool:
            attr = attrs.get(queue.uid)
            if self._unusable(queue, attr) is not None:
                return False
            assert attr is not None
            req = task.resreq
            # Only the queue's own limit: victims may free room in its ancestors (Volcano).
            if first_exceeded_sum(attr.allocated, req, attr.real_capability) is not None:
                return False
            future = attr.allocated.clone().add(req)
            if any_dim_within(future, attr.deserved, req):
                return True
            if hierarchy and self.ancestor_level > 0:
                for depth in range(1, self.ancestor_level + 1):
                    anc = self._ancestor_at_depth(attr, depth)
                    if anc is None or anc.name == ROOT:
                        continue
                    if any_dim_within(anc.allocated.clone().add(req), anc.deserved, req):
                        return True
            return False

        ssn.add_fn("preemptive", self.name, preemptive)
        ssn.add_fn("reclaimable", self.name, self._reclaimable)
        ssn.add_fn("unified_evictable", self.name, self._unified_evictable)

        def pre_predicate(task: TaskInfo) -> str | None:
            job = ssn.jobs.get(task.job)
            queue = ssn.queues.get(job.queue) if job is not None else None
            if queue is None:
                return None
            attr = attrs.get(queue.uid)
            if attr is None or not hierarchy:
                return None
            if attr.broken:
                return f"Queue <{queue.name}> cannot take work: {attr.broken_reason}"
            if attr.children:
                return f"Queue <{queue.name}> is not a leaf queue; jobs may only be submitted to leaf queues"
            return None

        ssn.add_fn("pre_predicate", self.name, pre_predicate)

        # Dry-run preemption: a copy-on-write copy of each touched queue's allocated.
        def simulate_init(state: dict[str, Any], _task: TaskInfo) -> None:
            state[STATE_KEY] = {}

        def sim_allocated(state: dict[str, Any], attr: QueueAttr) -> Resource:
            sim: dict[str, Resource] = state.setdefault(STATE_KEY, {})
            res = sim.get(attr.name)
            if res is None:
                res = sim[attr.name] = attr.allocated.clone()
            return res

        def simulate_shift(state: dict[str, Any], task: TaskInfo, sign: int) -> None:
            job = ssn.jobs.get(task.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is None:
                return
            for level in attr.chain if hierarchy else (attr,):
                res = sim_allocated(state, level)
                if sign > 0:
                    res.add(task.resreq)
                else:
                    res.sub(task.resreq)

        def simulate_add(state: dict[str, Any], _preemptor: TaskInfo, task: TaskInfo, _row: int) -> None:
            simulate_shift(state, task, +1)

        def simulate_remove(state: dict[str, Any], _preemptor: TaskInfo, task: TaskInfo, _row: int) -> None:
            simulate_shift(state, task, -1)

        def simulate_allocatable(state: dict[str, Any], queue: QueueInfo, task: TaskInfo) -> bool:
            attr = attrs.get(queue.uid)
            if self._unusable(queue, attr) is not None:
                return False
            assert attr is not None
            sim = state.get(STATE_KEY) or {}

            def allocated_of(level: QueueAttr) -> Resource:
                used = sim.get(level.name, level.allocated)
                return self._with_held(attr, used, task) if level is attr else used

            return self._allocatable_on(attr, allocated_of, task) is None

        ssn.add_fn("simulate_init", self.name, simulate_init)
        ssn.add_fn("simulate_add_task", self.name, simulate_add)
        ssn.add_fn("simulate_remove_task", self.name, simulate_remove)
        ssn.add_fn("simulate_allocatable", self.name, simulate_allocatable)

        def shift(task: TaskInfo, sign: int) -> None:
            job = ssn.jobs.get(task.job)
            if job is None:
                return
            if self.dra_quota is not None:
                self.dra_quota.shift(job.queue, task, sign)
            attr = attrs.get(job.queue)
            if attr is None:
                return
            req = task.resreq
            for level in attr.chain if hierarchy else (attr,):
                if sign > 0:
                    level.allocated.add(req)
                else:
                    level.allocated.sub(req)
                level.update_share()
            held = self.reservations
            if held is not None and sign > 0:
                held.release(task)  # placed: its room is allocated now
            elif held is not None:
                held.hold_if_opted_in(attr.name, task)  # taken back: held again

        ssn.add_event_handler(EventHandler(allocate=lambda t: shift(t, +1),
                                           deallocate=lambda t: shift(t, -1)))

    # ------------------------------------------------------------------ ordering

    def _queue_order_flat(self, l: QueueInfo, r: QueueInfo) -> int:
        if l.priority != r.priority:
            return _desc(l.priority, r.priority)
        la, ra = self.attrs.get(l.uid), self.attrs.get(r.uid)
        if la is None or ra is None:
            return 0
        return compare_share(la, ra)

    def _queue_order_hierarchical(self, l: QueueInfo, r: QueueInfo) -> int:
        if l.priority != r.priority:
            return _desc(l.priority, r.priority)
        la, ra = self.attrs.get(l.uid), self.attrs.get(r.uid)
        if la is None or ra is None:
            return 0
        l_leaf, r_leaf = not la.children, not ra.children
        if l_leaf != r_leaf:
            return -1 if l_leaf else 1
        if not l_leaf or la.ancestors == ra.ancestors:
            return compare_share(la, ra)  # inner queues, or siblings: their own shares
        # Compare the two branches just below the lowest common ancestor (seed §4.3).
        level = queue_level(la, ra) + 1
        lb = self.attrs[la.ancestors[level]] if level < len(la.ancestors) else la
        rb = self.attrs[ra.ancestors[level]] if level < len(ra.ancestors) else ra
        return compare_share(lb, rb)

    def _victim_queue_order(self, l: QueueInfo, r: QueueInfo, preemptor: QueueInfo) -> int:
        la, ra, pa = self.attrs.get(l.uid), self.attrs.get(r.uid), self.attrs.get(preemptor.uid)
        if la is None or ra is None or pa is None:
            return 0
        ll, rl = queue_level(la, pa), queue_level(ra, pa)
        if ll == rl:
            return 0
        return -1 if ll > rl else 1

    # ------------------------------------------------------------------ reclaim

    @staticmethod
    def _ancestor_at_depth(attr: QueueAttr, depth: int) -> QueueAttr | None:
        """The ancestor ``depth`` levels up (1 = parent), or None."""
        chain = attr.chain
        return chain[depth] if 0 < depth < len(chain) else None

    def _shares_ancestor_within_level(self, a: QueueAttr, b: QueueAttr) -> bool:
        mine = {x.name for x in a.chain[1:self.ancestor_level + 1] if x.name != ROOT}
        return any(x.name in mine for x in b.chain[1:self.ancestor_level + 1])

    def _victim_order(self, reclaimer: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
        """Victims in the order the actions evict them (Volcano BuildVictimsPriorityQueue), so
        the running allocated below is decremented in that same order."""
        from tidesched.framework.victim_order import order_victims

        return order_victims(self.ssn, victims, reclaimer)

    def _reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        ssn = self.ssn
        attrs = self.attrs
        rjob = ssn.jobs.get(reclaimer.job)
        rattr = attrs.get(rjob.queue) if rjob is not None else None
        if rattr is None:
            return [], REJECT
        ancestor_checks = self.hierarchy and self.ancestor_level > 0
        # In a tree, a victim outside the subtree of an ancestor the reclaimer's queue is
        # already short in frees nothing there: evicting it would break that ancestor's
        # capability (REL-2), so only victims below the deepest such ancestor qualify.
        must_be_under = None
        if self.hierarchy:
            for level in rattr.chain[1:]:
                if first_exceeded_sum(level.allocated, reclaimer.resreq, level.real_capability) is not None:
                    must_be_under = level
                    break
        allocations: dict[str, Resource] = {}
        victims: list[TaskInfo] = []
        for victim in self._victim_order(reclaimer, reclaimees):
            job = ssn.jobs.get(victim.job)
            attr = attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            if must_be_under is not None and must_be_under not in attr.chain:
                continue
            req = victim.resreq
            if not intersects(req, reclaimer.init_resreq):
                continue
            allocated = allocations.get(attr.name)
            if allocated is None:
                allocated = allocations[attr.name] = attr.allocated.clone()
            if not keeps_guarantee(allocated, req, attr.guarantee):
                continue
            if not intersects(req, attr.deserved):
                # An immediate victim; but siblings under a shared ancestor only give way to a
                # reclaimer that has a deserved for what it asks.
                if (ancestor_checks and self._shares_ancestor_within_level(rattr, attr)
                        and not intersects(reclaimer.resreq, rattr.deserved)):
                    continue
            elif not greater_on_relevant(allocated, attr.deserved, req):
                continue
            touched: list[Resource] = []
            if ancestor_checks and not self._ancestors_over_deserved(rattr, attr, req, allocations, touched):
                continue
            allocated.sub(req)
            for res in touched:
                res.sub(req)
            victims.append(victim)
        return victims, PERMIT

    def _unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """gangpreempt: every candidate. gangreclaim: in the given order, a candidate whose queue
        keeps its guarantee without it, and that is an immediate victim or whose queue is over
        its deserved on a dimension it uses (Volcano's, without the reclaimer-dimension check)."""
        if ctx.kind != GANG_RECLAIM:
            return candidates, PERMIT
        allocations: dict[str, Resource] = {}
        victims: list[TaskInfo] = []
        for victim in candidates:
            job = self.ssn.jobs.get(victim.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            allocated = allocations.get(attr.name)
            if allocated is None:
                allocated = allocations[attr.name] = attr.allocated.clone()
            req = victim.resreq
            if not keeps_guarantee(allocated, req, attr.guarantee):
                continue
            if intersects(req, attr.deserved) and not greater_on_relevant(allocated, attr.deserved, req):
                continue
            allocated.sub(req)
            victims.append(victim)
        return victims, PERMIT

    def _ancestors_over_deserved(self, rattr: QueueAttr, attr: QueueAttr, req: Resource,
                                 allocations: dict[str, Resource], touched: list[Resource]) -> bool:
        """ancestorReclaimLevel: each ancestor of the victim's queue up to N levels that the
        reclaimer does not share (root excluded) must itself be over its deserved."""
        for depth in range(1, self.ancestor_level + 1):
            anc = self._ancestor_at_depth(attr, depth)
            if anc is None or anc.name == ROOT:
                continue
            mine = self._ancestor_at_depth(rattr, depth)
            if mine is not None and mine.name == anc.name:
                continue
            allocated = allocations.get(anc.name)
            if allocated is None:
                allocated = allocations[anc.name] = anc.allocated.clone()
            touched.append(allocated)
            if not intersects(req, anc.deserved):
                continue
            if not greater_on_relevant(allocated, anc.deserved, req):
                return False
        return True

    # ------------------------------------------------------------------ close

    def on_session_close(self, ssn: Session) -> None:
        for task, reason, message in self._pod_reasons.values():
            if task.status == TaskStatus.PENDING:
                ssn.event("Pod", task.namespace, task.name, "Warning", reason, message)
        for job, reason, message in self._job_reasons.values():
            if job.phase == PodGroupPhase.PENDING:
                ssn.event("PodGroup", job.namespace, job.name, "Warning", reason, message)
        if self.hierarchy:
            for job in ssn.jobs.values():
                attr = self.attrs.get(job.queue)
                if attr is None or job.uid in self._job_reasons or not job.has_pending_tasks():
                    continue
                queue = ssn.queues.get(job.queue)
                bad = self._unusable(queue, attr) if queue is not None else None
                if bad is not None and bad[0] != REASON_NOT_OPEN:
                    ssn.event("PodGroup", job.namespace, job.name, "Warning", bad[0], bad[1])

    def queue_status(self) -> dict[str, dict[str, Any]]:
        """Per-queue attributes in natural units (for status, reports and ``explain``)."""
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(self.attrs):
            a = self.attrs[name]
            out[name] = {
                "deserved": a.deserved.to_natural(),
                "allocated": a.allocated.to_natural(),
                "request": a.request.to_natural(),
                "inqueue": a.inqueue.to_natural(),
                "elastic": a.elastic.to_natural(),
                "capability": a.capability.to_natural(),
                "realCapability": a.real_capability.to_natural(),
                "guarantee": a.guarantee.to_natural(),
                "share": round(a.share, 6),
                "parent": a.ancestors[-1] if a.ancestors else "",
                "leaf": not a.children,
                "problem": a.broken_reason,
            }
        return out

