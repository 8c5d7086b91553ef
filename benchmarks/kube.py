"""Benchmark: pods bound per second on a real control plane, tidesched beside kube-scheduler and
Volcano's vc-scheduler.

For each size and each scheduler a fresh control plane (etcd + kube-apiserver from
``../shared/envtest`` or ``KUBEBUILDER_ASSETS``, raised in-flight limits, Volcano's CRDs when its
build is there) gets the same nodes and pending pods (1 CPU / 1 Gi each), each pod in a PodGroup
of its own (minMember 1, ``Pending``, the pod annotated with its name, as Volcano's podgroup
controller would leave them) — ``--gang N``: also runs with PodGroups of minMember N,
``--bare-pods``: pods without PodGroups. Every scheduler is given the same stored objects but
``schedulerName`` (``--inputs DIR`` writes them and says which runs' were identical). Then the
scheduler starts:

* ``kube-scheduler`` from the same directory (``KubeSchedulerConfiguration``: qps/burst 2000, no
  leader election; pods with ``schedulerName: default-scheduler``) as ``system:kube-scheduler``,
  the identity kubeadm gives it, under the API server's bootstrap RBAC roles for it;
* ``tidesched run`` as deployed: ``deploy/`` applied, its ServiceAccount's token, the Volcano
  scheduler configuration (below), ``--kube-api-qps``/``--kube-api-burst`` 2000 (pods with
  ``schedulerName: volcano``).
* the floor (``benchmarks/floor_binder.py``, unless ``--no-floor``): tidesched's informers and
  binder with the same ServiceAccount, limiter and watches, but no scheduling decision — every
  pending pod is bound round-robin as soon as it is seen. Its pods/s is the most any scheduler
  built on this plumbing can reach on this control plane and machine.
* ``vc-scheduler``, Volcano v1.15.1's scheduler (``--volcano 1.7.0``: v1.7.0's), from
  ``../shared/volcano-1.15`` or ``VOLCANO_ASSETS`` (skipped, saying so, when it is not there): the
  same configuration file as tidesched, ``--kube-api-qps``/``--kube-api-burst`` 2000, no leader
  election, its own ServiceAccount under the ClusterRole Volcano's chart gives it (v1.7.0: a role
  of what it reads and writes, ``tests/e2e/volcano.py``), so RBAC and API Priority and Fairness
  treat it as they treat tidesched. It schedules no pod without
  a PodGroup, hence the PodGroup per pod; it runs a session every second whatever changed. Its
  "after sync" is counted from its klog line ``scheduler completes Initialization and start to
  run``, logged once its cache's informers have synced (it logs nothing for the sync itself).

The Volcano scheduler configuration of tidesched and vc-scheduler is ``--scheduler-conf FILE``,
by default Volcano's ``volcano-scheduler.conf`` beside vc-scheduler (its chart's default;
``--volcano-config ci``: ``volcano-scheduler-ci.conf``, the one Volcano's own e2e runs install,
with reclaim, preempt, sla, network-topology-aware and DRA switched on); without Volcano's build,
tidesched's built-in default.

Bindings are counted from the API server's audit log (a local file: counting costs the API server
nothing). Printed per run: pods/s from the first bind to the last, the first bind's delay after
the scheduler process started and after its log said its informers synced, total time, the CPU
seconds the scheduler, kube-apiserver and etcd spent from start to the last bind, the scheduler's
peak RSS, its write requests per bound pod by resource (the API server's own request counters),
and where there are PodGroups their phases once the scheduler has written them (not timed). A
run ends, saying why, when the scheduler exits, binds nothing for ``--stall`` seconds (300) or
exceeds ``--timeout`` (default 600 s + 0.1 s per pod per 1,000 nodes: vc-scheduler, measured
once at ~36 pods/s at 1,000 × 5,000, needs minutes); it prints progress every minute. Run by hand:

    .venv/bin/python benchmarks/kube.py                     # 1,000 × 5,000 and 5,000 × 10,000
    .venv/bin/python benchmarks/kube.py --sizes 1000x5000 --gang 8
    .venv/bin/python benchmarks/kube.py --peers tidesched,vc-scheduler --sizes 1000x5000 --gang 8
    .venv/bin/python benchmarks/kube.py --only tidesched --sizes 200x1000
    .venv/bin/python benchmarks/kube.py --repeat 3 --gang 8     # 3 interleaved rounds, medians
    .venv/bin/python benchmarks/kube.py --repeat 3 --gang 8 --volcano-config ci
    .venv/bin/python benchmarks/kube.py --dra --no-floor --sizes 1000x8000   # DRA (issue 35)

``--dra``: every node's 8 GPUs are a ResourceSlice of a DRA driver (``gpu.example.com``, one
DeviceClass) instead of a count, and every pod asks for one GPU through a ResourceClaim of its
own (``resourceClaimName``, made before the run: no kube-controller-manager needed), 1 CPU /
1 Gi besides. vc-scheduler is then Volcano **v1.15.1** (``../shared/volcano-1.15``, unpacked to
``~/.cache/volcano-1.15.1``), started before the pods exist as its README asks, with the admin's
credentials (the v1.7.0 ClusterRole of ``tests/e2e/volcano.py`` has no ``resource.k8s.io``);
tidesched and vc-scheduler run v1.15.1's CI config less ``proportion`` (with proportion
vc-scheduler binds no pod that has a claim, see ``benchmarks/dra_differential.py``).

The table ends with each size's ratios to kube-scheduler (every other run's) and tidesched's to
vc-scheduler's on the same inputs. This machine's speed drifts within minutes (the same run can
take half again as long a few minutes later), so ``--repeat N`` runs N rounds with the schedulers
interleaved and prints the ratios within each round and those of the medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from cluster import SA_NAME, SA_NAMESPACE, TIDESCHED, create_node, ensure_namespace, install_deploy  # noqa: E402
from controlplane import Api, ControlPlane, find_assets  # noqa: E402
from volcano import (  # noqa: E402
    V115,
    V170,
    chart_scheduler_rules,
    find_volcano,
    install_volcano_crds,
    scheduler_identity,
    start_vc_scheduler,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
PEERS = ("kube-scheduler", "floor", "tidesched", "vc-scheduler")
# The peers that read PodGroups and so also run the --gang inputs.
GANG_PEERS = ("tidesched", "vc-scheduler")
NS = "bench"
GROUP_NAME = "scheduling.k8s.io/group-name"


def cpu_seconds(pid: int) -> float:
    """user + system CPU of a process and its reaped children, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK


def peak_rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def podgroup_body(name: str, min_member: int) -> dict[str, object]:
    """A PodGroup as Volcano's podgroup controller leaves it before any scheduler has looked:
    ``Pending`` (vc-scheduler v1.7.0 enqueues only Pending groups; one without a phase would go
    straight to allocate in its first session)."""
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"minMember": min_member, "queue": "default"},
            "status": {"phase": "Pending"}}


def pod_body(name: str, scheduler: str, group: str | None, dra: bool = False) -> dict[str, object]:
    spec: dict[str, object] = {
        "schedulerName": scheduler,
        "automountServiceAccountToken": False,
        "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                      **({"claims": [{"name": "gpu"}]} if dra else {})}}],
    }
    if dra:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": {GROUP_NAME: group} if group else {}},
        "spec": spec,
    }


DRA_API = "/apis/resource.k8s.io/v1"
DRA_DRIVER = "gpu.example.com"
DRA_GPUS = 8


def populate_dra(api: Api, nodes: int, pods: int, pool: ThreadPoolExecutor) -> None:
    """``--dra``: a DeviceClass, each node's GPUs as a ResourceSlice, a one-GPU claim per pod."""
    api.post(f"{DRA_API}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRA_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}})
    list(pool.map(lambda i: api.post(f"{DRA_API}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{i:05d}-gpus"},
        "spec": {"driver": DRA_DRIVER, "nodeName": f"node-{i:05d}",
                 "pool": {"name": f"node-{i:05d}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{j}", "attributes": {"model": {"string": "H200"}},
                              "capacity": {"memory": {"value": "141Gi"}}} for j in range(DRA_GPUS)]},
    }), range(nodes)))
    list(pool.map(lambda i: api.post(f"{DRA_API}/namespaces/{NS}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"pod-{i:06d}-gpu", "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER}}]}},
    }), range(pods)))


def populate(api: Api, nodes: int, pods: int, scheduler: str, group: int, workers: int = 16, dra: bool = False) -> None:
    """Nodes (registered, Ready, untainted) and pending pods, in parallel. ``group`` 0: bare pods;
    1: one PodGroup of minMember 1 per pod; N: PodGroups of minMember N (the last one smaller when
    N does not divide the pods). The same objects for every scheduler but ``schedulerName``.
    ``dra``: GPUs and one-GPU claims (populate_dra), each pod naming its claim."""
    ensure_namespace(api, NS)
    # The default Queue Open, as Volcano's queue controller (not run here) leaves it: vc-scheduler
    # v1.15 allocates nothing in a queue whose state is not Open.
    api.request("PATCH", "/apis/scheduling.volcano.sh/v1beta1/queues/default/status", {"status": {"state": "Open"}})
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: create_node(api, f"node-{i:05d}", cpu="32", memory="128Gi"), range(nodes)))
        if dra:
            populate_dra(api, nodes, pods, pool)
        if group:
            groups = (pods + group - 1) // group
            list(pool.map(lambda g: api.post(
                f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups",
                podgroup_body(f"pg-{g:06d}", min(group, pods - g * group)),
            ), range(groups)))
        list(pool.map(lambda i: api.post(
            f"/api/v1/namespaces/{NS}/pods",
            pod_body(f"pod-{i:06d}", scheduler, f"pg-{i // group:06d}" if group else None, dra),
        ), range(pods)))


_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields")


def inputs_as_stored(api: Api) -> bytes:
    """The benchmark's pods and PodGroups and the default Queue as the API server returns them,
    less what it sets per object (uid, resourceVersion, creationTimestamp, managedFields): equal
    bytes for two runs mean the schedulers were given the same objects."""
    def strip(obj: dict) -> dict:
        obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in _SERVER_SET}
        return obj

    out = {
        "queue": strip(api.get("/apis/scheduling.volcano.sh/v1beta1/queues/default")),
        "podgroups": [strip(o) for o in api.items(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups")],
        "pods": [strip(o) for o in api.items(f"/api/v1/namespaces/{NS}/pods")],
    }
    return json.dumps(out, sort_keys=True, indent=1).encode()


_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})


def api_writes(api: Api) -> dict[str, float]:
    """Write requests the API server has served so far, by resource[/subresource], from its own
    ``apiserver_request_total`` (the benchmark's own writes happen before the scheduler starts)."""
    out: dict[str, float] = {}
    for line in api.client.get("/metrics").text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].replace('"', "").split(",")
        )
        if labels.get("verb") not in _WRITES:
            continue
        what = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
        out[what] = out.get(what, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def bind_times(cp: ControlPlane) -> list[float]:
    """Epoch seconds of every successful binding, from the audit log."""
    out = []
    try:
        lines = (cp.workdir / "audit.log").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        ev = json.loads(line)
        if (ev.get("objectRef") or {}).get("subresource") == "binding" and (ev.get("responseStatus") or {}).get("code") == 201:
            out.append(datetime.fromisoformat(ev["stageTimestamp"]).timestamp())
    return sorted(out)


class BindCounter:
    """Successful bindings in the audit log so far, reading only what was appended since the
    last call: re-reading the whole log every poll cost the machine a tenth of a core at
    5,000 × 10,000, taken from the processes being measured."""

    def __init__(self, cp: ControlPlane) -> None:
        self.path = cp.workdir / "audit.log"
        self.offset = 0
        self.count = 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return self.count
        end = data.rfind(b"\n") + 1  # whole lines only; a line being written is read next time
        for line in data[:end].split(b"\n"):
            if b'"binding"' in line and b'"code":201' in line:
                self.count += 1
        self.offset += end
        return self.count


# vc-scheduler (v1.7.0 and v1.15.1) logs this (klog, -v=2) once its cache's informers have synced, just before
# its first session; it prints no line of its own for the sync itself.
VC_SYNCED = "cheduler completes Initialization and start to run"  # "scheduler" in v1.7.0, "Scheduler" in v1.15


def synced_at(log: Path, started: float | None = None) -> float | None:
    """Epoch time of the scheduler's "informers synced" log line: tidesched's (and the floor's)
    ``informers synced``, or vc-scheduler's :data:`VC_SYNCED` (klog's header has no year: the
    year of ``started`` is taken)."""
    try:
        for line in log.read_text(errors="replace").splitlines():
            if "informers synced" in line:
                return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if VC_SYNCED in line:  # I1126 08:01:08.123456   4242 scheduler.go:…] …
                year = datetime.fromtimestamp(started or time.time()).year
                return datetime.strptime(f"{year} {line[1:21]}", "%Y %m%d %H:%M:%S.%f").timestamp()
    except (OSError, ValueError):
        pass
    return None


@dataclass
class Result:
    scheduler: str
    nodes: int
    pods: int
    gang: int  # 0: bare pods, 1: one PodGroup per pod, N: gangs of N
    bound: int
    pods_per_s: float
    first_bind_s: float
    total_s: float
    cpu: dict[str, float]
    rss_mib: float
    after_sync_s: float  # first bind after the informers synced (the scheduler's log says when)
    writes: dict[str, float]  # the scheduler's write requests by resource[/subresource]
    round: int = 1
    note: str = ""  # why the run stopped before every pod was bound
    phases: dict[str, int] | None = None  # PodGroup phases after the run (polled up to 30 s)
    phases_settled_s: float = float("nan")  # when no PodGroup was Pending or Inqueue any more, after the last bind
    inputs: str = ""  # digest of inputs_as_stored() (--inputs)


@dataclass
class Setup:
    """What every run of one invocation shares."""

    assets: Path
    volcano: Path | None  # Volcano's build (CRDs, vc-scheduler), None when absent
    conf: Path | None  # the Volcano scheduler configuration for tidesched and vc-scheduler
    extra: dict[str, list[str]]  # extra flags per scheduler
    timeout: float | None  # seconds per run; None: scaled to the size (run_timeout)
    stall: float  # a run ends when no pod was bound for this long
    py_spy: str | None = None
    logs: Path | None = None
    inputs: Path | None = None
    dra: bool = False  # --dra: GPUs as ResourceSlices, one one-GPU ResourceClaim per pod
    vc_rules: list[dict[str, Any]] | None = None  # vc-scheduler's ClusterRole (None: v1.7.0's, volcano.py)


def run_timeout(nodes: int, pods: int) -> float:
    """The default limit of one run: ten minutes plus a tenth of a second per pod per thousand
    nodes (vc-scheduler's pace shrinks with the nodes it scores: ~36 pods/s at 1,000 nodes was
    measured once, so 10,000 pods on 5,000 nodes may take half an hour). A run that binds nothing
    for ``--stall`` seconds ends long before that."""
    return 600.0 + 0.1 * pods * max(1.0, nodes / 1000)


def start_scheduler(
    which: str, cp: ControlPlane, workdir: Path, setup: Setup, kubeconfig: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    extra = setup.extra.get(which, [])
    if which == "vc-scheduler":
        assert setup.volcano is not None and setup.conf is not None and (kubeconfig is not None or setup.dra)
        # Its own ServiceAccount (scheduler_identity), like tidesched's and kube-scheduler's
        # identities: through RBAC and API Priority and Fairness. -v=2 for the line that says its
        # informers synced (VC_SYNCED); the flags kube-api-qps/burst are its defaults, written out.
        proc = start_vc_scheduler(
            cp, setup.volcano, workdir, setup.conf, kubeconfig=kubeconfig, healthy_timeout=300.0,
            log_name=f"{which}.log",
            args=("--kube-api-qps=2000", "--kube-api-burst=2000", "-v=2", *extra),
        )
        assert proc.popen is not None
        return proc.popen
    log = open(workdir / f"{which}.log", "wb")
    if which == "kube-scheduler":
        # Its production identity (system:kube-scheduler, through RBAC and API Priority and
        # Fairness like tidesched's ServiceAccount), not the admin's system:masters, which skips both.
        kubeconfig = cp.kubeconfig(workdir / "kube-scheduler.kubeconfig", cp.kube_scheduler_token, user="kube-scheduler")
        conf = workdir / "kube-scheduler.yaml"
        conf.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection:\n  kubeconfig: {kubeconfig}\n  qps: 2000\n  burst: 2000\n"
            "leaderElection:\n  leaderElect: false\n"
        )
        cmd = [str(cp.assets / "kube-scheduler"), f"--config={conf}", "--secure-port=0", "-v=1", *extra]
    elif which == "floor":
        token = cp.service_account_token(SA_NAMESPACE, SA_NAME)
        kubeconfig = cp.kubeconfig(workdir / "floor.kubeconfig", token)
        cmd = [sys.executable, str(ROOT / "benchmarks" / "floor_binder.py"), f"--kubeconfig={kubeconfig}",
               "--kube-api-qps=2000", "--kube-api-burst=2000", *extra]
    else:
        token = cp.service_account_token(SA_NAMESPACE, SA_NAME)
        kubeconfig = cp.kubeconfig(workdir / "tidesched.kubeconfig", token)
        conf_flag = [f"--scheduler-conf={setup.conf}"] if setup.conf else []
        cmd = [str(TIDESCHED), "run", f"--kubeconfig={kubeconfig}", *conf_flag, "--kube-api-qps=2000",
               "--kube-api-burst=2000", "-v=1", *extra]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for_binds(
    which: str, proc: subprocess.Popen[bytes], count: BindCounter, pods: int, timeout: float, stall: float,
    progress: float = 60.0,
) -> str:
    """Poll the audit log until every pod is bound; "" then, else why the wait ended: the scheduler
    exited, bound nothing new for ``stall`` seconds (from its start, before the first bind), or the
    run took longer than ``timeout``. Says how far it got every ``progress`` seconds."""
    t0 = time.monotonic()
    last, last_change, report = 0, t0, t0 + progress
    while True:
        n = count()
        now = time.monotonic()
        if n >= pods:
            return ""
        if n != last:
            last, last_change = n, now
        if proc.poll() is not None:
            return f"{which} exited with code {proc.returncode} after binding {n} of {pods} pods"
        if now - last_change > stall:
            since = "its start" if n == 0 else "the last one"
            return f"{which} bound no pod for {stall:.0f}s since {since} ({n} of {pods} bound): run stopped"
        if now - t0 > timeout:
            return f"{which} bound {n} of {pods} pods in the {timeout:.0f}s limit (--timeout): run stopped"
        if now >= report:
            print(f"    {which}: {n} of {pods} bound after {now - t0:.0f}s", flush=True)
            report += progress
        time.sleep(0.5)


def podgroup_phases(api: Api) -> dict[str, int]:
    out: dict[str, int] = {}
    for pg in api.items(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"):
        phase = (pg.get("status") or {}).get("phase") or "(none)"
        out[phase] = out.get(phase, 0) + 1
    return out


def _suffix(gang: int) -> str:
    return {0: "-bare", 1: ""}.get(gang, f"-gang{gang}")


def run_one(which: str, nodes: int, pods: int, gang: int, setup: Setup) -> Result:
    cp = ControlPlane(setup.assets, load_test=True)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        install_deploy(cp.admin)
        if setup.volcano is not None:
            # Volcano's own CRDs in every run (the same stored objects for every scheduler);
            # vc-scheduler v1.7.0 also watches NUMA topologies, which only Volcano's CRDs define.
            install_volcano_crds(cp.admin, setup.volcano)
        kubeconfig = scheduler_identity(cp, cp.workdir, rules=setup.vc_rules) if which == "vc-scheduler" and not setup.dra else None
        early = None
        if which == "vc-scheduler" and setup.dra:
            # v1.15.1 drops pods whose claims exist before it starts (its README): start it first.
            count_binds = BindCounter(cp)
            started = time.time()
            early = proc = start_scheduler(which, cp, cp.workdir, setup, kubeconfig)
        t = time.monotonic()
        populate(cp.admin, nodes, pods, "default-scheduler" if which == "kube-scheduler" else "volcano", gang, dra=setup.dra)
        print(f"  {which}: {nodes} nodes, {pods} pods created in {time.monotonic() - t:.0f}s", flush=True)
        digest = ""
        if setup.inputs is not None:
            data = inputs_as_stored(cp.admin)
            digest = hashlib.sha256(data).hexdigest()[:16]
            setup.inputs.mkdir(parents=True, exist_ok=True)
            (setup.inputs / f"{which}-{nodes}x{pods}{_suffix(gang)}.json").write_bytes(data)
        procs = {"apiserver": cp.apiserver.popen.pid, "etcd": cp.etcd.popen.pid}  # type: ignore[union-attr]
        cpu0 = {k: cpu_seconds(p) for k, p in procs.items()}
        writes0 = api_writes(cp.admin)
        if early is None:
            count_binds = BindCounter(cp)
            started = time.time()
            proc = start_scheduler(which, cp, cp.workdir, setup, kubeconfig)
        else:
            proc = early
        procs["scheduler"] = proc.pid
        cpu0["scheduler"] = 0.0
        spy = None
        if setup.py_spy and which in ("floor", "tidesched"):  # sampled, not paused: the figures stay honest-ish
            spy = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(proc.pid), "--nonblocking",
                 "--threads", *os.environ.get("PYSPY_FLAGS", "--gil").split(), "-r", "100", "-f", "raw", "-o",
                 setup.py_spy if which == "tidesched" else f"{setup.py_spy}.{which}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        timeout = setup.timeout or run_timeout(nodes, pods)
        note = wait_for_binds(which, proc, count_binds, pods, timeout, setup.stall)
        cpu = {k: cpu_seconds(p) - cpu0[k] for k, p in procs.items()}
        if spy is not None:
            spy.send_signal(2)  # py-spy writes its samples on SIGINT
            spy.wait(30)
        rss = peak_rss_mib(proc.pid)
        writes = {k: v - writes0.get(k, 0.0) for k, v in api_writes(cp.admin).items()}
        if note:
            print(f"  !! {note}", flush=True)
        times = bind_times(cp)
        if setup.logs is not None:  # each bind's time: where the stream stalls (a session, a GC)
            setup.logs.mkdir(parents=True, exist_ok=True)
            (setup.logs / f"{which}-{nodes}x{pods}{_suffix(gang)}.binds.json").write_text(json.dumps(times))
        synced = synced_at(cp.workdir / f"{which}.log", started)
        phases, settled = None, float("nan")
        if gang and which in GANG_PEERS:
            # The PodGroups' status as the scheduler writes it after the binds (not measured above):
            # polled until none is Pending or Inqueue any more, for at most 30 s (a stuck run: once).
            t_end = time.time()
            while True:
                phases = podgroup_phases(cp.admin)
                if note:
                    break
                if not (phases.keys() & {"Pending", "Inqueue", "(none)"}):
                    settled = time.time() - (times[-1] if times else t_end)
                    break
                if time.time() - t_end > 30:
                    break
                time.sleep(1.0)
        span = (times[-1] - times[0]) if len(times) > 1 else float("nan")
        return Result(
            which, nodes, pods, gang, len(times),
            (len(times) - 1) / span if span and span == span else 0.0,
            (times[0] - started) if times else float("nan"),
            (times[-1] - started) if times else float("nan"),
            cpu, rss,
            (times[0] - synced) if times and synced else float("nan"),
            {k: v for k, v in writes.items() if v},
            note=note,
            phases=phases,
            phases_settled_s=settled,
            inputs=digest,
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if setup.logs is not None:  # the scheduler's own log (sessions, their times) outlives the run
            setup.logs.mkdir(parents=True, exist_ok=True)
            src = cp.workdir / f"{which}.log"
            if src.exists():
                shutil.copy(src, setup.logs / f"{which}-{nodes}x{pods}{_suffix(gang)}.log")
        cp.cleanup()


def dra_setup(conf: Path | None) -> tuple[Path | None, str, Path]:
    """``--dra``: Volcano v1.15.1 unpacked, and the configuration file for both Volcano schedulers
    (``--scheduler-conf``, else v1.15.1's CI config less proportion)."""
    from cluster import VOLCANO_115_CI_CONF  # noqa: PLC0415

    if conf is None:
        conf = Path(tempfile.mkdtemp(prefix="kube-dra-")) / "volcano-scheduler-dra.conf"
        conf.write_text(VOLCANO_115_CI_CONF.replace("  - name: proportion\n", ""))
    shared = ROOT.parent / "shared" / "volcano-1.15"
    if not (shared / "unpack").exists():
        return None, f"no {shared}", conf
    dest = Path.home() / ".cache" / "volcano-1.15.1"
    subprocess.run(["sh", str(shared / "unpack"), str(dest)], check=True, capture_output=True)
    return dest, "", conf


def _peers(args: argparse.Namespace, ap: argparse.ArgumentParser) -> list[str]:
    if args.only and args.peers:
        ap.error("--only and --peers say the same thing: give one")
    chosen = [p.strip() for p in (args.only or args.peers or ",".join(PEERS)).split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PEERS]
    if unknown:
        ap.error(f"unknown scheduler {', '.join(unknown)} (choose from {', '.join(PEERS)})")
    if args.no_floor and "floor" in chosen:
        chosen.remove("floor")
    return [p for p in PEERS if p in chosen]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000x5000,5000x10000", help="NODESxPODS, comma-separated")
    ap.add_argument("--gang", type=int, default=0,
                    help="also run tidesched and vc-scheduler with PodGroups of this minMember")
    ap.add_argument("--gang-only", action="store_true", help="with --gang: only the gang runs")
    ap.add_argument("--bare-pods", action="store_true",
                    help="pods without PodGroups (this benchmark's inputs before vc-scheduler, which "
                         "schedules no pod without one, joined; vc-scheduler then runs only --gang)")
    ap.add_argument("--peers", metavar="LIST", help=f"comma-separated subset of {','.join(PEERS)} (default: all)")
    ap.add_argument("--only", metavar="LIST", help="the same as --peers")
    ap.add_argument("--no-floor", action="store_true", help="skip the floor run (benchmarks/floor_binder.py)")
    ap.add_argument("--volcano", choices=(V115, V170), default=V115,
                    help="vc-scheduler's version, and its CRDs (default %(default)s)")
    ap.add_argument("--volcano-config", choices=("default", "ci"), default="default",
                    help="with no --scheduler-conf: Volcano's chart's default config (volcano-scheduler.conf) "
                         "or the one its own CI installs (volcano-scheduler-ci.conf)")
    ap.add_argument("--scheduler-conf", type=Path,
                    help="Volcano scheduler configuration for tidesched and vc-scheduler (default: "
                         "--volcano-config of Volcano's build)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per run (default: 600 + 0.1 per pod per 1,000 nodes)")
    ap.add_argument("--stall", type=float, default=300.0,
                    help="end a run when no pod was bound for this many seconds (300)")
    ap.add_argument("--tidesched-arg", action="append", default=[], help="extra flag for tidesched run")
    ap.add_argument("--vc-scheduler-arg", action="append", default=[], help="extra flag for vc-scheduler")
    ap.add_argument("--py-spy", metavar="FILE", help="sample tidesched with py-spy (installed by hand) into FILE (the floor into FILE.floor)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="N rounds per size, the schedulers interleaved: this machine's speed drifts "
                         "within minutes, so ratios are taken within a round and over medians")
    ap.add_argument("--dra", action="store_true",
                    help="GPUs as DRA ResourceSlices, one one-GPU ResourceClaim per pod; vc-scheduler v1.15.1")
    ap.add_argument("--logs", metavar="DIR", type=Path, help="keep each scheduler's log, and its binds' times (.binds.json), in DIR")
    ap.add_argument("--inputs", metavar="DIR", type=Path,
                    help="write each run's pods, PodGroups and Queue as stored (less uid, resourceVersion, "
                         "timestamps) to DIR and say which runs had identical inputs")
    args = ap.parse_args()
    peers = _peers(args, ap)
    assets, missing = find_assets(("kube-scheduler",))
    if assets is None:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    volcano, vc_missing = find_volcano(binaries=("vc-scheduler",), version=args.volcano)
    conf = args.scheduler_conf
    name = "volcano-scheduler.conf" if args.volcano_config == "default" else "volcano-scheduler-ci.conf"
    if args.dra:
        volcano, vc_missing, conf = dra_setup(conf)
        if "floor" in peers:  # the floor binds without allocating: no figure for DRA
            peers.remove("floor")
    if conf is None and volcano is not None and (volcano / name).is_file():
        conf = volcano / name
    if conf is not None and not conf.is_file():
        print(f"cannot run: no scheduler configuration {conf}", file=sys.stderr)
        return 2
    if "vc-scheduler" in peers and (volcano is None or conf is None):
        print(f"vc-scheduler skipped: {vc_missing or 'no volcano-scheduler.conf beside it (give --scheduler-conf)'}",
              flush=True)
        peers.remove("vc-scheduler")
    if args.gang_only and not args.gang:
        ap.error("--gang-only needs --gang N")
    if args.gang == 1 or args.gang < 0:
        ap.error("--gang N wants N > 1 (one PodGroup of minMember 1 per pod is the default input)")
    single = 0 if args.bare_pods else 1
    if "vc-scheduler" in peers and args.bare_pods and not args.gang:
        print("vc-scheduler skipped: it schedules no pod without a PodGroup (--bare-pods)", flush=True)
        peers.remove("vc-scheduler")
    print(f"scheduler configuration of tidesched and vc-scheduler: {conf or 'tidesched built-in default'}; "
          f"CRDs: {'Volcano ' + str(volcano / 'crds') if volcano else 'deploy/crds'}", flush=True)
    setup = Setup(
        assets, volcano, conf,
        {"tidesched": args.tidesched_arg, "vc-scheduler": args.vc_scheduler_arg},
        args.timeout, args.stall, args.py_spy, args.logs, args.inputs, args.dra,
        chart_scheduler_rules(volcano) if volcano is not None and args.volcano == V115 and not args.dra else None,
    )
    results: list[Result] = []
    failed: list[str] = []
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.lower().split("x"))
        runs: list[tuple[str, int]] = []
        if not args.gang_only:
            runs += [(p, single) for p in peers if not (p == "vc-scheduler" and single == 0)]
        if args.gang:
            runs += [(p, args.gang) for p in peers if p in GANG_PEERS]
        for rnd in range(1, args.repeat + 1):  # rounds interleave the schedulers: each sees the same phases
            for which, gang in runs:
                try:
                    r = run_one(which, nodes, pods, gang, setup)
                except Exception as exc:  # one broken run (a start that failed) should not lose the others
                    failed.append(f"{_name(which, gang)} {nodes} × {pods} round {rnd}: {exc}")
                    print(f"  !! {failed[-1]}", flush=True)
                    continue
                r.round = rnd
                results.append(r)
                print(f"  {_row(r)}", flush=True)
    _report(results, args.repeat)
    if args.inputs is not None:
        print(f"\ninputs as stored (in {args.inputs}), identical where the digest is:")
        for r in results:
            print(f"{_name(r.scheduler, r.gang):<24} {r.nodes:>6} × {r.pods:<6} round {r.round}  {r.inputs}")
    incomplete = [r for r in results if r.note] + failed
    if incomplete:
        print("\nruns that did not bind every pod:")
        for r in incomplete:
            print(f"  {r.note if isinstance(r, Result) else r}")
    return 1 if incomplete else 0


def _report(results: list[Result], repeat: int) -> None:
    print("\nscheduler                 nodes × pods   group  bound   pods/s  first bind (after sync)  total"
          "   CPU s: sched / apiserver / etcd  peak RSS")
    for r in results:
        print(_row(r))
    print("\n'group': 1 = one PodGroup of minMember 1 per pod, N = gangs of N, - = pods without PodGroups."
          " 'after sync': after the log line saying the informers synced (tidesched, floor: 'informers"
          " synced'; vc-scheduler: '" + VC_SYNCED + "', logged after its cache sync; kube-scheduler: none).")
    print("\nwrite requests per bound pod (from the API server's apiserver_request_total):")
    for r in results:
        per_pod = ", ".join(f"{k} {v / max(r.bound, 1):.3f}" for k, v in sorted(r.writes.items(), key=lambda kv: -kv[1]))
        print(f"{_name(r.scheduler, r.gang):<24} {r.nodes:>6} × {r.pods:<6} {per_pod}")
    if any(r.phases for r in results):
        print("\nPodGroup phases after the last bind (polled each second for up to 30 s until none is Pending"
              " or Inqueue; not part of the figures above):")
        for r in results:
            if r.phases:
                when = ("when the run stopped" if r.note
                        else f"settled {r.phases_settled_s:.1f}s after the last bind" if r.phases_settled_s == r.phases_settled_s
                        else "not settled after 30 s")
                print(f"{_name(r.scheduler, r.gang):<24} {r.nodes:>6} × {r.pods:<6} "
                      + ", ".join(f"{k} {v}" for k, v in sorted(r.phases.items())) + f"  ({when})")
    sizes = sorted({(r.nodes, r.pods) for r in results})
    print("\npods/s relative to kube-scheduler's, and tidesched's to vc-scheduler's on the same inputs, in the same round:")
    for size in sizes:
        for rnd in range(1, repeat + 1):
            rate = {(r.scheduler, r.gang): r.pods_per_s for r in results if (r.nodes, r.pods) == size and r.round == rnd}
            label = f"  round {rnd}" if repeat > 1 else ""
            print(f"{size[0]:>6} × {size[1]:<6}{label}  {_ratios(rate)}")
    if repeat > 1:
        print("\nmedian pods/s over the rounds, its ratio to kube-scheduler's median, tidesched's to vc-scheduler's:")
        for size in sizes:
            runs_of: dict[tuple[str, int], list[float]] = {}
            for r in results:
                if (r.nodes, r.pods) == size:
                    runs_of.setdefault((r.scheduler, r.gang), []).append(r.pods_per_s)
            med = {k: statistics.median(v) for k, v in runs_of.items()}
            cells = ", ".join(f"{_name(which, g)} {m:.0f}" for (which, g), m in med.items())
            print(f"{size[0]:>6} × {size[1]:<6}  {cells}\n{'':>15}  {_ratios(med)}")


def _ratios(rate: dict[tuple[str, int], float]) -> str:
    """Each run's pods/s over kube-scheduler's, then tidesched's over vc-scheduler's for each kind of
    input both had."""
    cells = []
    base = next((v for (which, _), v in rate.items() if which == "kube-scheduler"), 0.0)
    if base:
        cells += [f"{_name(which, g)} {v / base:.2f}×" for (which, g), v in rate.items() if which != "kube-scheduler"]
    for (which, g), v in rate.items():
        vc = rate.get(("vc-scheduler", g))
        if which == "tidesched" and vc:
            cells.append(f"tidesched ÷ vc-scheduler{f' (gang {g})' if g > 1 else ''} {v / vc:.2f}×")
    return ", ".join(cells) or "(no pair to compare)"


def _name(which: str, gang: int) -> str:
    return f"{which} (gang {gang})" if gang > 1 else which


def _row(r: Result) -> str:
    return (
        f"{_name(r.scheduler, r.gang):<24} {r.nodes:>6} × {r.pods:<6} {r.gang or '-':>4}  {r.bound:>6} {r.pods_per_s:>8.0f} "
        f"{r.first_bind_s:>9.1f}s ({r.after_sync_s:>5.2f}s) {r.total_s:>9.1f}s   {r.cpu['scheduler']:>6.1f} / {r.cpu['apiserver']:>6.1f} / "
        f"{r.cpu['etcd']:>5.1f}          {r.rss_mib:>5.0f} MiB"
    )


if __name__ == "__main__":
    raise SystemExit(main())
