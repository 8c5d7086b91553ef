"""``tidesched run`` makes the ``root`` and ``default`` queues when missing, as vc-scheduler v1.15.1
does at its start (cluster/default_queues.py), and never fails for them."""

from __future__ import annotations

import threading
from pathlib import Path

from builders import node, queue
from cluster_helpers import fake_api, informers, kube_for, make_runner, wait
from tidesched.cluster.default_queues import ensure_default_queues


def test_the_leader_creates_root_and_default_as_vc_scheduler_does(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1")])
        r = make_runner(api, tmp_path)
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            assert wait(lambda: r.sessions >= 1, 10)
            root, default = api.get("Queue", "root"), api.get("Queue", "default")
            assert root is not None and default is not None
            assert root["spec"] == {"weight": 1, "reclaimable": False}
            assert default["spec"] == {"weight": 1, "reclaimable": True}
            # Seen by the informer, so the sessions have both (root tops the tree).
            assert wait(lambda: r.store.get("Queue", "root") is not None, 5)
        finally:
            r.stop()
            t.join(10)
        assert api.count("POST", r"/queues$") == 2


def test_existing_queues_are_left_alone(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1"), queue("root", weight=3), queue("default", weight=2, reclaimable=False)])
        r = make_runner(api, tmp_path)
        t = threading.Thread(target=r.run, daemon=True)
        t.start()
        try:
            assert wait(lambda: r.sessions >= 1, 10)
        finally:
            r.stop()
            t.join(10)
        assert api.count("POST", r"/queues$") == 0
        assert api.get("Queue", "default")["spec"] == {"weight": 2, "reclaimable": False}


def test_a_refusal_or_a_race_is_not_fatal_and_not_retried_forever() -> None:
    with fake_api() as api, informers(api) as (store, _infs):
        assert wait(store.synced, 5)
        kube = kube_for(api)
        api.fail("POST", r"/queues$", 403, times=1)  # root: not allowed
        api.fail("POST", r"/queues$", 409, times=1)  # default: made by someone else meanwhile
        assert ensure_default_queues(kube, store, sleep=lambda _s: None) == []
        assert api.count("POST", r"/queues$") == 2  # one try each: neither is worth a retry
        api.fail("POST", r"/queues$", 503, times=2)  # transient: retried (root: 503, 503, 201)
        assert ensure_default_queues(kube, store, sleep=lambda _s: None) == ["root", "default"]
        assert api.count("POST", r"/queues$") == 2 + 3 + 1
