"""The two Queues every Volcano v1.15 cluster has, made by ``tidesched run`` as vc-scheduler makes
them: ``root`` (the top of the queue tree: ``reclaimable: false``, weight 1) and ``default`` (the
queue of PodGroups and bare pods that name none: ``reclaimable: true``, weight 1).

Who does what in Volcano v1.15.1: the scheduler creates both when absent, at its start
(``pkg/scheduler/cache/cache.go``, ``newDefaultAndRootQueue``); the queue controller in
vc-controller-manager then sets ``spec.parent: root`` on every other queue that names no parent
and keeps the tree's open/closed states in step; the admission webhook refuses to delete ``root``.
So a cluster whose scheduler is tidesched needs tidesched to make them: without ``root`` the
capacity plugin's hierarchy has no top (tidesched then works under an implicit one and says so),
and queue ``status.allocated`` is not rolled up to parents.

They are made once, after the informers' first lists show which are missing, by the leader only
(nothing leaves a standby). A queue that appeared meanwhile (409) is fine; a refusal is logged
with what it needs and the scheduler goes on (REL-1: vc-scheduler exits instead, after a minute
of retries) — the cache's implicit ``default`` queue still serves.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from tidesched.cluster.api import Kube, error_message, is_transient, status_of
from tidesched.cluster.store import QUEUE, RESOURCE_TYPES, VOLCANO_GROUP, VOLCANO_VERSION, ClusterStore
from tidesched.model.objects import DEFAULT_QUEUE

log = logging.getLogger("tidesched.cluster.default_queues")

ROOT_QUEUE = "root"


def queue_body(name: str, reclaimable: bool) -> dict[str, Any]:
    """The Queue vc-scheduler creates: weight 1 and the given reclaimability, nothing else."""
    return {
        "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": reclaimable},
    }


def wanted_queues() -> list[dict[str, Any]]:
    """``root`` first (as vc-scheduler creates it first), then ``default``."""
    return [queue_body(ROOT_QUEUE, False), queue_body(DEFAULT_QUEUE, True)]


def ensure_default_queues(
    kube: Kube,
    store: ClusterStore,
    *,
    attempts: int = 3,
    delay: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Create whichever of ``root`` and ``default`` the store does not hold; the names created."""
    created: list[str] = []
    path = RESOURCE_TYPES[QUEUE].path
    for body in wanted_queues():
        name = body["metadata"]["name"]
        if store.get(QUEUE, name) is not None:
            continue
        for attempt in range(attempts):
            try:
                kube.post(path, body)
                created.append(name)
                log.info("created queue %s (vc-scheduler makes it at start when absent)", name)
                break
            except Exception as exc:  # noqa: BLE001 - classified below, never fatal
                code = status_of(exc)
                if code == 409:
                    break  # made by someone else meanwhile: the goal is reached
                if code == 403:
                    log.error("queue %s is missing and may not be created (RBAC: create on queues.%s): %s",
                              name, VOLCANO_GROUP, error_message(exc))
                    break
                if not is_transient(exc) or attempt == attempts - 1:
                    log.error("queue %s is missing and could not be created: %s", name, error_message(exc))
                    break
                sleep(delay * (2 ** attempt))
    return created
