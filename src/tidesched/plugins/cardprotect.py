"""cardprotect plugin (EXT-2, seed 003 §4.3): rare cards are kept for the pods that ask for them.

Argument ``protectedModels``: card model names as capacity-card names them (``NVIDIA-H200``,
``NVIDIA-H200/mig-3g.71gb-mixed``, …), or ``["*"]`` for every card model. A node *carries* a
model when card discovery (``model/cards.py``) finds it there (whole cards, MIG or MPS
slices). A node that carries protected models is reserved for pods that ask for one of them:

* ``volcano.sh/card.name`` naming the model, or an ``A|B`` list containing it (hard wish);
* a required node affinity — ``nodeSelector`` or a ``requiredDuringScheduling…`` term with
  operator ``In`` — on the card product label (``nvidia.com/gpu.product`` or another vendor's
  ``<domain>/<type>.product``) whose values include the model's product (hard wish).

Every other pod — no card, another model, or a card resource without a model name — fails
the predicate on such a node with ``node reserved for card model <M>`` (unresolvable: evicting
pods cannot change it). Preferred node affinity on the product label is a *soft* wish: it
does not exempt a pod here, and nodeorder's node-affinity score ranks the nodes it prefers.

Vectorised as the predicates plugin: the nodes' protected models are found once per node set
(``NodeTable.shared``), nodes with the same protected models share a group code, and the
result per pod template (its card name and node selection) is cached for the node set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.plugin import NodeFailure, Plugin, PredicateResult
from tidesched.model.cards import (
    ALTERNATIVE_SEPARATOR,
    CARD_NAME_ANNOTATION,
    discover_node_cards,
    is_product_label,
    model_product,
    split_card_names,
)
from tidesched.model.vgpu import node_card_scalars
from tidesched.plugins.predicates import template_key

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable

ALL_MODELS = "*"


def reserved_reason(model: str) -> str:
    return f"node reserved for card model {model}"


class _Groups:
    """Nodes grouped by the protected models they carry (code -1: none)."""

    def __init__(self, codes: np.ndarray, groups: list[tuple[str, ...]]) -> None:
        self.codes = codes
        self.groups = groups


def _node_groups(table: "NodeTable", protect_all: bool, protected: frozenset[str]) -> _Groups:
    index: dict[tuple[str, ...], int] = {}
    codes = np.full(len(table), -1, dtype=np.int64)
    for row, node in enumerate(table.nodes):
        found = discover_node_cards(node.name, node.meta.labels, node_card_scalars(node))
        models = tuple(m for m in found.models if protect_all or m in protected)
        if models:
            codes[row] = index.setdefault(models, len(index))
    return _Groups(codes, list(index))


def wished_products(spec: Mapping[str, Any]) -> set[str]:
    """Products a pod requires through ``nodeSelector`` or required node affinity (``In``)
    on a card product label. Malformed parts are skipped (predicates reports them)."""
    out: set[str] = set()
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping):
        out.update(str(v) for k, v in selector.items() if is_product_label(str(k)))
    affinity = spec.get("affinity")
    node_aff = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node_aff, Mapping) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for term in terms if isinstance(terms, list) else []:
        exprs = term.get("matchExpressions") if isinstance(term, Mapping) else None
        for e in exprs if isinstance(exprs, list) else []:
            if (
                isinstance(e, Mapping)
                and is_product_label(str(e.get("key", "")))
                and e.get("operator") == "In"
                and isinstance(e.get("values"), list)
            ):
                out.update(str(v) for v in e["values"])
    return out


class CardProtectPlugin(Plugin):
    name = "cardprotect"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        models = arguments.get_str_list("protectedModels")
        if not models:
            raise arguments.bad_value("protectedModels", 'a non-empty list of card model names, or ["*"]', models)
        self.protect_all = ALL_MODELS in models
        if self.protect_all and len(models) > 1:
            raise arguments.bad_value("protectedModels", '["*"] alone, or card model names', models)
        for m in models:
            if m == ALL_MODELS:
                continue
            names, problem = split_card_names(m)
            if problem or len(names) != 1 or ALTERNATIVE_SEPARATOR in m:
                raise arguments.bad_value("protectedModels", "card model names (one per entry, no A|B lists)", m)
        self.protected = frozenset(m.strip() for m in models if m != ALL_MODELS)

    def on_session_open(self, ssn: "Session") -> None:
        table = ssn.table
        key = ("cardprotect", self.protect_all, self.protected)
        self.groups: _Groups = table.memo(key, lambda: _node_groups(table, self.protect_all, self.protected))
        if not self.groups.groups:
            return  # no node carries a protected model: nothing to filter
        self._results: dict[tuple[str, str], PredicateResult] = table.memo(key + ("results",), dict)
        ssn.add_fn("predicate", self.name, self.predicate)

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        card_name = str(task.pod.meta.annotations.get(CARD_NAME_ANNOTATION) or "")
        cache_key = (card_name, template_key(task))
        cached = self._results.get(cache_key)
        if cached is None:
            cached = self._results[cache_key] = self._evaluate(task, card_name)
        return cached

    def _evaluate(self, task: "TaskInfo", card_name: str) -> PredicateResult:
        names = set(split_card_names(card_name)[0]) if card_name else set()
        products = wished_products(task.pod.raw_spec)
        groups, codes = self.groups.groups, self.groups.codes
        served = np.array([any(m in names or model_product(m) in products for m in g) for g in groups], dtype=bool)
        # Unprotected nodes (code -1) pass: index -1 reads the appended True.
        passed = np.append(served, True)[codes]
        passed.flags.writeable = False
        failures: list[NodeFailure] = []
        by_reason: dict[str, np.ndarray] = {}
        for code, group in enumerate(groups):
            if served[code]:
                continue
            reason = reserved_reason(group[0])
            mask = codes == code
            by_reason[reason] = by_reason[reason] | mask if reason in by_reason else mask
        for reason, mask in by_reason.items():
            mask.flags.writeable = False
            failures.append(NodeFailure(reason, mask, True))
        return PredicateResult(passed, failures)
