"""Invariants checked after every session of a simulation (SIM-3: REL-2, TIDE-4, TIDE-6).

Each rule judges what *the scheduler's own decisions of that step* did, not what the scenario
did to the world: a node that shrinks under running pods (a MIG re-split) or a quota lowered
below current use are the operator's doing, so only binds and evictions of the step are blamed.

* ``REL-2 node``: after the step's binds, no node that received a pod holds more than its
  allocatable in any dimension the new pods request (all pods on the node count, including
  ones being deleted: their resources are not free yet), nor more pods than ``pods``.
* ``REL-2 quota``: with the ``capacity-card`` plugin configured, a queue that received pods is
  not charged more cards of a model than its ``volcano.sh/card.quota`` (a model not listed has
  quota 0), in the quota view of DEC-1 (pods being deleted no longer count).
* ``TIDE-6 gang``: a PodGroup that lost pods to eviction is not left with some, but fewer than
  ``minMember``, pods running.
* ``TIDE-4 reclaim``: with ``capacity-card`` and the ``reclaim`` action configured, a pod
  evicted by reclaim is of a training job, and when the step placed pods of other queues
  (the reclaimers — pipelined or bound, on the victim's node when any) at least one of them is
  inference: never inference-vs-inference, never an unknown-type victim, never training-initiated.
  When the eviction reason names the reclaimer (``reclaim: evicted to make room for ns/pod on
  node n``, as the core writes it), that pod itself must be inference.
* ``TIDE-2/3/5 reclaim`` (same conditions): the victim's queue is reclaimable (``spec.reclaimable``
  not false), the victim is preemptable (``volcano.sh/preemptable`` on the pod, or on its
  PodGroup, is not false), and the named reclaimer is of another queue, one that is Open.
* ``TIDE-6 gang bind`` (gang configured): a PodGroup that received binds holds at least
  ``minMember`` pods bound or succeeded right after them: no gang is started partly.
* ``REL-2 device`` (deviceshare with vGPU configured): no GPU device over-committed by the
  step's binds, and every vGPU pod bound with its devices (see ``sim.device_invariants``).
* ``REL-2 claims`` (whenever the world holds ResourceClaims): no device in two claims, and
  every pod bound with claims bound with them allocated and reserved for it
  (``sim.dra_invariants``).
* ``REL-2 bind``: every bind names a node that exists and is Ready, and (predicates
  configured) is not cordoned unless the pod tolerates ``node.kubernetes.io/unschedulable``.
* ``SIM pod-node`` (every step, after the events too): no pod names a node that does not exist.
* ``REL-3 restart`` (scenarios with ``checkRestart: true``; the runner checks it): a scheduler
  rebuilt from the objects alone at that instant decides the same binds, evictions, pipelines
  and PodGroup phases as the running one on its incremental cache.

A violation is recorded with its time, rule and a message naming the objects; the ``simulate``
command exits non-zero when there is any.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidesched.framework.decisions import Decisions
from tidesched.framework.reasons import RECLAIM, evicted_by
from tidesched.rules.taints import tolerates_unschedulable
from tidesched.model.objects import GROUP_NAME_ANNOTATION, PREEMPTABLE_KEY, parse_bool
from tidesched.model.quantity import format_rough
from tidesched.model.resource import Resource
import tidesched.sim.metrics as metrics
from tidesched.sim.device_invariants import RULE_DEVICE, check_devices, deviceshare_vgpu
from tidesched.sim.dra_invariants import RULE_CLAIMS, check_claims
from tidesched.sim.metrics import Accounting, capacity_card_args, service_type
from tidesched.sim.world import (
    FINISHED_POD_PHASES,
    Applied,
    World,
    annotations,
    is_deleting,
    labels,
    meta,
    pod_node,
    pod_phase,
    spec,
    split_key,
)

RULE_NODE = "REL-2 node"
RULE_QUOTA = "REL-2 quota"
RULE_GANG = "TIDE-6 gang"
RULE_RECLAIM = "TIDE-4 reclaim"
RULE_SESSION = "REL-1 session"
RULE_RECLAIM_POLICY = "TIDE-2/3/5 reclaim"
RULE_GANG_BIND = "TIDE-6 gang bind"
RULE_BIND = "REL-2 bind"
RULE_POD_NODE = "SIM pod-node"
RULE_RESTART = "REL-3 restart"

# The core's eviction reason names the preemptor: "reclaim: evicted to make room for ns/pod on node n".
_REASON_PREEMPTOR = re.compile(r"make room for (\S+/\S+) on node")

_TOLERANCE = 0.5  # internal units (millicores, bytes, milli-cards): float noise only


@dataclass(frozen=True, slots=True)
class Violation:
    t: float
    rule: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), "rule": self.rule, "message": self.message}


class InvariantChecker:
    def __init__(self, world: World, accounting: Accounting, config: Any) -> None:
        self.world = world
        self.accounting = accounting
        self.notes: list[str] = []
        self.checked_steps = 0
        self.violations: list[Violation] = []
        self._nodes_seen: set[str] = set()  # every node the world has held
        self._gone: set[str] = set()  # node names in pods_by_node that no Node holds
        self._names_version = -1
        self.configure(config)

    def configure(self, config: Any) -> None:
        """Take the rules' switches from a scheduler config (at start and on a config reload)."""
        args = capacity_card_args(config)
        self.mapping: dict[str, str] = {}
        if args is not None:
            raw = args.get("podOwnerReferenceToServiceType") or {}
            if isinstance(raw, Mapping):
                self.mapping = {str(k): str(v) for k, v in raw.items()}
        # Card quota checks need the card naming module (issue 4) so that the invariant and the
        # plugin name cards the same way. TODO: drop this gate once tidesched.model.cards lands.
        self.check_quota = args is not None and metrics._cards_module is not None
        note = "card quota invariant skipped: tidesched.model.cards is not available yet"
        if args is not None and not self.check_quota and note not in self.notes:
            self.notes.append(note)
        self.card_unlimited = args is not None and parse_bool(args.get("cardUnlimitedCpuMemory", False)) is True
        actions = list(getattr(config, "actions", []) or [])
        # gangreclaim reclaims too (its reasons name it, so evicted_by counts it as reclaim).
        self.check_reclaim = args is not None and ("reclaim" in actions or "gangreclaim" in actions)
        plugins = set(config.plugin_names()) if hasattr(config, "plugin_names") else set()
        self.check_gang_bind = "gang" in plugins
        self.check_cordon = "predicates" in plugins
        self.check_devices = deviceshare_vgpu(config)

    def record(self, t: float, rule: str, message: str) -> Violation:
        v = Violation(t, rule, message)
        self.violations.append(v)
        return v

    def check(self, t: float, applied: Applied, decisions: Decisions) -> list[Violation]:
        """Check one step after its decisions were applied; returns the new violations."""
        self.checked_steps += 1
        found: list[Violation] = []
        if decisions.bound:
            found += self._bind_targets(t, decisions)
        if applied.bound:
            found += self._nodes(t, applied)
            if self.check_quota:
                found += self._quota(t, applied)
            if self.check_gang_bind:
                found += self._gang_binds(t, applied)
            if self.check_devices:
                found += [Violation(t, RULE_DEVICE, m) for m in check_devices(self.world, applied)]
            if self.world.cache.dra.claims:
                found += [Violation(t, RULE_CLAIMS, m) for m in check_claims(self.world, applied.bound)]
        if decisions.pipelined:
            found += self._pipelined(t, decisions)
        if applied.evicted:
            found += self._gangs(t, applied)
            if self.check_reclaim:
                found += self._reclaims(t, applied, decisions)
                found += self._reclaim_policy(t, applied)
        found += self.check_world(t)
        self.violations.extend(found)
        return found

    def check_world(self, t: float) -> list[Violation]:
        """Rules on the world alone (also checked after scenario events): no pod left on a node
        that went away. A pod the scenario itself put on a node that never existed is the
        input's doing (the cache reports it), not the simulator's."""
        world = self.world
        nodes = world.objects["Node"]
        by_node = world.pods_by_node
        if self._names_version != world.node_names_version:
            # Node names that pods were ever indexed under but no Node holds now, worked out
            # again only when a Node came or went or pods went to a new node name.
            self._nodes_seen.update(nodes)
            self._gone = by_node.keys() - nodes.keys()
            self._names_version = world.node_names_version
        out = []
        for node_name in sorted(n for n in self._gone if by_node.get(n) and n in self._nodes_seen):
            pods = sorted(self.world.pods_by_node[node_name])
            out.append(
                Violation(t, RULE_POD_NODE, f"pods {', '.join(pods[:5])} are bound to node {node_name}, which does not exist")
            )
        return out

    def _bind_targets(self, t: float, d: Decisions) -> list[Violation]:
        world = self.world
        out: list[Violation] = []
        for pk, node_name in sorted(d.bound.items()):
            node = world.record("Node", node_name)
            why = ""
            if world.get("Node", node_name) is None:
                why = "does not exist"
            elif node is None:
                why = "is malformed (not in the scheduler's view)"
            elif not node.ready:
                why = "is not Ready"
            elif node.unschedulable and self.check_cordon:
                rec = world.record("Pod", pk)
                if rec is None or not tolerates_unschedulable(rec.tolerations):
                    why = "is cordoned (spec.unschedulable) and the pod does not tolerate it"
            if why:
                out.append(Violation(t, RULE_BIND, f"pod {pk} bound to node {node_name}, which {why}"))
        return out

    def _gang_binds(self, t: float, applied: Applied) -> list[Violation]:
        world = self.world
        groups = self._groups_of(pk for pk, _node in applied.bound)
        out: list[Violation] = []
        for g in sorted(groups):
            min_member = self._min_member(g)
            if min_member is None or min_member <= 1:
                continue
            ready = 0
            for pk in world.pods_by_group.get(g, ()):
                p = world.get("Pod", pk)
                if p is None:
                    continue
                ph = pod_phase(p)
                if ph == "Succeeded" or (pod_node(p) and not is_deleting(p) and ph in ("Pending", "Running")):
                    ready += 1
            if ready < min_member:
                out.append(
                    Violation(
                        t,
                        RULE_GANG_BIND,
                        f"gang {g} started partly: {ready} of minMember {min_member} pods bound or done "
                        f"after binding {', '.join(sorted(groups[g])[:5])}",
                    )
                )
        return out

    # -- REL-2 --------------------------------------------------------------------------

    def _nodes(self, t: float, applied: Applied) -> list[Violation]:
        world = self.world
        out: list[Violation] = []
        new_by_node: dict[str, list[str]] = {}
        for pk, node in applied.bound:
            new_by_node.setdefault(node, []).append(pk)
        for node_name in sorted(new_by_node):
            node = world.record("Node", node_name)
            if node is None:
                continue
            asked: set[str] = set()
            for pk in new_by_node[node_name]:
                rec = world.record("Pod", pk)
                if rec is not None:
                    asked.update(rec.resreq.resource_names())
            used = Resource()
            count = 0
            for pk in sorted(world.pods_by_node.get(node_name, ())):
                pod = world.get("Pod", pk)
                rec = world.record("Pod", pk)
                if pod is None or rec is None or pod_phase(pod) in FINISHED_POD_PHASES:
                    continue
                used.add(rec.resreq)
                count += 1
            alloc = node.allocatable
            for dim in sorted(asked):
                have, need = alloc.get(dim), used.get(dim)
                if need > have + _TOLERANCE:
                    out.append(
                        Violation(
                            t,
                            RULE_NODE,
                            f"node {node_name} over-committed in {dim}: pods request {format_rough(dim, need)}, "
                            f"allocatable {format_rough(dim, have)} (bound this step: "
                            f"{', '.join(sorted(new_by_node[node_name]))})",
                        )
                    )
            if alloc.max_task_num and count > alloc.max_task_num:
                out.append(
                    Violation(
                        t,
                        RULE_NODE,
                        f"node {node_name} holds {count} pods, allocatable pods {alloc.max_task_num}",
                    )
                )
        return out

    def _quota(self, t: float, applied: Applied) -> list[Violation]:
        acc = self.accounting
        charged: dict[str, dict[str, list[str]]] = {}
        for pk, _node in applied.bound:
            c = acc.contrib.get(pk)
            if c is None or not c.queue:
                continue
            for model, _amount in c.cards:
                charged.setdefault(c.queue, {}).setdefault(model, []).append(pk)
        out: list[Violation] = self._queue_capability(t, applied)
        for queue in sorted(charged):
            usage = acc.queue_card_usage(queue)
            quota = acc.card_quota(queue)
            for model in sorted(charged[queue]):
                used, cap = usage.get(model, 0.0), quota.get(model, 0.0)
                if used > cap + 1e-9:
                    out.append(
                        Violation(
                            t,
                            RULE_QUOTA,
                            f"queue {queue} holds {used:g} {model} cards, quota {cap:g} "
                            f"(bound this step: {', '.join(sorted(charged[queue][model]))})",
                        )
                    )
        return out

    def _pipelined(self, t: float, d: Decisions) -> list[Violation]:
        """Pipelined pods (waiting for resources being released) must fit what the node will
        have once the releasing pods are gone, and count against their queue's card quota
        (DEC-1): no over-commit planned either."""
        world, acc = self.world, self.accounting
        out: list[Violation] = []
        by_node: dict[str, list[str]] = {}
        for pk, node in d.pipelined.items():
            by_node.setdefault(node, []).append(pk)
        for node_name in sorted(by_node):
            node = world.record("Node", node_name)
            if node is None:
                out.append(Violation(t, RULE_BIND, f"pods {', '.join(sorted(by_node[node_name])[:5])} pipelined "
                                                   f"onto node {node_name}, which does not exist"))
                continue
            need, asked, count = Resource(), set(), 0
            for pk in by_node[node_name]:
                rec = world.record("Pod", pk)
                if rec is not None:
                    need.add(rec.resreq)
                    asked.update(rec.resreq.resource_names())
                    count += 1
            for pk in world.pods_by_node.get(node_name, ()):
                pod, rec = world.get("Pod", pk), world.record("Pod", pk)
                if pod is None or rec is None or is_deleting(pod) or pod_phase(pod) in FINISHED_POD_PHASES:
                    continue
                need.add(rec.resreq)
                count += 1
            for dim in sorted(asked):
                if need.get(dim) > node.allocatable.get(dim) + _TOLERANCE:
                    out.append(
                        Violation(
                            t,
                            RULE_NODE,
                            f"node {node_name} over-committed once its releasing pods are gone, in {dim}: "
                            f"{format_rough(dim, need.get(dim))} for allocatable "
                            f"{format_rough(dim, node.allocatable.get(dim))} "
                            f"(pipelined: {', '.join(sorted(by_node[node_name])[:5])})",
                        )
                    )
            if node.allocatable.max_task_num and count > node.allocatable.max_task_num:
                out.append(Violation(t, RULE_NODE, f"node {node_name} would hold {count} pods with the pipelined "
                                                   f"ones, allocatable pods {node.allocatable.max_task_num}"))
        if not self.check_quota:
            return out
        planned: dict[str, dict[str, float]] = {}
        names: dict[str, list[str]] = {}
        for pk, node_name in sorted(d.pipelined.items()):
            pod, rec = world.get("Pod", pk), world.record("Pod", pk)
            if pod is None or rec is None:
                continue
            queue = acc.queue_of(pod, split_key(pk)[0])
            models = acc.node_models.get(node_name, {})
            for res, amount in rec.resreq.scalars.items():
                if res in models and amount:
                    q = planned.setdefault(queue, {})
                    q[models[res]] = q.get(models[res], 0.0) + amount / 1000.0
                    names.setdefault(queue, []).append(pk)
        for queue in sorted(planned):
            usage, quota = acc.queue_card_usage(queue), acc.card_quota(queue)
            for model, extra in sorted(planned[queue].items()):
                total = usage.get(model, 0.0) + extra
                if total > quota.get(model, 0.0) + 1e-9:
                    out.append(
                        Violation(
                            t,
                            RULE_QUOTA,
                            f"queue {queue} would hold {total:g} {model} cards with its pipelined pods, quota "
                            f"{quota.get(model, 0.0):g} (pipelined: {', '.join(sorted(set(names[queue]))[:5])})",
                        )
                    )
        return out

    def _queue_capability(self, t: float, applied: Applied) -> list[Violation]:
        """CPU/memory of ``spec.capability`` (where it sets them) for queues that received pods
        charged in CPU/memory — with ``cardUnlimitedCpuMemory`` only pods that use no cards."""
        acc = self.accounting
        got: dict[str, list[str]] = {}
        for pk, _node in applied.bound:
            c = acc.contrib.get(pk)
            if c is not None and c.queue and not (self.card_unlimited and c.uses_cards):
                got.setdefault(c.queue, []).append(pk)
        out: list[Violation] = []
        for queue in sorted(got):
            quota = acc.quota(queue)
            used = (acc.q_alloc_no_cards if self.card_unlimited else acc.q_alloc).get(queue, {})
            for dim, scale in (("cpu", 1000.0), ("memory", float(1 << 30))):
                if dim not in quota:
                    continue
                have = used.get(dim, 0.0) / scale
                if have > quota[dim] + 1e-6:
                    out.append(
                        Violation(
                            t,
                            RULE_QUOTA,
                            f"queue {queue} holds {have:g} {'CPU' if dim == 'cpu' else 'GiB of memory'}, capability "
                            f"{quota[dim]:g} (bound this step: {', '.join(sorted(got[queue])[:5])})",
                        )
                    )
        return out

    # -- TIDE-6 / TIDE-4 ----------------------------------------------------------------

    def _group_of(self, pod: Mapping[str, Any], key: str) -> str:
        g = annotations(pod).get(GROUP_NAME_ANNOTATION)
        return f"{split_key(key)[0]}/{g}" if g else ""

    def _groups_of(self, pod_keys: Iterable[str]) -> dict[str, list[str]]:
        """PodGroup key → the given pods (that still exist) belonging to it."""
        groups: dict[str, list[str]] = {}
        for pk in pod_keys:
            pod = self.world.get("Pod", pk)
            g = self._group_of(pod, pk) if pod is not None else ""
            if g:
                groups.setdefault(g, []).append(pk)
        return groups

    def _min_member(self, group: str) -> int | None:
        """The PodGroup's minMember; None when it is gone or its minMember is unreadable."""
        pg = self.world.get("PodGroup", group)
        if pg is None:
            return None
        try:
            return int(spec(pg).get("minMember", 1) or 0)
        except (TypeError, ValueError):
            return None

    def _gangs(self, t: float, applied: Applied) -> list[Violation]:
        world = self.world
        groups = self._groups_of(pk for pk, _reason in applied.evicted)
        out: list[Violation] = []
        for g in sorted(groups):
            min_member = self._min_member(g)
            if min_member is None:
                continue
            alive = [
                pk
                for pk in sorted(world.pods_by_group.get(g, ()))
                if (p := world.get("Pod", pk)) is not None
                and pod_node(p)
                and not is_deleting(p)
                and pod_phase(p) in ("Pending", "Running")
            ]
            if 0 < len(alive) < min_member:
                st = self.pod_service_type(world.get("Pod", groups[g][0]) or {}, groups[g][0])
                out.append(
                    Violation(
                        t,
                        RULE_GANG,
                        f"{st} job {g} left with {len(alive)} of minMember {min_member} pods running "
                        f"after evicting {', '.join(sorted(groups[g]))}",
                    )
                )
        return out

    def pod_service_type(self, pod: Mapping[str, Any], key: str) -> str:
        g = self._group_of(pod, key)
        pg = self.world.get("PodGroup", g) if g else None
        owners = meta(pod).get("ownerReferences")
        first = (
            owners[0].get("kind", "")
            if isinstance(owners, list) and owners and isinstance(owners[0], Mapping)
            else ""
        )
        return service_type(annotations(pg) if pg is not None else {}, str(first), self.mapping)

    def _reclaims(self, t: float, applied: Applied, d: Decisions) -> list[Violation]:
        world = self.world
        placed: list[tuple[str, str]] = sorted(set(applied.bound) | set(d.pipelined.items()))
        out: list[Violation] = []
        for pk, reason in applied.evicted:
            if not evicted_by(reason, RECLAIM):
                continue
            victim = world.get("Pod", pk)
            if victim is None:
                continue
            v_type = self.pod_service_type(victim, pk)
            v_queue = self.accounting.queue_of(victim, split_key(pk)[0])
            if v_type != "training":
                out.append(
                    Violation(
                        t,
                        RULE_RECLAIM,
                        f"reclaim evicted {v_type} pod {pk} (queue {v_queue}); "
                        "only training pods may be reclaimed",
                    )
                )
                continue
            named = _REASON_PREEMPTOR.search(reason)
            if named is not None:
                rk = named.group(1)
                reclaimer = world.get("Pod", rk)
                r_type = self.pod_service_type(reclaimer, rk) if reclaimer is not None else "unknown"
                if r_type != "inference":
                    out.append(
                        Violation(
                            t,
                            RULE_RECLAIM,
                            f"training pod {pk} (queue {v_queue}) reclaimed for "
                            f"{r_type} pod {rk}; only inference may reclaim",
                        )
                    )
                continue
            others = []
            for rk, node in placed:
                p = world.get("Pod", rk)
                if p is None:
                    continue
                q = self.accounting.queue_of(p, split_key(rk)[0])
                if q != v_queue:
                    others.append((rk, node, self.pod_service_type(p, rk)))
            same_node = [o for o in others if o[1] == pod_node(victim)]
            candidates = same_node or others
            if candidates and not any(o[2] == "inference" for o in candidates):
                names = ", ".join(f"{o[0]} ({o[2]})" for o in candidates[:5])
                out.append(
                    Violation(
                        t,
                        RULE_RECLAIM,
                        f"training pod {pk} (queue {v_queue}) reclaimed for non-inference pods: {names}",
                    )
                )
        return out

    def _reclaim_policy(self, t: float, applied: Applied) -> list[Violation]:
        """TIDE-2 (victim queue reclaimable), TIDE-3 (victim preemptable), TIDE-5 (the named
        reclaimer's queue is another, Open queue)."""
        world = self.world
        out: list[Violation] = []
        for pk, reason in applied.evicted:
            if not evicted_by(reason, RECLAIM):
                continue
            victim = world.get("Pod", pk)
            if victim is None:
                continue
            v_queue = self.accounting.queue_of(victim, split_key(pk)[0])
            q = world.record("Queue", v_queue)
            if q is not None and not q.reclaimable:
                out.append(
                    Violation(t, RULE_RECLAIM_POLICY, f"reclaim evicted {pk} from queue {v_queue}, which is not reclaimable")
                )
            g = self._group_of(victim, pk)
            pg = world.get("PodGroup", g) if g else None
            flags = [("pod", annotations(victim).get(PREEMPTABLE_KEY, labels(victim).get(PREEMPTABLE_KEY)))]
            if pg is not None:
                flags.append(("PodGroup", annotations(pg).get(PREEMPTABLE_KEY)))
            for where, raw in flags:
                if raw is not None and parse_bool(raw) is not True:
                    out.append(
                        Violation(
                            t,
                            RULE_RECLAIM_POLICY,
                            f"reclaim evicted {pk} although its {where} says {PREEMPTABLE_KEY}: {raw!r}",
                        )
                    )
                    break
            named = _REASON_PREEMPTOR.search(reason)
            if named is None:
                continue
            rk = named.group(1)
            reclaimer = world.get("Pod", rk)
            if reclaimer is None:
                continue
            r_queue = self.accounting.queue_of(reclaimer, split_key(rk)[0])
            rq = world.record("Queue", r_queue)
            if r_queue == v_queue:
                out.append(
                    Violation(t, RULE_RECLAIM_POLICY, f"reclaim evicted {pk} for {rk} of the same queue {v_queue}")
                )
            elif rq is not None and rq.state not in ("", "Open"):
                out.append(
                    Violation(
                        t,
                        RULE_RECLAIM_POLICY,
                        f"reclaim evicted {pk} for {rk} of queue {r_queue}, which is {rq.state} (not Open)",
                    )
                )
        return out
