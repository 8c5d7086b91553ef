"""numa-aware plugin (Volcano v1.15.1 plugins/numaaware, config name ``numa-aware``): places
Guaranteed pods where the node's topology manager would admit them, and prefers nodes where
their exclusive CPUs span fewest NUMA nodes.

It reads the nodes' Numatopology objects (``model/numatopology.py``: CPU manager and topology
manager policies, CPU topology, CPUs free for exclusive use, reserved CPUs) and a pod's
``volcano.sh/numa-topology-policy`` annotation (Volcano Jobs set it from a task's
``topologyPolicy``). Argument: ``weight`` (1), the score's multiplier.

Predicate, for Guaranteed pods only (others pass everywhere):

* a pod with a policy (not ``none``) fits only nodes with a Numatopology ("numa info is
  empty"), CPU manager policy ``static`` ("cpu manager policy isn't static"), the same topology
  manager policy ("task topology policy[P] is different with node[Q]") and free CPUs ("cpu
  allocatable map is empty");
* a pod without one is checked only on nodes with a Numatopology, policy ``static`` and a
  topology manager policy other than ``none``;
* where checked, each container's whole cores are matched against the node's free CPUs under
  the node's topology manager policy (``rules/numa_hints.py``, ``rules/cpu_assignment.py``); a
  container the policy does not admit fails the node ("container C cannot be assigned by numa",
  unresolvable), else it is given CPUs, which the next container cannot have.

Score, for a pod with a policy: the number of NUMA nodes its CPUs would span on each
candidate, normalised over the candidates to 0..100 with fewest best (100), times ``weight``.

The CPUs a placed pod gets are taken from the node's free CPUs for the rest of the session (and
given back if the placement is undone). Difference from Volcano: each session starts from the
Numatopology objects as they are; Volcano also keeps, from one session to the next, the CPUs
its earlier sessions assigned until the resource exporter reports fewer free CPUs, so in the
few seconds between a bind and the exporter's next report tidesched may count CPUs free that
Volcano would not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tidesched.framework.plugin import EventHandler, NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.model.qos import GUARANTEED, container_requests, pod_qos
from tidesched.rules.cpu_assignment import Topology, allocate_cpus, cpu_hints, exclusive_cpus
from tidesched.rules.numa_hints import NONE, policy_predicate

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.numatopology import Numatopology

NAME = "numa-aware"
POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
MAX_SCORE = 100  # Volcano api.DefaultMaxNodeScore
CPU = "cpu"
_PASSES, _NO_SCORE = (NAME, "passes"), (NAME, "no score")


def task_policy(task: "TaskInfo") -> str:
    return task.pod.meta.annotations.get(POLICY_ANNOTATION, "")


def normalize_reverse(counts: list[int]) -> list[int]:
    """Volcano NormalizeScore(100, reverse=true): fewest best, integer arithmetic."""
    top = max(counts, default=0)
    if top == 0:
        return [MAX_SCORE] * len(counts)
    return [MAX_SCORE - MAX_SCORE * c // top for c in counts]


class NumaAwarePlugin(Plugin):
    name = NAME

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.weight = arguments.get_int("weight", 1)

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        self.table = table
        by_name = {t.name: t for t in ssn.snapshot.numatopologies}
        # Per row with a Numatopology: the object, its topology, and the CPUs still free.
        self.topo: dict[int, tuple["Numatopology", Topology]] = {}
        self.free: dict[int, dict[str, set[int]]] = {}
        for row, name in enumerate(table.names):
            t = by_name.get(name)
            if t is not None:
                self.topo[row] = (t, Topology(t.cpu_detail))
                self.free[row] = {res: set(cpus) for res, cpus in t.allocatable.items()}
        # Rows whose topology a pod without a policy is checked against.
        self.checked_rows = [
            row for row, (t, _) in self.topo.items()
            if t.cpu_manager_policy == "static" and t.topology_manager_policy not in ("", NONE)
        ]
        self.assigned: dict[str, dict[int, set[int]]] = {}  # task uid -> row -> CPUs
        self._qos: dict[int, str] = {}

        ssn.add_fn("predicate", self.name, self.predicate)
        ssn.add_row_fn("predicate", self.name, RowFn(self._predicate_key, self._pass_rows))
        ssn.add_fn("node_order", self.name, self.score)
        ssn.add_row_fn("node_order", self.name, RowFn(self._score_key, self._zero_rows))
        ssn.add_event_handler(EventHandler(allocate=self._allocate, deallocate=self._deallocate))

    # -- which tasks the plugin looks at ---------------------------------------------------

    def _guaranteed(self, task: "TaskInfo") -> bool:
        got = self._qos.get(id(task.pod))
        if got is None:
            got = self._qos[id(task.pod)] = pod_qos(task.pod.raw_spec)
        return got == GUARANTEED

    def _passes_everywhere(self, task: "TaskInfo") -> bool:
        if task_policy(task) in ("", NONE) and not self.checked_rows:
            return True  # nothing to check, whatever its QoS (most pods: no QoS worked out)
        return not self._guaranteed(task)

    def _predicate_key(self, task: "TaskInfo") -> object:
        # Row-local only where the answer is "every node": the checks record CPU assignments.
        return _PASSES if self._passes_everywhere(task) else None

    def _pass_rows(self, task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
        return np.ones(len(self.table) if rows is None else len(rows), dtype=bool)

    def _score_key(self, task: "TaskInfo") -> object:
        # The score is normalised over the candidates: not row-local when there is one.
        return _NO_SCORE if task_policy(task) in ("", NONE) else None

    def _zero_rows(self, task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
        return np.zeros(len(self.table) if rows is None else len(rows))

    # -- predicate -------------------------------------------------------------------------

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        n = len(self.table)
        passed = np.ones(n, dtype=bool)
        if self._passes_everywhere(task):
            return PredicateResult(passed)
        failures: dict[tuple[str, bool], np.ndarray] = {}

        def fail(row: int, reason: str, unresolvable: bool = False) -> None:
            mask = failures.get((reason, unresolvable))
            if mask is None:
                mask = failures[(reason, unresolvable)] = np.zeros(n, dtype=bool)
            mask[row] = True
            passed[row] = False

        policy = task_policy(task)
        if policy in ("", NONE):
            rows = self.checked_rows
        else:
            rows = []
            for row in range(n):
                reason = self._policy_mismatch(row, policy)
                if reason:
                    fail(row, reason)
                else:
                    rows.append(row)
        containers = [c for c in task.pod.raw_spec.get("containers") or [] if isinstance(c, dict)]
        assigned = self.assigned.setdefault(task.uid, {})
        for row in rows:
            topo_obj, topo = self.topo[row]
            free = {res: set(cpus) for res, cpus in self.free[row].items()}
            numa_nodes = topo.numa_nodes()
            given: set[int] = set()
            for i, c in enumerate(containers):
                cores = container_requests(c)[0].get(CPU)
                request = exclusive_cpus(cores)
                hints = None
                if cores is not None and request and CPU in free:
                    hints = {CPU: cpu_hints(topo, free[CPU], request, topo_obj.reserved_cpu_milli)}
                best, admit = policy_predicate(topo_obj.topology_manager_policy, numa_nodes, [hints])
                if not admit:
                    fail(row, f"container {c.get('name', i)} cannot be assigned by numa", True)
                    break
                if CPU in free:
                    cpus = allocate_cpus(topo, free[CPU], request, best, topo_obj.reserved_cpu_milli)
                    given |= cpus
                    free[CPU] -= cpus
            else:
                assigned[row] = given
        return PredicateResult(passed, [NodeFailure(r, m, u) for (r, u), m in failures.items()])

    def _policy_mismatch(self, row: int, policy: str) -> str:
        got = self.topo.get(row)
        if got is None:
            return "numa info is empty"
        topo_obj, _ = got
        if topo_obj.cpu_manager_policy != "static":
            return "cpu manager policy isn't static"
        if policy != topo_obj.topology_manager_policy:
            return f"task topology policy[{policy}] is different with node[{topo_obj.topology_manager_policy}]"
        if not self.free[row].get(CPU):
            return "cpu allocatable map is empty"
        return ""

    # -- score -----------------------------------------------------------------------------

    def score(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        assigned = self.assigned.get(task.uid)
        if assigned is None or task_policy(task) in ("", NONE):
            return np.zeros(len(idx))
        counts = []
        for row in idx.tolist():
            cpus = assigned.get(row, set())
            detail = self.topo[row][1].details if row in self.topo else {}
            counts.append(len({detail[c].numa for c in cpus if c in detail}))
        return np.array(normalize_reverse(counts), dtype=float) * self.weight

    # -- the CPUs of placed tasks ------------------------------------------------------------

    def _task_cpus(self, task: "TaskInfo") -> tuple[int, set[int]] | None:
        row = self.table.index.get(task.node_name)
        cpus = self.assigned.get(task.uid, {}).get(row) if row is not None else None
        return None if row is None or cpus is None or CPU not in self.free.get(row, {}) else (row, cpus)

    def _allocate(self, task: "TaskInfo") -> None:
        got = self._task_cpus(task)
        if got is not None:
            self.free[got[0]][CPU] -= got[1]

    def _deallocate(self, task: "TaskInfo") -> None:
        got = self._task_cpus(task)
        if got is not None:
            self.free[got[0]][CPU] |= got[1]
