"""Benchmark: the web view's cost on the scheduling loop (cluster/webview.py, issue 14).

After a session on ``benchmarks/session.py``'s generated cluster (N nodes, P pods, many left
pending), times ``LiveView.record`` (what the loop pays per session: queues, the node grid, the
first 200 pending pods with their reasons) and the JSON serialisation an HTTP thread does once per
session. Run by hand::

    .venv/bin/python benchmarks/webview.py --nodes 5000 --pods 20000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from session import generate  # noqa: E402

from tidesched.explain import quota  # noqa: E402
from tidesched.cluster import webview  # noqa: E402
from tidesched.model.snapshot import build_snapshot  # noqa: E402
from tidesched.scheduler import open_session, run_actions, tune_gc  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    args = ap.parse_args()
    tune_gc()  # as the command line does
    from tidesched.scheduler import config_from_file

    objs = generate(args.nodes, args.pods)
    ssn = open_session(build_snapshot(objs), config_from_file(None))
    t0 = time.perf_counter()
    d = run_actions(ssn)
    session = time.perf_counter() - t0
    rep = quota.report(ssn)
    live = webview.LiveView()
    live.record(ssn, d, rep, session=1, seconds=session)  # the first pays one-time imports
    t0 = time.perf_counter()
    view = live.record(ssn, d, rep, session=2, seconds=session)
    record = time.perf_counter() - t0
    t0 = time.perf_counter()
    body = live.body()
    encode = time.perf_counter() - t0
    print(f"{args.nodes} nodes, {args.pods} pods: session {session:.2f} s; view {record * 1000:.0f} ms on the loop "
          f"({view['pending_total']} pending, {len(view['pending'])} explained); JSON {encode * 1000:.0f} ms, "
          f"{len(body or b'') / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
