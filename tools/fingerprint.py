"""Behaviour fingerprint: hashes of what tidesched decides, to hold a refactor to "nothing changed".

Run it before a change and after it; every line must be the same. Each line is
``<name>  <sha256 prefix>``; a final ``all`` line hashes them together::

    .venv/bin/python tools/fingerprint.py                 # everything, the trace replay included (~1-2 min)
    .venv/bin/python tools/fingerprint.py --no-trace      # without the Alibaba trace replay
    .venv/bin/python tools/fingerprint.py --trace DIR     # the trace elsewhere (default ../shared/traces/alibaba-gpu-v2023)

What it hashes:

* ``scenarios/<file>``: the decisions JSON of every document in ``tests/scenarios/*.yaml``, run
  as the scenario tests run them (``tests/scenario_harness.py``);
* ``schedule/<dir>``: ``tidesched schedule -o json --now T`` over each bundled manifest
  directory (``examples/*``, with its ``scheduler.conf`` where it has one; directories of
  scheduler configs alone, such as ``examples/policies``, are skipped), and
  ``explain/<dir>``: ``tidesched explain`` of every pod that schedule leaves unbound there and
  of every PodGroup;
* ``session-bench``: the decisions of one session over ``benchmarks/session.py``'s input at
  1,000 nodes × 5,000 pods (its generator is seeded) with its config, through ``schedule``;
* ``simulate/<name>``: ``result.json`` of ``tidesched simulate`` on the bundled tidal day and of
  a few ``--chaos`` seeds, and ``trace``: of the full trace replay. ``result.json`` holds no
  wall-clock values (``sim/runner.py``); ``report/tidal-day``: the bundled day's
  ``report.html`` (byte-identical for the same result); keys that would (``wall*``, ``*_seconds`` of the run,
  timestamps of the run) are dropped anyway, and the repository's own path and the output
  directory are replaced, so a clone elsewhere prints the same hashes.

The commands go through the command line in child processes, so the fingerprint survives moves
of modules; only the scenario harness and the benchmark's generator are imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023"
NOW = "2026-01-01T00:00:00Z"
CHAOS_SEEDS = (1, 2, 3)
# Keys of a run (not of what was decided) that may differ between two identical runs.
WALL_KEYS = {"wall", "wall_seconds", "session_seconds", "cpu_seconds", "started_at", "finished_at", "elapsed"}


def digest(data: Any) -> str:
    if not isinstance(data, (bytes, str)):
        data = json.dumps(data, sort_keys=True, separators=(",", ":"))
    if isinstance(data, str):
        data = data.replace(str(ROOT), "<repo>").encode()
    return hashlib.sha256(data).hexdigest()[:16]


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in WALL_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def cli(*args: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run([sys.executable, "-c", "from tidesched.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    if done.returncode not in ok:
        raise SystemExit(f"tidesched {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def scenarios() -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from scenario_harness import iter_scenarios, run_scenario

    per_file: dict[str, dict[str, Any]] = {}
    for name, doc in iter_scenarios():
        per_file.setdefault(name.split("::")[0], {})[name] = run_scenario(doc).to_json()
    return {f"scenarios/{f}": digest(d) for f, d in sorted(per_file.items())}


def _has_objects(path: str) -> bool:
    import yaml

    return any(isinstance(doc, dict) and "kind" in doc for doc in yaml.safe_load_all(Path(path).read_text()))


def schedule_and_explain() -> dict[str, str]:
    out: dict[str, str] = {}
    for d in sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir()):
        manifests = [str(p) for p in sorted(d.iterdir()) if p.suffix in (".yaml", ".yml", ".json")
                     and p.name != "scenario.yaml"]
        if not any(_has_objects(m) for m in manifests):
            continue  # scheduler configs only (examples/policies), no manifests to schedule
        conf = ["-c", str(d / "scheduler.conf")] if (d / "scheduler.conf").exists() else []
        text = cli("schedule", "-o", "json", "--now", NOW, *conf, *manifests)
        out[f"schedule/{d.name}"] = digest(json.loads(text))
        decided = json.loads(text)
        pods = []
        for m in manifests:
            import yaml

            for obj in yaml.safe_load_all(Path(m).read_text()):
                if obj and obj.get("kind") == "Pod":
                    meta = obj["metadata"]
                    pods.append(f"{meta.get('namespace', 'default')}/{meta['name']}")
        pending = [p for p in sorted(pods) if p not in decided["bound"]]
        groups = [f"{k.split('/')[0]}/podgroup/{k.split('/')[1]}" for k in sorted(decided["podgroups"])]
        out[f"explain/{d.name}"] = digest("".join(cli("explain", p, "--now", NOW, *conf, *manifests, ok=(0, 1))
                                                  for p in pending + groups))
    return out


def session_bench() -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import session as bench

    with tempfile.TemporaryDirectory() as tmp:
        manifests, config = Path(tmp, "cluster.json"), Path(tmp, "scheduler.conf")
        manifests.write_text(json.dumps(bench.generate(1000, 5000)))
        config.write_text(bench.CONFIG)
        text = cli("schedule", "-c", str(config), "-o", "json", "--now", "1970-01-01T00:00:00Z", str(manifests))
    return {"session-bench": digest(json.loads(text))}


def simulate(name: str, *args: str, report: bool = False) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cli("simulate", "--no-progress", "--out", tmp, *args, ok=(0, 1))
        # a --chaos run writes its scenario into the out directory and names it in messages
        result = json.loads(Path(tmp, "result.json").read_text().replace(tmp, "<out>"))
        out = {f"simulate/{name}": digest(strip(result))}
        if report:
            out[f"report/{name}"] = digest(Path(tmp, "report.html").read_text().replace(tmp, "<out>"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="the Alibaba GPU v2023 trace directory")
    ap.add_argument("--no-trace", action="store_true", help="skip the full trace replay")
    args = ap.parse_args()
    lines: dict[str, str] = {}
    lines.update(scenarios())
    lines.update(schedule_and_explain())
    lines.update(session_bench())
    lines.update(simulate("tidal-day", report=True))
    for seed in CHAOS_SEEDS:
        lines.update(simulate(f"chaos-{seed}", "--chaos", str(seed), "--no-shrink"))
    if not args.no_trace:
        if not args.trace.is_dir():
            raise SystemExit(f"no trace at {args.trace} (give --trace DIR or --no-trace)")
        lines.update(simulate("trace", "--trace", str(args.trace)))
    for name, h in lines.items():
        print(f"{name:<32} {h}", flush=True)
    print(f"{'all' + (' (no trace)' if args.no_trace else ''):<32} {digest(lines)}")


if __name__ == "__main__":
    main()
