"""Quota and usage per queue × resource (OBS-2) and cluster totals (OBS-1), read from a session.

Numbers come from the scheduler's own session state, so they follow exactly the pod-state rules
the scheduler uses (seed ``002``, "额度的资源查询"):

* with a plugin in the config that offers a quota view (``Plugin.quota_view``, the framework's
  ``QuotaView``: ``capacity-card``), its per card model accounting is used as is (quota from
  ``volcano.sh/card.quota`` / ``spec.capability``, used, inqueue, pending), and its rule names
  each job's service type;
* otherwise a fallback read of the session: quota = ``spec.capability`` (plus the
  ``volcano.sh/card.quota`` entries), used = the queue's allocated tasks (Allocated, Binding,
  Bound, Running), inqueue = ``minResources`` of Inqueue PodGroups (Volcano's proportion
  plugin), pending = requests of Pending tasks.

Values are in natural units: cores, bytes, cards. This module only reads; it decides nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Mapping

from tidesched.model.cards import MILLI, CardCatalog
from tidesched.model.quantity import QuantityError, parse_quantity
from tidesched.model.resource import CPU, MEMORY, PODS, Resource
from tidesched.model.status import PodGroupPhase, TaskStatus
from tidesched.model.vgpu import node_card_scalars

if TYPE_CHECKING:
    from tidesched.framework.plugin import QuotaView
    from tidesched.framework.session import Session

CARD_QUOTA_ANNOTATION = "volcano.sh/card.quota"
SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
FIELDS = ("quota", "used", "inqueue", "pending")


@dataclass
class Usage:
    quota: float | None = None  # None: no limit set
    used: float = 0.0
    inqueue: float = 0.0
    pending: float = 0.0


@dataclass
class QuotaReport:
    source: str  # "capacity-card" | "queue-spec"
    queues: dict[str, dict[str, Usage]] = field(default_factory=dict)
    cluster: dict[str, float] = field(default_factory=dict)  # allocatable totals of Ready nodes
    services: dict[str, dict[str, float]] = field(default_factory=dict)  # service type -> allocated

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "queues": {
                q: {r: asdict(u) for r, u in sorted(res.items())} for q, res in sorted(self.queues.items())
            },
            "cluster": dict(sorted(self.cluster.items())),
            "services": {s: dict(sorted(r.items())) for s, r in sorted(self.services.items())},
        }

    def card_allocated(self) -> dict[str, dict[str, str]]:
        """Per queue, the used count of each card model (written to Queue status.allocated)."""
        if self.source != "capacity-card":
            return {}
        return {
            q: {r: _fmt(u.used) for r, u in res.items() if r not in (CPU, MEMORY, PODS)}
            for q, res in self.queues.items()
        }


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def natural(name: str, internal: float) -> float:
    """Internal unit → natural unit: cpu millicores → cores, scalars milli → units."""
    if name in (MEMORY, PODS):
        return float(internal)
    return float(internal) / 1000.0


def resource_natural(r: Resource) -> dict[str, float]:
    out = {CPU: natural(CPU, r.milli_cpu), MEMORY: float(r.memory)}
    for name, v in r.scalars.items():
        out[name] = natural(name, v)
    return out


def _number(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, (int, float, Decimal)):
        return float(v)
    try:
        return float(parse_quantity(str(v)))
    except (QuantityError, ValueError):
        return None


def _rows(usage: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, Usage]]:
    """A quota view's ``queue_usage()`` as report rows (its ``allocated`` is the ``used``)."""
    return {
        str(queue): {
            str(res): Usage(_number(v["quota"]), _number(v["allocated"]) or 0.0,
                            _number(v["inqueue"]) or 0.0, _number(v["pending"]) or 0.0)
            for res, v in per_res.items()
        }
        for queue, per_res in usage.items()
    }


def _card_quota(annotations: Mapping[str, str]) -> dict[str, float]:
    try:
        raw = json.loads(annotations.get(CARD_QUOTA_ANNOTATION) or "{}")
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in raw.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }


def _fallback(ssn: Session) -> dict[str, dict[str, Usage]]:
    rows: dict[str, dict[str, Usage]] = {}
    for name, q in ssn.queues.items():
        row: dict[str, Usage] = {}
        spec = q.queue
        if spec.capability_set:
            for res, v in resource_natural(spec.capability).items():
                row.setdefault(res, Usage()).quota = v
        for card, v in _card_quota(spec.meta.annotations).items():
            row.setdefault(card, Usage()).quota = v
        rows[name] = row
    for job in ssn.jobs.values():
        row = rows.setdefault(job.queue, {})
        for res, v in resource_natural(job.allocated).items():
            row.setdefault(res, Usage()).used += v
        if job.phase == PodGroupPhase.INQUEUE and job.min_resources is not None:
            for res, v in resource_natural(job.min_resources).items():
                row.setdefault(res, Usage()).inqueue += v
        pending = Resource()
        for t in job.tasks.values():
            if t.status == TaskStatus.PENDING:
                pending.add(t.resreq)
        for res, v in resource_natural(pending).items():
            if v:
                row.setdefault(res, Usage()).pending += v
    return rows


def card_totals(ssn: Session) -> dict[str, float]:
    """Cards per model on the session's nodes (Ready ones), in cards."""
    catalog = CardCatalog.build((n.name, n.meta.labels, node_card_scalars(n)) for n in ssn.table.nodes)
    out: dict[str, float] = {}
    for nc in catalog.nodes.values():
        for slot in nc.slots:
            out[slot.model] = out.get(slot.model, 0.0) + slot.count / MILLI
    return dict(sorted(out.items()))


def _service_totals(ssn: Session, view: QuotaView | None) -> dict[str, dict[str, float]]:
    """Allocated per service type (online = inference, offline = training): cpu, memory and
    scalar resources, plus cards by model. With a quota view (capacity-card) its own rule names
    the type (PodGroup annotation, else the owner kind mapped by
    ``podOwnerReferenceToServiceType``); without one the PodGroup annotation alone."""
    out: dict[str, dict[str, float]] = {}
    mark = len(ssn.events)
    try:
        for _uid, job in sorted(ssn.jobs.items()):
            if view is not None:
                stype = str(view.job_service_type(job))
            else:
                stype = job.pod_group.meta.annotations.get(SERVICE_TYPE_ANNOTATION) or "unknown"
            agg = out.setdefault(stype, {})
            for res, v in resource_natural(job.allocated).items():
                agg[res] = agg.get(res, 0.0) + v
            if view is not None:
                for model, milli in view.job_card_usage(job).items():
                    agg[model] = agg.get(model, 0.0) + milli / MILLI
    finally:
        del ssn.events[mark:]  # a report only reads: warnings belong to the session that saw them
    return out


def quota_view(ssn: Session) -> tuple[str, QuotaView] | None:
    """The first plugin of the session's config (tier order) that offers a quota view, with its
    name; None when none does."""
    for name, plugin in ssn.plugins.items():
        view = plugin.quota_view()
        if view is not None:
            return name, view
    return None


def queue_report(ssn: Session) -> QuotaReport:
    """Only the per queue × resource rows of ``report`` (no cluster totals, no service types,
    so no plugin warnings): what ``explain`` reads for a PodGroup's queue before the session's
    actions."""
    found = quota_view(ssn)
    if found is not None:
        return QuotaReport(found[0], _rows(found[1].queue_usage()))
    return QuotaReport("queue-spec", _fallback(ssn))


def report(ssn: Session) -> QuotaReport:
    """The quota/usage report of a closed session. ``tidesched quota`` closes a session without
    running actions (the cluster as it is); ``run`` reports after its actions (as the cluster
    will be once the session's binds land)."""
    rep = queue_report(ssn)
    rep.cluster = {k: v for k, v in resource_natural(ssn.total_resource).items()}
    # Per card model (OBS-1): the models of the session's (Ready) nodes, named from their labels
    # as capacity-card names them, beside the generic resource names.
    for model, cards in card_totals(ssn).items():
        rep.cluster.setdefault(model, cards)
    found = quota_view(ssn)
    rep.services = _service_totals(ssn, None if found is None else found[1])
    return rep
