"""Benchmark: pods bound per second on a real control plane, tidesched beside kube-scheduler.

For each size and each scheduler a fresh control plane (etcd + kube-apiserver from
``../shared/envtest`` or ``KUBEBUILDER_ASSETS``, raised in-flight limits) gets the same nodes and
pending pods (1 CPU / 1 Gi each, no PodGroups unless ``--gang``), then the scheduler starts:

* ``kube-scheduler`` from the same directory (``KubeSchedulerConfiguration``: qps/burst 2000, no
  leader election; pods with ``schedulerName: default-scheduler``) as ``system:kube-scheduler``,
  the identity kubeadm gives it, under the API server's bootstrap RBAC roles for it;
* ``tidesched run`` as deployed: ``deploy/`` applied, its ServiceAccount's token, Volcano's
  built-in configuration, ``--kube-api-qps``/``--kube-api-burst`` 2000 (pods with
  ``schedulerName: volcano``).
* the floor (``benchmarks/floor_binder.py``, unless ``--no-floor``): tidesched's informers and
  binder with the same ServiceAccount, limiter and watches, but no scheduling decision — every
  pending pod is bound round-robin as soon as it is seen. Its pods/s is the most any scheduler
  built on this plumbing can reach on this control plane and machine.

Bindings are counted from the API server's audit log (a local file: counting costs the API server
nothing). Printed per run: pods/s from the first bind to the last, the first bind's delay after
the scheduler process started, total time, the CPU seconds the scheduler, kube-apiserver and
etcd spent from start to the last bind, the scheduler's peak RSS, and its write requests per bound
pod by resource (the API server's own request counters). Run by hand:

    .venv/bin/python benchmarks/kube.py                     # 1,000 × 5,000 and 5,000 × 10,000
    .venv/bin/python benchmarks/kube.py --sizes 1000x5000 --gang 8
    .venv/bin/python benchmarks/kube.py --only tidesched --sizes 200x1000
    .venv/bin/python benchmarks/kube.py --repeat 3 --gang 8     # 3 interleaved rounds, medians

The table ends with each size's ratios to kube-scheduler (tidesched's and the floor's). This
machine's speed drifts within minutes (the same run can take half again as long a few minutes
later), so ``--repeat N`` runs N rounds with the schedulers interleaved and prints the ratio
within each round and that of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from cluster import SA_NAME, SA_NAMESPACE, TIDESCHED, create_node, ensure_namespace, install_deploy  # noqa: E402
from controlplane import Api, ControlPlane, find_assets  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


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


def populate(api: Api, nodes: int, pods: int, scheduler: str, gang: int, workers: int = 16) -> None:
    """Nodes (registered, Ready, untainted) and pending pods, in parallel."""
    ns = "bench"
    ensure_namespace(api, ns)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: create_node(api, f"node-{i:05d}", cpu="32", memory="128Gi"), range(nodes)))
        if gang:
            groups = (pods + gang - 1) // gang
            list(pool.map(lambda g: api.post(
                f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
                {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": f"pg-{g:05d}", "namespace": ns},
                 "spec": {"minMember": min(gang, pods - g * gang), "queue": "default"}},
            ), range(groups)))

        def pod(i: int) -> None:
            ann = {"scheduling.k8s.io/group-name": f"pg-{i // gang:05d}"} if gang else {}
            api.post(f"/api/v1/namespaces/{ns}/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pod-{i:06d}", "namespace": ns, "annotations": ann},
                "spec": {
                    "schedulerName": scheduler,
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            })

        list(pool.map(pod, range(pods)))


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


def synced_at(log: Path) -> float | None:
    """Epoch time of tidesched's "informers synced" log line."""
    try:
        for line in log.read_text(errors="replace").splitlines():
            if "informers synced" in line:
                return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except (OSError, ValueError):
        pass
    return None


@dataclass
class Result:
    scheduler: str
    nodes: int
    pods: int
    gang: int
    bound: int
    pods_per_s: float
    first_bind_s: float
    total_s: float
    cpu: dict[str, float]
    rss_mib: float
    after_sync_s: float  # first bind after the informers synced (tidesched's log says when)
    writes: dict[str, float]  # the scheduler's write requests by resource[/subresource]
    round: int = 1


def start_scheduler(which: str, cp: ControlPlane, workdir: Path, extra: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
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
        cmd = [str(cp.assets / "kube-scheduler"), f"--config={conf}", "--secure-port=0", "-v=1"]
    elif which == "floor":
        token = cp.service_account_token(SA_NAMESPACE, SA_NAME)
        kubeconfig = cp.kubeconfig(workdir / "floor.kubeconfig", token)
        cmd = [sys.executable, str(ROOT / "benchmarks" / "floor_binder.py"), f"--kubeconfig={kubeconfig}",
               "--kube-api-qps=2000", "--kube-api-burst=2000"]
    else:
        token = cp.service_account_token(SA_NAMESPACE, SA_NAME)
        kubeconfig = cp.kubeconfig(workdir / "tidesched.kubeconfig", token)
        cmd = [str(TIDESCHED), "run", f"--kubeconfig={kubeconfig}", "--kube-api-qps=2000",
               "--kube-api-burst=2000", "-v=1", *extra]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def run_one(
    which: str, nodes: int, pods: int, gang: int, assets: Path, extra: list[str], timeout: float,
    py_spy: str | None = None,
    logs: Path | None = None,
) -> Result:
    cp = ControlPlane(assets, load_test=True)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        install_deploy(cp.admin)
        t = time.monotonic()
        populate(cp.admin, nodes, pods, "default-scheduler" if which == "kube-scheduler" else "volcano", gang)
        print(f"  {which}: {nodes} nodes, {pods} pods created in {time.monotonic() - t:.0f}s", flush=True)
        procs = {"apiserver": cp.apiserver.popen.pid, "etcd": cp.etcd.popen.pid}  # type: ignore[union-attr]
        cpu0 = {k: cpu_seconds(p) for k, p in procs.items()}
        writes0 = api_writes(cp.admin)
        started = time.time()
        proc = start_scheduler(which, cp, cp.workdir, extra)
        procs["scheduler"] = proc.pid
        cpu0["scheduler"] = 0.0
        spy = None
        if py_spy and which != "kube-scheduler":  # sampled, not paused: the figures stay honest-ish
            spy = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(proc.pid), "--nonblocking",
                 "--threads", *os.environ.get("PYSPY_FLAGS", "--gil").split(), "-r", "100", "-f", "raw", "-o", py_spy if which == "tidesched" else f"{py_spy}.{which}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        count_binds = BindCounter(cp)
        while count_binds() < pods and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        cpu = {k: cpu_seconds(p) - cpu0[k] for k, p in procs.items()}
        if spy is not None:
            spy.send_signal(2)  # py-spy writes its samples on SIGINT
            spy.wait(30)
        rss = peak_rss_mib(proc.pid)
        writes = {k: v - writes0.get(k, 0.0) for k, v in api_writes(cp.admin).items()}
        times = bind_times(cp)
        synced = synced_at(cp.workdir / f"{which}.log")
        span = (times[-1] - times[0]) if len(times) > 1 else float("nan")
        return Result(
            which, nodes, pods, gang, len(times),
            (len(times) - 1) / span if span and span == span else 0.0,
            (times[0] - started) if times else float("nan"),
            (times[-1] - started) if times else float("nan"),
            cpu, rss,
            (times[0] - synced) if times and synced else float("nan"),
            {k: v for k, v in writes.items() if v},
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if logs is not None:  # the scheduler's own log (sessions, their times) outlives the run
            logs.mkdir(parents=True, exist_ok=True)
            src = cp.workdir / f"{which}.log"
            if src.exists():
                shutil.copy(src, logs / f"{which}-{nodes}x{pods}{f'-gang{gang}' if gang else ''}.log")
        cp.cleanup()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000x5000,5000x10000", help="NODESxPODS, comma-separated")
    ap.add_argument("--gang", type=int, default=0, help="also run tidesched with PodGroups of this size")
    ap.add_argument("--only", choices=["kube-scheduler", "floor", "tidesched"], default=None)
    ap.add_argument("--no-floor", action="store_true", help="skip the floor run (benchmarks/floor_binder.py)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--tidesched-arg", action="append", default=[], help="extra flag for tidesched run")
    ap.add_argument("--py-spy", metavar="FILE", help="sample tidesched with py-spy (installed by hand) into FILE (the floor into FILE.floor)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="N rounds per size, the schedulers interleaved: this machine's speed drifts "
                         "within minutes, so ratios are taken within a round and over medians")
    ap.add_argument("--logs", metavar="DIR", type=Path, help="keep each scheduler's log in DIR")
    args = ap.parse_args()
    assets, missing = find_assets(("kube-scheduler",))
    if assets is None:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    results: list[Result] = []
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.lower().split("x"))
        runs = [("kube-scheduler", 0), ("tidesched", 0)]
        if not args.no_floor:
            runs.insert(1, ("floor", 0))
        if args.gang:
            runs.append(("tidesched", args.gang))
        for rnd in range(1, args.repeat + 1):  # rounds interleave the schedulers: each sees the same phases
            for which, gang in runs:
                if args.only and which != args.only:
                    continue
                r = run_one(which, nodes, pods, gang, assets, args.tidesched_arg, args.timeout, args.py_spy, args.logs)
                r.round = rnd
                results.append(r)
                print(f"  {_row(r)}", flush=True)
    print("\nscheduler        nodes × pods    gang  bound   pods/s  first bind (after sync)  total"
          "   CPU s: sched / apiserver / etcd  peak RSS")
    for r in results:
        print(_row(r))
    print("\nwrite requests per bound pod (from the API server's apiserver_request_total):")
    for r in results:
        per_pod = ", ".join(f"{k} {v / max(r.bound, 1):.3f}" for k, v in sorted(r.writes.items(), key=lambda kv: -kv[1]))
        print(f"{r.scheduler:<15} {r.nodes:>6} × {r.pods:<6} {r.gang or '-':>4}  {per_pod}")
    print("\npods/s relative to kube-scheduler's in the same round:")
    for size in sorted({(r.nodes, r.pods) for r in results}):
        for rnd in range(1, args.repeat + 1):
            rate = {(r.scheduler, r.gang): r.pods_per_s for r in results if (r.nodes, r.pods) == size and r.round == rnd}
            base = rate.get(("kube-scheduler", 0))
            if not base:
                continue
            ratios = ", ".join(f"{_name(which, g)} {v / base:.2f}×" for (which, g), v in rate.items() if which != "kube-scheduler")
            label = f"  round {rnd}" if args.repeat > 1 else ""
            print(f"{size[0]:>6} × {size[1]:<6}{label}  {ratios}")
    if args.repeat > 1:
        print("\nmedian pods/s over the rounds, and its ratio to kube-scheduler's median:")
        for size in sorted({(r.nodes, r.pods) for r in results}):
            runs_of: dict[tuple[str, int], list[float]] = {}
            for r in results:
                if (r.nodes, r.pods) == size:
                    runs_of.setdefault((r.scheduler, r.gang), []).append(r.pods_per_s)
            med = {k: statistics.median(v) for k, v in runs_of.items()}
            base = med.get(("kube-scheduler", 0))
            cells = ", ".join(
                f"{_name(which, g)} {m:.0f}" + (f" ({m / base:.2f}×)" if base and which != "kube-scheduler" else "")
                for (which, g), m in med.items()
            )
            print(f"{size[0]:>6} × {size[1]:<6}  {cells}")
    return 0


def _name(which: str, gang: int) -> str:
    return f"{which} (gang {gang})" if gang else which


def _row(r: Result) -> str:
    return (
        f"{r.scheduler:<15} {r.nodes:>6} × {r.pods:<6} {r.gang or '-':>4}  {r.bound:>6} {r.pods_per_s:>8.0f} "
        f"{r.first_bind_s:>9.1f}s ({r.after_sync_s:>5.2f}s) {r.total_s:>9.1f}s   {r.cpu['scheduler']:>6.1f} / {r.cpu['apiserver']:>6.1f} / "
        f"{r.cpu['etcd']:>5.1f}          {r.rss_mib:>5.0f} MiB"
    )


if __name__ == "__main__":
    raise SystemExit(main())
