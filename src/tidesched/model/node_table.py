"""Per-session node state as arrays: one row per node, one column per resource dimension.

This is the data layout the whole scheduler's speed rests on (DESIGN "fast by data layout"):
fit checks and scores for a task are computed for every node at once with numpy, and a
placement updates one row. Rows are in node-name order, so "first best node" tie-breaks are
deterministic (ACT-6).

Accounting follows Volcano's NodeInfo.AddTask/RemoveTask: a Releasing task holds its
resources (used) and also counts as releasing; a Pipelined task reserves future-idle only.
``idle = allocatable - used`` and ``future_idle = idle + releasing - pipelined``.

The resource scorers (nodeorder) see a node as kube-scheduler's NodeInfo that Volcano keeps
beside its own: the pods the node held when the session opened (Releasing ones too), plus
those allocated or pipelined there since, less those evicted since (Volcano's event handlers
add and remove pods as the session moves them). ``held`` sums those pods' requests as
kube-scheduler counts them (init containers and overhead included, ``init_vec``) and
``held_nonzero`` their cpu and memory with kube-scheduler's defaults for a container that
names none (``Pod.nonzero_request``).

The last column is the node's pod slots (Volcano adds ``pods: 1`` to every task request,
GetPodResourceRequest): allocatable is the node's pod capacity and every task takes one, so
an evicted pod frees a slot in FutureIdle. It takes part in fit checks only; ``resource()``
leaves it out, so queue and cluster totals hold the same dimensions as Volcano's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from tidesched.model.devices import DeviceTable
from tidesched.model.infos import TaskInfo
from tidesched.model.objects import Node
from tidesched.model.resource import CPU, MEMORY, MIN_RESOURCE, Resource
from tidesched.model.status import TaskStatus

# Statuses whose pods hold nothing on a node (Volcano: terminated pods are not added).
_NOT_ON_NODE = frozenset({TaskStatus.PENDING, TaskStatus.SUCCEEDED, TaskStatus.FAILED})
PODS = "pods"


def occupies_node(task: TaskInfo) -> bool:
    return bool(task.node_name) and task.status not in _NOT_ON_NODE


def held_for_scoring(task: TaskInfo) -> bool:
    """Whether the scorers' view of the node holds ``task`` (see the module docstring): every
    task on it but one evicted in this session (Releasing now, not when the session opened)."""
    return task.status != TaskStatus.RELEASING or task.pod.status == TaskStatus.RELEASING


def required_affinity_terms(task: TaskInfo, kind: str) -> list[Mapping[str, Any]]:
    """The pod's required ``podAffinity`` or ``podAntiAffinity`` terms (``kind``)."""
    if not task.pod.affinity:  # most pods: no ABC isinstance checks on the hot path
        return []
    affinity = task.pod.affinity.get(kind) if isinstance(task.pod.affinity, Mapping) else None
    if not isinstance(affinity, Mapping):
        return []
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return [t for t in terms if isinstance(t, Mapping)]


def _holds_anti_affinity(task: TaskInfo | None) -> int:
    return 1 if task is not None and required_affinity_terms(task, "podAntiAffinity") else 0


# Carried row-cache keys at most (request shapes): past it the long-lived table starts afresh.
MAX_CARRIED = 512
_NO_CONTEXT_YET = object()


def _catch_up(values: np.ndarray, changed_log: list[int], n: int,
              compute: Callable[[np.ndarray | None], np.ndarray]) -> None:
    """Recompute in place the rows named in ``changed_log`` (all of them when many changed)."""
    if not changed_log:
        return
    # Usually one or two rows: a set is much cheaper than np.unique here. The log repeats
    # rows (a move logs its old and new row), so count distinct ones.
    changed = set(changed_log) if len(changed_log) < n else None
    if changed is None or len(changed) * 4 >= n:
        values[:] = compute(None)
    else:
        rows = np.array(sorted(changed), dtype=np.int64)
        values[rows] = compute(rows)


class NodeTable:
    """Arrays over the session's nodes; the single source of node resource truth."""

    def __init__(self, nodes: Sequence[Node], extra_dims: Iterable[str] = ()) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.names = [n.name for n in self.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        scalars: set[str] = set(extra_dims)
        for n in self.nodes:
            scalars.update(n.allocatable.scalars)
        scalars.discard(CPU)
        scalars.discard(MEMORY)
        scalars.discard(PODS)
        self.dims = [CPU, MEMORY, *sorted(scalars), PODS]
        self.pods_col = len(self.dims) - 1
        self.dim_index = {d: i for i, d in enumerate(self.dims)}
        n, d = len(self.nodes), len(self.dims)
        self.allocatable = np.zeros((n, d))
        for i, node in enumerate(self.nodes):
            self.allocatable[i] = self.vector(node.allocatable)
            self.allocatable[i, self.pods_col] = node.allocatable.max_task_num
        self.used = np.zeros((n, d))
        self.held = np.zeros((n, d))
        self.held_nonzero = np.zeros((n, 2))
        self.releasing = np.zeros((n, d))
        self.pipelined = np.zeros((n, d))
        self._rp_shared = False
        # Whether any pod was ever releasing or pipelined here: until then future_idle is idle,
        # and the two fit checks share one row cache (fits_cached).
        self.rp_touched = False
        self.idle = self.allocatable.copy()
        self.future_idle = self.allocatable.copy()
        self.pod_count = np.zeros(n, dtype=np.int64)
        self.max_pods = np.array([node.allocatable.max_task_num for node in self.nodes], dtype=np.int64)
        self.tasks: list[dict[str, TaskInfo]] = [{} for _ in range(n)]
        self._own_rows: set[int] = set(range(n))  # rows of ``tasks`` no copy shares
        # Placed pods with required anti-affinity (they constrain every newcomer): a running
        # count, so a session learns "none" without a pass over every placed pod.
        self.anti_affinity_pods = 0
        # Rows changed so far, in order: per-row caches catch up from their last position.
        self.change_log: list[int] = []
        # Bumped on every row change: memos of whole-table sums compare it.
        self.version = self._base_version = 0
        self._used_total: tuple[int, Resource] | None = None
        self._row_caches: dict[object, list] = {}
        # Carried row caches (see carry_caches): the table a session copy was made from, and
        # on that table, what its caches were computed under.
        self._parent: NodeTable | None = None
        self._carry_context: object = None
        # What plugins derive from the nodes alone (label and taint indexes, static filter
        # masks), shared by every copy of this table: built once per node set, not per session.
        self.shared: dict[object, Any] = {}
        # The nodes' vGPU devices (model.devices), kept by add_task/remove_task; None when no
        # node registers any.
        self.devices: DeviceTable | None = DeviceTable.build(self.nodes)
        # A session's DRA claim ledger (model.dra.ledger), charged by add_task/remove_task as the
        # vGPU devices are; None outside sessions.
        self.dra: Any = None

    def copy(self) -> "NodeTable":
        """A table a session may change: own usage arrays; the nodes, dimensions, allocatable
        and ``shared`` are shared (nothing changes them). Per-node task maps are copied when
        either table first changes a row (copy on write), so a copy costs O(nodes) pointers."""
        new = NodeTable.__new__(NodeTable)
        for name in (
            "nodes", "names", "index", "dims", "pods_col", "dim_index", "allocatable", "max_pods", "shared",
            "anti_affinity_pods",
        ):
            setattr(new, name, getattr(self, name))
        for name in ("used", "held", "held_nonzero", "idle", "future_idle", "pod_count"):
            setattr(new, name, getattr(self, name).copy())
        # Releasing and pipelined amounts are rare (and read here only): both tables share
        # them until either first changes one (_own_rp).
        new.releasing, new.pipelined = self.releasing, self.pipelined
        new._rp_shared = self._rp_shared = True
        new.rp_touched = self.rp_touched
        new.tasks = list(self.tasks)
        new._own_rows = set()
        self._own_rows = set()
        new.change_log = []
        new.version = new._base_version = self.version
        new._used_total = self._used_total  # same usage so far (never changed in place)
        new._row_caches = {}
        new._parent = None
        new._carry_context = None
        new.devices = self.devices.copy() if self.devices is not None else None
        new.dra = self.dra.copy() if self.dra is not None else None
        if self._carry_context is not None:
            new._parent = self
        return new

    def carry_caches(self, context: object) -> None:
        """Let this copy's row caches start from its parent's and bring the parent's up to
        date on the way: a long-lived table (the cluster cache's) then keeps each request
        shape's values from session to session, and a session recomputes only the rows the
        cluster changed since, not every node for every new task.

        ``context`` is what the cached values depend on besides a row's state and the cache
        key: the scheduler config (plugin weights and arguments, the chains of row fns). The
        parent's caches are dropped when the context is another object than last time, when
        they outgrow MAX_CARRIED keys, and when its change log outgrows a few passes over the
        nodes.
        Only the parent's own changes (events between sessions) move its entries; a value is
        written back to the parent only while this copy has changed nothing, so it holds for
        the parent's state too."""
        parent = self._parent
        if parent is None:
            return
        if parent._carry_context is not context or len(parent._row_caches) > MAX_CARRIED or (
            len(parent.change_log) > 4 * len(parent.names) + 64
        ):
            parent._row_caches = {}
            parent.change_log = []
            parent._carry_context = context
        self._carry_context = context

    def enable_carry(self) -> None:
        """Mark this table as long-lived: copies of it may carry row caches (carry_caches)."""
        if self._carry_context is None:
            self._carry_context = _NO_CONTEXT_YET

    def memo(self, key: object, build: Callable[[], Any]) -> Any:
        """``shared[key]``, built on first use: for data that depends on the nodes only."""
        try:
            return self.shared[key]
        except KeyError:
            value = self.shared[key] = build()
            return value

    def _row(self, i: int) -> dict[str, TaskInfo]:
        """Row ``i``'s task map, made this table's own before a change."""
        if i not in self._own_rows:
            self.tasks[i] = dict(self.tasks[i])
            self._own_rows.add(i)
        return self.tasks[i]

    def __len__(self) -> int:
        return len(self.names)

    # -- vectors ------------------------------------------------------------------------

    def vector(self, res: Resource) -> np.ndarray:
        v = np.zeros(len(self.dims))
        v[0] = res.milli_cpu
        v[1] = res.memory
        for name, value in res.scalars.items():
            j = self.dim_index.get(name)
            if j is not None:
                v[j] = value
        return v

    def prepare_task(self, task: TaskInfo) -> None:
        """Attach request vectors; `check_cols` marks the dimensions Volcano's LessEqual
        compares (cpu and memory always, scalars only where requested)."""
        task.req_vec = self.vector(task.resreq)
        task.req_vec[self.pods_col] = 1
        init = self.vector(task.init_resreq)
        init[self.pods_col] = 1
        task.init_vec = init
        # Unchecked dimensions get -inf so that "request < avail + tolerance" always holds.
        check = init.copy()
        for j in range(2, self.pods_col):
            if init[j] <= 0:
                check[j] = -np.inf
        task.check_cols = check
        task.nonzero_req = np.array(task.pod.nonzero_request, dtype=float)

    def resource(self, row: np.ndarray) -> Resource:
        """A Resource from one row (for plugins that reason in Resources)."""
        scalars = {self.dims[j]: float(row[j]) for j in range(2, self.pods_col) if row[j] != 0}
        return Resource(float(row[0]), float(row[1]), scalars)

    # -- fit ----------------------------------------------------------------------------

    def fits(self, task: TaskInfo, avail: np.ndarray) -> np.ndarray:
        """Volcano LessEqual(request, avail, Zero) for every node: l < r + MIN_RESOURCE."""
        assert task.check_cols is not None
        return np.all(avail + MIN_RESOURCE > task.check_cols, axis=1)

    def fits_row(self, task: TaskInfo, avail_row: np.ndarray) -> bool:
        assert task.check_cols is not None
        return bool((avail_row + MIN_RESOURCE > task.check_cols).all())

    # -- accounting ---------------------------------------------------------------------

    def _refresh(self, i: int) -> None:
        np.subtract(self.allocatable[i], self.used[i], out=self.idle[i])
        self.future_idle[i] = self.idle[i] + self.releasing[i] - self.pipelined[i]
        self.change_log.append(i)
        self.version += 1

    # -- per-row caches -----------------------------------------------------------------

    def row_cached(self, key: object, compute: Callable[[np.ndarray | None], np.ndarray]) -> np.ndarray:
        """Per-node values that depend only on a row's state and on ``key`` (e.g. a request
        shape), kept up to date incrementally: ``compute(None)`` gives all rows, and
        ``compute(rows)`` recomputes only the rows changed since the last call. Gang
        members and repeated pod templates share one entry, so a placement costs one row
        of work per cached shape instead of a pass over every node.

        The returned array is the cache itself: callers must not modify it."""
        entry = self._row_caches.get(key)
        log = self.change_log
        if entry is None:
            parent = self._parent
            if parent is None or self._carry_context is None or parent.version != self._base_version:
                values = compute(None)  # nothing carried, or the parent moved on since the copy
            else:
                values = self._carried(parent, key, compute)
            self._row_caches[key] = [values, len(log)]
            return values
        values, seen = entry
        if seen < len(log):
            _catch_up(values, log[seen:], len(self.names), compute)
            entry[1] = len(log)
        return values

    def _carried(self, parent: "NodeTable", key: object, compute: Callable[[np.ndarray | None], np.ndarray]) -> np.ndarray:
        """This copy's first values for ``key``, from the parent's entry when it has one."""
        entry = parent._row_caches.get(key)
        untouched = not self.change_log  # this copy's arrays are still the parent's
        if entry is None:
            values = compute(None)
            if untouched:
                parent._row_caches[key] = [values.copy(), len(parent.change_log)]
            return values
        pvalues, seen = entry
        if untouched:
            if seen < len(parent.change_log):
                _catch_up(pvalues, parent.change_log[seen:], len(self.names), compute)
                entry[1] = len(parent.change_log)
            return pvalues.copy()
        # This copy changed rows already: its values are computed on its own state (the
        # parent's changes since the entry and this copy's own), and the parent's entry stays.
        values = pvalues.copy()
        _catch_up(values, parent.change_log[seen:] + self.change_log, len(self.names), compute)
        return values

    def fits_cached(self, task: TaskInfo, which: str) -> np.ndarray:
        """``fits(task, idle)`` or ``fits(task, future_idle)`` through the row cache."""
        assert task.check_cols is not None
        check = task.check_cols
        # No pod releasing or pipelined yet: future_idle equals idle, so "future" reads the
        # "idle" cache (one row catch-up per placement fewer; a new session's usual case).
        on_idle = which == "idle" or not self.rp_touched
        avail = self.idle if on_idle else self.future_idle
        key = ("idle" if on_idle else "future", check.tobytes())

        def compute(rows: np.ndarray | None) -> np.ndarray:
            if rows is not None and len(rows) <= 8:
                # A few rows in plain floats: numpy's per-call overhead would dominate.
                limits = check.tolist()
                out = []
                for i in rows.tolist():
                    ok = True
                    for a, c in zip(avail[i].tolist(), limits):
                        if not a + MIN_RESOURCE > c:
                            ok = False
                            break
                    out.append(ok)
                return np.array(out, dtype=bool)
            part = avail if rows is None else avail[rows]
            return np.all(part + MIN_RESOURCE > check, axis=1)

        devices = self.devices
        vgpu = task.pod.vgpu
        if which == "idle" and vgpu is not None and devices is not None and devices.enforced:
            # A vGPU pod placed now also needs device room now (model.devices; the deviceshare
            # predicate checks the room once releasing pods are gone).
            tasks = self.tasks

            def compute_with_devices(rows: np.ndarray | None) -> np.ndarray:
                return compute(rows) & devices.fit_rows(vgpu, "idle", rows, tasks)

            return self.row_cached((*key, "vgpu", vgpu.shape()), compute_with_devices)
        return self.row_cached(key, compute)

    def _own_rp(self) -> None:
        """Make the releasing and pipelined arrays this table's own before changing them."""
        self.rp_touched = True
        if self._rp_shared:
            self.releasing, self.pipelined = self.releasing.copy(), self.pipelined.copy()
            self._rp_shared = False

    def add_task(self, i: int, task: TaskInfo) -> None:
        vec = task.req_vec
        assert vec is not None
        if task.status == TaskStatus.RELEASING:
            self._own_rp()
            self.releasing[i] += vec
            self.used[i] += vec
        elif task.status == TaskStatus.PIPELINED:
            self._own_rp()
            self.pipelined[i] += vec
        else:
            self.used[i] += vec
        if held_for_scoring(task):
            self.held[i] += task.init_vec
            self.held_nonzero[i] += task.nonzero_req
        self.pod_count[i] += 1
        if self.devices is not None and task.pod.vgpu is not None:
            self.devices.add(i, task, self.tasks[i])
        if self.dra is not None and task.pod.claims:
            self.dra.add(i, task)
        row = self._row(i)
        before = row.get(task.uid)
        row[task.uid] = task
        self.anti_affinity_pods += _holds_anti_affinity(task) - _holds_anti_affinity(before)
        self._refresh(i)

    def remove_task(self, i: int, task: TaskInfo) -> None:
        vec = task.req_vec
        assert vec is not None
        if task.status == TaskStatus.RELEASING:
            self._own_rp()
            self.releasing[i] -= vec
            self.used[i] -= vec
        elif task.status == TaskStatus.PIPELINED:
            self._own_rp()
            self.pipelined[i] -= vec
        else:
            self.used[i] -= vec
        if held_for_scoring(task):
            self.held[i] -= task.init_vec
            self.held_nonzero[i] -= task.nonzero_req
        self.pod_count[i] -= 1
        if self.devices is not None and task.pod.vgpu is not None:
            self.devices.remove(i, task)
        if self.dra is not None and task.pod.claims:
            self.dra.remove(i, task)
        self.anti_affinity_pods -= _holds_anti_affinity(self._row(i).pop(task.uid, None))
        self._refresh(i)

    def used_total(self) -> Resource:
        """``used`` summed over the nodes as a Resource (a fresh one: callers may change it),
        summed again only after a row changed (a quiet cluster's sessions share one sum)."""
        memo = self._used_total
        if memo is None or memo[0] != self.version:
            parent = self._parent
            if parent is not None and not self.change_log and parent.version == self._base_version:
                return parent.used_total()  # the same rows: the long-lived table keeps it
            total = self.resource(self.used.sum(axis=0)) if len(self) else Resource()
            memo = self._used_total = (self.version, total)
        return memo[1].clone()

    def totals(self) -> Resource:
        """The nodes' allocatable summed (a fresh Resource: callers may change it)."""
        total = self.memo("totals", lambda: self.resource(self.allocatable.sum(axis=0)) if len(self) else Resource())
        return total.clone()
