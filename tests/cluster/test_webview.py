"""The live web view's document (cluster/webview.py): built from a closed session on the loop thread,
read by HTTP threads; the page and its files are served by the process (GET only)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from builders import card_node, card_pod, card_queue, node, pod, podgroup, queue
from tidesched.explain.pod import explain_lines
from tidesched.explain import quota
from tidesched.cluster import webview
from tidesched.cluster.server import HttpServer
from tidesched.model.snapshot import build_snapshot
from tidesched.model.vgpu import ASSIGNED_IDS, ASSIGNED_NODE
from tidesched.scheduler import config_from_file, config_from_text, open_session, run_actions
from vgpu_builders import vgpu_config, vgpu_node, vgpu_pod

ROOT = Path(__file__).resolve().parents[2]
SEED000 = ROOT / "tests/data/config/seed000_tidal.conf"
RUNNING = {"phase": "Running"}


def _cards_session():
    objs = [
        card_node("h1", "NVIDIA-H200", 8),
        card_node("h2", "NVIDIA-H200", 8),
        card_node("a1", "NVIDIA-A100", 4),
        node("c1", cpu="16"),
        card_queue("online", '{"NVIDIA-H200": 4}', cpu="32"),
        card_queue("offline", '{"NVIDIA-H200": 8, "NVIDIA-A100": 4}', cpu="32"),
        card_pod("inf", "NVIDIA-H200", 2, queue_name="online", owner="ReplicaSet", node_name="h1", **RUNNING),
        card_pod("train", "NVIDIA-A100", 3, queue_name="offline", owner="Job", node_name="a1", **RUNNING),
        card_pod("new", "NVIDIA-H200", 1, queue_name="offline", owner="Job"),
        card_pod("huge", "NVIDIA-H200", 6, queue_name="online", owner="Job"),  # over its queue's quota
    ]
    objs[1]["spec"] = {"unschedulable": True}
    ssn = open_session(build_snapshot(objs), config_from_file(SEED000))
    return ssn, run_actions(ssn)


def test_view_of_a_session_queues_nodes_and_pending_reasons() -> None:
    ssn, d = _cards_session()
    rep = quota.report(ssn)
    live = webview.LiveView()
    view = live.record(ssn, d, rep, session=7, seconds=0.01, now=1000.0)
    assert view["session"] == 7 and view["decided"]["bound"] == len(d.bound) == 1
    queues = {q["name"]: q for q in view["queues"]}
    assert queues["online"]["resources"]["NVIDIA-H200"] == {"quota": 4.0, "used": 2.0, "inqueue": 0.0, "pending": 6.0}
    # The bound pod counts as used (the session's picture: as the cluster will be once it lands).
    assert queues["offline"]["resources"]["NVIDIA-H200"]["used"] == 1.0
    # Per node cards from the session's table; the cordoned node is flagged.
    models = view["nodes"]["models"]
    rows = {r[0]: (models[r[1]], r[2], r[3], r[4]) for r in view["nodes"]["nodes"]}
    assert rows["a1"] == ("NVIDIA-A100", 3.0, 4.0, "")
    assert rows["h1"][0] == "NVIDIA-H200" and rows["h1"][2] == 8.0
    assert rows["h1"][1] + rows["h2"][1] == 3.0  # inf (2) and the newly bound pod (1)
    assert rows["h2"][3] == "c"
    assert rows["c1"][0] == "cpu" and rows["c1"][2] == 16.0
    # Pending pods carry exactly the reasons `tidesched explain` prints.
    assert view["pending_total"] == 1
    (p,) = view["pending"]
    assert p["pod"] == "ns/huge" and p["queue"] == "online"
    assert p["reasons"] == explain_lines(ssn, d, "ns/huge")[1:]
    assert any("quota" in r.lower() for r in p["reasons"]), p["reasons"]
    # Serialised once per view; what HTTP threads hand out is that JSON.
    body = live.body()
    assert body is not None and json.loads(body)["queues"] == view["queues"] and live.body() is body
    live.publish({"session": 8})  # a new view: encoded anew
    assert json.loads(live.body() or b"{}") == {"session": 8}


def test_node_grid_counts_vgpu_devices_as_cards_of_the_product() -> None:
    # A vGPU node shows its product, its devices as cards and the compute its pods hold, once
    # the session's binds land: 30 % held before, 50 % bound now, of 2 devices.
    objs = [
        queue("default", weight=1),
        vgpu_node("n1", gpus=2, product="Tesla-T4"),
        vgpu_pod("r", node="n1", phase="Running", memory=100, cores=30,
                 annotations={ASSIGNED_IDS: "GPU-n1-0,NVIDIA,100,30:", ASSIGNED_NODE: "n1"}),
        podgroup("pg-p"),
        vgpu_pod("p", group="pg-p", memory=100, cores=50),
    ]
    ssn = open_session(build_snapshot(objs), config_from_text(vgpu_config()))
    assert run_actions(ssn).bound == {"ns/p": "n1"}
    grid = webview.node_grid(ssn)
    (row,) = grid["nodes"]
    assert grid["models"][row[1]] == "Tesla-T4" and row[2:4] == [0.8, 2.0]


def test_queue_tree_depth_first_with_parents() -> None:
    objs = [
        node("n1"),
        queue("root"),
        queue("eng", parent="root"),
        queue("ml", parent="eng"),
        queue("ads", parent="root"),
        queue("orphan", parent="nowhere"),
    ]
    ssn = open_session(build_snapshot(objs), config_from_text("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n"))
    d = run_actions(ssn)
    view = webview.LiveView().record(ssn, d, quota.report(ssn), session=1, seconds=0.0)
    order = [(q["name"], q["depth"], q["parent"]) for q in view["queues"]]
    # default has no parent in the objects: a root of its own; "nowhere" is unknown: orphan is a root.
    assert order == [
        ("default", 0, ""), ("orphan", 0, ""), ("root", 0, ""),
        ("ads", 1, "root"), ("eng", 1, "root"), ("ml", 2, "eng"),
    ]



def test_queue_tree_lists_a_parent_cycle_once_at_the_top_as_the_scheduler_hangs_it() -> None:
    objs = [node("n1"), queue("a", parent="b"), queue("b", parent="a"), queue("c", parent="a")]
    ssn = open_session(build_snapshot(objs), config_from_text("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n"))
    d = run_actions(ssn)
    view = webview.LiveView().record(ssn, d, quota.report(ssn), session=1, seconds=0.0)
    order = [(q["name"], q["depth"], q["parent"]) for q in view["queues"]]
    assert order == [("a", 0, ""), ("c", 1, "a"), ("b", 0, ""), ("default", 0, "")]

RECLAIM = """
actions: "reclaim"
tiers:
- plugins:
  - {name: conformance}
  - {name: gang}
"""


def test_evictions_are_kept_across_sessions_newest_first() -> None:
    objs = [queue("q1"), queue("q2"), node("n1", cpu="2"),
            podgroup("victims", 0, queue="q1"), podgroup("reclaimer", 1, queue="q2"),
            pod("v-0", "victims", cpu="1", node="n1", phase="Running"),
            pod("v-1", "victims", cpu="1", node="n1", phase="Running"),
            pod("r-0", "reclaimer", cpu="1")]
    live = webview.LiveView(max_evictions=3)
    for n in range(1, 5):
        ssn = open_session(build_snapshot(objs), config_from_text(RECLAIM))
        d = run_actions(ssn)
        assert d.evicted == ["ns/v-1"]
        view = live.record(ssn, d, quota.report(ssn), session=n, seconds=0.0, now=float(n))
    assert [e["time"] for e in view["evictions"]] == [4.0, 3.0, 2.0]
    assert view["evictions"][0]["pod"] == "ns/v-1" and view["evictions"][0]["reason"]


def test_page_and_state_served_get_only() -> None:
    ssn, d = _cards_session()
    live = webview.LiveView()
    server = HttpServer("127.0.0.1:0", webview.routes(live))
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert httpx.get(f"{base}/ui/state.json", trust_env=False).status_code == 503  # no session yet
        live.record(ssn, d, quota.report(ssn), session=1, seconds=0.0)
        page = httpx.get(f"{base}/ui", trust_env=False)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "/ui/app.js" in page.text and "http" not in page.text.replace("http-equiv", "")  # nothing from elsewhere
        assert httpx.get(f"{base}/", trust_env=False).text == page.text
        for name in ("app.js", "style.css"):
            r = httpx.get(f"{base}/ui/{name}", trust_env=False)
            assert r.status_code == 200 and r.content
        state = httpx.get(f"{base}/ui/state.json", trust_env=False).json()
        assert {q["name"] for q in state["queues"]} == {"default", "online", "offline"}
        assert httpx.post(f"{base}/ui/state.json", trust_env=False).status_code == 405  # read-only (cluster/server.py: GET and HEAD only)
    finally:
        server.stop()
