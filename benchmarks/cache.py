"""Benchmark: opening a session on the incremental cluster cache against a full rebuild.

A cluster of N nodes and M pods (half running on the nodes, half pending in gang jobs), fed
once into a :class:`~tidesched.model.cache.ClusterCache`. Then, timed:

* ``rebuild``: what every session did before the cache: ``build_snapshot`` over the raw objects
  and a session opened on it (infos, node table, plugins' session-open);
* ``cache open``: ``ClusterCache.open`` + the same session open, nothing changed;
* ``after K changes``: K pods bound (as the watch reports binds) before the open;
* ``idle session``: a whole session (every action and close) when nothing is pending.

Plugins are Volcano's built-in configuration (what ``tidesched run`` uses by default) or, with
``--config session``, those of ``benchmarks/session.py``.

Run by hand:

    .venv/bin/python benchmarks/cache.py                     # 5,000 nodes × 10,000 pods
    .venv/bin/python benchmarks/cache.py --nodes 1000 --pods 5000 --changes 500
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any, Callable

from session import CONFIG, generate  # benchmarks/session.py

from tidesched.framework.session import Session
from tidesched.model.cache import ClusterCache
from tidesched.model.snapshot import build_snapshot
from tidesched.scheduler import config_from_file, config_from_text, open_session, run_actions, tune_gc

OURS = ("volcano",)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall seconds of ``repeat`` calls, and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def cluster(n_nodes: int, n_pods: int) -> list[dict[str, Any]]:
    """Half the pods placed and running (round-robin over the nodes), half pending."""
    objs = generate(n_nodes, n_pods)
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    pods = [o for o in objs if o["kind"] == "Pod"]
    for i, pod in enumerate(pods[: len(pods) // 2]):
        pod["spec"]["nodeName"] = nodes[i % len(nodes)]
        pod["status"] = {"phase": "Running"}
    for o in objs:
        if o["kind"] == "PodGroup" and all(
            p["spec"].get("nodeName") for p in pods if p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == o["metadata"]["name"]
        ):
            o["status"]["phase"] = "Running"
    return objs


def key_of(obj: dict[str, Any]) -> str:
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if "namespace" in md else md["name"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--config", choices=("volcano", "session"), default="volcano",
        help="Volcano's built-in config (what `run` uses without --scheduler-conf) or benchmarks/session.py's",
    )
    args = ap.parse_args()
    tune_gc()  # as the command line does
    config = config_from_file(None) if args.config == "volcano" else config_from_text(CONFIG)
    objs = cluster(args.nodes, args.pods)
    print(f"{args.nodes} nodes, {args.pods} pods ({args.pods // 2} running, the rest pending), {args.config} config")

    def rebuild() -> Session:
        return open_session(build_snapshot(objs, scheduler_names=OURS), config, scheduler_names=OURS)

    t, _ = timed(rebuild, args.repeat)
    print(f"  rebuild (parse + infos + plugins open)   {t * 1000:8.1f} ms")

    cache = ClusterCache(OURS)
    t0 = time.perf_counter()
    for o in objs:
        cache.update(o["kind"], key_of(o), o)
    cache.open()
    print(f"  cache first fill (parse + infos)         {(time.perf_counter() - t0) * 1000:8.1f} ms")

    t, _ = timed(cache.open, args.repeat)
    print(f"  cache open, nothing changed              {t * 1000:8.1f} ms")

    def open_on_cache() -> Session:
        snapshot, state = cache.open()
        return open_session(snapshot, config, scheduler_names=OURS, state=state)

    t, _ = timed(open_on_cache, args.repeat)
    print(f"  cache open + plugins open                {t * 1000:8.1f} ms")

    pending = [o for o in objs if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    batches = iter(range(0, len(pending), args.changes))

    def bind_some() -> None:
        start = next(batches)
        for i, pod in enumerate(pending[start : start + args.changes]):
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = nodes[(start + i) % len(nodes)]
            bound["status"] = {"phase": "Running"}
            cache.update("Pod", key_of(bound), bound)

    def changed_open() -> Session:
        bind_some()
        return open_on_cache()

    t, _ = timed(changed_open, args.repeat)
    print(f"  {args.changes} pods bound, then open              {t * 1000:8.1f} ms")

    idle_objs = [o for o in objs if not (o["kind"] == "Pod" and not o["spec"].get("nodeName"))]
    idle = ClusterCache(OURS)
    for o in idle_objs:
        idle.update(o["kind"], key_of(o), o)
    idle.open()

    def idle_session() -> Any:
        snapshot, state = idle.open()
        return run_actions(open_session(snapshot, config, scheduler_names=OURS, state=state))

    t, _ = timed(idle_session, args.repeat)
    print(f"  whole session, nothing pending           {t * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
