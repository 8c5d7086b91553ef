"""Make docs/webview.png: the live web view of a mid-size cluster, the bundled tidal day scaled up.

The tidal-day example's nodes and workloads are copied ``--copies`` times (nodes renamed, the
workloads in namespaces of their own, the queues' quotas multiplied), simulated to ``--at``
(mid-morning: inference reclaiming cards from training), and the session at that moment is turned
into the web view's document by the same code ``tidesched run`` uses (``cluster/webview.py``); the
latest evictions are the simulation's. The page is served by the same HTTP server and captured
with headless Chromium. Run by hand::

    .venv/bin/python tools/webview_screenshot.py [--copies 8] [--at 10:30] [--out docs/webview.png]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tidesched.explain import quota
from tidesched.cluster import webview
from tidesched.cluster.server import HttpServer
from tidesched.model.loader import Manifest
from tidesched.scheduler import open_session, run_actions
from tidesched.sim import bundled_example, load_scenario
from tidesched.sim.runner import Engine
from tidesched.sim.events import Scenario
from tidesched.sim.vocabulary import parse_duration
from tidesched.sim.world import EPOCH

NODE_ACTIONS = ("cordon", "uncordon", "removeNode")


def _copy_object(obj: dict[str, Any], k: int) -> dict[str, Any] | None:
    o = copy.deepcopy(obj)
    md = o.setdefault("metadata", {})
    kind = o.get("kind")
    if kind == "Node":
        md["name"] = f"{md['name']}-{k}"
        md.setdefault("labels", {})["kubernetes.io/hostname"] = md["name"]
        return o
    if kind in ("Queue", "PriorityClass"):
        return None  # shared by every copy
    if md.get("namespace"):
        md["namespace"] = f"{md['namespace']}-{k}"
    return o


def _scale_quota(q: dict[str, Any], copies: int) -> dict[str, Any]:
    q = copy.deepcopy(q)
    ann = q["metadata"].get("annotations") or {}
    raw = ann.get("volcano.sh/card.quota")
    if raw:
        ann["volcano.sh/card.quota"] = json.dumps({m: v * copies for m, v in json.loads(raw).items()})
    cap = (q.get("spec") or {}).get("capability")
    if cap and "cpu" in cap:
        cap["cpu"] = int(cap["cpu"]) * copies
    if cap and "memory" in cap:
        cap["memory"] = f"{int(str(cap['memory']).rstrip('Ti')) * copies}Ti"
    return q


def scaled(sc: Scenario, copies: int) -> Scenario:
    objects: list[Manifest] = []
    for m in sc.objects:
        obj = dict(m.obj)
        objects.append(Manifest(m.source, _scale_quota(obj, copies) if obj.get("kind") == "Queue" else obj))
        for k in range(2, copies + 1):
            c = _copy_object(obj, k)
            if c is not None:
                objects.append(Manifest(f"{m.source} (copy {k})", c))
    events = list(sc.events)
    for ev in sc.events:
        for k in range(2, copies + 1):
            if ev.action == "scale":
                ns, name = ev.args["name"].split("/", 1)
                events.append(dataclasses.replace(ev, args={**ev.args, "name": f"{ns}-{k}/{name}"}))
            elif ev.action in NODE_ACTIONS:
                events.append(dataclasses.replace(ev, args={**ev.args, "names": [f"{n}-{k}" for n in ev.args["names"]]}))
            elif ev.action == "setNode":
                events.append(dataclasses.replace(ev, args={**ev.args, "name": f"{ev.args['name']}-{k}"}))
    return dataclasses.replace(sc, objects=objects, events=events, name=f"{sc.name} ×{copies}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--at", default="10:30", help="simulated time of the picture (08:00, 10h30m, ...)")
    ap.add_argument("--out", type=Path, default=Path("docs/webview.png"))
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--colors", type=int, default=48, help="palette size of the PNG (keeps it small)")
    args = ap.parse_args()

    sc = scaled(load_scenario(bundled_example()), args.copies)
    at = parse_duration(args.at, "--at")
    engine = Engine(dataclasses.replace(sc, duration=at))
    sim = engine.run()
    snapshot, state = engine.world.open()
    ssn = open_session(snapshot, engine.config, scheduler_names=sc.scheduler_names, now=EPOCH + at, state=state)
    decisions = run_actions(ssn)
    live = webview.LiveView()
    for e in sim.result["events"]:  # the day's evictions, oldest first, so the newest ends on top
        if e["kind"] == "Pod" and "evict" in e["reason"].lower():
            live.evictions.appendleft(
                {"time": EPOCH + e["t"], "pod": f"{e['namespace']}/{e['name']}", "reason": e["message"]}
            )
    view = live.record(ssn, decisions, quota.report(ssn), session=sim.sessions + 1, seconds=0.0, now=EPOCH + at)
    print(f"{len(view['nodes']['nodes'])} nodes, {len(view['queues'])} queues, {view['pending_total']} pending, "
          f"{len(view['evictions'])} evictions listed", file=sys.stderr)

    from playwright.sync_api import sync_playwright

    server = HttpServer("127.0.0.1:0", webview.routes(live))
    server.start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run"],
            )
            page = browser.new_page(viewport={"width": args.width, "height": 900})
            # The picture's clock is the simulation's: "ago" is counted from it.
            page.add_init_script(f"Date.now = () => {(EPOCH + at + 2) * 1000};")
            page.goto(f"http://127.0.0.1:{server.port}/ui")
            page.wait_for_selector(".queue")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
            browser.close()
    finally:
        server.stop()
    try:
        from PIL import Image

        img = Image.open(args.out).convert("RGB").quantize(colors=args.colors)
        img.save(args.out, optimize=True)
    except ImportError:
        pass
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
