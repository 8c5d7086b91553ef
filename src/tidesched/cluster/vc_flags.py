"""The rest of vc-scheduler v1.15.1's command-line flags, so that an operator switching from it
keeps the Deployment's argument list (Volcano's Helm chart passes ``--enable-pprof``,
``--percentage-nodes-to-find``, ``--plugins-dir``, ``--scheduler-sharding-mode`` among others).

Each flag is in one of three kinds:

* **no effect here** — what it tunes does not exist in tidesched (Go's pprof, the informers'
  resync, the cache dumper, Go plugin loading with no plugin present): taken, logged at start
  when set to something other than its default;
* **a deliberate difference** — vc-scheduler scores a sample of the feasible nodes on large
  clusters (``--percentage-nodes-to-find`` and the two minimums); tidesched always scores them
  all, which its vectorised fit makes cheap: taken, and logged;
* **not supported** — flags whose values would change what is scheduled in ways tidesched does
  not do (a node selector, another default queue, ignoring PriorityClasses, node sharding):
  their default values are taken, any other value refuses to start with the reason, rather
  than schedule differently from what the operator asked for.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from tidesched.model.objects import DEFAULT_QUEUE

NoEffect = tuple[str, Any, str]  # flag, its default, why it changes nothing here

# flag, default (as argparse stores it), what it is for in vc-scheduler
_NO_EFFECT: tuple[NoEffect, ...] = (
    ("--enable-pprof", False, "Go's pprof endpoint; tidesched is not a Go program"),
    ("--resync-period", "0s", "the informers' periodic resync; tidesched's watches need none"),
    ("--resource-sync-timeout", "60s", "the wait for the first lists; tidesched waits until every list is in"),
    ("--cache-dumper", True, "the SIGUSR2 cache dump"),
    ("--cache-dump-dir", "/tmp", "where the cache dump goes"),
    ("--csi-storage", False, "a deprecated switch"),
    ("--ca-cert-file", "", "HTTPS certificates vc-scheduler's own servers do not use"),
    ("--tls-cert-file", "", "HTTPS certificates vc-scheduler's own servers do not use"),
    ("--tls-private-key-file", "", "HTTPS certificates vc-scheduler's own servers do not use"),
    ("--disable-default-scheduler-config", False,
     "falling back to the default config when the given one is invalid: tidesched never does, it refuses an "
     "invalid config at start and keeps the last good one on reload"),
    ("--scheduler-sharding-name", "volcano", "the shard's name, used only with a sharding mode"),
)
# vc-scheduler's sampling of feasible nodes (kube-scheduler's percentageOfNodesToScore)
_SAMPLING = ("--percentage-nodes-to-find", "--minimum-feasible-nodes", "--minimum-percentage-nodes-to-find")
_SAMPLING_DEFAULTS = (0, 100, 5)


def add_flags(p: argparse.ArgumentParser, to_bool: Callable[[str], bool], to_int: Callable[[str], int]) -> None:
    """Add vc-scheduler's remaining flags to ``tidesched run``'s parser (hidden from --help)."""
    flag: dict[str, Any] = {"nargs": "?", "const": True, "type": to_bool}
    for name, default, _why in _NO_EFFECT:
        if isinstance(default, bool):
            p.add_argument(name, default=default, **flag, help=argparse.SUPPRESS)
        else:
            p.add_argument(name, default=default, help=argparse.SUPPRESS)
    for name, default in zip(_SAMPLING, _SAMPLING_DEFAULTS):
        p.add_argument(name, type=to_int, default=default, help=argparse.SUPPRESS)
    p.add_argument("--plugins-dir", default="", help=argparse.SUPPRESS)
    p.add_argument("--node-selector", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--default-queue", default=DEFAULT_QUEUE, help=argparse.SUPPRESS)
    p.add_argument("--priority-class", default=True, **flag, help=argparse.SUPPRESS)
    p.add_argument("--scheduler-sharding-mode", default="none", help=argparse.SUPPRESS)


def _dest(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(notes, errors): what to log about the flags given, and why the values given cannot be
    honoured (the caller refuses to start)."""
    notes: list[str] = []
    errors: list[str] = []
    for name, default, why in _NO_EFFECT:
        value = getattr(args, _dest(name))
        if value != default:
            notes.append(f"{name}={value} taken, no effect in tidesched: {why}")
    sampling = [(n, getattr(args, _dest(n))) for n in _SAMPLING]
    if any(v != d for (_n, v), d in zip(sampling, _SAMPLING_DEFAULTS)):
        given = ", ".join(f"{n}={v}" for n, v in sampling)
        notes.append(f"{given} taken: tidesched scores every feasible node, never a sample of them")
    plugins_dir = args.plugins_dir.lstrip("=")
    if plugins_dir:
        found = _go_plugins(plugins_dir)
        if found:
            errors.append(f"--plugins-dir={plugins_dir} holds Go plugins ({', '.join(found[:3])}) that tidesched cannot "
                          "load; remove the flag or the plugins (their config names would be refused anyway)")
        else:
            notes.append(f"--plugins-dir={plugins_dir} taken: it holds no plugin")
    if args.node_selector:
        errors.append(f"--node-selector={','.join(args.node_selector)} is not supported: tidesched schedules onto every "
                      "Ready node (keep pods off nodes with taints or node affinity instead)")
    if args.default_queue.lstrip("=") != DEFAULT_QUEUE:
        errors.append(f"--default-queue={args.default_queue} is not supported: a PodGroup naming no queue goes to "
                      f"{DEFAULT_QUEUE!r}")
    if not args.priority_class:
        errors.append("--priority-class=false is not supported: tidesched always reads pods' and PodGroups' "
                      "PriorityClasses")
    mode = args.scheduler_sharding_mode.lstrip("=")
    if mode != "none":
        errors.append(f"--scheduler-sharding-mode={mode} is not supported: tidesched schedules every node "
                      "(sharding mode none)")
    return notes, errors


def _go_plugins(path: str) -> list[str]:
    try:
        return sorted(f for f in os.listdir(path) if f.endswith(".so"))
    except OSError:
        return []
