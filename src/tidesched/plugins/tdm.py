"""tdm plugin (Volcano plugins/tdm): time-division multiplexing of revocable nodes.

Nodes labelled ``volcano.sh/revocable-zone: <zone>`` belong to a revocable zone, open only in
the daily window the plugin's arguments give it::

    - name: tdm
      arguments:
        tdm.revocable-zone.rz1: 10:00-21:00   # every key containing the prefix names a zone
        tdm.revocable-zone.rz2: 22:00-6:00    # end <= start: the window ends the next day
        tdm.evict.period: 1m                  # shuffle evicts at most once per period (1m)

A pod may use revocable nodes when its annotation ``volcano.sh/revocable-zone`` is ``*`` (any
other value: it may not), or, without that annotation, when its annotation
``volcano.sh/preemptable`` is true.

Hooks (Volcano's, restated):

* **Predicate**: a node in no zone passes; a node whose zone is unknown or closed now fails
  (unresolvable: ``revocable zone <z> not support`` / ``current time beyond revocable zone
  <z>:<window>``); on a node whose zone is open only pods that may use revocable nodes pass
  (``not allow to dispatch to revocable node``).
* **NodeOrder**: 100 for a pod that may use revocable nodes on a node of an open zone, else 0.
* **Preemptable**: a preemptor that is preemptable itself, or may use revocable nodes,
  preempts nothing (Reject). Otherwise the victims are the Running, preemptable candidates on
  nodes in no zone, per job at most what its disruption budget allows (below).
* **VictimTasks** (shuffle, ``enabledVictim``): once per ``tdm.evict.period``, for every zone
  that is closed now, the Running preemptable pods on its nodes, per job at most what its
  budget allows — the revocable nodes are handed back when their window closes.
* **JobOrder**: jobs that are not preemptable (PodGroup ``volcano.sh/preemptable``) first.
* **JobPipelined**: Permit when the job is pipelined (gang's count), else Reject.
* **JobStarving**: a preemptable job never starves; another starves while it has pending pods.

A job's disruption budget, from its PodGroup's annotations: ``volcano.sh/jdb-max-unavailable``
(an integer or a percentage of its pods, rounded up): that many minus the pods neither running
nor finished; else ``volcano.sh/jdb-min-available``: the running pods above it (when fewer run,
1); without either, 1. A job's victims are its first ones in key order up to the budget.

Windows are read in the scheduler's local time (``TZ``), against the session's clock, as
vc-scheduler reads them against its own: a zone is open from today's start to its end
(tomorrow's, when the end is not after the start), ends included. So a window across midnight
is open from its start until midnight and closed after midnight until the next start — as in
Volcano, which measures both ends from the current day. The session asks the world for a
session at the next window boundary (``Session.wake``). The last shuffle eviction time is kept
per loaded config, so one ``tidesched run`` or ``simulate`` keeps the period; ``schedule``
(one session) always may evict.

Differences from Volcano: a window that is not ``H:MM-H:MM`` (or ``HH:MM``), a non-string
zone value, and an evict period that is no Go duration are config errors at load (Volcano
takes them and then finds the zone never open, or falls back to 1m); a job's victims are its
first in key order (Volcano: map order, so any of them).
"""

from __future__ import annotations

import datetime as dt
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.plugin import PERMIT, REJECT, NodeFailure, Plugin, PredicateResult, RowFn
from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo
    from tidesched.model.node_table import NodeTable

ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"  # node label, pod annotation
PREEMPTABLE = "volcano.sh/preemptable"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
MAX_NODE_SCORE = 100.0
DEFAULT_EVICT_PERIOD = 60.0
DEFAULT_POD_EVICT_NUM = 1
NOT_ALLOWED = "not allow to dispatch to revocable node"

# Go's "15:04" layout: an hour of one or two digits (0-23), a minute of exactly two.
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_INTEGER = re.compile(r"[+-]?\d+")  # Go's strconv.Atoi
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool
# When shuffle last evicted for tdm, per loaded config (a run's or a simulation's sessions share
# one config object; a reloaded config starts afresh).
_LAST_EVICT: dict[int, tuple["weakref.ref[Any]", float]] = {}


def parse_window(raw: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``H:MM-H:MM`` (surrounding blanks allowed) as ((hour, minute), (hour, minute)); a
    ValueError saying what is wrong otherwise."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ValueError(f"revocable zone {raw} format error")
    out = []
    for part in parts:
        m = _CLOCK.fullmatch(part)
        if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
            raise ValueError(f"revocable zone {raw} format error: {part!r} is no time of day such as 9:00")
        out.append((int(m.group(1)), int(m.group(2))))
    return out[0], out[1]


def window_bounds(raw: str, now: float) -> tuple[float, float]:
    """The window's start and end around the local day of ``now`` (Volcano parseRevocableZone:
    both measured from the current day; the end on the next day when it is not after the start)."""
    (h1, m1), (h2, m2) = parse_window(raw)
    today = dt.datetime.fromtimestamp(now).date()
    start = dt.datetime.combine(today, dt.time(h1, m1))
    end_day = today + dt.timedelta(days=1) if (h1, m1) >= (h2, m2) else today
    end = dt.datetime.combine(end_day, dt.time(h2, m2))
    return start.timestamp(), end.timestamp()


@dataclass(frozen=True, slots=True)
class Zones:
    """The configured zones at one instant: which are open, why the others are not, and when
    the next window boundary falls."""

    windows: dict[str, str]
    open: frozenset[str]
    next_change: float | None

    @classmethod
    def at(cls, windows: dict[str, str], now: float) -> "Zones":
        opened: set[str] = set()
        # Windows are measured from the current day, so the next local midnight moves them too.
        tomorrow = dt.datetime.fromtimestamp(now).date() + dt.timedelta(days=1)
        changes: list[float] = [dt.datetime.combine(tomorrow, dt.time()).timestamp()] if windows else []
        second = int(now)
        for zone, raw in windows.items():
            start, end = window_bounds(raw, now)
            if int(start) <= second <= int(end):
                opened.add(zone)
            changes += [t for t in (start, end + 1, start + 86400) if t > now]
        return cls(windows, frozenset(opened), min(changes) if changes else None)

    def why_closed(self, zone: str) -> str | None:
        """None when ``zone`` is open now, else Volcano's words for why not."""
        if zone in self.open:
            return None
        if zone not in self.windows:
            return f"revocable zone {zone} not support"
        return f"current time beyond revocable zone {zone}:{self.windows[zone]}"


def may_use_revocable(task: "TaskInfo") -> bool:
    """Volcano GetPodRevocableZone(pod) == "*": the annotation ``*``, or, without the annotation,
    a true ``volcano.sh/preemptable`` annotation."""
    annotations = task.pod.meta.annotations
    zone = annotations.get(REVOCABLE_ZONE)
    if zone is not None:
        return zone == "*"
    return annotations.get(PREEMPTABLE, "") in _GO_TRUE


def _int_or_percent(raw: str, total: int) -> int:
    """Kubernetes intstr: an integer, or a percentage of ``total`` rounded up; anything else
    counts 0 (Volcano logs it)."""
    if _INTEGER.fullmatch(raw):
        return int(raw)
    if raw.endswith("%") and _INTEGER.fullmatch(raw[:-1]):
        return -(-int(raw[:-1]) * total // 100)
    return 0


def max_evictions(job: "JobInfo") -> int:
    """How many of the job's pods tdm may evict now (Volcano getMaxPodEvictNum)."""
    annotations = job.pod_group.meta.annotations
    total = len(job.tasks)
    running = job.status_count[TaskStatus.RUNNING]
    if JDB_MIN_AVAILABLE in annotations:
        min_available = _int_or_percent(annotations[JDB_MIN_AVAILABLE], total)
        return running - min_available if running >= min_available else DEFAULT_POD_EVICT_NUM
    if JDB_MAX_UNAVAILABLE in annotations:
        max_unavailable = _int_or_percent(annotations[JDB_MAX_UNAVAILABLE], total)
        finished = job.status_count[TaskStatus.SUCCEEDED] + job.status_count[TaskStatus.FAILED]
        unavailable = total - finished - running
        return 0 if unavailable >= max_unavailable else max_unavailable - unavailable
    return DEFAULT_POD_EVICT_NUM


class TdmPlugin(Plugin):
    name = "tdm"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.windows: dict[str, str] = {}
        for key in sorted(arguments):
            if ZONE_PREFIX not in key:
                continue
            raw = arguments.get_str(key, "")
            try:
                parse_window(raw)
            except ValueError as exc:
                raise arguments.bad_value(key, f"a daily window such as 10:00-21:00 ({exc})", raw) from None
            self.windows[key.replace(ZONE_PREFIX, "", 1)] = raw
        raw_period = arguments.get_str(EVICT_PERIOD, "")
        self.evict_period = DEFAULT_EVICT_PERIOD
        if raw_period:
            try:
                self.evict_period = parse_go_duration(raw_period, EVICT_PERIOD)
            except ObjectError:
                expected = "a Go duration such as 30s or 1m"
                raise arguments.bad_value(EVICT_PERIOD, expected, raw_period) from None

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        zones = Zones.at(self.windows, ssn.now)
        # The nodes' zones depend on the node set alone: read once per node set, not per session.
        node_zone, revocable = table.memo(("tdm", "zones"), lambda: _node_zones(table))
        if revocable.any() and zones.next_change is not None:
            ssn.wake(zones.next_change)
        # Per node: closed (why), open, or in no zone.
        closed_reason: dict[str, list[int]] = {}
        open_rows = np.zeros(len(table), dtype=bool)
        for row, zone in enumerate(node_zone):
            if not zone:
                continue
            why = zones.why_closed(zone)
            if why is None:
                open_rows[row] = True
            else:
                closed_reason.setdefault(why, []).append(row)
        closed = revocable & ~open_rows

        def pass_rows(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
            ok = ~closed if may_use_revocable(task) else ~revocable
            return (ok if rows is None else ok[rows]).copy()

        def predicate(task: "TaskInfo") -> PredicateResult:
            failures = []
            for why, rows in closed_reason.items():
                mask = np.zeros(len(table), dtype=bool)
                mask[rows] = True
                failures.append(NodeFailure(why, mask, True))
            if not may_use_revocable(task) and open_rows.any():
                failures.append(NodeFailure(NOT_ALLOWED, open_rows.copy(), True))
            return PredicateResult(pass_rows(task, None), failures)

        def score_rows(task: "TaskInfo", rows: np.ndarray | None) -> np.ndarray:
            if not may_use_revocable(task):
                return np.zeros(len(table) if rows is None else len(rows))
            scores = np.where(open_rows, MAX_NODE_SCORE, 0.0)
            return scores if rows is None else scores[rows]

        # Row values depend on the node's zone label and which zones are open now.
        def row_key(task: "TaskInfo") -> tuple[Any, ...]:
            return ("tdm", may_use_revocable(task), zones.open, tuple(sorted(self.windows.items())))

        ssn.add_fn("predicate", self.name, predicate)
        ssn.add_row_fn("predicate", self.name, RowFn(row_key, pass_rows))
        ssn.add_fn("node_order", self.name, lambda task, idx: score_rows(task, idx))
        ssn.add_row_fn("node_order", self.name, RowFn(row_key, score_rows))

        def budgeted(by_job: dict[str, list["TaskInfo"]]) -> list["TaskInfo"]:
            victims: list["TaskInfo"] = []
            for uid in sorted(by_job):
                job = ssn.jobs.get(uid)
                if job is not None:
                    victims += by_job[uid][:max(0, max_evictions(job))]
            return victims

        def preemptable(preemptor: "TaskInfo", preemptees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
            if preemptor.preemptable or may_use_revocable(preemptor):
                return [], REJECT
            by_job: dict[str, list["TaskInfo"]] = {}
            for task in preemptees:
                if not task.preemptable or task.status != TaskStatus.RUNNING:
                    continue
                row = table.index.get(task.node_name)
                if row is None or revocable[row]:
                    continue
                by_job.setdefault(task.job, []).append(task)
            return budgeted(by_job), PERMIT

        def victim_tasks(_tasks: list["TaskInfo"]) -> list["TaskInfo"]:
            key = id(ssn.config)
            last = _LAST_EVICT.get(key)
            if last is not None and last[0]() is ssn.config and last[1] + self.evict_period > ssn.now:
                ssn.wake(last[1] + self.evict_period)
                return []
            victims: list["TaskInfo"] = []
            for zone in sorted(self.windows):
                if zone in zones.open:
                    continue
                by_job: dict[str, list["TaskInfo"]] = {}
                for row in np.flatnonzero(revocable):
                    if node_zone[row] != zone:
                        continue
                    for task in sorted(table.tasks[row].values(), key=lambda t: t.key):
                        if task.preemptable and task.status == TaskStatus.RUNNING:
                            by_job.setdefault(task.job, []).append(task)
                victims += budgeted(by_job)
            _remember_eviction(ssn.config, ssn.now)
            return victims

        def job_order(l: "JobInfo", r: "JobInfo") -> int:
            if l.preemptable == r.preemptable:
                return 0
            return 1 if l.preemptable else -1

        ssn.add_fn("preemptable", self.name, preemptable)
        ssn.add_fn("victim_tasks", self.name, victim_tasks)
        ssn.add_fn("job_order", self.name, job_order)
        ssn.add_order_key(self.name, lambda job: 1 if job.preemptable else 0)
        ssn.add_fn("job_pipelined", self.name, lambda job: PERMIT if job.is_pipelined() else REJECT)
        ssn.add_fn("job_starving", self.name,
                   lambda job: not job.preemptable and job.status_count[TaskStatus.PENDING] > 0)


def _node_zones(table: "NodeTable") -> tuple[list[str], np.ndarray]:
    zones = [node.meta.labels.get(REVOCABLE_ZONE, "") for node in table.nodes]
    return zones, np.array([bool(z) for z in zones], dtype=bool)


def _remember_eviction(config: Any, now: float) -> None:
    for key in [k for k, (ref, _t) in _LAST_EVICT.items() if ref() is None]:
        del _LAST_EVICT[key]
    _LAST_EVICT[id(config)] = (weakref.ref(config), now)
