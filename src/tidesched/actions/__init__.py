"""Scheduler actions, run in the configured order within a session (ACT-1..6).

Each action module has ``execute(session) -> None``; ``scheduler.ACTIONS`` names them as Volcano
does (``enqueue``, ``allocate``, ``backfill``, ``preempt``, ``reclaim``, ``gangpreempt``,
``gangreclaim``, ``shuffle``). Modules: one per action; ``victims`` (shared by preempt and
reclaim: ValidateVictims, candidate nodes, tentative evictions); ``pdb`` (PodDisruptionBudget
violations, for preempt and the pdb plugin); ``starving`` (the jobs that may evict, and their
turns); ``bundles`` and ``gang_evict`` (what gangpreempt and gangreclaim share); ``reclaim/``
(the reclaim action and the modules only it uses).
"""
