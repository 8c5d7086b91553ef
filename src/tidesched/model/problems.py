"""Structured problems found while reading objects or running a session.

A problem never stops the scheduler: the object is skipped or treated conservatively and the
problem becomes a Warning event on the object (REL-1).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes-style event the session writes on an object (Pod, PodGroup, Queue, Node)."""

    kind: str
    namespace: str
    name: str
    type: str  # "Normal" | "Warning"
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
        }


class ObjectError(ValueError):
    """A field of one object is malformed; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def warning(kind: str, namespace: str, name: str, reason: str, message: str) -> Event:
    return Event(kind, namespace, name, "Warning", reason, message)
