"""predicates plugin (Volcano plugins/predicates): kube-scheduler filters, vectorised.

Registers PredicateFn. For a task it returns, over all nodes at once:

* NodeUnschedulable — ``spec.unschedulable`` nodes unless the pod tolerates the
  ``node.kubernetes.io/unschedulable`` taint (unresolvable).
* NodeAffinity — ``nodeSelector`` and required node affinity, every operator
  (``predicate.NodeAffinityEnable``, unresolvable).
* TaintToleration — untolerated NoSchedule/NoExecute taints (``predicate.TaintTolerationEnable``,
  unresolvable).
* Pod count — the node's ``pods`` allocatable (Volcano MaxTaskNum; a node without it fits
  no pod).
* NodePorts — host port conflicts (``predicate.NodePortsEnable``).
* InterPodAffinity — required pod affinity / anti-affinity of the pod, and existing pods'
  required anti-affinity against it (``predicate.PodAffinityEnable``).
* PodTopologySpread — the pod's ``DoNotSchedule`` topology spread constraints, counted over
  placed pods and this session's placements (``predicate.PodTopologySpreadEnable``, on by
  default as in Volcano; see ``plugins/topology_spread.py``). A node without a topology key is
  unresolvable; a skew too large is not (evicting pods may fix it).
* Volumes, for pods with PersistentVolumeClaims only (``docs/volumes.md``): Volcano's count of
  CSI volumes against nodes' attach limits, NodeVolumeLimits and VolumeZone before the spread
  check, VolumeBinding after it (``predicate.NodeVolumeLimitsEnable``, ``VolumeZoneEnable``,
  ``VolumeBindingEnable``, all on by default; ``plugins/volume_limits.py``,
  ``plugins/volume_binding.py``). Their PreFilters run as the pre-predicate; the claims'
  bindings are reserved when a pod is placed and planned for its binding at dispatch.

Predicate cache (EXT-4, seed 004). The node-property filters (the first three) never change
within a session, so their mask is cached per *task template*: a key derived from everything
that affects them (nodeSelector, node affinity, tolerations). Two pods share cached results
only when those are identical, whatever their ``volcano.sh/task-spec`` role says, so a CPU
master and GPU workers of one job can never poison each other's cache — with or without the
annotation. The dynamic filters (pod count, ports, pod affinity) are evaluated afresh each
time; they are cheap array operations or only run for pods that use them. Volcano's own error
cache by job and role is allocate's ``predicateErrorCacheByRole`` (``framework/predicate_cache.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from tidesched.framework.plugin import EventHandler, NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.rules.node_index import NodeLabelIndex
from tidesched.rules.selectors import SelectorError, compile_label_selector, affinity_term_namespaces
from tidesched.rules.taints import TaintIndex, tolerates_unschedulable
from tidesched.rules.topology_spread import spread_filter
from tidesched.model.node_table import required_affinity_terms
from tidesched.model.objects import HostPort
from tidesched.model.status import TaskStatus
from tidesched.plugins.topology_spread import spread_inputs
from tidesched.plugins.volume_binding import NAME as VOLUME_BINDING, VolumeBinder
from tidesched.plugins.volume_limits import REASON_ZONE, ZONE_NAME, VolumeLimits, zone_mask, zone_topologies

if TYPE_CHECKING:
    from tidesched.model.volumes import VolumePlan
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable

# Volcano's switch for kube-scheduler's DRA plugin inside predicates: read and accepted;
# tidesched allocates ResourceClaims with or without it, never binding a pod without its
# claims (framework/hooks.py, docs/dra.md).
DRA_ENABLE = "predicate.DynamicResourceAllocationEnable"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT = "node(s) had untolerated taint"
REASON_PODS = "node(s) pod number exceeded"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_INVALID = "pod has an invalid node selector or affinity"
# kube-scheduler podtopologyspread ErrReasonConstraintsNotMatch / ErrReasonNodeLabelNotMatch
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"


def node_labels(table: "NodeTable") -> NodeLabelIndex:
    """The nodes' label index, one per node set (shared by predicates and nodeorder)."""
    return table.memo("labels", lambda: NodeLabelIndex(table.names, [n.meta.labels for n in table.nodes]))


def node_taints(table: "NodeTable") -> tuple[TaintIndex, list[str]]:
    """The nodes' taint index and the malformed taints it skipped, one per node set."""

    def build() -> tuple[TaintIndex, list[str]]:
        errors: list[str] = []
        return TaintIndex([list(n.taints) for n in table.nodes], errors=errors), errors

    return table.memo("taints", build)


_KEY_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def template_key(task: "TaskInfo") -> str:
    """Everything the static node filters read, as one comparable string."""
    key = task.template_key
    if key is None:
        spec = task.pod.raw_spec
        affinity = spec.get("affinity") or {}
        selector = spec.get("nodeSelector") or {}
        if (
            not affinity and not spec.get("tolerations") and isinstance(selector, dict)
            and all(type(k) is str and type(v) is str for k, v in selector.items())
        ):
            # The common pod (at most a plain node selector): a cheaper key than JSON, which
            # always starts with "[", so the two forms never collide.
            key = task.template_key = "S" + repr(sorted(selector.items()))
            return key
        parts = [
            spec.get("nodeSelector") or {},
            affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else affinity,
            spec.get("tolerations") or [],
        ]
        try:
            # Every pod from an API server has tolerations (the default not-ready/unreachable
            # ones), so this is the usual path there: orjson takes a ninth of json's time.
            key = orjson.dumps(parts, option=_KEY_OPTIONS, default=str).decode()
        except TypeError:  # what orjson refuses (an integer past 64 bits): json takes it
            key = json.dumps(parts, sort_keys=True, default=str)
        task.template_key = key
    return key


_pod_affinity = required_affinity_terms


def _fail(
    passed: np.ndarray, failures: list[NodeFailure], reason: str, nodes: np.ndarray, unresolvable: bool
) -> None:
    """Nodes still passing that fail for ``reason``: named by it, and no longer passing."""
    newly = passed & nodes
    if newly.any():
        failures.append(NodeFailure(reason, newly, unresolvable))
        passed &= ~nodes


def _ports_conflict(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or a.protocol != b.protocol:
        return False
    return a.host_ip == b.host_ip or "0.0.0.0" in (a.host_ip, b.host_ip)


class PredicatesPlugin(Plugin):
    name = "predicates"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.node_affinity_on = arguments.get_bool("predicate.NodeAffinityEnable", True)
        self.ports_on = arguments.get_bool("predicate.NodePortsEnable", True)
        self.taints_on = arguments.get_bool("predicate.TaintTolerationEnable", True)
        self.pod_affinity_on = arguments.get_bool("predicate.PodAffinityEnable", True)
        self.spread_on = arguments.get_bool("predicate.PodTopologySpreadEnable", True)
        arguments.get_bool(DRA_ENABLE, False)  # accepted: claims are allocated either way
        self.volume_limits_on = arguments.get_bool("predicate.NodeVolumeLimitsEnable", True)
        self.volume_zone_on = arguments.get_bool("predicate.VolumeZoneEnable", True)
        self.volume_binding_on = arguments.get_bool("predicate.VolumeBindingEnable", True)
        # Volcano's VolumeBinding arguments: the wait for the PV controller at bind; the score
        # (weight, shape) only counts with the StorageCapacityScoring feature gate, off here.
        self.bind_timeout = float(arguments.get_int("volumebinding.bindTimeoutSeconds", 600))
        arguments.get_int("volumebinding.weight", 1)

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        self.ssn = ssn
        # Node-derived indexes and static masks live as long as the node set (table.shared).
        self.labels = node_labels(table)
        self.taints, taint_errors = node_taints(table)
        for msg in taint_errors:
            ssn.event("Node", "", "", "Warning", "InvalidTaint", msg)
        self.unschedulable = table.memo(
            "unschedulable", lambda: np.array([n.unschedulable for n in table.nodes], dtype=bool)
        )
        self._static: dict[str, tuple[np.ndarray, list[NodeFailure]]] = table.memo(
            ("predicates.static", self.node_affinity_on, self.taints_on), dict
        )
        # Placed pods with required anti-affinity: their terms constrain every newcomer.
        self._anti_holders = self._find_anti_holders()
        # Pods evicted this session, by uid -> row: Volcano's predicates drop a pod from its
        # node's NodeInfo on deallocate, so an eviction frees its slot, ports and affinity.
        self._evicted: dict[str, int] = {}
        self._evicted_per_row = np.zeros(len(table), dtype=np.int64)
        ssn.add_fn("predicate", self.name, self.predicate)
        ssn.add_row_fn("predicate", self.name, RowFn(self._row_key, self._rows))
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))
        # Volumes: made on first use (most sessions have no pod with a claim).
        self._binder: VolumeBinder | None = None
        self._limits: VolumeLimits | None = None
        ssn.add_fn("pre_predicate", self.name, self._pre_predicate)
        # Tasks whose PreFilter state this session holds (Volcano: the task's cycle state).
        self._prefiltered: set[str] = set()
        if self.ports_on or self.pod_affinity_on or self.spread_on:
            ssn.add_fn("predicate_state_missing", self.name, lambda t: t.uid not in self._prefiltered)
        ssn.plan_volumes = self._plan_volumes

    def _pre_predicate(self, task: "TaskInfo") -> str | None:
        self._prefiltered.add(task.uid)
        return self._volume_pre_predicate(task)

    def _on_allocate(self, task: "TaskInfo") -> None:
        row = self._evicted.pop(task.uid, None)
        if row is not None:
            self._evicted_per_row[row] -= 1
        if not self._anti_holders and _pod_affinity(task, "podAntiAffinity"):
            self._anti_holders = True
        if task.pod.volumes:
            self._volume_limits().allocated(task)
            if self.volume_binding_on:
                self._volume_binder().reserve(task)

    def _on_deallocate(self, task: "TaskInfo") -> None:
        if task.pod.volumes:
            if self._limits is not None:
                self._limits.deallocated(task)
            if self._binder is not None:
                self._binder.unreserve(task)
        if task.status != TaskStatus.RELEASING or task.uid in self._evicted:
            return
        row = self.ssn.table.index.get(task.node_name)
        if row is not None:
            self._evicted[task.uid] = row
            self._evicted_per_row[row] += 1

    def _find_anti_holders(self) -> bool:
        return self.ssn.table.anti_affinity_pods > 0

    # -- static ---------------------------------------------------------------------------

    def _static_mask(self, task: "TaskInfo") -> tuple[np.ndarray, list[NodeFailure]]:
        key = template_key(task)
        cached = self._static.get(key)
        if cached is not None:
            return cached
        n = len(self.ssn.table)
        passed = np.ones(n, dtype=bool)
        failures: list[NodeFailure] = []
        if self.unschedulable.any() and not tolerates_unschedulable(task.pod.tolerations):
            failures.append(NodeFailure(REASON_UNSCHEDULABLE, self.unschedulable.copy(), True))
            passed &= ~self.unschedulable
        if self.node_affinity_on:
            errors: list[str] = []
            try:
                mask = self.labels.pod_node_mask(task.pod.raw_spec, errors)
                reason = REASON_AFFINITY
            except SelectorError as exc:
                mask = np.zeros(n, dtype=bool)
                reason = f"{REASON_INVALID}: {exc}"
            failed = passed & ~mask
            if failed.any():
                failed.flags.writeable = False
                failures.append(NodeFailure(reason, failed, True))
            passed &= mask
        if self.taints_on:
            try:
                mask = self.taints.filter_mask(task.pod.tolerations)
                reason = REASON_TAINT
            except SelectorError as exc:
                mask = np.zeros(n, dtype=bool)
                reason = f"pod has invalid tolerations: {exc}"
            failed = passed & ~mask
            if failed.any():
                failed.flags.writeable = False
                failures.append(NodeFailure(reason, failed, True))
            passed &= mask
        passed.flags.writeable = False
        self._static[key] = (passed, failures)
        return passed, failures

    # -- dynamic --------------------------------------------------------------------------

    def _needs_pod_affinity(self, task: "TaskInfo") -> bool:
        """The pod's own required (anti-)affinity or placed pods' anti-affinity applies."""
        return self.pod_affinity_on and bool(
            self._anti_holders or _pod_affinity(task, "podAffinity") or _pod_affinity(task, "podAntiAffinity")
        )

    def _row_key(self, task: "TaskInfo") -> str | None:
        """Row-local (static filters and the node's pod slots) unless the task needs the
        checks that read other pods: host ports, pod (anti-)affinity, hard topology spread,
        and volumes (what this session gave other pods' claims)."""
        if task.pod.volumes:
            return None
        if self.ports_on and task.pod.host_ports:
            return None
        if self._needs_pod_affinity(task):
            return None
        if self.spread_on and any(c.hard for c in task.pod.spread_constraints):
            return None
        return template_key(task)

    def _rows(self, task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
        """``predicate(task).passed`` for the given rows when ``_row_key`` holds. An eviction
        changes its row in the node table too, so the row cache sees ``_evicted_per_row``."""
        static = self._static_mask(task)[0]
        table = self.ssn.table
        if rows is None:
            return static & (table.pod_count - self._evicted_per_row < table.max_pods)
        if len(rows) <= 8:  # a few rows (one per placement) in plain Python: same test
            count, evicted, most = table.pod_count, self._evicted_per_row, table.max_pods
            return np.array(
                [bool(static[i]) and int(count[i]) - int(evicted[i]) < int(most[i]) for i in rows.tolist()], dtype=bool
            )
        return static[rows] & (table.pod_count[rows] - self._evicted_per_row[rows] < table.max_pods[rows])

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        static_passed, static_failures = self._static_mask(task)
        passed = self._rows(task, None)  # the static filters and the node's pod slots
        failures = list(static_failures)
        too_many = static_passed & ~passed
        if too_many.any():
            failures.append(NodeFailure(REASON_PODS, too_many))
        if self.ports_on and task.pod.host_ports:
            self._check_ports(task, passed, failures)
        if self._needs_pod_affinity(task):
            self._check_pod_affinity(task, passed, failures)
        if task.pod.volumes:
            self._check_volume_limits(task, passed, failures)
        if self.spread_on and task.pod.spread_constraints:
            self._check_topology_spread(task, passed, failures)
        if task.pod.volumes and self.volume_binding_on:
            self._check_volume_binding(task, passed, failures)
        return PredicateResult(passed, failures)

    # -- volumes --------------------------------------------------------------------------

    def _volume_binder(self) -> VolumeBinder:
        if self._binder is None:
            ssn = self.ssn
            self._binder = VolumeBinder(ssn.snapshot.volumes(), self.labels, ssn.table, self.bind_timeout)
        return self._binder

    def _volume_limits(self) -> VolumeLimits:
        if self._limits is None:
            self._limits = VolumeLimits(self.ssn.snapshot.volumes(), self.ssn.table, self._evicted)
        return self._limits

    def _volume_prefilter(self, task: "TaskInfo") -> str | None:
        """The volume plugins' PreFilters in Volcano's order (VolumeZone, then VolumeBinding):
        why the pod fits no node, as Volcano words a failed pre-predicate."""
        catalog = self.ssn.snapshot.volumes()
        if self.volume_zone_on:
            topologies = zone_topologies(task.pod, catalog)
            if isinstance(topologies, str):
                return f"plugin {ZONE_NAME} pre-predicates failed {topologies}"
        if self.volume_binding_on:
            claims = self._volume_binder().claims(task)
            if isinstance(claims, str):
                return f"plugin {VOLUME_BINDING} pre-predicates failed {claims}"
        return None

    def _volume_pre_predicate(self, task: "TaskInfo") -> str | None:
        if not task.pod.volumes:
            return None
        reason = self._volume_prefilter(task)
        if reason is None:
            return None
        n = len(self.ssn.table)  # Volcano sets the error on every node
        return f"0/{n} nodes are unavailable: {n} {reason}."

    def _check_volume_limits(
        self, task: "TaskInfo", passed: np.ndarray, failures: list[NodeFailure]
    ) -> None:
        """Volcano's attach count, NodeVolumeLimits and VolumeZone (a failed PreFilter fails
        every node, so a reader of the predicate alone, like explain, sees it too)."""
        reason = self._volume_prefilter(task)
        if reason is not None:
            _fail(passed, failures, reason, np.ones(len(passed), dtype=bool), True)
            return
        limits = self._volume_limits()
        for why, nodes in limits.attach_failures(task):
            _fail(passed, failures, why, nodes, False)
        if self.volume_limits_on:
            over, error = limits.limit_failures(task)
            if error is not None:
                _fail(passed, failures, error, np.ones(len(passed), dtype=bool), True)
            for why, nodes in over:
                _fail(passed, failures, why, nodes, False)
        if self.volume_zone_on:
            topologies = zone_topologies(task.pod, self.ssn.snapshot.volumes())
            if isinstance(topologies, list) and topologies:
                _fail(passed, failures, REASON_ZONE, ~zone_mask(topologies, self.labels), True)

    def _check_volume_binding(
        self, task: "TaskInfo", passed: np.ndarray, failures: list[NodeFailure]
    ) -> None:
        claims = self._volume_binder().claims(task)
        if isinstance(claims, str):
            return  # the PreFilter's failure was named above
        for why, nodes in self._volume_binder().filter(claims, task):
            _fail(passed, failures, why, nodes, True)

    def _plan_volumes(self, task: "TaskInfo") -> "VolumePlan | None":
        if not task.pod.volumes or self._binder is None:
            return None
        return self._binder.plan(task)

    def _check_topology_spread(
        self, task: "TaskInfo", passed: np.ndarray, failures: list[NodeFailure]
    ) -> None:
        hard = [c for c in task.pod.spread_constraints if c.hard]
        if not hard:
            return
        missing, skewed = spread_filter(spread_inputs(self.ssn, self.labels, self.taints, task, hard))
        missing &= passed
        if missing.any():
            failures.append(NodeFailure(REASON_SPREAD_LABEL, missing, True))
            passed &= ~missing
        skewed &= passed
        if skewed.any():
            failures.append(NodeFailure(REASON_SPREAD, skewed))
            passed &= ~skewed

    def _check_ports(self, task: "TaskInfo", passed: np.ndarray, failures: list[NodeFailure]) -> None:
        table = self.ssn.table
        bad = np.zeros(len(table), dtype=bool)
        for row, tasks in enumerate(table.tasks):
            if not passed[row]:
                continue
            for other in tasks.values():
                if other.uid != task.uid and other.uid not in self._evicted and any(
                    _ports_conflict(a, b) for a in other.pod.host_ports for b in task.pod.host_ports
                ):
                    bad[row] = True
                    break
        if bad.any():
            failures.append(NodeFailure(REASON_PORTS, bad.copy()))
            passed &= ~bad

    def _placed(self) -> list[tuple[int, "TaskInfo"]]:
        evicted = self._evicted
        return [
            (row, t) for row, tasks in enumerate(self.ssn.table.tasks) for t in tasks.values() if t.uid not in evicted
        ]

    def _check_pod_affinity(self, task: "TaskInfo", passed: np.ndarray, failures: list[NodeFailure]) -> None:
        placed = [(row, t) for row, t in self._placed() if t.uid != task.uid]
        labels = task.pod.meta.labels
        ns = task.namespace
        aff_terms = _pod_affinity(task, "podAffinity")
        if aff_terms:
            ok = self._affinity_mask(aff_terms, task, placed)
            bad_aff = passed & ~ok
            if bad_aff.any():
                failures.append(NodeFailure(REASON_POD_AFFINITY, bad_aff, True))
                passed &= ok
        bad_anti = np.zeros(len(passed), dtype=bool)
        for term in _pod_affinity(task, "podAntiAffinity"):
            mask = self._term_domain_mask(term, task, placed)
            if mask is not None:
                bad_anti |= mask
        bad_anti &= passed
        if bad_anti.any():
            failures.append(NodeFailure(REASON_POD_ANTI_AFFINITY, bad_anti.copy()))
            passed &= ~bad_anti
        if self._anti_holders:
            bad_existing = np.zeros(len(passed), dtype=bool)
            for row, other in placed:
                for term in _pod_affinity(other, "podAntiAffinity"):
                    if self._term_matches(term, other.namespace, ns, labels):
                        codes = self.labels.topology_codes(str(term.get("topologyKey", "")))
                        code = codes[row]
                        if code >= 0:
                            bad_existing |= codes == code
            bad_existing &= passed
            if bad_existing.any():
                failures.append(NodeFailure(REASON_EXISTING_ANTI_AFFINITY, bad_existing.copy()))
                passed &= ~bad_existing

    def _affinity_mask(
        self, terms: list[Mapping[str, Any]], task: "TaskInfo", placed: list[tuple[int, "TaskInfo"]]
    ) -> np.ndarray:
        """kube-scheduler's required pod affinity: a placed pod counts for a topology domain
        only if it matches *every* term; a node needs every term's topology key and a
        counted pod in each term's domain. When no placed pod counts anywhere, the pod may
        still go where all keys exist if it matches all its own terms (the first pod of a
        group that wants to be together)."""
        ns, labels = task.namespace, task.pod.meta.labels
        codes = [self.labels.topology_codes(str(t.get("topologyKey", ""))) for t in terms]
        has_keys = np.ones(len(self.ssn.table), dtype=bool)
        for c in codes:
            has_keys &= c >= 0
        rows = [
            row for row, other in placed
            if all(self._term_matches(t, ns, other.namespace, other.pod.meta.labels) for t in terms)
        ]
        allowed = [{int(c[r]) for r in rows if c[r] >= 0} for c in codes]
        if not any(allowed):
            if all(self._term_matches(t, ns, ns, labels) for t in terms):
                return has_keys
            return np.zeros(len(has_keys), dtype=bool)
        ok = has_keys.copy()
        for c, values in zip(codes, allowed):
            ok &= np.isin(c, np.fromiter(values, dtype=c.dtype, count=len(values)))
        return ok

    @staticmethod
    def _term_matches(term: Mapping[str, Any], owner_ns: str, other_ns: str, other_labels: Mapping[str, str]) -> bool:
        try:
            if other_ns not in affinity_term_namespaces(term, owner_ns) and term.get("namespaceSelector") is None:
                return False
            return compile_label_selector(term.get("labelSelector")).matches(other_labels)
        except SelectorError:
            return False

    def _term_domain_mask(
        self, term: Mapping[str, Any], task: "TaskInfo", placed: list[tuple[int, "TaskInfo"]]
    ) -> np.ndarray | None:
        """Nodes in the same topology domain as a placed pod matching the term; None when
        no placed pod matches."""
        codes = self.labels.topology_codes(str(term.get("topologyKey", "")))
        hit: set[int] = set()
        for row, other in placed:
            if codes[row] >= 0 and self._term_matches(term, task.namespace, other.namespace, other.pod.meta.labels):
                hit.add(int(codes[row]))
        if not hit:
            return None
        return np.isin(codes, np.fromiter(hit, dtype=codes.dtype))
