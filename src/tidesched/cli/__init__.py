"""The command line: ``tidesched schedule``, ``explain``, ``run``, ``quota``, ``simulate`` and ``experiment``.

Bad input (unreadable YAML, unknown kinds, invalid objects, a bad scheduler config) ends with
a message naming the file/object/field and exit code 2 — never a traceback. The commands live
in ``schedule`` (schedule, explain), ``cluster`` (run, quota) and ``simulate``; what they share
in ``common``; ``experiment`` runs the FGD paper's policy experiments. Importing them registers them on ``app`` in this order (the order ``--help``
lists them).
"""

from __future__ import annotations

import gc

from tidesched.cli.common import RUN, app
from tidesched.scheduler import tune_gc

# isort: off
# Importing the command modules registers their commands, in the order --help lists them.
from tidesched.cli import schedule, cluster, simulate, experiment  # noqa: E402, F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    RUN.own_process = True
    tune_gc()
    try:
        app()
    finally:
        # At exit the interpreter runs the cyclic collector over every object still alive:
        # after a session over 20,000 pods that walk costs about 0.6 s and frees nothing the
        # OS does not take back anyway. Frozen objects are out of the collector's sight.
        gc.freeze()
