"""The FGD experiment protocol (sim/experiment): tuning and shuffling the pod list, the
placement loop with the policies' own scoring, the figures by arrived per cent."""

from __future__ import annotations

import numpy as np
import pytest

from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.sim.experiment.placement import place_all
from tidesched.sim.experiment.policies import bundled, parse, placement_plugins
from tidesched.sim.experiment.results import by_arrival, figures
from tidesched.sim.experiment.workload import arrival_order

SHARE = GpuRequest(2000, 1000, 1, 500)
WHOLE = GpuRequest(4000, 1000, 1, 1000)
CPU = GpuRequest(8000, 1000, 0, 0)


def plugins(name: str):
    return placement_plugins(parse(bundled(name)))


def test_tuning_up_appends_copies_after_the_shuffled_list_until_the_target() -> None:
    reqs = tuple([SHARE] * 10 + [WHOLE] * 10 + [CPU] * 5)  # 15,000 milli-GPU asked
    order = arrival_order(reqs, capacity_milli=20_000, inflate=1.3, seed=7)
    assert sorted(order[:25]) == list(range(25))  # every pod once, shuffled, first
    assert order[:25] != list(range(25))
    demand = sum(reqs[k].total_milli for k in order)
    assert 26_000 - 1000 < demand <= 26_000
    assert order == arrival_order(reqs, 20_000, 1.3, 7)
    assert order != arrival_order(reqs, 20_000, 1.3, 8)


def test_tuning_down_drops_random_pods() -> None:
    reqs = tuple([WHOLE] * 40)
    order = arrival_order(reqs, capacity_milli=20_000, inflate=1.3, seed=1)
    assert len(order) == 26 and len(set(order)) == 26


def cluster() -> GpuNodes:
    # two 8-GPU nodes and one 2-GPU node, one of another model
    return GpuNodes(["a", "b", "c"], ["G2", "G2", "T4"], [96_000, 96_000, 32_000], [400_000] * 3, [8, 8, 2])


def test_fgd_places_shared_pods_on_the_device_the_measure_prefers() -> None:
    nodes = cluster()
    fgd = plugins("fgd")
    nodes.set_typical(fgd[0][0].typical([SHARE.shape()] * 5 + [WHOLE.shape()] * 5))
    p = place_all(nodes, [SHARE, SHARE], fgd, np.random.default_rng(0))
    # two halves of a GPU go to one device (it becomes whole-used), not to two devices
    used = nodes.dev_free[p.node[0]]
    assert p.node[0] == p.node[1]
    assert sorted(used[: nodes.dev_count[p.node[0]]].tolist()).count(0) == 1
    assert nodes.allocated_milli == 1000


@pytest.mark.parametrize("name", ["random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"])
def test_every_policy_places_what_fits_and_fails_what_does_not(name: str) -> None:
    nodes = cluster()
    pols = plugins(name)
    nodes.set_typical(pols[0][0].typical([SHARE.shape(), WHOLE.shape()]) if name == "fgd" else
                      plugins("fgd")[0][0].typical([SHARE.shape(), WHOLE.shape()]))
    reqs = [GpuRequest(1000, 1000, 8, 1000)] * 3 + [GpuRequest(1000, 1000, 1, 1000, ("T4",))] * 3 + [SHARE] * 2
    p = place_all(nodes, reqs, pols, np.random.default_rng(0))
    assert set(p.node[:3].tolist()) == {0, 1, -1}  # the 2-GPU node takes no 8-GPU pod
    assert p.node[3:5].tolist() == [2, 2]  # the T4 node has 2 GPUs
    assert p.failed == {"EightGpu": 1, "OneGpu": 1, "ShareGpu": 2}
    assert nodes.allocated_milli == 18_000 == nodes.capacity_milli
    assert (nodes.dev_free == 0).all() and (nodes.cpu_free == nodes.cpu_cap - [1000, 1000, 2000]).all()


def test_figures_by_arrived_percent() -> None:
    arrived = np.array([0.0, 0.4, 1.2, 1.6, 3.0])
    assert by_arrival(arrived, np.array([1.0, 3.0, 5.0, 7.0, 9.0]), 4) == {
        "0": 2.0, "1": 5.0, "2": 7.0, "3": 9.0, "4": 9.0}


def test_figures_of_a_run() -> None:
    nodes = cluster()
    pols = plugins("bestfit")
    nodes.set_typical(plugins("fgd")[0][0].typical([SHARE.shape(), WHOLE.shape()]))
    cap = nodes.capacity_milli
    p = place_all(nodes, [WHOLE] * 20, pols, np.random.default_rng(0))
    f = figures(p, cap, 1.3)
    assert f["failed_pods"]["OneGpu"] == 2
    assert f["final"]["allocation"] == 100.0
    assert f["allocation_by_arrival"]["100"] == 100.0
    assert set(f["allocation_by_arrival"]) == {str(a) for a in range(131)}
