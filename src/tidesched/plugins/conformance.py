"""conformance plugin (Volcano plugins/conformance).

Preemptable / Reclaimable / UnifiedEvictable: never evict pods in ``kube-system`` or with the
``system-cluster-critical`` / ``system-node-critical`` priority classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import PERMIT, Plugin

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(_evictor: "TaskInfo", evictees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
    victims = [
        t for t in evictees if t.pod.priority_class not in CRITICAL_CLASSES and t.namespace != "kube-system"
    ]
    return victims, PERMIT


class ConformancePlugin(Plugin):
    name = "conformance"

    def on_session_open(self, ssn: "Session") -> None:
        ssn.add_fn("preemptable", self.name, evictable)
        ssn.add_fn("reclaimable", self.name, evictable)
        ssn.add_fn("unified_evictable", self.name, evictable)
