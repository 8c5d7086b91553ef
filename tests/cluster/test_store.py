"""Informers against the fake API: list then watch, pages, bookmarks, 410 relist, errors (K8S-1)."""

from __future__ import annotations

import time

from builders import node, pod
from cluster_helpers import FAST_INFORMER, fake_api, informers, kube_for, wait
from tidesched.cluster.store import (
    HYPERNODE,
    NODE,
    NUMATOPO,
    POD,
    PODGROUP,
    PV,
    RESOURCE_TYPES,
    ClusterStore,
    Informer,
)


def test_list_in_pages_and_only_whole_lists_enter_the_cache() -> None:
    with fake_api() as api:
        api.create_many([node(f"n{i}") for i in range(7)])
        with informers(api, page_size=3) as (store, _):
            assert store.wait_synced(10)
            assert len(store.items(NODE)) == 7
        assert api.count("GET", r"^/api/v1/nodes$") >= 3  # 3 + 3 + 1 items


def test_the_cache_keeps_objects_without_managed_fields() -> None:
    """Listed and watched objects lose metadata.managedFields (as kube-scheduler's informers
    trim them); everything else stays, and the kind is set on list items."""
    fields = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    with fake_api() as api:
        listed = node("n1")
        listed["metadata"]["managedFields"] = fields
        api.create(listed)
        with informers(api) as (store, _):
            assert store.wait_synced(10)
            watched = pod("p1")
            watched["metadata"]["managedFields"] = fields
            api.create(watched)
            assert wait(lambda: store.get(POD, "ns/p1") is not None)
            for obj in (store.get(NODE, "n1"), store.get(POD, "ns/p1")):
                assert obj is not None and "managedFields" not in obj["metadata"]
                assert obj["kind"] in (NODE, POD) and obj["metadata"]["uid"]


def test_bookmarks_advance_the_resource_version() -> None:
    with fake_api(bookmark_interval=0.05) as api:
        api.create(node("n1"))
        with informers(api) as (store, infs):
            assert store.wait_synced(10)
            inf = next(i for i in infs if i.rtype.kind == NODE)
            start = int(inf.resource_version)
            api.create_many([pod(f"p{i}") for i in range(5)])  # other kinds move the global version
            assert wait(lambda: int(inf.resource_version) >= start + 5)
            assert store.get(NODE, "n1") is not None


def test_410_gone_relists_and_replaces_the_cache() -> None:
    with fake_api() as api:
        api.create_many([node("n1"), node("n2")])
        with informers(api) as (store, infs):
            assert store.wait_synced(10)
            inf = next(i for i in infs if i.rtype.kind == NODE)
            # Changes the watch never delivers: history compacted, every open watch gets 410.
            api.expire_watches()
            api.create(node("n3"))
            api.delete("Node", "n1")
            api.compact()
            assert wait(lambda: sorted(n["metadata"]["name"] for n in store.items(NODE)) == ["n2", "n3"])
            assert inf.relists >= 1


def test_5xx_and_dropped_connections_reconnect_without_losing_events() -> None:
    with fake_api() as api:
        api.create(node("n1"))
        api.fail("GET", r"^/api/v1/nodes$", 503, times=3)  # the first lists fail
        with informers(api) as (store, infs):
            assert store.wait_synced(10)
            inf = next(i for i in infs if i.rtype.kind == NODE)
            assert inf.errors >= 3
            rv = inf.resource_version
            api.drop_watches()  # cut mid-stream, no proper end of the chunked body
            api.create(node("n2"))
            assert wait(lambda: store.get(NODE, "n2") is not None)
            assert inf.relists == 0 and int(inf.resource_version) > int(rv)  # resumed, not relisted


def test_not_synced_until_every_kind_listed() -> None:
    with fake_api() as api:
        api.create(node("n1"))
        api.fail("GET", r"^/apis/scheduling.volcano.sh/v1beta1/queues$", 500, times=10**6)
        with informers(api) as (store, _):
            assert wait(lambda: store.get(NODE, "n1") is not None)
            assert not store.synced()
            assert not store.wait_synced(0.3)
            api.faults.clear()
            assert store.wait_synced(10)


def test_snapshot_overlays_assumed_and_releasing_pods() -> None:
    store = ClusterStore()
    a, b = pod("a"), pod("b", node="n1", phase="Running")
    for p in (a, b):
        p["metadata"]["uid"] = "uid-" + p["metadata"]["name"]
    store.replace(POD, {"ns/a": a, "ns/b": b})
    assert store.assume("ns/a", "n2", "uid-a") and not store.assume("ns/a", "n3", "uid-a")
    assert store.mark_releasing("ns/b", ttl=60)
    snap = {o["metadata"]["name"]: o for o in store.snapshot_objects() if o.get("kind", "Pod") == "Pod"}
    assert snap["a"]["spec"]["nodeName"] == "n2" and "nodeName" not in a["spec"]  # a copy, not mutated
    assert snap["b"]["metadata"].get("deletionTimestamp")
    # The watch confirms: the overlay goes, the API object is the truth.
    bound = {**a, "spec": {**a["spec"], "nodeName": "n2"}}
    store.apply(POD, "MODIFIED", "ns/a", bound)
    assert not store.is_assumed("ns/a")
    store.apply(POD, "DELETED", "ns/b", b)
    assert "ns/b" not in store.releasing
    # A failed bind is forgotten: the pod is pending again in the next snapshot.
    store.replace(POD, {"ns/a": a})
    store.assume("ns/a", "n2", "uid-a")
    store.forget("ns/a")
    assert "nodeName" not in store.snapshot_objects()[-1]["spec"]


def test_changes_name_each_key_once_with_its_overlay_and_deletions_as_none() -> None:
    """What the scheduling loop's incremental cache is fed: every key touched since the last
    call, objects and overlays alike, as the scheduler must see it now."""
    store = ClusterStore()
    a, b = pod("a"), pod("b", node="n1", phase="Running")
    for p in (a, b):
        p["metadata"]["uid"] = "uid-" + p["metadata"]["name"]
    store.replace(POD, {"ns/a": a, "ns/b": b})
    store.replace(NODE, {"n1": node("n1")})
    first = {(kind, key) for kind, key, _ in store.take_changes()}
    assert first == {(POD, "ns/a"), (POD, "ns/b"), (NODE, "n1")}
    assert store.take_changes() == []  # nothing new
    store.assume("ns/a", "n1", "uid-a")
    store.mark_releasing("ns/b", ttl=60)
    changes = {key: obj for _, key, obj in store.take_changes()}
    assert changes["ns/a"]["spec"]["nodeName"] == "n1"
    released = changes["ns/b"]["metadata"]["deletionTimestamp"]
    # The same eviction time every time the pod is handed out: an unchanged pod stays unchanged.
    store.apply(POD, "MODIFIED", "ns/b", {**b, "status": {"phase": "Running", "message": "x"}})
    assert store.take_changes()[0][2]["metadata"]["deletionTimestamp"] == released
    store.forget("ns/a")
    store.apply(POD, "DELETED", "ns/b", b)
    changes = {key: obj for _, key, obj in store.take_changes()}
    assert "nodeName" not in changes["ns/a"]["spec"] and changes["ns/b"] is None
    # A relist names the keys that went as well as those that came.
    store.replace(NODE, {"n2": node("n2")})
    assert sorted((k, o is None) for _, k, o in store.take_changes()) == [("n1", True), ("n2", False)]


def test_410_on_a_list_continuation_relists_from_scratch() -> None:
    """The history is compacted between two pages of the first list: the continue token is
    refused with 410 Expired, and the informer starts the list over (never a partial cache)."""
    with fake_api() as api:
        api.create_many([node(f"n{i}") for i in range(5)])
        kube = kube_for(api)
        plain = kube.get
        pages: list[object] = []
        seen_in_cache: list[int] = []

        def get(path, **params):
            pages.append(params.get("continue"))
            body = plain(path, **params)
            if len(pages) == 1:  # after the first page: a change, then compaction
                api.create(node("n9"))
                api.compact()
            return body

        kube.get = get  # type: ignore[method-assign]
        store = ClusterStore(kinds=(NODE,))
        inf = Informer(kube, RESOURCE_TYPES[NODE], store, page_size=2, **FAST_INFORMER)
        real_replace = store.replace

        def replace(kind, items):
            seen_in_cache.append(len(items))
            real_replace(kind, items)

        store.replace = replace  # type: ignore[method-assign]
        inf.start()
        try:
            assert store.wait_synced(10)
            assert sorted(store.objects[NODE]) == ["n0", "n1", "n2", "n3", "n4", "n9"]
            assert api.count("GET", r"^/api/v1/nodes$", 410) == 1 and inf.relists == 1
            assert seen_in_cache == [6]  # the cache only ever received the whole second list
            assert pages[1] and pages[2] is None  # the refused token, then a list from the start
        finally:
            inf.stop()




def test_has_work_tracks_pods_waiting_for_a_node_and_pending_podgroups() -> None:
    store = ClusterStore(scheduler_names=frozenset({"volcano"}))

    def mkpod(name: str, scheduler: str = "volcano", node: str = "", phase: str = "Pending") -> dict:
        spec = {"schedulerName": scheduler, **({"nodeName": node} if node else {})}
        return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec,
                "status": {"phase": phase}}

    store.replace(POD, {"ns/other": mkpod("other", scheduler="default-scheduler"), "ns/done": mkpod("done", node="n1")})
    assert not store.has_work()
    store.apply(POD, "ADDED", "ns/p", mkpod("p"))
    store.apply(POD, "ADDED", "ns/a", mkpod("a"))
    assert store.has_work() and store.pending_pods() == ["ns/a", "ns/p"]
    assert store.assume("ns/a", "n1", "a") and store.pending_pods() == ["ns/p"]
    assert store.assume("ns/p", "n1", "p")
    assert not store.has_work(), "a pod whose bind is in flight is not work"
    assert store.pending_pods() == []
    store.forget("ns/p")
    assert store.has_work() and store.pending_pods() == ["ns/p"]
    store.apply(POD, "MODIFIED", "ns/p", mkpod("p", node="n1"))
    assert not store.has_work()
    group = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "ns"}, "status": {"phase": "Pending"}}
    store.apply(PODGROUP, "ADDED", "ns/g", group)
    assert store.has_work(), "a Pending PodGroup waits for enqueue before its pods exist"
    store.apply(PODGROUP, "MODIFIED", "ns/g", {**group, "status": {"phase": "Inqueue"}})
    assert not store.has_work()
    store.apply(POD, "ADDED", "ns/q", mkpod("q"))
    store.apply(POD, "DELETED", "ns/q", mkpod("q"))
    assert not store.has_work()


def test_first_list_pages_reach_the_loop_before_the_sync_and_relists_do_not() -> None:
    """Each page of a kind's first list is offered to the scheduling loop (take_listed) as it
    arrives, so it can be parsed while the rest is listed; once the kind has synced, later
    pages (a relist) are not offered: nobody waits for them."""
    with fake_api() as api:
        api.create_many([node(f"n{i}") for i in range(7)])
        store = ClusterStore(kinds=(NODE,))
        inf = Informer(kube_for(api), RESOURCE_TYPES[NODE], store, page_size=3, **FAST_INFORMER)
        inf._list()
        listed = store.take_listed()
        assert [(k, key) for k, key, _ in listed] == [(NODE, f"n{i}") for i in range(7)]
        # The very objects the store now holds, so a parse of them is a parse of these.
        assert all(obj is store.objects[NODE][key] for _, key, obj in listed)
        assert store.take_listed() == []
        inf._list()  # a relist after the sync
        assert store.take_listed() == []


def test_podgroups_a_session_moved_on_are_no_work_until_their_write_shows_or_fails() -> None:
    """A session moved a Pending PodGroup on (Inqueue, Running); until the watch shows the
    status write, the group alone is no reason for another session — unless the write failed,
    a later session put it back to Pending, or the hold ran out."""
    store = ClusterStore(scheduler_names=frozenset({"volcano"}))
    group = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "ns"}, "status": {"phase": "Pending"}}
    other = {"kind": "PodGroup", "metadata": {"name": "h", "namespace": "ns"}, "status": {"phase": "Pending"}}
    store.replace(PODGROUP, {"ns/g": group, "ns/h": other})
    assert store.has_work()
    store.assume_enqueued(["ns/g", "ns/absent"], hold=60.0)
    assert store.has_work(), "ns/h still waits for enqueue"
    store.assume_enqueued(["ns/h"], hold=60.0)
    assert not store.has_work()
    assert "ns/absent" not in store.enqueued  # only groups Pending in the store are held
    # The write of ns/h failed: work again at once.
    store.enqueue_written("ns/h", False, ttl=10.0)
    assert store.has_work() and "ns/h" not in store.enqueued
    store.assume_enqueued(["ns/h"], hold=60.0)
    assert not store.has_work()
    # The write of ns/g went through; the watch has a short while to show it.
    store.enqueue_written("ns/g", True, ttl=0.05)
    assert not store.has_work()
    time.sleep(0.1)
    assert store.has_work(), "the watch never showed the write: the group is work again"
    store.expire()
    assert "ns/g" not in store.enqueued
    # The watch shows ns/h Inqueue: nothing left to hold, nothing pending.
    store.apply(PODGROUP, "MODIFIED", "ns/h", {**other, "status": {"phase": "Inqueue"}})
    assert "ns/h" not in store.enqueued
    store.apply(PODGROUP, "MODIFIED", "ns/g", {**group, "status": {"phase": "Running"}})
    assert not store.has_work()
    # A group that goes back to Pending (a relist shows it so) is not held by an old entry.
    store.assume_enqueued(["ns/g"], hold=60.0)
    assert "ns/g" not in store.enqueued  # not Pending in the store: nothing to hold
    store.replace(PODGROUP, {"ns/g": group})
    assert store.has_work()


def test_an_optional_kind_without_its_crd_counts_as_listed_and_empty() -> None:
    """Numatopology is Volcano's CRD: a cluster without it (the fake API serves no such path)
    must not keep the scheduler from starting; the kind is listed as empty and looked at again."""
    with fake_api() as api:
        api.create(node("n1"))
        with informers(api) as (store, infs):
            assert store.wait_synced(10)
            assert store.items(NUMATOPO) == []
            inf = next(i for i in infs if i.rtype.kind == NUMATOPO)
            assert inf.errors == 0  # an absent CRD is no error
        assert api.count("GET", r"^/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies") >= 1


def test_hypernodes_absent_from_the_cluster_count_as_listed_and_empty() -> None:
    """A cluster without Volcano's topology CRD answers 404 for HyperNodes: the kind is listed
    as empty (the store syncs, the scheduler starts) and is no error."""
    with fake_api() as api:
        api.create(node("n1"))
        with informers(api) as (store, infs):
            assert store.wait_synced(10)
            assert store.items(HYPERNODE) == []
            inf = next(i for i in infs if i.rtype.kind == HYPERNODE)
            assert inf.errors == 0
        assert api.count("GET", r"^/apis/topology.volcano.sh/v1alpha1/hypernodes") >= 1


def test_an_assumed_storage_object_shows_until_the_watch_brings_another_version() -> None:
    """A PV a bind is giving to its claim: sessions see the write at once, and the API's object
    again as soon as any newer version of it arrives (or the write is given up)."""
    store = ClusterStore()
    pv = {"kind": "PersistentVolume", "metadata": {"name": "pv-1", "resourceVersion": "5"}, "spec": {}}
    store.replace(PV, {"pv-1": pv})
    store.take_changes()
    claimed = {**pv, "spec": {"claimRef": {"namespace": "ns", "name": "data"}}}
    store.assume_object(PV, "pv-1", claimed)
    assert store.take_changes() == [(PV, "pv-1", claimed)]
    assert claimed in store.snapshot_objects() and pv not in store.snapshot_objects()
    store.apply(PV, "MODIFIED", "pv-1", pv)  # the same version again (a relist): still ours
    assert store.take_changes() == [(PV, "pv-1", claimed)]
    written = {**claimed, "metadata": {"name": "pv-1", "resourceVersion": "6"}}
    store.apply(PV, "MODIFIED", "pv-1", written)
    assert store.take_changes() == [(PV, "pv-1", written)] and not store.assumed_objects
    store.assume_object(PV, "pv-1", claimed)
    store.forget_object(PV, "pv-1")
    assert store.take_changes() == [(PV, "pv-1", written)]
