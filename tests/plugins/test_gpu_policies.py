"""The FGD paper's placement policies as plugins (plugins/gpu_policy and one module each): their
scores on hand-made nodes, worked out from the authors' formulas, and their device choice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.model.gpu_nodes import GpuNodes, GpuRequest
from tidesched.plugins.bestfit import BestFitPlugin
from tidesched.plugins.dotprod import DotProdPlugin
from tidesched.plugins.fgd import FgdPlugin
from tidesched.plugins.gpuclustering import GpuClusteringPlugin
from tidesched.plugins.gpupacking import GpuPackingPlugin
from tidesched.plugins.random_node import RandomPlugin
from tidesched.rules import gpu_frag


def nodes() -> GpuNodes:
    n = GpuNodes(["idle8", "used8", "idle2"], ["G2", "G2", "T4"], [96_000, 96_000, 32_000], [10**6] * 3, [8, 8, 2])
    n.place(1, GpuRequest(8_000, 0, 1, 300), device=2)  # used8: device 2 has 700 free
    n.place(1, GpuRequest(8_000, 0, 2, 1000))  # … devices 0 and 1 taken whole
    return n


ALL = np.arange(3)
SHARE = GpuRequest(4_000, 0, 1, 500)


def test_bestfit_prefers_the_fullest_node() -> None:
    s = BestFitPlugin(Arguments({})).node_scores(nodes(), SHARE, ALL)
    want = [int((1 - ((c - 4_000) / 128_000 * 0.5 + (f - 500) / 8_000 * 0.5)) * 100)
            for c, f in ((96_000, 8_000), (80_000, 5_700))] + [int((1 - ((32_000 - 4_000) / 128_000 * 0.5 + 1_500 / 8_000 * 0.5)) * 100)]
    assert s.tolist() == want


def test_dotprod_max_norm() -> None:
    s = DotProdPlugin(Arguments({})).node_scores(nodes(), SHARE, ALL)
    dot = (80_000 / 128_000) * (4_000 / 128_000) + (5_700 / 8_000) * (500 / 8_000)
    assert s[1] == int(100 * (1 - dot / 2))
    with pytest.raises(ConfigError):
        DotProdPlugin(Arguments({"dotprod.normMethod": "l2"}))


def test_gpupacking_bands() -> None:
    p = GpuPackingPlugin(Arguments({}))
    n = nodes()
    # idle 8-GPU node: max(33 - 8, 8); partly used device 2 (700 free): 100 - 70/10; idle 2-GPU: 33 - 2
    assert p.node_scores(n, SHARE, ALL).tolist() == [25, 93, 31]
    # a whole GPU on the used node takes an idle device: max(50 - 1, 33)
    assert p.node_scores(n, GpuRequest(1_000, 0, 1, 1000), ALL).tolist() == [25, 49, 31]
    assert p.node_scores(n, GpuRequest(1_000, 0, 0, 0), ALL).tolist() == [0, 0, 0]


def test_gpuclustering_bands() -> None:
    p = GpuClusteringPlugin(Arguments({}))
    n = nodes()
    # used8 holds a share-gpu pod and a 2-gpu pod: a shared pod finds its kind among others
    base_used = 25 * (8_000 - 5_700) // 8_000
    assert p.node_scores(n, SHARE, ALL).tolist() == [25, base_used + 50, 25 * 6_000 // 8_000 + 25]
    assert p.node_scores(n, GpuRequest(1, 0, 4, 1000), ALL).tolist() == [25, base_used, 25 * 6_000 // 8_000 + 25]


def test_shared_pods_get_the_tightest_device_by_default_and_any_with_random() -> None:
    n = nodes()
    _, dev = BestFitPlugin(Arguments({})).score_rows(n, SHARE, ALL)
    assert dev.tolist() == [0, 2, 0]
    _, dev = BestFitPlugin(Arguments({"bestfit.deviceSelect": "worst"})).score_rows(n, SHARE, ALL)
    assert dev.tolist() == [0, 3, 0]
    r = RandomPlugin(Arguments({}))
    picks = {r.pick_device(n, 1, SHARE, -1, np.random.default_rng(s)) for s in range(40)}
    assert picks == set(range(2, 8))


def test_fgd_score_is_the_sigmoid_of_the_fragmentation_it_removes() -> None:
    n = nodes()
    fgd = FgdPlugin(Arguments({}))
    tp = fgd.typical([GpuRequest(4_000, 0, 1, 500).shape()] * 3 + [GpuRequest(8_000, 0, 1, 1000).shape()])
    n.set_typical(tp)
    scores, dev = fgd.score_rows(n, SHARE, ALL)
    # on used8, putting the half GPU on the 700-free device leaves 200 stranded for both typical
    # pods (the whole-GPU pod cannot use it either); on an idle device it strands 500 for the
    # whole-GPU pod only: the partly used device wins.
    assert dev[1] == 2
    access = tp.access(["G2"])
    before = gpu_frag.node_frag(tp, access, np.array([80_000]), n.dev_free[1:2])[0]
    after_dev = n.dev_free[1:2].copy()
    after_dev[0, 2] -= 500
    after = gpu_frag.node_frag(tp, access, np.array([76_000]), after_dev)[0]
    assert scores[1] == math.floor(100 / (1 + math.exp(-(before - after) / 1000)))
    assert scores[1] == scores.max()
