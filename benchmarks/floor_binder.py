"""The floor of ``benchmarks/kube.py``: a binder that decides nothing.

It runs tidesched's own Kubernetes plumbing exactly as ``tidesched run`` does — the same
kubeconfig (the ServiceAccount's token), the same six informers (so the API server pays the same
list and watch fan-out), the same lean write path (:class:`~tidesched.cluster.binder.Binder` on the
libcurl call loop, ``--bind-workers`` in flight, the same QPS/burst limiter) — but no session:
every pending pod of ``--scheduler-name`` is bound to the next node in name order, round-robin,
as soon as the informers show it. No events and no status writes.

Its pods/s is therefore what this control plane on this machine can take from any scheduler
written this way: a real scheduler can only add CPU of its own on the same cores.

    .venv/bin/python benchmarks/floor_binder.py --kubeconfig FILE   # until SIGTERM
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tidesched.cluster.api import Kube, TokenBucket, connect  # noqa: E402
from tidesched.cluster.binder import Binder  # noqa: E402
from tidesched.cluster.store import NODE, ClusterStore, start_informers  # noqa: E402
from tidesched.scheduler import tune_gc  # noqa: E402

log = logging.getLogger("tidesched.floor")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--scheduler-name", default="volcano")
    ap.add_argument("--kube-api-qps", type=float, default=2000.0)
    ap.add_argument("--kube-api-burst", type=int, default=2000)
    ap.add_argument("--bind-workers", type=int, default=64)  # as tidesched run
    ap.add_argument("--period", type=float, default=0.05, help="seconds between looks for new pending pods")
    args = ap.parse_args()
    # The same log format as tidesched run: benchmarks/kube.py reads "informers synced" from it.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname).1s %(name)s] %(message)s")
    # The same GIL switch interval (RunOptions.switch_interval) and collector thresholds as
    # tidesched run.
    sys.setswitchinterval(0.0005)
    tune_gc()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    created = time.monotonic()
    conn = connect(args.kubeconfig, pool_size=args.bind_workers + 16)
    kube = Kube(conn).with_limiter(TokenBucket(args.kube_api_qps, args.kube_api_burst))
    store = ClusterStore(scheduler_names=frozenset([args.scheduler_name]))
    informers = start_informers(kube, store)
    if not store.wait_synced(600.0, stop):
        log.error("informers did not sync")
        return 1
    log.info("informers synced %.2fs after start", time.monotonic() - created)
    binder = Binder(kube, store, None, workers=args.bind_workers)
    turn = 0
    while not stop.is_set():
        pending = store.pending_pods()
        nodes = sorted(str(n["metadata"]["name"]) for n in store.items(NODE)) if pending else []
        if nodes:
            binds = {}
            for key in pending:
                binds[key] = nodes[turn % len(nodes)]
                turn += 1
            binder.submit(binds)
        stop.wait(args.period)
    binder.drain(5.0)
    binder.stop()
    for inf in informers:
        inf.stop()
    log.info("bound %d, failed %d", binder.bound, binder.failed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
