"""The run loop end to end against the fake API: sessions, writes, endpoints, config reload,
restart safety (REL-3), and the run/quota/explain commands."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from builders import BASIC_CONFIG, node, pod, podgroup, queue
from cluster_helpers import ManualClock, bound_nodes, fake_api, http_get, make_runner, wait
from tidesched.cluster.api import Kube, connect
from tidesched.cluster.commands import options_from_args, run_main, run_parser
from tidesched.cluster.runner import Runner
from tidesched.model.durations import parse_flag_duration as parse_duration
from tidesched.cluster.store import POD


def _start(r: Runner) -> threading.Thread:
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    return t


def test_first_session_waits_for_every_cache(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("a")])
        api.fail("GET", r"^/api/v1/nodes$", 500, times=10**6)
        r = make_runner(api, tmp_path, enable_healthz=True, healthz_address="127.0.0.1:0")
        t = _start(r)
        try:
            assert wait(lambda: r.store.get(POD, "ns/a") is not None, 10)
            # The node list has failed again and again ...
            assert wait(lambda: any(i.rtype.kind == "Node" and i.errors >= 3 for i in r.informers), 10)
            assert not r.store.synced() and r.sessions == 0  # ... so no session has run
            assert http_get(r.servers[0].port, "/readyz")[0] == 503
            api.faults.clear()
            assert wait(lambda: bound_nodes(api)["ns/a"] == "n1", 10)
        finally:
            r.stop()
            t.join(10)


def _configmap_update(mount: Path, text: str) -> None:
    """Update a mounted ConfigMap as the kubelet does: the new content goes into a fresh
    directory and the ``..data`` symlink is swapped atomically; the file name itself is a
    symlink through ``..data``. A reader never sees a half-written file."""
    version = mount / f"..v{len(list(mount.glob('..v*')))}"
    version.mkdir()
    (version / "scheduler.conf").write_text(text)
    tmp = mount / "..data_tmp"
    tmp.symlink_to(version.name)
    tmp.replace(mount / "..data")
    link = mount / "scheduler.conf"
    if not link.is_symlink():
        link.symlink_to("..data/scheduler.conf")


def test_restart_between_decisions_and_binds_never_double_binds(tmp_path: Path) -> None:
    """REL-3: the first scheduler decides, gets some binds out and dies; the second rebuilds
    everything from the cluster, re-derives the rest, and no pod is bound twice."""
    pods = [pod(f"p{i}", cpu="1") for i in range(8)]
    with fake_api() as api:
        api.create_many([node("n1", cpu="4"), node("n2", cpu="4"), queue("default")] + pods)
        first = make_runner(api, tmp_path, switch_interval=None)
        # No writer threads and a binder that may not send: nothing but the binds sent below by
        # hand ever leaves this scheduler (no status, no events) — as if it died right after
        # deciding.
        for component in (first.evictor, first.status, first.recorder):
            component.start = lambda: None  # type: ignore[method-assign]
        first.binder.may_send = lambda: False
        first.start()
        assert first.store.wait_synced(10)
        decisions = first.run_once()  # one-member jobs: enqueue and allocate in the same session
        if not decisions.bound:
            decisions = first.run_once()
        assert len(decisions.bound) == 8
        # Half of the binds reach the API server before the crash.
        sent = sorted(decisions.bound)[:4]
        for key in sent:
            ns, name = key.split("/")
            body = {
                "metadata": {"name": name, "namespace": ns},
                "target": {"kind": "Node", "name": decisions.bound[key]},
            }
            first.kube.post(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
        for inf in first.informers:  # the crash: no drain, no release, nothing written after
            inf.stop()
        # All eight decided, none sent by the binder; four reached the API server by hand.
        assert wait(lambda: first.binder.dropped >= 8, 5) and first.binder.bound == 0
        before_restart = len(api.requests)

        second = make_runner(api, tmp_path)
        t = _start(second)
        try:
            assert wait(lambda: all(bound_nodes(api).values()), 10)
            assert all(api.binds[f"ns/p{i}"] == 1 for i in range(8))
            assert api.count("POST", r"/binding$", 409) == 0  # never even tried twice
            # The second scheduler bound exactly what it found unbound, by its own decisions.
            rebound = {
                "ns/" + path.split("/")[-2]
                for method, path, _code in api.requests[before_restart:]
                if method == "POST" and path.endswith("/binding")
            }
            assert rebound == {f"ns/p{i}" for i in range(8)} - set(sent)
            assert second.last_decisions is not None and second.sessions >= 1
            used: dict[str, int] = {}
            for v in bound_nodes(api).values():
                used[v] = used.get(v, 0) + 1
            assert used == {"n1": 4, "n2": 4}  # 8 one-CPU pods on two 4-CPU nodes: no overcommit
        finally:
            second.stop()
            t.join(10)


def test_sigterm_drains_binds_and_releases_the_lease(tmp_path: Path) -> None:
    """stop() (what the SIGTERM handler calls) while binds are in flight: the loop stops, the
    binds already sent complete, and only then is the Lease released; run() returns 0."""
    with fake_api() as api:
        api.create_many([node("n1", cpu="8"), queue("default")] + [pod(f"p{i}") for i in range(4)])
        api.hold("POST", r"/binding$")  # every bind stays in flight at the API server
        r = make_runner(
            api,
            tmp_path,
            leader_elect=True,
            identity="me",
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.1,
            drain_timeout=120.0,  # only a guard: the drain ends when the binds do
            component_options={"elector": {"clock": ManualClock()}},  # the lease cannot be lost by a stall
        )
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(r.run()))
        t.start()
        try:
            assert wait(lambda: len(api.held_paths()) == 4, 10)
            sessions = r.sessions
            r.stop()  # SIGTERM
            # Draining: the lease is still ours and run() has not returned, for as long as the
            # binds are in flight (they are held, so this is not a race).
            assert r.binder.pending() == 4 and t.is_alive()
            assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["holderIdentity"] == "me"
            api.unhold()
            assert api.release_held(execute=True) == 4
            t.join(30)
            assert not t.is_alive() and codes == [0]
            assert r.binder.pending() == 0 and r.binder.bound == 4
            assert all(api.binds[f"ns/p{i}"] == 1 for i in range(4))
            assert r.sessions <= sessions + 1  # at most the session already running when stopped
            # The Lease was released after the last bind was carried out, not before (the API
            # server's history orders the writes).
            history = api.state.history
            last_bind = max(
                rv for rv, plural, _e, o in history if plural == "pods" and o["spec"].get("nodeName")
            )
            release = min(
                rv for rv, plural, _e, o in history if plural == "leases" and not o["spec"]["holderIdentity"]
            )
            assert last_bind < release
            assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["holderIdentity"] == ""
        finally:
            api.unhold()
            api.release_held(execute=False)
            r.stop()
            t.join(30)


def test_run_accepts_vc_scheduler_arguments() -> None:
    args = run_parser().parse_args(
        [
            "--logtostderr",
            "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf",
            "--enable-healthz=true",
            "--enable-metrics=true",
            "--leader-elect=false",
            "--kube-api-qps=2000",
            "--kube-api-burst=2000",
            "--schedule-period=3s",
            "--node-worker-threads=20",
            "-v=3",
            "2>&1",
        ]
    )
    o = options_from_args(args)
    assert (o.enable_healthz, o.enable_metrics, o.leader_elect) == (True, True, False)
    assert o.schedule_period == 3.0 and o.kube_api_qps == 2000 and o.scheduler_names == ("volcano",)
    o = options_from_args(
        run_parser().parse_args(
            [
                "--leader-elect",
                "--scheduler-name",
                "a",
                "--scheduler-name",
                "b",
                "--leader-elect-lease-duration=1m30s",
            ]
        )
    )
    assert o.leader_elect and o.scheduler_names == ("a", "b") and o.lease_duration == 90.0
    # Volcano's e2e runs: --ignored-provisioners kubernetes.io/no-provisioner (a string slice)
    o = options_from_args(run_parser().parse_args(
        ["--ignored-provisioners", "kubernetes.io/no-provisioner", "--ignored-provisioners=a.example.com,b.example.com"]
    ))
    assert o.ignored_provisioners == ("kubernetes.io/no-provisioner", "a.example.com", "b.example.com")
    assert parse_duration("500ms") == 0.5


def test_run_refuses_a_bad_config_at_start(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text('actions: "enqueue, nosuchaction"\n')
    assert run_main(["--master", "http://127.0.0.1:9", f"--scheduler-conf={bad}"]) == 2
    assert "nosuchaction" in capsys.readouterr().err


def _kubeconfig(tmp_path: Path, url: str) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
    }
    p = tmp_path / "kubeconfig"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_master_overrides_the_kubeconfig_server_and_keeps_its_credentials(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create(node("n1"))
        kc = _kubeconfig(tmp_path, "https://unreachable.invalid:6443")
        before = kc.read_text()
        conn = connect(str(kc), host=api.url)
        try:
            assert conn.host == api.url and conn.authorization() == "Bearer t"
            kube = Kube(conn)
            assert [n["metadata"]["name"] for n in kube.get("/api/v1/nodes")["items"]] == ["n1"]
        finally:
            conn.close()
        assert kc.read_text() == before  # never written back
        o = options_from_args(run_parser().parse_args([f"--kubeconfig={kc}", f"--master={api.url}"]))
        assert (o.kubeconfig, o.host) == (str(kc), api.url)


def _run_process(api: str | Path, conf: Path, log: Path, *extra: str) -> subprocess.Popen:
    """``tidesched run`` as a real process against the fake API (its URL, or a kubeconfig file
    naming it), its output in ``log`` (a file, not a pipe nobody reads while it runs)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tidesched.cli",
                "run",
                f"--kubeconfig={api}" if isinstance(api, Path) else f"--master={api}",
                f"--scheduler-conf={conf}",
                "--schedule-period=100ms",
                "-v=0",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _output(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def test_sigkill_between_decisions_and_binds_then_restart(tmp_path: Path) -> None:
    """REL-3 with a real process and a real kill: the scheduler has decided every pod, half of
    the binding calls are answered, the other half are still in flight at the API server when
    the process is SIGKILLed. Of those, one had reached the server (it lands after the crash),
    the others never arrive. A new process rebuilds everything from the cluster: it binds only
    what is still unbound, with decisions of its own, and no pod is bound twice."""
    gang = [pod(f"t{i}", "train", cpu="1") for i in range(4)]
    bare = [pod(f"b{i}", cpu="1") for i in range(4)]
    with fake_api() as api:
        api.create_many(
            [node("n1", cpu="4"), node("n2", cpu="4"), queue("default")]
            + [podgroup("train", 4, phase="Pending")]
            + gang
            + bare
        )
        held = r"/pods/(t2|t3|b2|b3)/binding$"
        api.hold("POST", held)
        conf = tmp_path / "c.conf"
        conf.write_text(BASIC_CONFIG)
        first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
        first = _run_process(api.url, conf, first_log)
        try:
            assert wait(lambda: len(api.held_paths()) == 4, 30), _output(first_log)
            assert wait(lambda: api.count("POST", r"/binding$", 201) == 4, 30), _output(first_log)
            first.kill()  # SIGKILL: no drain, no cleanup, nothing more leaves the process
            assert first.wait(10) == -signal.SIGKILL
        finally:
            if first.poll() is None:
                first.kill()
                first.wait(10)
        assert {k for k, n in api.binds.items() if n} == {"ns/t0", "ns/t1", "ns/b0", "ns/b1"}
        api.unhold()
        assert api.release_held(r"/pods/t2/", execute=True) == 1  # reached the server before the crash
        assert api.release_held(execute=False) == 3  # never arrived
        assert wait(lambda: not api.held_paths() and api.binds["ns/t2"] == 1, 10)
        before_restart = len(api.requests)

        second = _run_process(api.url, conf, second_log)
        try:
            assert wait(lambda: all(bound_nodes(api).values()), 30), _output(second_log)
            assert all(api.binds[f"ns/{p['metadata']['name']}"] == 1 for p in gang + bare)
            assert api.count("POST", r"/binding$", 409) == 0  # not even an attempt at a bound pod
            # The new process bound exactly what the cluster showed unbound, by its own decisions.
            rebound = {
                path.split("/")[-2]
                for method, path, _code in api.requests[before_restart:]
                if method == "POST" and path.endswith("/binding")
            }
            assert rebound == {"t3", "b2", "b3"}
            used: dict[str, int] = {}
            for v in bound_nodes(api).values():
                used[v] = used.get(v, 0) + 1
            assert used == {"n1": 4, "n2": 4}  # nothing counted twice: no node overcommitted
            second.send_signal(signal.SIGTERM)
            assert second.wait(30) == 0, _output(second_log)
        finally:
            if second.poll() is None:
                second.kill()
                second.wait(10)


def test_pods_listed_before_the_sync_are_parsed_once_while_waiting(tmp_path: Path, monkeypatch) -> None:
    """While another kind's list still fails, the pod list's pages are parsed into the cache;
    the first session after the sync takes those parses (each pod parsed once) and binds."""
    from tidesched.model import snapshot as snapshot_module

    parsed: list[str] = []
    real = snapshot_module._PARSERS["Pod"]
    monkeypatch.setitem(snapshot_module._PARSERS, "Pod", lambda obj: parsed.append(obj["metadata"]["name"]) or real(obj))
    with fake_api() as api:
        api.create_many([node("n1", cpu="8"), queue("default")] + [pod(f"p{i}") for i in range(5)])
        api.fail("GET", r"^/api/v1/nodes$", 500, times=10**6)
        r = make_runner(api, tmp_path)
        r.options.informer_options["page_size"] = 2
        t = _start(r)
        try:
            assert wait(lambda: sum(k == "Pod" for k, _ in r.cache._early) == 5, 10)  # while the nodes' list fails
            assert sorted(parsed) == [f"p{i}" for i in range(5)] and r.sessions == 0
            api.faults.clear()
            assert wait(lambda: len(bound_nodes(api)) == 5 and set(bound_nodes(api).values()) == {"n1"}, 10)
            assert sorted(parsed) == [f"p{i}" for i in range(5)]  # not parsed again by the fill
        finally:
            r.stop()
            t.join(10)


def test_no_session_waits_on_a_podgroup_whose_enqueue_write_is_in_flight(tmp_path: Path) -> None:
    """A gang bound in the first session: its PodGroup still reads Pending until the status write
    lands. That alone starts no session per period (a mass submission's writes take a while);
    once the write lands, the group is Inqueue and nothing waits."""
    with fake_api() as api:
        api.create_many([node("n1"), podgroup("pg", 1, phase="Pending"), pod("a", "pg")])
        api.hold("PUT", r"/podgroups/pg")
        r = make_runner(api, tmp_path, idle_session_interval=60.0)
        t = _start(r)
        try:
            assert wait(lambda: bound_nodes(api)["ns/a"] == "n1", 10)
            assert wait(lambda: bool(api.held_paths()), 10)  # the write waits at the server
            sessions = r.sessions
            assert wait(lambda: not r.store.has_work(), 10)
            time.sleep(1.0)  # ten periods
            assert r.sessions == sessions, "the group's write is in flight: nothing to decide"
            api.unhold()
            api.release_held(r"/podgroups/pg", execute=True)
            assert wait(lambda: api.get("PodGroup", "ns/pg")["status"].get("phase") == "Inqueue", 10)
            assert wait(lambda: "ns/pg" not in r.store.enqueued, 10)
            assert not r.store.has_work()
        finally:
            r.stop()
            t.join(10)


def test_session_released_before_the_collector_resumes(tmp_path: Path, monkeypatch) -> None:
    """The cyclic collector is off through the whole session, its release included: a sweep
    while the session is alive would walk everything it allocated with the binds waiting."""
    import gc

    from tidesched.framework.session import Session

    seen: list[tuple[str, bool]] = []
    release = Session.release

    def recording_release(self: Session) -> None:
        seen.append(("release", gc.isenabled()))
        release(self)

    monkeypatch.setattr(Session, "release", recording_release)
    with fake_api() as api:
        api.create_many([node("n1", cpu="4"), queue("default"), pod("a", cpu="1")])
        r = make_runner(api, tmp_path, switch_interval=None)
        r.binder.may_send = lambda: False
        r.start()
        try:
            assert r.store.wait_synced(10)
            assert gc.isenabled()
            r.run_once()
            seen.append(("after", gc.isenabled()))
        finally:
            r.stop()
            r.shutdown()
    assert seen == [("release", False), ("after", True)]
