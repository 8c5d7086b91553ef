"""A scheduling session's nodes as the GPU placement policies read them (``GpuNodes``), kept in
step with the session's node table: built at session open, and brought up to date for the rows
the table's change log names before each scoring, so a placement the session made is seen by
the next pod's scores.

* CPU and memory: the node table's idle (allocatable − used) CPU and memory.
* GPUs: a node's vGPU devices where it registers them (``deviceshare``, ``model/devices.py``):
  each device's free compute in milli-GPU (what pods placed now may take: the larger of its use
  now and once releasing pods are gone), 0 for a device that is unusable or holds as many pods
  as its split count; otherwise its whole cards (``nvidia.com/gpu``), each 1000 free or 0.
  The node's GPU model is its ``nvidia.com/gpu.product`` label.
* The kinds of GPU pods a node holds (GPU Clustering), from the node's tasks.
* A task's request: its CPU and memory, and its vGPU request (devices, compute per device) or
  its whole cards.

Typical pods in a session (FGD): the shapes of the most recent ``window`` pods the session knows
(by creation time; placed or pending), as FGD's workload.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from tidesched.model.devices import CORE, IDLE, NUM
from tidesched.model.gpu_nodes import FULL, GpuNodes, GpuRequest
from tidesched.model.resource import CPU, MEMORY
from tidesched.rules.gpu_frag import PodShape

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import TaskInfo
    from tidesched.model.node_table import NodeTable

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIB = 1024 * 1024


def request_of(task: "TaskInfo") -> GpuRequest:
    res = task.resreq
    cpu, mem = int(res.milli_cpu), int(res.memory // MIB)
    vgpu = task.pod.vgpu
    if vgpu is not None and vgpu.devices:
        return GpuRequest(cpu, mem, vgpu.devices, max(1, min(FULL, vgpu.containers[0].core_milli)))
    cards = int(round(res.scalars.get(GPU_RESOURCE, 0.0) / 1000))
    return GpuRequest(cpu, mem, cards, FULL if cards else 0)


class SessionGpuView:
    """``GpuNodes`` over a session's node table (see the module docstring)."""

    def __init__(self, table: "NodeTable") -> None:
        self.table = table
        col = table.dim_index.get(GPU_RESOURCE)
        self.gpu_col = col
        cards = np.zeros(len(table), dtype=np.int64) if col is None else np.rint(table.allocatable[:, col] / 1000).astype(np.int64)
        devices = table.devices
        self.devices = devices if devices is not None and devices.width else None
        self.vgpu_rows = self.devices.count > 0 if self.devices is not None else np.zeros(len(table), dtype=bool)
        count = np.where(self.vgpu_rows, self.devices.count if self.devices is not None else 0, cards)
        models = [n.meta.labels.get(PRODUCT_LABEL, "") if count[i] else "" for i, n in enumerate(table.nodes)]
        cpu_col, mem_col = table.dim_index[CPU], table.dim_index[MEMORY]
        self.nodes = GpuNodes(table.names, models, table.allocatable[:, cpu_col].astype(np.int64),
                              (table.allocatable[:, mem_col] // MIB).astype(np.int64), count)
        self.seen = 0
        self._load(np.arange(len(table)))

    def _load(self, rows: np.ndarray) -> None:
        t, nodes = self.table, self.nodes
        cpu_col, mem_col = t.dim_index[CPU], t.dim_index[MEMORY]
        nodes.cpu_free[rows] = t.idle[rows, cpu_col].astype(np.int64)
        nodes.mem_free[rows] = (t.idle[rows, mem_col] // MIB).astype(np.int64)
        width = nodes.width
        if self.gpu_col is not None:
            free = np.clip(np.rint(t.idle[rows, self.gpu_col] / 1000).astype(np.int64), 0, None)
            slots = np.arange(width)[None, :]
            nodes.dev_free[rows] = np.where((slots < free[:, None]) & nodes.valid[rows], FULL, 0)
        dt = self.devices
        if dt is not None:
            vrows = rows[self.vgpu_rows[rows]]
            if len(vrows):
                use = dt.state(IDLE, vrows)
                room = dt.usable[vrows] & (use[NUM] < dt.split[vrows])
                free = np.where(room, np.clip(FULL - use[CORE], 0, FULL), 0)
                nodes.dev_free[vrows, : dt.width] = free[:, :width]
        for i in rows.tolist():
            nodes.affinity[i] = 0
            for task in t.tasks[i].values():
                req = request_of(task)
                if 0 <= req.affinity < nodes.affinity.shape[1]:
                    nodes.affinity[i, req.affinity] += 1
        if nodes.typical is not None:
            nodes.refresh(rows)

    def sync(self) -> GpuNodes:
        """The view with every row the table changed since the last call reloaded."""
        log = self.table.change_log
        if self.seen < len(log):
            self._load(np.unique(np.array(log[self.seen:], dtype=np.int64)))
            self.seen = len(log)
        return self.nodes


def recent_shapes(ssn: "Session", window: int) -> list[PodShape]:
    """The request shapes of the ``window`` most recently created pods of the session's jobs."""
    tasks = (t for job in ssn.jobs.values() for t in job.tasks.values())
    newest = heapq.nlargest(window, tasks, key=lambda t: (t.creation, t.uid))
    return [request_of(t).shape() for t in newest]
