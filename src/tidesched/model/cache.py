"""The incremental cluster cache: parsed objects and session state kept up to date per event.

Both worlds feed it (the Kubernetes informers and the simulated world): each add, update or
delete of a raw object is parsed once, and the infos a session opens on — one TaskInfo per
pod, one JobInfo per PodGroup, the node table's usage rows — are changed in place for just
that object. :meth:`ClusterCache.open` then hands a session those infos and a copy of the node
table, so opening costs a pass of cheap checks instead of parsing and rebuilding everything
(Volcano's SchedulerCache.Snapshot, kube-scheduler's cache.UpdateSnapshot).

A session changes the infos it is lent (task statuses, job phases, fit errors). The next
change or ``open`` first puts every lent info back to what its object says, so the cache
always describes the objects, never a session's plans. :func:`~tidesched.model.state.build_state`
over :meth:`ClusterCache.snapshot` is the oracle: any sequence of events must give the same
session state and the same decisions both ways (tests/model/test_cache.py).

Changes that touch everything rebuild everything: a Queue added or removed, a PriorityClass
changed, or the node table's columns changing (a resource name appearing or going). A Node
change rebuilds the node table only. These are rare; pods and PodGroups, the stream that
matters, are incremental.

Not thread-safe: one thread (the scheduling loop) feeds it and opens sessions on it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from tidesched.model.dra.ledger import ClaimLedger
from tidesched.model.dra.records import KINDS as DRA_KINDS
from tidesched.model.dra.records import DraObjects
from tidesched.model.hypernode_tree import HyperNodeIndex, HyperNodeTree
from tidesched.model.infos import ALLOCATED_STATUSES, JobInfo, TaskInfo
from tidesched.model.node_table import NodeTable, occupies_node
from tidesched.model.objects import DEFAULT_QUEUE, Node, Pod, PodGroup, reparse_pod, reparse_podgroup
from tidesched.model.problems import Event, ObjectError, warning
from tidesched.model.resource import Resource
from tidesched.model.snapshot import (
    _PARSERS,
    DEFAULT_SCHEDULER_NAME,
    VOLUME_KINDS,
    ClusterSnapshot,
    default_queue,
    synthesize_podgroup,
    synthesized_group_name,
)
from tidesched.model.state import (
    SessionState,
    class_priority,
    job_info,
    job_key_of,
    pod_dims,
    pod_priority,
    podgroup_not_found,
    priority_values,
    queue_info,
    queue_not_found,
)
from tidesched.model.status import TaskStatus
from tidesched.model.volumes import VolumeCatalog

KINDS = ("Node", "Pod", "PodGroup", "Queue", "PriorityClass", "PodDisruptionBudget", "ResourceQuota", "Numatopology",
         *VOLUME_KINDS, "HyperNode", *DRA_KINDS)
_NAMESPACED = frozenset({"Pod", "PodGroup", "PodDisruptionBudget", "ResourceQuota", "PersistentVolumeClaim",
                         "ResourceClaim", "ResourceClaimTemplate"})

# Short ways to parse a copy-on-write status write of the object parsed last (None: parse it all).
_REPARSERS = {"Pod": reparse_pod, "PodGroup": reparse_podgroup}


class ClusterCache:
    def __init__(
        self,
        scheduler_names: Iterable[str] = (DEFAULT_SCHEDULER_NAME,),
        *,
        synthesize_podgroups: bool = True,
        ensure_default_queue: bool = True,
        ignored_provisioners: Iterable[str] = (),
    ) -> None:
        self.ours = frozenset(scheduler_names)
        self.ignored_provisioners = frozenset(ignored_provisioners)
        self._catalog: tuple[tuple[int, ...], VolumeCatalog] | None = None
        self.synthesize = synthesize_podgroups
        self.ensure_default_queue = ensure_default_queue
        self.generation = 0  # moves on every change that reached a record
        self.records: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        self._problems: dict[tuple[str, str], Event] = {}
        self._parsed: dict[tuple[str, str], tuple[Any, Any, Event | None]] = {}  # raw identity
        self._early: dict[tuple[str, str], tuple[Any, Any, Event | None]] = {}  # see preparse
        self._synthesized: dict[str, str] = {}  # pod key -> key of the PodGroup made for it
        self._rev = dict.fromkeys(KINDS, 0)
        self._lists: dict[str, tuple[int, list[Any]]] = {}
        self.dra = DraObjects()  # the DRA records, kept beside the others (sessions' claim ledgers)
        # Session state (valid unless _rebuild is set).
        self._rebuild = True
        self._table_stale = True
        self._values: dict[str, int] = {}
        self._default_priority = 0
        self._tasks: dict[str, TaskInfo] = {}  # every pod, by pod key
        self._jobs: dict[str, JobInfo] = {}  # PodGroups whose queue exists, by key
        self._group_pods: defaultdict[str, set[str]] = defaultdict(set)  # job key -> pod keys
        self._dims: Counter[str] = Counter()  # scalar names the pods request
        self._table: NodeTable | None = None
        self._default_queue: Any = None
        self._unsorted_jobs: set[str] = set()
        self._unsorted_rows: set[int] = set()
        self._order_stale = True  # _tasks / _jobs not in key order
        self._lent = False  # a session may have changed the infos since the last open
        # The network topology: HyperNodes and node labels resolved per change (model.hypernode_tree).
        self._hypernodes = HyperNodeIndex()
        self._tree: HyperNodeTree | None = None
        self._domains: dict[str, tuple[str, dict[str, str]]] = {}  # job uid -> HyperNodes its gang and sub-groups were placed within

    # -- feeding ------------------------------------------------------------------------

    def update(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        """A raw object as the world now has it (None: deleted). The same object (by
        identity) as last time is not parsed again; a malformed one is dropped with a
        warning that every later session reports until the object is fixed or gone."""
        if kind not in self.records:
            return
        if obj is None:
            self._parsed.pop((kind, key), None)
            self.update_record(kind, key, None)
            return
        record, problem = self.parse(kind, key, obj)
        self.update_record(kind, key, record, problem)

    def preparse(self, kind: str, key: str, obj: Mapping[str, Any]) -> None:
        """Parse an object ahead of its ``update`` (a page of the informers' first list, while
        the rest is still coming). The update that brings the same object (by identity) takes
        the result; what no update took by the next ``open`` is dropped."""
        if kind in self.records:
            self._early[(kind, key)] = (obj, *self._parse(kind, key, obj))

    def parse(self, kind: str, key: str, obj: Mapping[str, Any]) -> tuple[Any, Event | None]:
        prev = hit = self._parsed.get((kind, key))
        if hit is None or hit[0] is not obj:
            hit = self._early.pop((kind, key), None)
        if hit is not None and hit[0] is obj:
            self._parsed[(kind, key)] = hit
            return hit[1], hit[2]
        if prev is not None and prev[1] is not None and kind in _REPARSERS:
            # A copy-on-write status write (a bind, a pod's end, a PodGroup phase) of the object
            # parsed last, as the simulator makes them: only the changed fields are read.
            record = _REPARSERS[kind](prev[0], prev[1], obj)
            if record is not None:
                self._parsed[(kind, key)] = (obj, record, None)
                return record, None
        record, problem = self._parse(kind, key, obj)
        self._parsed[(kind, key)] = (obj, record, problem)
        return record, problem

    def _parse(self, kind: str, key: str, obj: Mapping[str, Any]) -> tuple[Any, Event | None]:
        record: Any = None
        problem: Event | None = None
        try:
            record = _PARSERS[kind](obj)
        except ObjectError as exc:
            ns, name = key.split("/", 1) if kind in _NAMESPACED and "/" in key else ("", key)
            problem = warning(kind, ns, name, "InvalidObject", f"{kind} {key}: {exc}")
        return record, problem

    def update_record(self, kind: str, key: str, record: Any, problem: Event | None = None) -> None:
        """A parsed record (None: gone, or malformed with ``problem``)."""
        if problem is None:
            self._problems.pop((kind, key), None)
        elif self._problems.get((kind, key)) != problem:
            self._problems[(kind, key)] = problem
            self.generation += 1
        records = self.records[kind]
        old = records.get(key)
        if old is None and record is None:
            return
        synthesized = kind == "Pod" and record is not None and self._needs_group(record)
        if synthesized:
            # Named as build_snapshot names it, before comparing: a pod whose parsed fields did
            # not change is no change, although its raw object did.
            object.__setattr__(record, "group_name", synthesized_group_name(record))
        if old is not None and record is not None and old == record:
            records[key] = record  # same content; keep the latest object
            return
        self._restore()
        if record is None:
            del records[key]
        else:
            records[key] = record
        self._rev[kind] += 1
        self.generation += 1
        if kind == "Pod":
            self._pod_changed(key, record, synthesized)
        elif kind == "PodGroup":
            self._group_changed(key, record)
        elif kind == "Node":
            self._table_stale = True
            self._hypernodes.set_node(key, None if record is None else record.meta.labels)
            self._tree = None
        elif kind == "HyperNode":
            self._hypernodes.set_hypernode(key, record)
            self._tree = None
        elif kind in ("Queue", "PriorityClass"):
            if kind == "PriorityClass" or old is None or record is None:
                self._rebuild = True  # job membership or every priority may change
        elif kind in DRA_KINDS:
            self.dra.put(kind, key, record)  # read afresh by each session's claim ledger
        # PodDisruptionBudgets, ResourceQuotas, Numatopologies and the storage kinds: only the
        # snapshot lists hold them.

    # -- pods and groups ----------------------------------------------------------------

    def _needs_group(self, pod: Pod) -> bool:
        """A pod of ours that names no PodGroup gets one made for it (Volcano's podgroup
        controller does this in a cluster); a pod already carrying the made-up name keeps it."""
        if not self.synthesize or pod.scheduler_name not in self.ours:
            return False
        return not pod.group_name or (
            pod.key in self._synthesized and pod.group_name == synthesized_group_name(pod)
        )

    def _pod_changed(self, key: str, new: Pod | None, synthesized: bool) -> None:
        # The task goes first, then its made-up group, so neither is ever linked to a stale one.
        if not self._rebuild and key in self._tasks:
            self._drop_task(key)
        self._drop_synthesized(key)
        if new is not None and synthesized:
            pg = synthesize_podgroup(new)
            self._synthesized[key] = pg.key
            self.records["PodGroup"][pg.key] = pg
            self._rev["PodGroup"] += 1
            self._group_changed(pg.key, pg)
        if new is not None and not self._rebuild:
            self._add_task(new)

    def _drop_synthesized(self, pod_key: str) -> None:
        pg_key = self._synthesized.pop(pod_key, None)
        if pg_key is not None:
            self.records["PodGroup"].pop(pg_key, None)
            self._rev["PodGroup"] += 1
            self._group_changed(pg_key, None)

    def _group_changed(self, key: str, pg: PodGroup | None) -> None:
        if self._rebuild:
            return
        old = self._jobs.pop(key, None)
        job = None
        if pg is not None and pg.queue in self._queue_names():
            job = job_info(pg, class_priority(pg.priority_class, self._values, self._default_priority))
            self._jobs[key] = job
            self._order_stale = True
        for pod_key in sorted(self._group_pods.get(key, ())):
            task = self._tasks[pod_key]
            if old is not None and task.job == key:
                task.job = ""
            if job is not None and task.pod.scheduler_name in self.ours:
                task.job = key
                job.add_task(task)

    def _add_task(self, pod: Pod) -> TaskInfo:
        job_key = job_key_of(pod)
        job = self._jobs.get(job_key) if pod.scheduler_name in self.ours else None
        task = TaskInfo(pod, job_key if job is not None else "", pod_priority(pod, self._values, self._default_priority))
        self._tasks[pod.key] = task
        self._order_stale = True
        if job_key:
            self._group_pods[job_key].add(pod.key)
        if job is not None:
            if job.tasks and next(reversed(job.tasks.values())).key > task.key:
                self._unsorted_jobs.add(job_key)
            job.add_task(task)
        for dim in pod_dims(pod):
            self._dims[dim] += 1
            if self._table is not None and dim not in self._table.dim_index:
                self._table_stale = True  # a new column
        if not self._table_stale and self._table is not None:
            self._place(task)
        return task

    def _drop_task(self, key: str) -> None:
        task = self._tasks.pop(key)
        pod = task.pod
        job_key = job_key_of(pod)
        if job_key:
            pods = self._group_pods.get(job_key)
            if pods is not None:
                pods.discard(key)
                if not pods:
                    del self._group_pods[job_key]
        job = self._jobs.get(task.job) if task.job else None
        if job is not None:
            job.remove_task(task)
            _drop_zero_scalars(job)
        for dim in pod_dims(pod):
            self._dims[dim] -= 1
            if not self._dims[dim]:
                del self._dims[dim]
                self._table_stale = True  # the column may go
        table = self._table
        if not self._table_stale and table is not None and occupies_node(task):
            i = table.index.get(task.node_name)
            if i is not None and task.uid in table.tasks[i]:
                table.remove_task(i, task)

    def _place(self, task: TaskInfo) -> None:
        table = self._table
        assert table is not None
        table.prepare_task(task)
        task.devices = task.pod.vgpu_assignment  # devices chosen for older nodes are chosen again
        if occupies_node(task):
            i = table.index.get(task.node_name)
            if i is not None:
                row = table.tasks[i]
                if row and next(reversed(row.values())).key > task.key:
                    self._unsorted_rows.add(i)
                table.add_task(i, task)
        task.base_devices = task.devices  # what the cache charged (a session may change it)

    # -- rebuilds -----------------------------------------------------------------------

    def _queue_names(self) -> set[str] | dict[str, Any]:
        queues = self.records["Queue"]
        if self.ensure_default_queue and DEFAULT_QUEUE not in queues:
            return {**queues, DEFAULT_QUEUE: None}
        return queues

    def _rebuild_all(self) -> None:
        self._values, self._default_priority = priority_values(self.records["PriorityClass"].values())
        self._tasks = {}
        self._jobs = {}
        self._group_pods = defaultdict(set)
        self._dims = Counter()
        self._table = None
        self._table_stale = True
        self._rebuild = False
        queues = self._queue_names()
        for key, pg in self.records["PodGroup"].items():
            if pg.queue in queues:
                self._jobs[key] = job_info(pg, class_priority(pg.priority_class, self._values, self._default_priority))
        for pod in sorted(self.records["Pod"].values(), key=lambda p: p.key):
            self._add_task(pod)
        self._unsorted_jobs.clear()  # tasks went in in key order
        self._order_stale = True

    def _rebuild_table(self) -> None:
        nodes = [n for n in self.records["Node"].values() if n.ready]
        self._table = NodeTable(nodes, self._dims)
        self._table.enable_carry()  # long-lived: sessions' copies carry its row caches
        self._table_stale = False
        self._unsorted_rows.clear()
        for key in sorted(self._tasks):
            self._place(self._tasks[key])

    def _restore(self) -> None:
        """Put back what the last session changed: task statuses and nodes as their pods say,
        job phases as their PodGroups say, no fit errors or conditions."""
        if not self._lent:
            return
        self._lent = False
        for task in self._tasks.values():
            pod = task.pod
            if task.status is not pod.status or task.node_name != pod.node_name:
                job = self._jobs.get(task.job) if task.job else None
                if job is not None:
                    job.update_task_status(task, pod.status)
                else:
                    task.status = pod.status
                task.node_name = pod.node_name
            task.fit_error = None
            task.order_key = None
            if task.devices is not task.base_devices:
                task.devices = task.base_devices
        for job in self._jobs.values():
            # Also for jobs no task of which ended in another status: a session may have
            # allocated a task and taken it back again, leaving a scalar at zero.
            _drop_zero_scalars(job)
            pg = job.pod_group
            if job.phase != pg.phase:
                job.phase = pg.phase
            if job.fit_errors:
                job.fit_errors = {}
            if job.job_fit_error:
                job.job_fit_error = ""
            if job.conditions:
                job.conditions = []
            job.enqueued_this_session = False

    # -- reading ------------------------------------------------------------------------

    def _list(self, kind: str) -> list[Any]:
        rev = self._rev[kind]
        hit = self._lists.get(kind)
        if hit is None or hit[0] != rev:
            records = self.records[kind]
            hit = (rev, [records[k] for k in sorted(records)])
            self._lists[kind] = hit
        return hit[1]

    def snapshot(self) -> ClusterSnapshot:
        """The cache's records as a snapshot (fresh lists, shared records)."""
        queues = list(self._list("Queue"))
        if self.ensure_default_queue and DEFAULT_QUEUE not in self.records["Queue"]:
            if self._default_queue is None:
                self._default_queue = default_queue()  # a record like the others: shared, never changed
            queues.append(self._default_queue)
        return ClusterSnapshot(
            nodes=list(self._list("Node")),
            pods=list(self._list("Pod")),
            podgroups=list(self._list("PodGroup")),
            queues=queues,
            priority_classes=list(self._list("PriorityClass")),
            pdbs=list(self._list("PodDisruptionBudget")),
            dra=self.dra,
            hypernodes=list(self._list("HyperNode")),
            resource_quotas=list(self._list("ResourceQuota")),
            numatopologies=list(self._list("Numatopology")),
            problems=[self._problems[k] for k in sorted(self._problems)],
            **{attr: list(self._list(kind)) for kind, attr in VOLUME_KINDS.items()},
            ignored_provisioners=self.ignored_provisioners,
            catalog=self._volume_catalog(),
        )

    def _volume_catalog(self) -> VolumeCatalog:
        """The storage objects' catalog, made again only when one of them changed."""
        revs = tuple(self._rev[kind] for kind in VOLUME_KINDS)
        if self._catalog is None or self._catalog[0] != revs:
            lists = [self._list(kind) for kind in VOLUME_KINDS]
            self._catalog = (revs, VolumeCatalog(*lists, ignored_provisioners=self.ignored_provisioners))
        return self._catalog[1]

    def problems(self) -> list[Event]:
        """Warning events of the malformed objects held now (every session reports them too)."""
        return [self._problems[k] for k in sorted(self._problems)]

    def open(self) -> tuple[ClusterSnapshot, SessionState]:
        """The snapshot and the state for one session. The infos are lent: the session may
        change them, and the next change or open puts them back."""
        self.node_table()  # infos put back, rebuilt where a change asked for it
        self._early.clear()
        if self._order_stale:
            self._tasks = dict(sorted(self._tasks.items()))
            self._jobs = dict(sorted(self._jobs.items()))
            self._order_stale = False
        for job_key in self._unsorted_jobs:
            job = self._jobs.get(job_key)
            if job is not None:
                job.tasks = dict(sorted(job.tasks.items(), key=lambda kv: kv[1].key))
        self._unsorted_jobs.clear()
        table = self._table
        for i in self._unsorted_rows:
            table.tasks[i] = dict(sorted(table.tasks[i].items(), key=lambda kv: kv[1].key))
        self._unsorted_rows.clear()

        snapshot = self.snapshot()
        events = list(snapshot.problems)
        if self._tree is None:
            self._tree = self._hypernodes.tree(table.names)
        events.extend(self._tree.problems)
        if len(self._domains) > len(self._jobs):  # gangs gone: their domains go too
            self._domains = {k: v for k, v in self._domains.items() if k in self._jobs}
        queues = {q.name: queue_info(q) for q in snapshot.queues}
        queues = dict(sorted(queues.items()))
        for pg in snapshot.podgroups:
            if pg.queue not in queues:
                events.append(queue_not_found(pg))
        tasks: dict[str, TaskInfo] = {}
        for task in self._tasks.values():
            if task.job:
                tasks[task.uid] = task
            elif task.status is TaskStatus.PENDING and task.pod.scheduler_name in self.ours:
                events.append(podgroup_not_found(task.pod))
        self._lent = True
        state = SessionState(
            snapshot=snapshot,
            events=events,
            priority_classes=dict(self._values),
            default_priority=self._default_priority,
            queues=queues,
            jobs=dict(self._jobs),
            tasks=tasks,
            table=table.copy(),
            hypernodes=self._tree,
            domains=self._domains,
        )
        state.table.dra = ClaimLedger.open(self.dra, state.table)
        return snapshot, state

    def node_table(self) -> NodeTable:
        """The cache's own node table, up to date, for readers that only look (the simulator's
        GPU figures); a session gets a copy from :meth:`open` instead."""
        self._restore()
        if self._rebuild:
            self._rebuild_all()
        if self._table_stale or self._table is None:
            self._rebuild_table()
        assert self._table is not None
        return self._table

    def hypernodes(self) -> HyperNodeTree:
        """The HyperNode tree over the nodes as they are (for readers that only look)."""
        table = self.node_table()
        if self._tree is None:
            self._tree = self._hypernodes.tree(table.names)
        return self._tree

    def node(self, name: str) -> Node | None:
        return self.records["Node"].get(name)


def _drop_zero_scalars(job: JobInfo) -> None:
    """Sums a job's requests afresh once they may hold a scalar gone back to zero: a rebuilt
    job holds a resource name only when one of its tasks asks for it (and comparisons whose
    missing dimensions count as infinite tell the two apart)."""
    for res in (job.allocated, job.total_request):
        if res.scalars and 0.0 in res.scalars.values():
            break
    else:
        return
    total, allocated = Resource(), Resource()
    for task in job.tasks.values():
        total.add(task.resreq)
        if task.status in ALLOCATED_STATUSES:
            allocated.add(task.resreq)
    job.total_request, job.allocated = total, allocated
