"""The operator's path of docs/operations.md ("Replacing vc-scheduler in a Volcano install"), on the
control plane with Volcano v1.15.1's controllers and webhooks: vc-scheduler runs jobs with the
configuration of Volcano's chart (its ConfigMap, mounted as a file), is stopped (the chart's
``custom.scheduler_replicas=0``), tidesched takes over reading the same ConfigMap, then the switch is
made back. Jobs are running and arriving throughout. Checked: no pod lost (none deleted, every one
bound and Running), no pod bound twice (the API server's audit log: one binding per pod, no
eviction), and every PodGroup's phase only moves forward across both handovers.

Also the two facts of Volcano's chart the documented steps rest on (``helm template``): scaling its
scheduler to 0 keeps ``volcano-scheduler-configmap``, while ``custom.scheduler_enable=false``
deletes it with the scheduler."""

from __future__ import annotations

import collections
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cluster import bound, create_node, pods, podgroup_name, volcano_job, wait_until
from controlplane import ApiError
from kind import ConfigMapVolume
from volcano import V115, render_chart, start_vc_scheduler, version_of

RELEASE, NAMESPACE = "volcano", "volcano-system"
CONFIGMAP = f"{RELEASE}-scheduler-configmap"
KEY = "volcano-scheduler.conf"
# deploy/deployment.yaml's leader election: vc-scheduler's Lease name, in Volcano's namespace.
TIDESCHED_ARGS = ["--leader-elect", f"--lock-object-namespace={NAMESPACE}", "--leader-elect-resource-name=vc-scheduler"]
PHASES = {"": 0, "Pending": 0, "Inqueue": 1, "Running": 2, "Completed": 3}


def _render(chart: Path, *sets: str) -> list[dict[str, Any]]:
    return render_chart(chart, "templates/scheduler.yaml", *sets, release=RELEASE, namespace=NAMESPACE)


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


class Recorder:
    """Every pod deletion and PodGroup phase of one namespace, from watches started before the
    test's first object."""

    def __init__(self, cp: Any, ns: str) -> None:
        self.api = cp.client(cp.admin_token)
        self.ns = ns
        self.deleted: list[str] = []
        self.phases: dict[str, list[str]] = collections.defaultdict(list)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(path, self._on_pod if kind == "pod" else self._on_pg),
                                          daemon=True)
                         for kind, path in (("pod", f"/api/v1/namespaces/{ns}/pods"),
                                            ("pg", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"))]

    def start(self) -> Recorder:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        self.api.close()

    def _on_pod(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.deleted.append(obj["metadata"]["name"])

    def _on_pg(self, kind: str, obj: dict[str, Any]) -> None:
        phase = (obj.get("status") or {}).get("phase") or ""
        seen = self.phases[obj["metadata"]["name"]]
        if kind != "DELETED" and (not seen or seen[-1] != phase):
            seen.append(phase)

    def _watch(self, path: str, handle: Any) -> None:
        rv = self.api.get(path)["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            try:
                for ev in self.api.watch_lines(path, rv, timeout=2):
                    obj = ev.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        handle(ev["type"], obj)
            except (ApiError, ValueError, OSError):
                self._stop.wait(0.2)
            except Exception:  # noqa: BLE001 - the client closed at stop
                if self._stop.is_set():
                    return
                raise


def test_volcano_chart_keeps_the_scheduler_configmap_when_its_scheduler_is_scaled_to_zero(volcano_dir) -> None:
    if version_of(volcano_dir) != V115:
        pytest.skip("Volcano v1.15's chart")
    default = _by_kind(_render(volcano_dir / "chart"))
    assert default["ConfigMap"]["metadata"]["name"] == CONFIGMAP and KEY in default["ConfigMap"]["data"]
    assert default["Deployment"]["spec"]["replicas"] == 1
    assert "--leader-elect=false" in default["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    scaled = _by_kind(_render(volcano_dir / "chart", "custom.scheduler_replicas=0"))
    assert scaled["Deployment"]["spec"]["replicas"] == 0
    assert scaled["ConfigMap"]["data"] == default["ConfigMap"]["data"]
    assert "ConfigMap" not in _by_kind(_render(volcano_dir / "chart", "custom.scheduler_enable=false"))


def test_switch_from_vc_scheduler_to_tidesched_and_back_with_jobs_running(e2e, volcano_dir) -> None:
    if version_of(volcano_dir) != V115:
        pytest.skip("the switch is checked with Volcano v1.15.1")
    api, ns, cp = e2e.api, e2e.ns, e2e.cp
    for i in range(4):
        create_node(api, f"node-{i}", cpu="8", memory="32Gi")
    # Volcano's chart's scheduler ConfigMap, mounted as a file for whichever scheduler runs.
    cm = _by_kind(_render(volcano_dir / "chart"))["ConfigMap"]
    cm["metadata"].pop("labels", None)
    api.apply(cm)
    conf = e2e.tmp / KEY
    volume = ConfigMapVolume(cp, NAMESPACE, CONFIGMAP, KEY, conf).start()
    recorder = Recorder(cp, ns).start()
    try:
        expected: list[str] = []

        def submit(name: str, replicas: int, **kw: Any) -> None:
            expected.extend(volcano_job(api, ns, name, replicas=replicas, cpu="1", memory="1Gi", **kw))

        def all_running(names: list[str]) -> bool:
            now = pods(api, ns)
            return all(n in now and (now[n].get("status") or {}).get("phase") == "Running" for n in names)

        vc = start_vc_scheduler(cp, volcano_dir, e2e.tmp, conf, args=("--schedule-period=1s",))
        submit("a", 4)
        submit("b", 3, min_available=2)
        wait_until(lambda: all_running(expected), 60, "vc-scheduler to run jobs a and b")

        # The switch: a job arrives as vc-scheduler is stopped (the chart's scheduler_replicas=0:
        # SIGTERM, its pod gone); tidesched starts on Volcano's ConfigMap and leads on its Lease.
        submit("c", 4)
        vc.stop()
        tidesched = e2e.scheduler(conf.read_text(), args=TIDESCHED_ARGS)
        submit("d", 2)
        wait_until(lambda: all_running(expected), 60, "tidesched to run jobs c and d")

        # And back: tidesched scaled to 0, vc-scheduler to 1, a job arriving in between.
        submit("e", 3)
        assert tidesched.stop() == 0
        vc.restart()
        submit("f", 2)
        wait_until(lambda: all_running(expected), 60, "vc-scheduler to run jobs e and f")
        groups = {podgroup_name(api, ns, j) for j in "abcdef"}
        wait_until(lambda: all(recorder.phases[g] and recorder.phases[g][-1] == "Running" for g in groups), 30,
                   "every PodGroup Running")
        vc.stop()
    finally:
        recorder.stop()
        volume.stop()
        # The chart's ConfigMap goes with the test: later tests look for Volcano's as a fallback.
        api.delete(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}")

    assert set(expected) <= set(bound(api, ns)), "a pod is not bound"
    assert not recorder.deleted, f"pods deleted: {recorder.deleted}"
    binds = collections.Counter(a.name for a in cp.audit("binding") if a.namespace == ns)
    assert set(binds) == set(expected) and all(c == 1 for c in binds.values()), f"bindings per pod: {dict(binds)}"
    assert not [a for a in cp.audit("eviction") if a.namespace == ns], "a pod was evicted"
    backwards = {g: seq for g, seq in recorder.phases.items()
                 if any(PHASES.get(b, 0) < PHASES.get(a, 0) for a, b in zip(seq, seq[1:]))}
    assert not backwards, f"PodGroup phases went backwards: {json.dumps(backwards)}"
