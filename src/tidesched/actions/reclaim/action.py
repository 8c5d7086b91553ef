"""reclaim (ACT-5): a queue below its fair share takes resources back from other queues.

Rules (Volcano actions/reclaim, restated):

* **Reclaimer jobs**: not Pending, JobValid, queue exists, JobStarving; their pending tasks
  in TaskOrder.
* Queues take turns in QueueOrder (each turn serves one starving job, then the queue goes
  back with its updated share); a queue that is Overused is skipped. Jobs of a queue in
  JobOrder; each job gets one Statement and its tasks are tried while it is starving.
* Per task: the gates and Volcano's per-node walk are in ``steps`` (candidate nodes
  in name order, reclaimees → Reclaimable → ValidateVictims → evict in victim order until
  the task fits FutureIdle → pipeline on the first node that then passes the predicates: a
  card-quota failure counts as resolvable, yet evicting other queues' pods never frees it).
* The task is pipelined only while ``Allocatable(queue, task)`` holds after the evictions
  (REL-2: evicting from another queue must not push the reclaimer's queue over its quota).
* The job's Statement is committed if JobPipelined holds afterwards, else discarded.
* Arguments: ``predicateErrorCacheEnable`` is accepted and ignored (predicate results are
  exact per call). ``enableGangSafeReclaim`` (default true, tidesched's own): a job's turn
  goes to ``gang`` (TIDE-6) — whole-gang plans chosen per reclaiming job where a
  gang is at stake, and where none is, Volcano's victims (``victimOrder: volcano``) or DEC-8's
  ranking (``victimOrder: tidal``, the default with capacity-card); false gives Volcano's
  per-pod walk for every task. With it, a gang held to one HyperNode by a hard network-topology
  constraint takes its room inside one (``actions/evict_domain.py``; Volcano's reclaim ignores topology).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.actions.reclaim.gang import GangSafeReclaim
from tidesched.actions.reclaim.steps import ACTION, eligible, reclaimees, volcano_walk
from tidesched.actions.evict_domain import constrained, within_best_domain
from tidesched.actions.starving import starving_turns
from tidesched.framework.gates import ungated_pending
from tidesched.framework.statement import Statement

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session

# The reclaimees of a job on a node (kept under its old name for callers and tests).
_reclaimees = reclaimees


# Victim orders of gang-safe reclaim (``victimOrder``): ``volcano`` keeps Volcano's per-pod
# victims wherever no gang is at stake; ``tidal`` ranks every reclaim by DEC-8 (lowest priority
# first, then fewest jobs broken, then fewest pods; Volcano's newest-first breaks the ties left).
VOLCANO_ORDER, TIDAL_ORDER = "volcano", "tidal"
# The plugin of the tidal setup (seed 000: inference reclaims cards from training): with it
# configured, ``tidal`` is the default.
TIDAL_PLUGIN = "capacity-card"


def gang_safe(arguments: "Arguments") -> bool:
    """Reads every reclaim argument; True when victims are chosen as whole gangs."""
    arguments.get_bool("predicateErrorCacheEnable", True)  # validated only
    order = arguments.get_str("victimOrder", "")
    if order and order not in (VOLCANO_ORDER, TIDAL_ORDER):
        raise arguments.bad_value("victimOrder", f"{VOLCANO_ORDER} or {TIDAL_ORDER}", order)
    return arguments.get_bool("enableGangSafeReclaim", True)


def victim_order(arguments: "Arguments", plugins: set[str]) -> str:
    """``victimOrder``, by default ``tidal`` where capacity-card decides what may be reclaimed
    (TIDE-4) and ``volcano`` elsewhere."""
    return arguments.get_str("victimOrder", "") or (TIDAL_ORDER if TIDAL_PLUGIN in plugins else VOLCANO_ORDER)




def execute(ssn: "Session") -> None:
    arguments = ssn.config.action_arguments(ACTION)
    gang = None
    if gang_safe(arguments):
        plugins = {p.name for tier in ssn.config.tiers for p in tier}
        gang = GangSafeReclaim(ssn, every_reclaim_by_dec8=victim_order(arguments, plugins) == TIDAL_ORDER)
    turns = starving_turns(ssn)
    queues, reclaimer_jobs = turns.queues, turns.starving
    reclaimer_tasks = {job.uid: ssn.sort_tasks(ungated_pending(job)) for job in turns.jobs}

    while not queues.empty():
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = reclaimer_jobs.get(queue.uid)
        if jobs is None or jobs.empty():
            continue
        job = jobs.pop()
        stmt = Statement(ssn)
        tasks = reclaimer_tasks[job.uid]
        if gang is not None and constrained(ssn, job):
            # A gang held to one HyperNode takes its room inside one (actions/evict_domain.py).
            within_best_domain(ssn, stmt, job, lambda s: gang.job_turn(s, queue, job, tasks), gang.keep)
        elif gang is not None:
            gang.job_turn(stmt, queue, job, tasks)
        else:
            for task in tasks:
                if not ssn.job_starving(job):
                    break
                if eligible(ssn, queue, task):
                    volcano_walk(ssn, stmt, queue, job, task)
        if ssn.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()
        if not jobs.empty():
            queues.push(queue)
