"""The run loop end to end against the fake API: sessions, writes, endpoints, config reload,
restart safety (REL-3), and the run/quota/explain commands."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import yaml
from typer.testing import CliRunner

from builders import BASIC_CONFIG, node, pod, podgroup, queue
from kube_helpers import bound_nodes, fake_api, make_runner, wait
from tidesched.cli import app
from tidesched.kube.commands import options_from_args, run_main, run_parser
from tidesched.kube.runner import Runner, parse_duration
from tidesched.kube.store import POD


def _start(r: Runner) -> threading.Thread:
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    return t


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_run_schedules_writes_status_and_serves_endpoints(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1", cpu="4"),
                node("n2", cpu="4"),
                queue("default"),
                podgroup("gang", 2, phase="Pending"),
                pod("g0", "gang"),
                pod("g1", "gang"),
                pod("bare"),
                pod("huge", cpu="64"),
                pod(
                    "other", spec={"schedulerName": "default-scheduler"}, cpu="3", node="n1", phase="Running"
                ),
            ]
        )
        r = make_runner(
            api,
            tmp_path,
            enable_metrics=True,
            listen_address="127.0.0.1:0",
            enable_healthz=True,
            healthz_address="127.0.0.1:0",
        )
        t = _start(r)
        try:
            # Enqueue in one session, bind in the next; a bare pod runs as a one-member job.
            assert wait(lambda: all(bound_nodes(api)[k] for k in ("ns/g0", "ns/g1", "ns/bare")), 5)
            assert not bound_nodes(api)["ns/huge"]
            # Another scheduler's pod uses 3 of n1's 4 CPUs: nothing of ours fits beside it twice.
            placed = [v for k, v in bound_nodes(api).items() if k != "ns/other" and v]
            assert placed.count("n1") <= 1
            assert wait(
                lambda: (api.get("PodGroup", "ns/gang").get("status") or {}).get("phase") == "Running", 5
            )
            assert wait(
                lambda: any(
                    c.get("reason") == "Unschedulable"
                    for c in (api.get("Pod", "ns/huge")["status"].get("conditions") or [])
                ),
                5,
            )
            assert wait(
                lambda: api.get("Queue", "default").get("status", {}).get("allocated", {}).get("cpu") == "3",
                5,
            )
            assert r.recorder.flush(5)
            failed = [e for e in api.list("Event") if e["reason"] == "FailedScheduling"]
            assert len(failed) == 1 and failed[0]["involvedObject"]["name"] == "huge"
            n = r.sessions
            assert wait(lambda: r.sessions >= n + 5, 5)  # more sessions: still one event object
            assert r.recorder.flush(5)
            assert len([e for e in api.list("Event") if e["reason"] == "FailedScheduling"]) == 1
            assert api.binds.most_common(1)[0][1] == 1  # nobody bound twice

            port = r.servers[0].port
            code, body = _get(port, "/metrics")
            assert code == 200
            for name in (
                "tidesched_session_duration_seconds_count",
                'tidesched_action_duration_seconds_count{action="allocate"}',
                "tidesched_pods_bound_total 3.0",
                'tidesched_queue_allocated{queue="default",resource="cpu"} 3.0',
                "tidesched_pods_unschedulable 1.0",
                'tidesched_cluster_allocatable{resource="cpu"} 8.0',
            ):
                assert name in body, name
            code, body = _get(port, "/api/v1/queues")
            quota = json.loads(body)
            assert code == 200 and quota["queues"]["default"]["cpu"]["used"] == 3.0
            assert quota["queues"]["default"]["cpu"]["pending"] == 64.0
            hport = r.servers[-1].port  # same address: one server serves both
            assert _get(hport, "/healthz")[0] == 200 and _get(hport, "/readyz")[0] == 200
        finally:
            r.stop()
            t.join(5)


def test_first_session_waits_for_every_cache(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1"), pod("a")])
        api.fail("GET", r"^/api/v1/nodes$", 500, times=10**6)
        r = make_runner(api, tmp_path, enable_healthz=True, healthz_address="127.0.0.1:0")
        t = _start(r)
        try:
            assert wait(lambda: r.store.get(POD, "ns/a") is not None, 3)
            assert not wait(lambda: r.sessions > 0, 0.4)
            assert _get(r.servers[0].port, "/readyz")[0] == 503
            api.faults.clear()
            assert wait(lambda: bound_nodes(api)["ns/a"] == "n1", 5)
        finally:
            r.stop()
            t.join(5)


def test_config_reload_keeps_the_last_good_config(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1")])
        r = make_runner(api, tmp_path)
        conf = Path(r.options.scheduler_conf or "")
        t = _start(r)
        try:
            assert wait(lambda: r.sessions > 0, 3)
            good = r.config
            conf.write_text('actions: "enqueue, allocate, nosuchaction"\ntiers: []\n')
            assert wait(lambda: r.metrics.config_reloads.labels("rejected")._value.get() == 1, 3)
            assert r.config is good
            n = r.sessions
            assert wait(lambda: r.sessions > n + 2, 3)  # still scheduling with the old one
            conf.write_text(BASIC_CONFIG.replace('"enqueue, allocate, backfill"', '"enqueue, allocate"'))
            assert wait(lambda: r.config.actions == ["enqueue", "allocate"], 3)
        finally:
            r.stop()
            t.join(5)


def test_restart_between_decisions_and_binds_never_double_binds(tmp_path: Path) -> None:
    """REL-3: the first scheduler decides, gets some binds out and dies; the second rebuilds
    everything from the cluster, re-derives the rest, and no pod is bound twice."""
    pods = [pod(f"p{i}", cpu="1") for i in range(8)]
    with fake_api() as api:
        api.create_many([node("n1", cpu="4"), node("n2", cpu="4"), queue("default")] + pods)
        first = make_runner(api, tmp_path)
        first.binder.start = lambda: None  # type: ignore[method-assign]  # no workers: binds stay queued
        first.start()
        assert first.store.wait_synced(5)
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
            first.kube.call(first.kube.core.create_namespaced_pod_binding, name, ns, body)
        for inf in first.informers:  # the crash: no drain, no release, nothing written after
            inf.stop()

        second = make_runner(api, tmp_path)
        t = _start(second)
        try:
            assert wait(lambda: all(bound_nodes(api).values()), 5)
            assert all(api.binds[f"ns/p{i}"] == 1 for i in range(8))
            assert api.count("POST", r"/binding$", 409) == 0  # never even tried twice
            # The second scheduler's decisions are its own, from the cluster as it found it.
            rebound = {k for k, n in api.binds.items() if n} - set(sent)
            assert rebound == {f"ns/p{i}" for i in range(8)} - set(sent)
            used: dict[str, int] = {}
            for v in bound_nodes(api).values():
                used[v] = used.get(v, 0) + 1
            assert used == {"n1": 4, "n2": 4}  # 8 one-CPU pods on two 4-CPU nodes: no overcommit
        finally:
            second.stop()
            t.join(5)


def test_sigterm_drains_binds_and_releases_the_lease(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many([node("n1", cpu="8"), queue("default")] + [pod(f"p{i}") for i in range(4)])
        r = make_runner(
            api,
            tmp_path,
            leader_elect=True,
            identity="me",
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.1,
        )
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(r.run()))
        t.start()
        assert wait(lambda: r.sessions > 0, 5)
        r.stop()  # what the SIGTERM handler does
        t.join(5)
        assert codes == [0]
        assert r.binder.pending() == 0
        assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["holderIdentity"] == ""


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


def test_quota_and_explain_against_a_live_cluster(tmp_path: Path) -> None:
    with fake_api() as api:
        api.create_many(
            [
                node("n1", cpu="4"),
                queue("q", capability={"cpu": "10", "memory": "20Gi"}),
                podgroup("job", 1, queue="q", phase="Running"),
                pod("run", "job", node="n1", phase="Running"),
                podgroup("big", 1, queue="q", phase="Inqueue", min_resources={"cpu": "16"}),
                pod("wait", "big", cpu="16"),
            ]
        )
        kc = _kubeconfig(tmp_path, api.url)
        conf = tmp_path / "c.conf"
        conf.write_text(BASIC_CONFIG)
        cli = CliRunner()
        res = cli.invoke(app, ["quota", "--kubeconfig", str(kc), "-c", str(conf), "-o", "json"])
        assert res.exit_code == 0, res.output
        q = json.loads(res.stdout)["queues"]["q"]["cpu"]
        assert q == {"quota": 10.0, "used": 1.0, "inqueue": 16.0, "pending": 16.0}
        res = cli.invoke(app, ["quota", "--kubeconfig", str(kc), "-c", str(conf)])
        assert res.exit_code == 0 and "Queue quota and usage" in res.stdout
        res = cli.invoke(app, ["explain", "ns/wait", "--kubeconfig", str(kc), "-c", str(conf)])
        assert res.exit_code == 0, res.output
        assert "stays pending" in res.stdout and "Insufficient cpu" in res.stdout
        # Reads only: nothing was written to the cluster.
        assert not [m for m, _p, _s in api.requests if m != "GET"]


def test_tidesched_run_process_schedules_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    with fake_api() as api:
        api.create_many([node("n1"), queue("default"), pod("a")])
        conf = tmp_path / "c.conf"
        conf.write_text(BASIC_CONFIG)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tidesched.cli",
                "run",
                f"--master={api.url}",
                f"--scheduler-conf={conf}",
                "--schedule-period=100ms",
                "--leader-elect",
                "--leader-elect-lease-duration=2s",
                "--leader-elect-renew-deadline=1s",
                "--leader-elect-retry-period=100ms",
                "-v=0",
                "2>&1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            assert wait(lambda: bound_nodes(api)["ns/a"] == "n1", 15)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 0, proc.stdout.read() if proc.stdout else ""
            assert api.get("Lease", "volcano-system/vc-scheduler")["spec"]["holderIdentity"] == ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
