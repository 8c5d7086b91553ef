"""Fuzz the scheduler's inputs by hand, many more times than CI does (issue 13, REL-1, REL-2).

    .venv/bin/python benchmarks/fuzz.py --count 10000 [--seed 0] [--out fuzz-crashes]
    .venv/bin/python benchmarks/fuzz.py --replay fuzz-crashes/crash-1.json

Runs in this process the checks of tests/fuzz (the strategies in tests/fuzz/objects.py and
configs.py, the contract in tests/fuzz/contract.py) on ``--count`` generated inputs:

* ``objects``: a corrupted cluster through the snapshot (file, object and field in every
  message), a session per config (no node, queue capability or card quota over-committed) and
  the cache ``run`` and ``simulate`` feed (Warning events);
* ``config``: a corrupted scheduler config (ConfigError naming the file, or a session runs);
* ``cli``: every 25th input also through ``tidesched schedule`` (typer's CliRunner): exit 0,
  or 2 with a message;
* ``simulate``: every 40th input also simulated for 15 minutes (a Warning event naming file,
  object and field per refused object; no invariant broken).

``--sweep`` instead mutates one field at a time of a cluster that uses every field read
(tests/fuzz/objects.py ``rich_cluster``), with every bad value: about 59,000 inputs.

Prints the counts per outcome — accepted, rejected with a message, crash (an exception),
broken contract (an over-commit or a message without its field) — and lists every crash and
broken contract with the file that reproduces it (``--replay`` runs that file again and shows
the traceback). Exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import contract  # noqa: E402
from configs import corrupted_configs  # noqa: E402
from objects import SWEEP_VALUES, apply_sweep_case, clusters, corrupted_clusters, sweep_cases  # noqa: E402

ACCEPTED, REJECTED, CRASH, BROKEN = "accepted", "rejected-with-message", "crash", "broken-contract"
CLI_EVERY = 25
SIMULATE_EVERY = 40


def check(case: dict[str, Any], tmp: Path, runner: Any) -> str:
    """Run one case; returns ACCEPTED or REJECTED, raises on a crash or a broken contract."""
    if case["check"] == "config":
        return ACCEPTED if contract.check_config(case["config"], case["objects"]) else REJECTED
    objs = case["objects"]
    snap = contract.check_snapshot(objs)
    assert snap is not None
    contract.check_session(snap, case["config"])
    contract.check_cache(objs, case["config"])
    if case.get("cli"):
        contract.check_cli(objs, tmp, runner)
    if case.get("simulate"):
        contract.check_simulate(objs)
    return REJECTED if snap.problems else ACCEPTED


def cases() -> st.SearchStrategy[dict[str, Any]]:
    objects_case = st.builds(
        lambda c, cfg: {"check": "objects", "objects": c[0], "mutations": c[1], "config": cfg},
        corrupted_clusters(),
        st.sampled_from(sorted(contract.CONFIGS)),
    )
    config_case = st.builds(
        lambda text, objs: {"check": "config", "config": text, "objects": objs},
        corrupted_configs(),
        clusters(workloads=False),
    )
    return st.one_of(objects_case, objects_case, objects_case, config_case)


def save(case: dict[str, Any], out: Path, n: int, kind: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kind}-{n}.json"
    path.write_text(json.dumps(case, indent=1, ensure_ascii=True, allow_nan=True, default=repr), encoding="utf-8")
    return path


def replay(path: Path) -> int:
    from typer.testing import CliRunner

    case = json.loads(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        outcome = check(case, Path(tmp), CliRunner())
    print(f"{path}: {outcome}")
    return 0


def sweep(out: Path, limit: int | None) -> int:
    """Every field of rich_cluster() deleted or replaced by every bad value, one at a time; the
    configs take turns."""
    counts: collections.Counter[str] = collections.Counter()
    failures: list[tuple[str, str, Path]] = []
    configs = sorted(contract.CONFIGS)
    cases_ = sweep_cases()
    if limit is not None and limit < len(cases_):  # an evenly spread sample
        step = len(cases_) / limit
        cases_ = [cases_[int(k * step)] for k in range(limit)]
    started = time.monotonic()
    for n, case in enumerate(cases_, 1):
        objs = apply_sweep_case(case)
        entry = {"check": "objects", "objects": objs, "config": configs[n % len(configs)],
                 "mutations": [f"objs[{case[0]}]{list(case[1])} = {SWEEP_VALUES[case[2]]!r}"[:300]]}
        try:
            outcome = check(entry, out, None)
        except AssertionError as exc:
            outcome = BROKEN
            failures.append((outcome, f"{exc}".splitlines()[0][:200], save(entry, out, n, "broken")))
        except Exception as exc:  # noqa: BLE001
            outcome = CRASH
            where = traceback.extract_tb(exc.__traceback__)[-1]
            failures.append((outcome, f"{type(exc).__name__}: {str(exc)[:120]} at {Path(where.filename).name}:{where.lineno}",
                             save(entry, out, n, "crash")))
        counts[outcome] += 1
        if n % 5000 == 0:
            print(f"  {n} of {len(cases_)}, {time.monotonic() - started:.0f} s: {dict(counts)}", file=sys.stderr, flush=True)
    print(f"sweep: {sum(counts.values())} single mutations in {time.monotonic() - started:.0f} s")
    for outcome in (ACCEPTED, REJECTED, CRASH, BROKEN):
        print(f"  {outcome:24} {counts[outcome]:7d}")
    for outcome, what, path in failures:
        print(f"{outcome}: {what}\n  reproduce: .venv/bin/python benchmarks/fuzz.py --replay {path}")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=None, help="inputs to generate (default 10000; --sweep: all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generator")
    ap.add_argument("--out", type=Path, default=Path("fuzz-crashes"), help="where reproducers are written")
    ap.add_argument("--replay", type=Path, help="run one saved case again, with its traceback")
    ap.add_argument("--sweep", action="store_true",
                    help="instead: every single mutation of tests/fuzz/objects.py rich_cluster() (about 59,000; "
                         "with --count N an evenly spread sample of N)")
    args = ap.parse_args()
    if args.replay is not None:
        return replay(args.replay)
    if args.sweep:
        return sweep(args.out, args.count)
    if args.count is None:
        args.count = 10_000

    from typer.testing import CliRunner

    runner = CliRunner()
    counts: collections.Counter[str] = collections.Counter()
    per_check: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures: list[tuple[str, str, Path]] = []
    seen = 0
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="tidesched-fuzz-"))

    @seed(args.seed)
    @settings(max_examples=args.count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def one(case: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if case["check"] == "objects" and seen % CLI_EVERY == 0:
            case = dict(case, cli=True)
        if case["check"] == "objects" and seen % SIMULATE_EVERY == 0:
            case = dict(case, simulate=True)
        try:
            outcome = check(case, tmp, runner)
        except AssertionError as exc:
            outcome = BROKEN
            failures.append((outcome, f"{exc}".splitlines()[0][:200], save(case, args.out, seen, "broken")))
        except Exception as exc:  # noqa: BLE001 - counting crashes is the point
            outcome = CRASH
            where = traceback.extract_tb(exc.__traceback__)[-1]
            what = f"{type(exc).__name__}: {str(exc)[:120]} at {Path(where.filename).name}:{where.lineno}"
            failures.append((outcome, what, save(case, args.out, seen, "crash")))
        counts[outcome] += 1
        per_check[case["check"] + ("+cli" if case.get("cli") else "") + ("+simulate" if case.get("simulate") else "")][outcome] += 1
        if seen % 500 == 0:
            print(f"  {seen} inputs, {time.monotonic() - started:.0f} s: {dict(counts)}", file=sys.stderr, flush=True)

    one()
    elapsed = time.monotonic() - started
    print(f"{seen} inputs in {elapsed:.0f} s (seed {args.seed})")
    for outcome in (ACCEPTED, REJECTED, CRASH, BROKEN):
        print(f"  {outcome:24} {counts[outcome]:7d}")
    print("per check:")
    for name, c in sorted(per_check.items()):
        print(f"  {name:14} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for outcome, what, path in failures:
        print(f"{outcome}: {what}\n  reproduce: .venv/bin/python benchmarks/fuzz.py --replay {path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
