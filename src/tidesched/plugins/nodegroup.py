"""nodegroup plugin (Volcano plugins/nodegroup), plus tidesched's exclusive node groups.

Nodes name their group with the label ``volcano.sh/nodegroup-name``. A Queue's
``spec.affinity`` says which groups its jobs may use:

* ``nodeGroupAffinity.required…`` / ``.preferred…`` allow a group; ``nodeGroupAntiAffinity
  .required…`` forbids it (it wins over both); ``nodeGroupAntiAffinity.preferred…`` allows it
  again, as Volcano does (its predicate checks that last).
* An unlabelled node fits only when ``strict: false`` and the queue has no affinity rules.
  A labelled node never fits a queue without rules.
* Score (NodeOrder): +100 for a required group, +50 for a preferred one (with
  ``enablePreferredOrder``: ``50 × (n − i) / n`` for the i-th of n preferred groups); a group
  in the preferred anti-affinity scores −1 whatever else it matched.
* ``enableHierarchy: true`` on the plugin: a queue without ``spec.affinity`` uses that of its
  nearest ancestor that has one (parents by ``spec.parent``, a queue without one hangs below
  the queue named ``root``; a queue that names ``affinity: {}`` keeps its own, empty one).
* Queue annotation ``volcano.sh/nodegroup-resource-limits``: JSON ``{group: resource list}``;
  a queue's tasks on a group's nodes may not add up to more than its limit there (only the
  named resources are limited). An invalid annotation refuses the queue's tasks everywhere.

tidesched adds:

* ``exclusive: true``: a labelled node is usable only by queues whose *required* affinity
  names its group (preferred affinity or preferred anti-affinity no longer open it).
* Pod label ``scheduling.tidesched.io/node-group: <g>``: the pod stays on nodes of group
  ``<g>`` (on top of what its queue allows).

Everything a predicate answers depends on the queue, the pod's group label and the node's
group, so the answer is computed once per group for each (queue, pod group) pair and spread
over the nodes with one index operation; only resource limits are checked per task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.plugin import EventHandler, NodeFailure, Plugin, PredicateResult
from tidesched.model.objects import NodeGroupAffinity
from tidesched.model.quantity import QuantityError
from tidesched.model.resource import CPU, MEMORY, MIN_RESOURCE, Resource
from tidesched.model.status import ALLOCATED_STATUSES

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import QueueInfo, TaskInfo
    from tidesched.model.node_table import NodeTable

NODE_GROUP_LABEL = "volcano.sh/nodegroup-name"
RESOURCE_LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
POD_GROUP_LABEL = "scheduling.tidesched.io/node-group"
ROOT_QUEUE = "root"
BASE_SCORE = 100.0

# Fit-error reasons. Each starts with Volcano's own words (errors.go), then says which queue,
# group or rule is at stake, so `explain` tells the whole story.
REASON_LABEL_NOT_FOUND = "node group label not found"
REASON_AFFINITY_NOT_FOUND = "node group affinity not specified"
REASON_UNSATISFIED = "node does not satisfy the node group affinity"
REASON_LIMIT_INVALID = "node group resource limit annotation invalid"
REASON_LIMIT_EXCEEDED = "node group resource limit exceeded"
REASON_AFFINITY_INVALID = "queue node group affinity invalid"
REASON_EXCLUSIVE = "node group is exclusive"
REASON_POD_GROUP = "node is outside the pod's node group"


def node_groups(table: "NodeTable") -> tuple[list[str], np.ndarray]:
    """The node set's group names (sorted) and each row's group code (-1: no label); built
    once per node set."""

    def build() -> tuple[list[str], np.ndarray]:
        labels = [n.meta.labels.get(NODE_GROUP_LABEL) for n in table.nodes]
        names = sorted({g for g in labels if g is not None})
        code = {g: i for i, g in enumerate(names)}
        codes = np.array([-1 if g is None else code[g] for g in labels], dtype=np.int64)
        codes.flags.writeable = False
        return names, codes

    return table.memo("nodegroup.codes", build)


@dataclass(slots=True)
class QueueGroups:
    """What the plugin knows of one queue: its effective affinity (own or inherited), why it
    cannot be used, and its per-group resource limits and usage."""

    name: str
    affinity: NodeGroupAffinity | None
    inherited_from: str = ""
    error: str = ""  # a fit-error reason for every node (invalid affinity or limits)
    limits: dict[str, Resource] = field(default_factory=dict)
    limit_names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    used: dict[str, Resource] = field(default_factory=dict)

    def unset(self) -> bool:
        return self.affinity is None or self.affinity.is_empty()

    @property
    def who(self) -> str:
        """The queue as reasons name it, with the ancestor its rules come from."""
        if self.inherited_from:
            return f"queue {self.name} (rules inherited from queue {self.inherited_from})"
        return f"queue {self.name}"


def parse_resource_limits(raw: str) -> tuple[dict[str, Resource], dict[str, tuple[str, ...]]]:
    """The resource-limits annotation; raises ValueError with a readable message."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(data, Mapping):
        raise ValueError("expected a JSON object of node group -> resource list")
    limits: dict[str, Resource] = {}
    names: dict[str, tuple[str, ...]] = {}
    for group, rl in data.items():
        if not isinstance(rl, Mapping):
            raise ValueError(f"group {group!r}: expected a resource list, got {type(rl).__name__}")
        try:
            limits[group] = Resource.from_resource_list(rl)
        except (QuantityError, TypeError) as exc:
            raise ValueError(f"group {group!r}: {exc}") from None
        names[group] = tuple(sorted(rl))
    return limits, names


def exceeded_names(used: Resource, limit: Resource, names: tuple[str, ...]) -> list[str]:
    """Limited resources that ``used`` goes beyond (by at least Volcano's minimum)."""
    out = []
    for name in names:
        u, lim = used.get(name), limit.get(name)
        if u > lim and u - lim >= MIN_RESOURCE:
            out.append(name)
    # cpu and memory first, as Volcano lists them
    return sorted(out, key=lambda n: (n != CPU, n != MEMORY, n))


class NodeGroupPlugin(Plugin):
    name = "nodegroup"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.strict = arguments.get_bool("strict", True)
        self.preferred_order = arguments.get_bool("enablePreferredOrder", False)
        self.exclusive = arguments.get_bool("exclusive", False)

    # ------------------------------------------------------------------ session open

    def on_session_open(self, ssn: "Session") -> None:
        self.ssn = ssn
        self.hierarchy = any(
            opt.name == self.name and opt.enabled("hierarchy") for tier in ssn.tiers for opt in tier.plugins
        )
        self.group_names, self.codes = node_groups(ssn.table)
        self.group_code = {g: i for i, g in enumerate(self.group_names)}
        self.queues = {name: self._queue_groups(qi) for name, qi in ssn.queues.items()}
        if self.hierarchy:
            for attr in self.queues.values():
                self._inherit(attr)
        self._count_used()
        # (queue, pod group wish) -> static verdict over all nodes
        self._static: dict[tuple[str, str], tuple[np.ndarray, list[NodeFailure]]] = {}
        self._scores: dict[str, np.ndarray] = {}
        ssn.add_fn("predicate", self.name, self.predicate)
        ssn.add_fn("node_order", self.name, self.node_order)
        if any(a.limits for a in self.queues.values()):
            ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def _queue_groups(self, qi: "QueueInfo") -> QueueGroups:
        queue = qi.queue
        attr = QueueGroups(qi.name, queue.node_group_affinity)
        if queue.affinity_error:
            attr.error = f"{REASON_AFFINITY_INVALID} (queue {qi.name}: {queue.affinity_error})"
            self._warn(qi.name, "InvalidNodeGroupAffinity",
                       f"Queue {qi.name}: {queue.affinity_error}; its jobs are refused by the nodegroup plugin until it is fixed")
        raw = queue.meta.annotations.get(RESOURCE_LIMITS_ANNOTATION, "")
        if raw:
            try:
                attr.limits, attr.limit_names = parse_resource_limits(raw)
            except ValueError as exc:
                where = f"metadata.annotations[{RESOURCE_LIMITS_ANNOTATION}]"
                if not attr.error:
                    attr.error = f"{REASON_LIMIT_INVALID} (queue {qi.name}: {exc})"
                self._warn(qi.name, "InvalidNodeGroupResourceLimits",
                           f"Queue {qi.name}: {where}: {exc}; its jobs are refused by the nodegroup plugin until it is fixed")
        return attr

    def _warn(self, queue: str, reason: str, message: str) -> None:
        self.ssn.event("Queue", "", queue, "Warning", reason, message)

    def _inherit(self, attr: QueueGroups) -> None:
        """A queue without ``spec.affinity`` takes its nearest ancestor's (Volcano
        updateAffinityFromAncestor). A missing parent or a cycle ends the walk."""
        if attr.affinity is not None or self.ssn.queues[attr.name].queue.affinity_error:
            return
        seen = {attr.name}
        name = attr.name
        while name != ROOT_QUEUE:
            qi = self.ssn.queues[name]
            parent = qi.parent or ROOT_QUEUE
            if parent in seen:
                self._warn(attr.name, "QueueHierarchyCycle",
                           f"Queue {attr.name}: the queue hierarchy has a cycle at {parent}; no node group affinity is inherited beyond it")
                return
            ancestor = self.queues.get(parent)
            if ancestor is None:
                return  # Volcano: parent not found, the hierarchy stops here
            seen.add(parent)
            bad = self.ssn.queues[parent].queue.affinity_error
            if bad:
                attr.error = f"{REASON_AFFINITY_INVALID} (queue {attr.name} inherits it from queue {parent}: {bad})"
                return
            own = self.ssn.queues[parent].queue.node_group_affinity
            if own is not None:
                attr.affinity = own
                attr.inherited_from = parent
                return
            name = parent

    def _count_used(self) -> None:
        """Per queue with limits: what its placed tasks already use in each group."""
        limited = {name for name, a in self.queues.items() if a.limits}
        if not limited:
            return
        for job in self.ssn.jobs.values():
            if job.queue not in limited:
                continue
            for task in job.tasks.values():
                if task.status in ALLOCATED_STATUSES:
                    self._add_used(task, 1)

    def _group_of_task(self, task: "TaskInfo") -> str | None:
        row = self.ssn.table.index.get(task.node_name) if task.node_name else None
        if row is None:
            return None
        code = int(self.codes[row])
        return None if code < 0 else self.group_names[code]

    def _add_used(self, task: "TaskInfo", sign: int) -> None:
        job = self.ssn.jobs.get(task.job)
        attr = self.queues.get(job.queue) if job is not None else None
        if attr is None or not attr.limits:
            return
        group = self._group_of_task(task)
        if group is None:
            return
        used = attr.used.setdefault(group, Resource())
        if sign > 0:
            used.add(task.resreq)
        else:
            used.sub(task.resreq)

    def _on_allocate(self, task: "TaskInfo") -> None:
        self._add_used(task, 1)

    def _on_deallocate(self, task: "TaskInfo") -> None:
        self._add_used(task, -1)

    # ------------------------------------------------------------------ predicate

    def _group_reason(self, attr: QueueGroups, wish: str, group: str | None) -> str | None:
        """Why a node of ``group`` (None: unlabelled) does not fit the queue's tasks that
        wish for group ``wish`` ("" none); None when it fits."""
        if attr.error:
            return attr.error
        if wish and group != wish:
            return f"{REASON_POD_GROUP} (pod label {POD_GROUP_LABEL}={wish})"
        aff = attr.affinity
        if group is None:
            if not self.strict and attr.unset():
                return None
            if attr.unset():
                return f"{REASON_LABEL_NOT_FOUND} (strict: {attr.who} may only use nodes labelled {NODE_GROUP_LABEL})"
            return f"{REASON_LABEL_NOT_FOUND} ({attr.who} has node group affinity; the node has no {NODE_GROUP_LABEL} label)"
        if aff is None or aff.is_empty():
            return f"{REASON_AFFINITY_NOT_FOUND} ({attr.who} names no node group; node is in group {group})"
        # Volcano's order: allowed by affinity, then forbidden by required anti-affinity,
        # then allowed again by preferred anti-affinity.
        allowed = group in aff.required or group in aff.preferred
        if group in aff.anti_required:
            allowed = False
        if group in aff.anti_preferred:
            allowed = True
        if not allowed:
            if group in aff.anti_required:
                why = f"{attr.who} has required anti-affinity to group {group}"
            else:
                why = f"group {group} is not in the node group affinity of {attr.who}"
            return f"{REASON_UNSATISFIED} ({why})"
        if self.exclusive and group not in aff.required:
            return f"{REASON_EXCLUSIVE} (group {group} is only for queues whose required affinity names it; {attr.who} does not require it)"
        return None

    def _static_verdict(self, attr: QueueGroups, wish: str) -> tuple[np.ndarray, list[NodeFailure]]:
        key = (attr.name, wish)
        hit = self._static.get(key)
        if hit is not None:
            return hit
        # One reason per group code; the last slot (index -1 in numpy) is the unlabelled nodes.
        reasons = [self._group_reason(attr, wish, g) for g in self.group_names]
        reasons.append(self._group_reason(attr, wish, None))
        codes = self.codes
        passed_by_code = np.array([r is None for r in reasons], dtype=bool)
        passed = passed_by_code[codes]
        failures: list[NodeFailure] = []
        by_reason: dict[str, list[int]] = {}
        for code, reason in enumerate(reasons):
            if reason is not None:
                by_reason.setdefault(reason, []).append(code if code < len(self.group_names) else -1)
        for reason, group_codes in by_reason.items():
            nodes = np.isin(codes, group_codes)
            if nodes.any():
                nodes.flags.writeable = False
                failures.append(NodeFailure(reason, nodes, True))
        passed.flags.writeable = False
        self._static[key] = (passed, failures)
        return passed, failures

    def _attr_of(self, task: "TaskInfo") -> QueueGroups | None:
        job = self.ssn.jobs.get(task.job)
        return self.queues.get(job.queue) if job is not None else None

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        attr = self._attr_of(task)
        n = len(self.codes)
        if attr is None:
            reason = f"job {task.job or '(none)'} of the pod is not in this session"
            return PredicateResult(np.zeros(n, dtype=bool), [NodeFailure(reason, np.ones(n, dtype=bool), True)])
        wish = task.pod.meta.labels.get(POD_GROUP_LABEL, "")
        passed, failures = self._static_verdict(attr, wish)
        if attr.limits and not attr.error:
            over = self._over_limit(attr, task, passed)
            if over is not None:
                passed = passed & ~over[0]
                failures = failures + over[1]
        return PredicateResult(passed, failures)

    def _over_limit(
        self, attr: QueueGroups, task: "TaskInfo", passed: np.ndarray
    ) -> tuple[np.ndarray, list[NodeFailure]] | None:
        failures: list[NodeFailure] = []
        bad = np.zeros(len(self.codes), dtype=bool)
        for group, limit in attr.limits.items():
            code = self.group_code.get(group)
            if code is None:
                continue
            used = attr.used.get(group)
            future = (used.clone() if used is not None else Resource()).add(task.resreq)
            names = exceeded_names(future, limit, attr.limit_names[group])
            if not names:
                continue
            nodes = passed & (self.codes == code)
            if nodes.any():
                bad |= nodes
                reason = (f"{REASON_LIMIT_EXCEEDED} (queue {attr.name} in group {group}, "
                          f"insufficient: {', '.join(names)})")
                failures.append(NodeFailure(reason, nodes, True))
        return (bad, failures) if failures else None

    # ------------------------------------------------------------------ node order

    def _group_scores(self, attr: QueueGroups) -> np.ndarray:
        """Score per group code, the last entry for unlabelled nodes (always 0)."""
        hit = self._scores.get(attr.name)
        if hit is not None:
            return hit
        aff = attr.affinity
        out = np.zeros(len(self.group_names) + 1)
        if aff is not None:
            # As Volcano: a group listed twice counts at its last position, n counts
            # distinct groups.
            pref_index = {g: i for i, g in enumerate(aff.preferred)}
            n_pref = len(pref_index)
            for code, group in enumerate(self.group_names):
                score = 0.0
                if group in aff.required:
                    score += BASE_SCORE
                if group in pref_index:
                    if self.preferred_order:
                        score += 0.5 * BASE_SCORE * (n_pref - pref_index[group]) / n_pref
                    else:
                        score += 0.5 * BASE_SCORE
                if group in aff.anti_preferred:
                    score = -1.0
                out[code] = score
        self._scores[attr.name] = out
        return out

    def node_order(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        attr = self._attr_of(task)
        if attr is None:
            return np.zeros(len(idx))
        return self._group_scores(attr)[self.codes[idx]]

