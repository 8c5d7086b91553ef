"""``explain`` for pods with DRA ResourceClaims: which request of which claim no node could
satisfy, and why, in node counts (issue 35), e.g.::

    Claims: no node can allocate them (17 nodes).
      claim ml/train-0-gpu (template two-big) request gpu: 2 devices of class gpu.nvidia.com
        selector device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0:
        no such device on 12 nodes; 3 nodes have one but not 2; every such device is taken on 2 nodes

For a gang the pending pods' requests are told once per shape (template, request, what the
nodes have), with how many pods ask so. Read from the session's claim ledger after the
session (:mod:`tidesched.model.dra.diagnosis`); this module only words it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.model.dra.diagnosis import (
    ALL_TAKEN,
    FEW_FREE,
    NO_CLASS_DEVICE,
    NO_MATCH,
    TOO_FEW,
    ClaimsDiagnosis,
    RequestDiagnosis,
    diagnose,
)
from tidesched.model.status import TaskStatus

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo


def _nodes(n: int) -> str:
    return f"{n} node{'' if n == 1 else 's'}"


def _have(n: int) -> str:
    return f"{_nodes(n)} {'has' if n == 1 else 'have'}"


def _amount(k: int) -> str:
    return "one" if k == 1 else str(k)


def _wanted(r: RequestDiagnosis) -> str:
    if not r.count:
        return f"all devices of class {r.class_name}"
    return f"{r.count} device{'s' if r.count != 1 else ''} of class {r.class_name}"


def _why(r: RequestDiagnosis) -> str:
    """What the failing nodes have of the request's devices: ``head: population; ...``."""
    parts = []
    for population, have, n in r.populations:
        if population == NO_CLASS_DEVICE:
            parts.append(f"no device of class {r.class_name} on {_nodes(n)}")
        elif population == NO_MATCH:
            parts.append(f"no such device on {_nodes(n)}")
        elif population == TOO_FEW:
            parts.append(f"{_have(n)} {_amount(have)} but not {r.count}")
        elif population == ALL_TAKEN:
            parts.append(f"every such device is taken on {_nodes(n)}")
        elif population == FEW_FREE:
            parts.append(f"{_have(n)} {_amount(have)} free but not {r.count}")
    head = f"selector {' && '.join(r.selectors)}" if r.selectors else f"class {r.class_name}"
    return f"{head}: {'; '.join(parts)}"


def _summary(d: ClaimsDiagnosis) -> str:
    if d.fit:
        return (f"Claims: can be allocated on {d.fit} of {_nodes(d.nodes)}; the pod does not fit there "
                "for the node reasons above." if not d.requests else
                f"Claims: can be allocated on {d.fit} of {_nodes(d.nodes)}; on the others:")
    return f"Claims: no node can allocate them ({_nodes(d.nodes)})."


def _rest(d: ClaimsDiagnosis, indent: str) -> list[str]:
    lines = [f"{indent}{reason}: {_nodes(n)}" for reason, n in d.outside]
    if d.together:
        lines.append(f"{indent}{_have(d.together)} enough devices for each request but not for all of them "
                     "together (constraints, or requests that would share devices)")
    return lines


def pod_claim_lines(ssn: "Session", task: "TaskInfo") -> list[str]:
    """The claims part of ``explain NS/POD`` (nothing for a pod without claims)."""
    ledger = ssn.table.dra
    if not task.pod.claims or ledger is None:
        return []
    d = diagnose(ledger, task)
    if d.problem:
        return [f"Claims: {d.problem}."]
    if not d.requests and not d.outside and not d.together:
        return [_summary(d)] if d.fit < d.nodes else []
    lines = [_summary(d)]
    for r in d.requests:
        made = f" (template {r.template})" if r.template else ""
        lines.append(f"  claim {r.claim}{made} request {r.request}: {_wanted(r)}")
        lines.append(f"    {_why(r)}")
    return lines + _rest(d, "  ")


def group_claim_lines(ssn: "Session", job: "JobInfo") -> list[str]:
    """The claims part of ``explain NS/podgroup/NAME``: the pending pods' requests, each shape
    once with how many pods ask for it."""
    ledger = ssn.table.dra
    if ledger is None:
        return []
    shapes: dict[tuple[str, ...], int] = {}
    problems: dict[str, int] = {}
    for t in sorted(job.tasks.values(), key=lambda t: t.key):
        if t.status != TaskStatus.PENDING or not t.pod.claims:
            continue
        d = diagnose(ledger, t)
        if d.problem:
            problems[d.problem] = problems.get(d.problem, 0) + 1
            continue
        for r in d.requests:
            whose = f"claims from template {r.template}" if r.template else f"claim {r.claim}"
            key = (f"request {r.request} of {whose}", _wanted(r), _why(r))
            shapes[key] = shapes.get(key, 0) + 1
        for line in _rest(d, ""):
            shapes[(line,)] = shapes.get((line,), 0) + 1
    if not shapes and not problems:
        return []
    lines = ["Claims of the pending pods (how many pods ask so):"]
    for text, pods in problems.items():
        lines.append(f"  {text} ({pods} pod{'s' if pods != 1 else ''})")
    for shape, pods in shapes.items():
        count = f"{pods} pod{'s' if pods != 1 else ''}"
        if len(shape) == 1:
            lines.append(f"  {shape[0]} ({count})")
            continue
        lines.append(f"  {shape[0]} ({count}): {shape[1]}")
        lines.append(f"    {shape[2]}")
    return lines
