"""NUMA topology hints and the topology manager's policies, as Volcano v1.15.1's numa-aware
plugin applies them (``plugins/numaaware/policy``, after the kubelet's topology manager).

A NUMA affinity is a bitmask held in an int (bit i: NUMA node i). A hint is an affinity and
whether it is preferred; a hint provider (the CPU manager, ``rules/cpu_assignment.py``) gives
hints per resource; a policy merges them into the best hint and says whether the container is
admitted:

* ``none`` admits everything (and gives no hint);
* ``best-effort`` admits everything, with the best merged hint;
* ``restricted`` admits only when the best merged hint is preferred;
* ``single-numa-node`` keeps only single-node (or "any") preferred hints first, then admits as
  ``restricted`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, product

NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = "none", "best-effort", "restricted", "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)


def mask_of(*nodes: int) -> int:
    out = 0
    for n in nodes:
        out |= 1 << n
    return out


def bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def narrower(a: int, b: int) -> bool:
    """The kubelet's IsNarrowerThan: fewer nodes, or as many with lower-numbered ones."""
    ca, cb = a.bit_count(), b.bit_count()
    return a < b if ca == cb else ca < cb


@dataclass(frozen=True, slots=True)
class Hint:
    affinity: int | None  # None: no preference (any NUMA node)
    preferred: bool


def iterate_masks(nodes: Sequence[int]) -> Iterator[int]:
    """Every non-empty subset of ``nodes``, smallest first (bitmask.IterateBitMasks)."""
    for size in range(1, len(nodes) + 1):
        for combo in combinations(nodes, size):
            yield mask_of(*combo)


def _filter_provider_hints(providers: Sequence[Mapping[str, list[Hint] | None] | None]) -> list[list[Hint]]:
    out: list[list[Hint]] = []
    for hints in providers:
        if not hints:
            out.append([Hint(None, True)])  # the provider has no preference at all
            continue
        for resource in sorted(hints):
            per = hints[resource]
            if per is None:
                out.append([Hint(None, True)])  # no preference for this resource
            elif not per:
                out.append([Hint(None, False)])  # no possible affinity for this resource
            else:
                out.append(list(per))
    return out


def _merge(numa_nodes: Sequence[int], filtered: list[list[Hint]]) -> Hint:
    default = mask_of(*numa_nodes)
    best = Hint(default, False)
    for permutation in product(*filtered):
        affinity, preferred = default, True
        for h in permutation:
            affinity &= default if h.affinity is None else h.affinity
            preferred = preferred and h.preferred
        if affinity == 0:
            continue
        if preferred and not best.preferred:
            best = Hint(affinity, preferred)
            continue
        if not preferred and best.preferred:
            continue
        assert best.affinity is not None
        if narrower(affinity, best.affinity):
            best = Hint(affinity, preferred)
    return best


def policy_predicate(policy: str, numa_nodes: Sequence[int],
                     providers: Sequence[Mapping[str, list[Hint] | None] | None]) -> tuple[Hint, bool]:
    """The best hint and whether the container is admitted, under the node's topology manager
    ``policy`` (an unknown one acts as ``none``, as in Volcano's GetPolicy)."""
    if policy not in (BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE):
        return Hint(None, False), True
    filtered = _filter_provider_hints(providers)
    if policy == SINGLE_NUMA_NODE:
        filtered = [
            [h for h in per if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
            for per in filtered
        ]
    best = _merge(numa_nodes, filtered)
    return best, policy == BEST_EFFORT or best.preferred
