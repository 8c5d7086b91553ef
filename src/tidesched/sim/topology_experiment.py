"""The network-topology experiment (issue 34): the bundled tidal day on a generated fat-tree,
four ways, side by side — where the training gangs land (within a leaf, a spine, or across),
how long they wait, how scattered the free GPUs are, and what the day got done:

* ``blind`` — the tidal day's own config: HyperNodes exist, nobody reads them;
* ``volcano-hard`` — every gang held to one leaf (``hard``, tier 1), ``network-topology-aware``
  on, reclaim as Volcano's (``enableGangSafeReclaim: false``: per pod, topology-blind);
* ``volcano-soft`` — the same with ``soft`` constraints;
* ``tidesched`` — hard tier-1 gangs with tidesched's reclaim (gang-safe, and a gang held to a
  HyperNode takes its room inside one).

    python -m tidesched.sim.topology_experiment [--topology 2x2] [--out DIR]

prints a Markdown table (and writes each run's ``result.json`` under ``DIR`` when given).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tidesched.framework.config import SchedulerConfig
from tidesched.scheduler import config_from_text
from tidesched.sim import bundled_example, load_scenario, result_json, run
from tidesched.sim.topology import add_fat_tree, constrain_gangs, parse_constraint, parse_shape

PLUGIN_LINE = "  - name: nodeorder"
VOLCANO_RECLAIM = "configurations:\n- name: reclaim\n  arguments:\n    enableGangSafeReclaim: false\n"


def configs(text: str) -> dict[str, SchedulerConfig | None]:
    """Per variant, the config (None: the scenario's own)."""
    with_plugin = text.replace(PLUGIN_LINE, "  - name: network-topology-aware\n" + PLUGIN_LINE, 1)
    volcano = with_plugin.replace("tiers:\n", VOLCANO_RECLAIM + "tiers:\n", 1)
    return {
        "blind": None,
        "volcano-hard": config_from_text(volcano, "volcano-hard"),
        "volcano-soft": config_from_text(volcano, "volcano-soft"),
        "tidesched": config_from_text(with_plugin, "tidesched"),
    }


CONSTRAINTS = {"blind": "none", "volcano-hard": "hard:1", "volcano-soft": "soft", "tidesched": "hard:1"}
COLUMNS = [
    ("gangs_placed", "gangs placed"), ("gangs_within_tier1", "in a leaf"), ("gangs_within_tier2", "in a spine"),
    ("gangs_across", "across"), ("gang_mean_wait", "gang wait (s)"), ("free_gpu_fragmentation", "free-GPU scatter"),
]


def run_variant(name: str, config: SchedulerConfig | None, shape: tuple[int, int]) -> dict[str, Any]:
    sc = load_scenario(bundled_example())
    if config is not None:
        sc.config, sc.config_source = config, f"<{name}>"
    add_fat_tree(sc, *shape)
    constrain_gangs(sc, parse_constraint(CONSTRAINTS[name]))
    return run(sc).result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", default="2x2", help="nodes per leaf x leaves per spine (default 2x2)")
    ap.add_argument("--out", type=Path, default=None, help="write each run's result.json under this directory")
    args = ap.parse_args(argv)
    shape = parse_shape(args.topology)
    text = (bundled_example().parent / "scheduler.conf").read_text()
    rows = []
    for name, config in configs(text).items():
        result = run_variant(name, config, shape)
        if args.out is not None:
            (args.out / name).mkdir(parents=True, exist_ok=True)
            (args.out / name / "result.json").write_text(result_json(result))
        s = result["summary"]
        topo = s.get("topology", {})
        rows.append([name, *(topo.get(k) for k, _ in COLUMNS), s["jobs_completed"], s["reclaims"], s["mean_wait"]])
    head = ["variant", *(h for _, h in COLUMNS), "jobs completed", "reclaims", "mean job wait (s)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join("–" if v is None else (f"{v:g}" if isinstance(v, float) else str(v)) for v in r) + " |")
    if args.out is not None:
        (args.out / "summary.json").write_text(json.dumps({r[0]: dict(zip(head[1:], r[1:])) for r in rows}, indent=1))


if __name__ == "__main__":
    main()
