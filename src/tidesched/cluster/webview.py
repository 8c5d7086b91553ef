"""The live web view of ``tidesched run`` (issue 14, OBS-1/OBS-2): what the last session saw and
decided, as one JSON document, and the static page that draws it.

The scheduling loop calls :meth:`LiveView.record` after each session, on its own thread, with
the session it just closed: everything the page shows is read there from that session (queues
and their usage from ``explain.quota.QuotaReport``, the queue tree, per-node card usage from the
session's node table, the pods left pending with the same reasons ``tidesched explain`` gives)
and published as one new, never-changed dict. HTTP threads only serialise the latest dict
(once per session, then cached) — they never touch the cache or a session.

Routes (GET only, on the metrics address): ``/`` and ``/ui`` (the page), ``/ui/app.js``,
``/ui/style.css``, ``/ui/state.json`` (the document). The page polls ``state.json`` and redraws
when the session number changes; it needs no build step and loads nothing from elsewhere.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tidesched.explain.topology import topology_view
from tidesched.model.cards import MILLI, CardCatalog
from tidesched.model.devices import CORE
from tidesched.model.queue_tree import children_of, resolve_parents
from tidesched.model.resource import CPU
from tidesched.model.status import TaskStatus
from tidesched.model.vgpu import node_card_scalars

if TYPE_CHECKING:
    from tidesched.framework.decisions import Decisions
    from tidesched.framework.session import Session
    from tidesched.explain.quota import QuotaReport

MAX_PENDING = 200  # pods listed with their reasons; the total is always given
MAX_EVICTIONS = 100  # the latest evictions kept, across sessions
ROOT_QUEUE = "root"

Route = Callable[[], "tuple[int, str, bytes]"]


def _round(x: float) -> float:
    return round(float(x), 3)


def queue_rows(ssn: Session, report: QuotaReport) -> list[dict[str, Any]]:
    """Queues in tree order (depth-first from the top, names sorted), each with its parent,
    depth and usage per resource: the tree of ``model.queue_tree``, whose top level here is
    every queue without a parent (so Volcano's ``root`` is one of them). A queue whose parent
    is unknown, or that is on a parent cycle, is at the top level."""
    names = set(ssn.queues) | set(report.queues)
    spec_parents = {name: (q.parent if (q := ssn.queues.get(name)) is not None else "") or "" for name in names}
    resolved, _problems = resolve_parents(spec_parents, "")
    parent = {name: resolved[name] or "" for name in names}
    children = children_of(resolved)
    out: list[dict[str, Any]] = []

    def walk(name: str, depth: int) -> None:
        q = ssn.queues.get(name)
        usage = report.queues.get(name, {})
        out.append(
            {
                "name": name,
                "parent": parent[name],
                "depth": depth,
                "state": q.state if q is not None else "",
                "weight": q.weight if q is not None else None,
                "resources": {
                    res: {
                        "quota": None if u.quota is None else _round(u.quota),
                        "used": _round(u.used),
                        "inqueue": _round(u.inqueue),
                        "pending": _round(u.pending),
                    }
                    for res, u in sorted(usage.items())
                },
            }
        )
        for child in children.get(name, []):
            walk(child, depth + 1)

    for top in children.get("", []):
        walk(top, 0)
    return out


def _grid_layout(table: Any) -> tuple[list[str], list[int], Any, Any]:
    """What of the grid depends on the nodes alone (kept per node set, see NodeTable.memo): the
    models, each row's model, what each row offers, and which table columns count as its use."""
    catalog = CardCatalog.build((n.name, n.meta.labels, node_card_scalars(n)) for n in table.nodes)
    models: list[str] = []
    index: dict[str, int] = {}
    row_model: list[int] = []
    mask = np.zeros(table.allocatable.shape)
    total = np.zeros(len(table.nodes))
    cpu_col = table.dim_index.get(CPU)
    for i, node in enumerate(table.nodes):
        nc = catalog.nodes.get(node.name)
        slots = nc.slots if nc is not None else ()
        if slots:
            model = slots[0].model
            total[i] = sum(s.count for s in slots) / MILLI
            for s in slots:
                for r in s.resources:
                    col = table.dim_index.get(r)
                    if col is not None:
                        mask[i, col] = 1.0
        else:  # no cards: its cores
            model = CPU
            if cpu_col is not None:
                total[i] = table.allocatable[i, cpu_col] / MILLI
                mask[i, cpu_col] = 1.0
        if model not in index:
            index[model] = len(models)
            models.append(model)
        row_model.append(index[model])
    return models, row_model, total, mask


def node_grid(ssn: Session) -> dict[str, Any]:
    """Per node: its card model (the first it offers, else ``cpu``), cards used and offered
    (cores for nodes without cards), from the session's node table — i.e. as the cluster will be
    once the session's binds land. Compact rows ``[name, model index, used, total, flags]``
    (flag ``c``: cordoned)."""
    table = ssn.table
    models, row_model, total, mask = table.memo(("webview", "grid"), lambda: _grid_layout(table))
    held = (table.used * mask).sum(axis=1)
    if table.devices is not None:  # vGPU devices: the compute their pods hold (milli-GPU)
        held = held + table.devices.state("now")[CORE].sum(axis=1)
    used = np.round(held / MILLI, 3).tolist()
    totals = np.round(total, 3).tolist()
    rows = [
        [node.name, m, u, t, "c" if node.unschedulable else ""]
        for node, m, u, t in zip(table.nodes, row_model, used, totals)
    ]
    return {"models": models, "nodes": rows}


def _events_by_object(decisions: Decisions) -> dict[tuple[str, str], list[tuple[int, Any]]]:
    """The session's events per object, each with its position (explain keeps session order)."""
    out: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    for i, e in enumerate(decisions.events):
        name = f"{e.namespace}/{e.name}" if e.kind in ("Pod", "PodGroup") else e.name
        out.setdefault((e.kind, name), []).append((i, e))
    return out


def pending_pods(ssn: Session, decisions: Decisions, limit: int = MAX_PENDING) -> tuple[int, list[dict[str, Any]]]:
    """The pods this session left pending (not bound, not pipelined) and, for the first
    ``limit`` of them (queue, then PodGroup, then pod), the reasons ``tidesched explain`` prints."""
    from tidesched.explain.pod import explain_lines  # the one text of "why pending"

    left = [
        t
        for t in ssn.tasks.values()
        if t.status == TaskStatus.PENDING and t.key not in decisions.bound and t.key not in decisions.pipelined
    ]
    left.sort(key=lambda t: (ssn.jobs[t.job].queue if t.job in ssn.jobs else "", t.job, t.key))
    by_object = _events_by_object(decisions)
    out = []
    for t in left[:limit]:
        job = ssn.jobs.get(t.job)
        if job is None:
            continue
        related = by_object.get(("Pod", t.key), []) + by_object.get(("PodGroup", job.uid), [])
        related += by_object.get(("Queue", job.queue), [])
        related.sort(key=lambda ie: ie[0])
        lines = explain_lines(ssn, decisions, t.key, task=t, events=[e for _i, e in related])
        out.append({"pod": t.key, "queue": job.queue, "podgroup": job.uid, "reasons": lines[1:]})
    return len(left), out


class LiveView:
    """The latest view, published by the scheduling loop and read by HTTP threads."""

    def __init__(self, max_evictions: int = MAX_EVICTIONS) -> None:
        self._lock = threading.Lock()
        self._view: dict[str, Any] | None = None
        self._body: bytes | None = None
        self.evictions: deque[dict[str, Any]] = deque(maxlen=max_evictions)  # loop thread only

    def record(self, ssn: Session, decisions: Decisions, report: QuotaReport, *, session: int,
               seconds: float, now: float | None = None) -> dict[str, Any]:
        """Build the view of a closed session (loop thread) and publish it."""
        now = time.time() if now is None else now
        for key in sorted(decisions.evicted):
            self.evictions.appendleft(
                {"time": now, "pod": key, "reason": decisions.eviction_reasons.get(key, "")}
            )
        total_pending, pending = pending_pods(ssn, decisions)
        view = {
            "session": session,
            "time": now,
            "seconds": round(seconds, 4),
            "source": report.source,
            "decided": {
                "bound": len(decisions.bound),
                "pipelined": len(decisions.pipelined),
                "evicted": len(decisions.evicted),
            },
            "cluster": {k: _round(v) for k, v in sorted(report.cluster.items())},
            "queues": queue_rows(ssn, report),
            "nodes": node_grid(ssn),
            "pending_total": total_pending,
            "pending": pending,
            "topology": topology_view(ssn),
            "evictions": list(self.evictions),
        }
        self.publish(view)
        return view

    def publish(self, view: dict[str, Any]) -> None:
        with self._lock:
            self._view, self._body = view, None

    def body(self) -> bytes | None:
        """The latest view as JSON (serialised once per view, on the first request for it, outside
        the lock: the loop's next publish never waits for an encoding)."""
        with self._lock:
            view, body = self._view, self._body
        if view is None or body is not None:
            return body
        body = json.dumps(view, separators=(",", ":")).encode()
        with self._lock:
            if self._view is view:
                self._body = body
        return body


_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


def _static(name: str) -> bytes:
    return resources.files("tidesched.cluster").joinpath("webui", name).read_bytes()


def routes(view: LiveView) -> dict[str, Route]:
    """The page's routes; the files are read once, here."""
    files = {name: (ctype, _static(name)) for name, ctype in _STATIC.items()}

    def page() -> tuple[int, str, bytes]:
        ctype, body = files["index.html"]
        return 200, ctype, body

    def state() -> tuple[int, str, bytes]:
        body = view.body()
        if body is None:
            return 503, "application/json", b'{"error": "no session has run yet"}\n'
        return 200, "application/json", body

    out: dict[str, Route] = {"/": page, "/ui": page, "/ui/": page, "/ui/state.json": state}
    for name in ("app.js", "style.css"):
        ctype, body = files[name]
        out[f"/ui/{name}"] = lambda c=ctype, b=body: (200, c, b)
    return out
