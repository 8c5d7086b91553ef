"""Benchmark: binds per second through the Kubernetes adapter against the *fake* API server.

A child process runs ``tidesched.kube.fakeapi.FakeApiServer`` on 127.0.0.1 (an ephemeral port)
holding N nodes and M pending pods (gangs of 1–4 pods, PodGroups already Inqueue, one queue);
this process runs the real ``tidesched run`` machinery (``Runner``: informers, sessions, binder
pool under the ``--kube-api-qps`` token bucket, status writer, event recorder) until every pod
is bound. Reported:

* binds/s — bindings confirmed by the API (201) per second, from the first bind call to the
  last (the adapter's bind pipeline: queue, workers, QPS limit, HTTP, fake server);
* end to end — from caches synced to the last pod bound (sessions included);
* the first session's duration (snapshot + actions + close for the whole cluster).

The fake server shares the machine (2 cores here) and is itself Python; a real kube-apiserver
answers a binding in about a millisecond and runs elsewhere, so the figure is a floor for the
adapter, not a promise about a cluster. Run by hand:

    .venv/bin/python benchmarks/kube.py                      # 5,000 nodes, 10,000 pods, qps 2000
    .venv/bin/python benchmarks/kube.py --nodes 500 --pods 1000
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
"""


def generate(n_nodes: int, n_pods: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [{"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}]
    for i in range(n_nodes):
        objs.append(
            {
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": {"zone": f"z{i % 4}"}},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    made = j = 0
    while made < n_pods:
        size = min(rng.choice([1, 1, 2, 4]), n_pods - made)
        name = f"job-{j:06d}"
        objs.append(
            {
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {"minMember": size, "queue": "default"},
                "status": {"phase": "Inqueue"},
            }
        )
        cpu = rng.choice(["500m", "1", "2"])
        for k in range(size):
            objs.append(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-w-{k}",
                        "namespace": "bench",
                        "annotations": {"scheduling.k8s.io/group-name": name},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
            )
        made += size
        j += 1
    return objs


def _serve(n_nodes: int, n_pods: int, conn: Any) -> None:
    from tidesched.kube.fakeapi import FakeApiServer

    api = FakeApiServer(bookmark_interval=5.0, max_watch_seconds=600.0, record_requests=False)
    api.create_many(generate(n_nodes, n_pods))
    conn.send(api.start())
    conn.recv()  # until the parent is done
    conn.send(sum(1 for p in api.list("Pod") if p["spec"].get("nodeName")))
    api.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--kube-api-qps", type=float, default=2000.0)
    ap.add_argument("--kube-api-burst", type=int, default=2000)
    ap.add_argument("--bind-workers", type=int, default=32)
    ap.add_argument("--schedule-period", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the fake API stops before the last status writes

    from tidesched.kube.runner import Runner, RunOptions

    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_serve, args=(args.nodes, args.pods, child), daemon=True)
    t_gen = time.perf_counter()
    proc.start()
    url = parent.recv()
    print(
        f"fake API at {url}: {args.nodes} nodes, {args.pods} pending pods "
        f"(set up in {time.perf_counter() - t_gen:.1f}s)",
        flush=True,
    )

    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "scheduler.conf"
        conf.write_text(CONFIG)
        runner = Runner(
            RunOptions(
                host=url,
                scheduler_conf=str(conf),
                schedule_period=args.schedule_period,
                kube_api_qps=args.kube_api_qps,
                kube_api_burst=args.kube_api_burst,
                bind_workers=args.bind_workers,
            )
        )
        first_bind: list[float] = []
        last_bind: list[float] = [0.0]
        inner = runner.binder.on_result

        def on_result(what: str, seconds: float) -> None:
            now = time.perf_counter()
            if what == "bound":
                if not first_bind:
                    first_bind.append(now - seconds)
                last_bind[0] = now
            if inner:
                inner(what, seconds)

        runner.binder.on_result = on_result
        t0 = time.perf_counter()
        loop = threading.Thread(target=runner.run, daemon=True)
        loop.start()
        if not runner.store.wait_synced(args.timeout):
            sys.exit("caches never synced")
        t_synced = time.perf_counter()
        deadline = t_synced + args.timeout
        while runner.binder.bound + runner.binder.failed < args.pods and time.perf_counter() < deadline:
            time.sleep(0.05)
        t_done = time.perf_counter()
        first_session = runner.metrics.session_duration.collect()[0].samples
        runner.stop()
        loop.join(30)
        parent.send("done")
        bound_in_api = parent.recv()
        proc.join(10)

    bound, failed = runner.binder.bound, runner.binder.failed
    span = (last_bind[0] - first_bind[0]) if first_bind else float("nan")
    sessions = next((s.value for s in first_session if s.name.endswith("_count")), 0)
    total = next((s.value for s in first_session if s.name.endswith("_sum")), 0.0)
    print(
        f"caches synced in {t_synced - t0:.2f}s; sessions run {sessions:.0f} "
        f"(mean {total / max(sessions, 1):.2f}s)"
    )
    print(f"bound {bound} (API shows {bound_in_api}), bind failures {failed}")
    print(
        f"binds/s through the adapter: {bound / span:,.0f}  "
        f"(first to last bind {span:.2f}s, qps limit {args.kube_api_qps:g}, {args.bind_workers} workers)"
    )
    e2e = t_done - t_synced
    print(f"end to end (synced → all bound): {e2e:.2f}s = {bound / e2e:,.0f} pods/s")


if __name__ == "__main__":
    main()
