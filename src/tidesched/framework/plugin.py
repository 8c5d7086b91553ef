"""Plugin base class and the small types hooks exchange (the registry of plugins by config
name is ``scheduler.PLUGINS``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, TaskInfo

# Votes for JobEnqueueable / JobPipelined (Volcano util.Permit / Abstain / Reject).
PERMIT = 1
ABSTAIN = 0
REJECT = -1


class Plugin:
    """A scheduler plugin. Subclasses set ``name`` (the config name) and register hooks on
    the session in ``on_session_open``."""

    name: ClassVar[str] = ""

    def __init__(self, arguments: "Arguments") -> None:
        self.arguments = arguments

    @classmethod
    def validate_arguments(cls, arguments: "Arguments") -> None:
        """Raise ConfigError for a bad argument (CONF-3: at config load, not in a session).
        Plugins read their arguments in ``__init__``, so building one validates them."""
        cls(arguments)

    @classmethod
    def unhonoured(cls, arguments: "Arguments") -> list[str]:
        """What of Volcano's behaviour these arguments ask for that this plugin does not do yet,
        in words for the operator: said when the config is loaded (``tidesched run`` logs it at
        start and on reload; ``schedule``, ``explain`` and ``simulate`` print it)."""
        return []

    def before_session_open(self, ssn: "Session") -> None:
        """Runs for every plugin before any plugin's ``on_session_open``: for decisions other
        plugins must see when they open (the gang timeout takes a timed-out PodGroup out of
        Inqueue before the queue plugins count what admitted jobs hold)."""

    def on_session_open(self, ssn: "Session") -> None:  # pragma: no cover - interface
        pass

    def on_session_close(self, ssn: "Session") -> None:
        pass

    def quota_view(self) -> "QuotaView | None":
        """The plugin's read-only view of the queue quotas it keeps, for the quota report,
        ``explain`` and the web view; None for a plugin that keeps none."""
        return None


class QuotaView(Protocol):
    """What a plugin that keeps queue quotas offers readers (``Plugin.quota_view``; the
    capacity-card plugin does). Reading it changes nothing in the session."""

    def queue_usage(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per queue, per dimension (``cpu`` in cores, ``memory`` in bytes, each card model or
        ``A|B`` group in cards): ``quota``, ``allocated``, ``inqueue`` and ``pending``; after the
        session closed, the state at close."""
        ...

    def job_service_type(self, job: "JobInfo") -> str:
        """``inference``, ``training`` or ``unknown`` (TIDE-1)."""
        ...

    def job_card_usage(self, job: "JobInfo") -> dict[str, float]:
        """The card models the job's placed pods hold, in milli-cards."""
        ...


@dataclass(slots=True)
class NodeFailure:
    """Nodes (a boolean mask over the session's node table) failing for one reason."""

    reason: str
    nodes: np.ndarray
    # Unresolvable failures cannot be fixed by evicting pods (node selector, taints, …);
    # preempt skips those nodes (Volcano UnschedulableAndUnresolvable).
    unresolvable: bool = False


@dataclass(slots=True)
class PredicateResult:
    """A vectorised predicate: which nodes pass, and why the others fail."""

    passed: np.ndarray
    failures: list[NodeFailure] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class RowFn:
    """The row-local form of a plugin's predicate or node_order fn, which the session may use
    instead of calling the fn per task. ``key(task)`` names everything of the task the values
    depend on, or is None when they are not row-local for this task (they read other nodes'
    state, or are normalised over the candidates); ``rows(task, rows)`` gives the values
    (pass mask or score) for the given rows, all rows when None, equal to what the full fn
    gives there, as a fresh array the session may change. Values must depend only on a row's
    state in the node table and on the key: the session keeps them per key and recomputes
    only the rows changed since (DESIGN: every scorer rescores only changed rows)."""

    key: Callable[["TaskInfo"], Any]
    rows: Callable[["TaskInfo", "np.ndarray | None"], np.ndarray]


@dataclass(slots=True)
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


@dataclass(slots=True)
class EventHandler:
    """Allocate/deallocate callbacks fired by every Statement operation (and reverted on
    discard): the one place where plugins keep their accounting."""

    allocate: Callable[["TaskInfo"], None] | None = None
    deallocate: Callable[["TaskInfo"], None] | None = None


# What a gang eviction is for (Volcano api.EvictionKind), told to ``unified_evictable`` fns.
GANG_PREEMPT = "gangpreempt"
GANG_RECLAIM = "gangreclaim"


@dataclass(slots=True, frozen=True)
class EvictionContext:
    """Who asks for victims in a gang-aware eviction (Volcano api.EvictionContext): the kind
    (``GANG_PREEMPT`` or ``GANG_RECLAIM``), the job that needs the room, and the domain (a
    HyperNode name; ``""``: the whole cluster) its victims are looked for in. A
    ``unified_evictable`` fn answers ``(allowed candidates, vote)`` as Preemptable fns do."""

    kind: str
    job: "JobInfo"
    hyper_node: str = ""


CompareFn = Callable[[Any, Any], int]
