"""binpack plugin (Volcano plugins/binpack): prefer nodes that the task fills up most.

Arguments: ``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1),
``binpack.resources`` (comma-separated extra resource names) and
``binpack.resources.<name>`` (1 each). Negative cpu, memory or resource weights become 1.

Hook registered (only when ``binpack.weight`` ≠ 0):

- ``node_order``: for each candidate node, over the resources the task requests that have a
  weight::

      score = binpack.weight · 100 · Σ w_r · (used_r + request_r) / allocatable_r  /  Σ w_r

  A resource the node does not have (allocatable 0) or with weight 0 adds 0 to the sum but
  its weight still counts in the divisor. If the task would push any weighted resource
  above the node's allocatable, the node scores 0 altogether. ``used`` is what the node
  has charged now (running, bound, allocated and releasing pods, not pipelined ones), so a
  task already placed on the node counts itself. Computed for every node once per request
  shape and session, then only for the rows that changed since (``NodeTable.row_cached``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tidesched.framework.plugin import Plugin, RowFn
from tidesched.model.resource import CPU, MEMORY

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo

WEIGHT_KEY = "binpack.weight"
CPU_KEY = "binpack.cpu"
MEMORY_KEY = "binpack.memory"
RESOURCES_KEY = "binpack.resources"
RESOURCE_PREFIX = RESOURCES_KEY + "."

MAX_NODE_SCORE = 100  # kube-scheduler framework.MaxNodeScore


def parse_weights(arguments: "Arguments") -> tuple[int, dict[str, int]]:
    """(plugin weight, per-resource weights including cpu and memory)."""
    weight = arguments.get_int(WEIGHT_KEY, 1)
    cpu = arguments.get_int(CPU_KEY, 1)
    if cpu < 0:
        cpu = 1
    memory = arguments.get_int(MEMORY_KEY, 1)
    if memory < 0:
        memory = 1
    resources: dict[str, int] = {}
    for raw in arguments.get_str(RESOURCES_KEY, "").split(","):
        name = raw.strip()
        if not name:
            continue
        w = arguments.get_int(RESOURCE_PREFIX + name, 1)
        resources[name] = w if w >= 0 else 1
    # cpu and memory always take binpack.cpu / binpack.memory, even if listed as resources.
    resources[CPU] = cpu
    resources[MEMORY] = memory
    return weight, resources


class BinpackPlugin(Plugin):
    name = "binpack"

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.weight, self.resource_weights = parse_weights(arguments)

    def on_session_open(self, ssn: "Session") -> None:
        if self.weight == 0:
            return  # upstream: a zero weight registers no scorer
        table = ssn.table
        # Per request shape: the weighted columns of the node table, their weights, and the
        # weight sum (resources the table lacks are scored as allocatable 0).
        shapes: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray, np.ndarray, float]] = {}
        scale = float(MAX_NODE_SCORE * self.weight)

        def shape_of(task: "TaskInfo") -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
            names = tuple(n for n in task.resreq.resource_names() if n in self.resource_weights)
            got = shapes.get(names)
            if got is None:
                cols = [table.dim_index.get(n, -1) for n in names]
                present = np.array([c >= 0 for c in cols], dtype=bool)
                col_idx = np.array([c for c in cols if c >= 0], dtype=np.int64)
                weights = np.array([self.resource_weights[n] for n in names], dtype=float)
                got = (col_idx, present, weights, float(weights.sum()))
                shapes[names] = got
            return got

        computes: dict[object, tuple[object, Any]] = {}

        def shape_compute(task: "TaskInfo") -> tuple[object, Any]:
            """The request's cache key, and its scores for given rows (all when None); made
            once per request (gang members and replicas share it)."""
            assert task.req_vec is not None
            memo_key = (task.req_vec.tobytes(), tuple(task.resreq.scalars.items()))
            got = computes.get(memo_key)
            if got is None:
                got = computes[memo_key] = make_compute(task)
            return got

        def make_compute(task: "TaskInfo") -> tuple[object, Any]:
            col_idx, present, weights, weight_sum = shape_of(task)
            assert task.req_vec is not None
            w = weights[present]
            req = task.req_vec[col_idx]
            cols, w_list, req_list = col_idx.tolist(), w.tolist(), req.tolist()

            def compute_rows(rows: np.ndarray) -> np.ndarray:
                """``compute`` for a few rows in plain floats (numpy's per-call overhead
                would dominate one row); same arithmetic in the same order."""
                out = np.zeros(len(rows))
                for k, i in enumerate(rows.tolist()):
                    alloc_row = table.allocatable[i].tolist()
                    used_row = table.used[i].tolist()
                    total, over = 0.0, False
                    for c, wc, r in zip(cols, w_list, req_list):
                        a = alloc_row[c]
                        if a != 0 and wc != 0:
                            final = used_row[c] + r
                            total += final * wc / a
                            over = over or final > a
                    if over:
                        continue
                    if weight_sum > 0:
                        total /= weight_sum
                    out[k] = total * scale
                return out

            def compute(rows: np.ndarray | None) -> np.ndarray:
                if not len(col_idx):
                    return np.zeros(len(table) if rows is None else len(rows))
                if rows is not None and len(rows) <= 8:
                    return compute_rows(rows)
                sel = slice(None) if rows is None else rows
                alloc = table.allocatable[sel][:, col_idx]
                final = table.used[sel][:, col_idx] + req
                scored = (alloc != 0) & (w != 0)
                safe = np.where(scored, alloc, 1.0)
                out = np.where(scored, final * w / safe, 0.0).sum(axis=1)
                if weight_sum > 0:
                    out /= weight_sum
                out *= scale
                # A weighted resource the node cannot hold disqualifies the node entirely.
                out[(scored & (final > alloc)).any(axis=1)] = 0.0
                return out

            # Everything the scores depend on besides the row: the key holds across sessions.
            return ("binpack", scale, weight_sum, w.tobytes(), col_idx.tobytes(), req.tobytes()), compute

        def score(task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
            # Every node's score for this request, kept per request and updated only for the
            # rows that changed since (as nodeorder does): gang members and replicas share it.
            key, compute = shape_compute(task)
            return table.row_cached(key, compute)[idx]

        ssn.add_fn("node_order", self.name, score)
        # Row-local for every task: the session may keep the sum of all scorers instead.
        ssn.add_row_fn("node_order", self.name, RowFn(lambda task: shape_compute(task)[0], lambda task, rows: shape_compute(task)[1](rows)))
