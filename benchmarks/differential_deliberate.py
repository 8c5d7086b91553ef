"""Where tidesched decides differently from Volcano v1.15.1 on purpose and no configuration switch
gives Volcano's rule, the replay of that rule for the differential's explainer
(``benchmarks/differential.py``): a mismatch with vc-scheduler v1.15.1 is *deliberate* when
tidesched's own rules, with Volcano's variant of such a part, give vc-scheduler's outcome and the
variant decided otherwise than tidesched's rule did. Differences tidesched makes on purpose
*behind* a switch (gang-safe reclaim: ``enableGangSafeReclaim``; DEC-8 victim order:
``victimOrder``) are not here: the world's configuration chooses Volcano's side of them.

Each entry is listed in docs/fidelity.md ("Deliberately not as Volcano"). ``volcano_switches``
sets, in a v1.15.1 world's configuration, the switches that give Volcano's side where there is one
and no other part of the generator sets it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from tidesched.model.infos import TaskInfo


@dataclass(frozen=True)
class Deliberate:
    key: str
    volcano: str  # Volcano's rule
    tidesched: str  # tidesched's, and why
    reference: str


DELIBERATE = {
    "tier-intersection-refill": Deliberate(
        "tier-intersection-refill",
        "Preemptable/Reclaimable: once a tier's plugins agree on no victim, the next plugin's answer "
        "is taken whole (the empty intersection is Go's nil, read as 'no answer yet'), so a victim "
        "that priority or gang protects is evicted on conformance's word",
        "the intersection stays empty for the rest of the tier and the next tier decides",
        "volcano-sh/volcano#5963 (open), master 7976b63e2",
    ),
}


# allocate's switches for Volcano v1.15.1's side: its predicate error cache by job and task role
# (tidesched's own rule, EXT-4, shares no failure between pods of different templates;
# src/tidesched/framework/predicate_cache.py). Found by seed 3039.
ALLOCATE_SWITCHES = {"predicateErrorCacheByRole": True}


def volcano_switches(conf: dict[str, Any]) -> None:
    """Set Volcano's side of tidesched's switches in a parsed scheduler configuration (in place):
    allocate's, when the configuration allocates. vc-scheduler ignores arguments it does not know."""
    if "allocate" not in [a.strip() for a in str(conf.get("actions", "")).split(",")]:
        return
    configurations = conf.setdefault("configurations", [])
    entry = next((c for c in configurations if c.get("name") == "allocate"), None)
    if entry is None:
        entry = {"name": "allocate", "arguments": {}}
        configurations.append(entry)
    entry.setdefault("arguments", {}).update(ALLOCATE_SWITCHES)


class Seen:
    """The deliberate differences that decided something in a replay, with an example each."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, key: str, example: str) -> None:
        self.seen.setdefault(key, example)


def _victims_refill(seen: Seen) -> Any:
    """Volcano v1.15.1's Preemptable and Reclaimable (``framework/session_plugins.go``)."""
    from tidesched.framework.plugin import ABSTAIN

    def victims_of(self: Any, hook: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for tier in self._chain(hook):
            victims: list[TaskInfo] | None = None
            emptied = refilled = False
            for _name, fn in tier:
                chosen, vote = fn(actor, candidates)
                if vote == ABSTAIN:
                    continue
                if not chosen:
                    victims = None
                    break
                if victims is None:  # Go's nil: no answer yet, or an intersection that came out empty
                    refilled = refilled or emptied
                    victims = list(chosen)
                else:
                    keep = {t.uid for t in chosen}
                    victims = [v for v in victims if v.uid in keep] or None
                    emptied = victims is None
            if victims:
                if refilled:
                    seen("tier-intersection-refill",
                         f"{hook} for {actor.key}: {len(victims)} victim(s) after an empty intersection")
                return victims
        return []

    return victims_of


@contextlib.contextmanager
def volcano_rules(keys: frozenset[str], seen: Seen | None = None) -> Iterator[Seen]:
    """Within the block, tidesched's sessions use Volcano's rule for each of ``keys``."""
    from tidesched.framework.hooks import SessionHooks

    seen = seen if seen is not None else Seen()
    saved = SessionHooks._victims
    try:
        if "tier-intersection-refill" in keys:
            SessionHooks._victims = _victims_refill(seen)  # type: ignore[method-assign]
        yield seen
    finally:
        SessionHooks._victims = saved  # type: ignore[method-assign]
