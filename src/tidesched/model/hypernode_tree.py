"""The HyperNode tree over the nodes: parents, children, tiers, the nodes under each HyperNode,
and the virtual cluster top (Volcano's ``HyperNodesInfo`` and ``addClusterTopHyperNode``).

:class:`HyperNodeIndex` is fed HyperNode records and nodes one change at a time (the cluster
cache does, and ``build_tree`` for a one-shot snapshot) and keeps each HyperNode's node
members resolved: a node change re-tests only that node against the regex and label members,
a HyperNode change resolves only that HyperNode. :meth:`HyperNodeIndex.tree` then links the
structure (cheap: a pass over the HyperNodes) when something changed since the last tree.

Bad input never stops it (REL-1); each problem becomes a Warning on the HyperNode:

* a HyperNode member named by two HyperNodes keeps its first parent (by name), and a cycle is
  cut where it closes; as in Volcano, either makes the tree *not ready*: jobs with a
  network-topology constraint wait until it is fixed (jobs without one are not held);
* a member HyperNode that does not exist, and a HyperNode member selected otherwise than by
  ``exactMatch``, are ignored (Volcano's scheduler ignores both);
* a regex or label selector that does not compile selects no node;
* a node in two HyperNodes of the lowest tier counts, for "which leaf is this node in", in
  the first by name (Volcano picks one at random).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tidesched.model.hypernodes import KIND, HyperNode
from tidesched.model.problems import Event, warning
from tidesched.rules.hypernode_match import EXACT

# Volcano's name for the virtual HyperNode above every root: its tier is one above the highest.
CLUSTER_TOP = "<cluster-top-hypernode>"


@dataclass(slots=True)
class HyperNodeInfo:
    name: str
    tier: int
    tier_name: str
    parent: str = ""  # CLUSTER_TOP for a root; "" only for the top itself
    children: tuple[str, ...] = ()  # in name order
    nodes: frozenset[str] = frozenset()  # every node under it (its members and its descendants')


@dataclass(slots=True)
class HyperNodeTree:
    """One state of the tree. ``infos`` holds the real HyperNodes and ``CLUSTER_TOP`` (whose
    nodes are every node the tree was built over); ``tiers`` the tiers in ascending order, the
    top's included, as Volcano's ``HyperNodesTiers``."""

    infos: dict[str, HyperNodeInfo]
    tiers: list[int]
    tier_names: dict[str, int]
    ready: bool
    problems: list[Event]
    leaf_of: dict[str, str]  # node -> its HyperNode of the lowest tier (FindHyperNodeForNode)
    _ancestors: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def top(self) -> HyperNodeInfo:
        return self.infos[CLUSTER_TOP]

    @property
    def has_hypernodes(self) -> bool:
        return len(self.infos) > 1

    def by_tier(self, tier: int) -> list[str]:
        return [n for n, i in self.infos.items() if i.tier == tier]

    def ancestors(self, name: str) -> tuple[str, ...]:
        """``name`` and every HyperNode above it, lowest first (Volcano GetAncestors)."""
        hit = self._ancestors.get(name)
        if hit is None:
            chain = [name]
            info = self.infos.get(name)
            while info is not None and info.parent:
                chain.append(info.parent)
                info = self.infos.get(info.parent)
            hit = self._ancestors[name] = tuple(chain)
        return hit

    def lca(self, a: str, b: str) -> str:
        """The lowest HyperNode holding both (Volcano GetLCAHyperNode: "" counts as absent)."""
        if not a:
            return b
        if not b or a == b:
            return a
        mine = set(self.ancestors(a))
        for name in self.ancestors(b):
            if name in mine:
                return name
        return ""

    def tier_of(self, name: str) -> int:
        info = self.infos.get(name)
        return info.tier if info is not None else 0


class HyperNodeIndex:
    """HyperNode records and node labels, kept resolved per change (see the module doc)."""

    def __init__(self) -> None:
        self.records: dict[str, HyperNode] = {}
        self._labels: dict[str, Mapping[str, str]] = {}  # node -> labels
        self._members: dict[str, set[str]] = {}  # HyperNode -> nodes its Node members select
        self._scanning: set[str] = set()  # HyperNodes with regex or label members
        self._tree: HyperNodeTree | None = None
        self._nodes_key: frozenset[str] | None = None

    # -- feeding --------------------------------------------------------------------------

    def set_hypernode(self, name: str, record: HyperNode | None) -> None:
        if record is None:
            if self.records.pop(name, None) is None:
                return
            self._members.pop(name, None)
            self._scanning.discard(name)
        else:
            if self.records.get(name) == record:
                return
            self.records[name] = record
            self._members[name] = self._resolve(record)
            if any(m.selector.how != EXACT for m in record.node_members):
                self._scanning.add(name)
            else:
                self._scanning.discard(name)
        self._tree = None

    def set_node(self, name: str, labels: Mapping[str, str] | None) -> None:
        """A node as it now is (None: gone). Only HyperNodes selecting by regex or label are
        tested again; exact members name nodes whether they exist or not."""
        old = self._labels.get(name)
        if labels is None:
            if name not in self._labels:
                return
            del self._labels[name]
        else:
            if old is not None and old == labels:
                return
            self._labels[name] = labels
        for hn in self._scanning:
            record = self.records[hn]
            hit = labels is not None and any(
                m.selector.how != EXACT and m.selector.matches(name, labels) for m in record.node_members
            )
            exact = any(m.selector.how == EXACT and m.selector.text == name for m in record.node_members)
            members = self._members[hn]
            if hit or exact:
                if name not in members:
                    members.add(name)
                    self._tree = None
            elif name in members:
                members.discard(name)
                self._tree = None
        if (old is None) != (labels is None):
            self._tree = None  # the top's nodes changed

    def _resolve(self, record: HyperNode) -> set[str]:
        out: set[str] = set()
        for m in record.node_members:
            sel = m.selector
            if sel.how == EXACT:
                out.add(sel.text)
            elif not sel.error:
                out.update(n for n, labels in self._labels.items() if sel.matches(n, labels))
        return out

    # -- reading --------------------------------------------------------------------------

    def tree(self, nodes: Iterable[str] | None = None) -> HyperNodeTree:
        """The tree over ``nodes`` (default: every node fed): node sets hold only these."""
        names = frozenset(self._labels if nodes is None else nodes)
        if self._tree is None or names != self._nodes_key:
            self._tree = _link(self.records, self._members, names)
            self._nodes_key = names
        return self._tree


def _problem(name: str, reason: str, message: str) -> Event:
    return warning(KIND, "", name, reason, f"HyperNode {name}: {message}")


def _link(records: Mapping[str, HyperNode], members: Mapping[str, set[str]], nodes: frozenset[str]) -> HyperNodeTree:
    problems: list[Event] = []
    ready = True
    names = sorted(records)
    parent: dict[str, str] = {}
    for name in names:
        record = records[name]
        for m in record.members:
            if m.selector.error:
                problems.append(_problem(name, "InvalidHyperNodeMember", f"{m.selector.error}; the member selects no node"))
        for m in record.hypernode_members:
            if m.selector.how != EXACT:
                problems.append(_problem(
                    name, "InvalidHyperNodeMember",
                    f"{m.where}: a HyperNode member is selected by exactMatch only; this one is ignored",
                ))
                continue
            child = m.selector.text
            if child not in records:
                problems.append(_problem(name, "HyperNodeMemberNotFound", f"{m.where}: member HyperNode {child} does not exist; ignored until it does"))
                continue
            if child in parent and parent[child] != name:
                ready = False
                problems.append(_problem(
                    name, "HyperNodeConflict",
                    f"{m.where}: HyperNode {child} already belongs to {parent[child]}; a HyperNode has one parent "
                    "(jobs with a network topology wait until this is fixed)",
                ))
                continue
            parent[child] = name
    # Cut cycles where they close (walking up from each HyperNode in name order).
    done: set[str] = set()
    for name in names:
        path: list[str] = []
        on_path: set[str] = set()
        cur = name
        while cur and cur not in done:
            if cur in on_path:
                ready = False
                cycle = path[path.index(cur):]
                problems.append(_problem(
                    cur, "HyperNodeCycle",
                    f"its members form a cycle ({' -> '.join([*cycle, cur])}); the link from {cur} to "
                    f"{parent[cur]} is ignored (jobs with a network topology wait until this is fixed)",
                ))
                del parent[cur]
                break
            path.append(cur)
            on_path.add(cur)
            cur = parent.get(cur, "")
        done.update(path)

    children: dict[str, list[str]] = {n: [] for n in names}
    for child in names:
        if child in parent:
            children[parent[child]].append(child)
    under: dict[str, frozenset[str]] = {}

    def nodes_of(name: str) -> frozenset[str]:
        # Iterative post-order: trees may be deep and the recursion limit is not ours to spend.
        stack = [(name, False)]
        while stack:
            cur, expanded = stack.pop()
            if cur in under:
                continue
            if not expanded:
                stack.append((cur, True))
                stack.extend((c, False) for c in children[cur] if c not in under)
                continue
            acc = set(members.get(cur, ())) & nodes
            for c in children[cur]:
                acc |= under[c]
            under[cur] = frozenset(acc)
        return under[name]

    infos: dict[str, HyperNodeInfo] = {}
    tier_names: dict[str, int] = {}
    for name in names:
        record = records[name]
        infos[name] = HyperNodeInfo(
            name=name,
            tier=record.tier,
            tier_name=record.tier_name,
            parent=parent.get(name, CLUSTER_TOP),
            children=tuple(children[name]),
            nodes=nodes_of(name),
        )
        if record.tier_name:
            tier_names[record.tier_name] = record.tier  # Volcano: the last one read wins
    top_tier = max((i.tier for i in infos.values()), default=0) + 1
    roots = tuple(n for n in names if n not in parent)
    infos[CLUSTER_TOP] = HyperNodeInfo(CLUSTER_TOP, max(top_tier, 1), "", "", roots, nodes)
    tiers = sorted({i.tier for i in infos.values()})
    leaf_of: dict[str, str] = {}
    lowest = tiers[0]
    for name, info in infos.items():
        if info.tier != lowest:
            continue
        for node in sorted(info.nodes):
            first = leaf_of.setdefault(node, name)
            if first != name and name != CLUSTER_TOP:
                problems.append(_problem(
                    name, "HyperNodeOverlap",
                    f"node {node} is also in {first} (tier {lowest}); it counts as in {first}",
                ))
    return HyperNodeTree(infos, tiers, tier_names, ready, problems, leaf_of)


def build_tree(
    hypernodes: Iterable[HyperNode], nodes: Iterable[tuple[str, Mapping[str, str]]], over: Iterable[str] | None = None
) -> HyperNodeTree:
    """The tree of a one-shot snapshot: ``nodes`` as (name, labels); node sets hold only the
    nodes in ``over`` (the node table's: ready nodes), every node when None."""
    index = HyperNodeIndex()
    for name, labels in nodes:
        index.set_node(name, labels)
    for hn in hypernodes:
        index.set_hypernode(hn.name, hn)
    return index.tree(over)
