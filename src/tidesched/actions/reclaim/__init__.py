"""The reclaim action (ACT-5, TIDE-6) and the modules only it uses: ``action`` (Volcano's loop:
queues in QueueOrder, starving jobs, one Statement per job), ``steps`` (one reclaimer task's
moves: reclaimees, gates, Volcano's per-node walk, evict-and-pipeline), ``gang`` (gang-safe
reclaim for one job's turn) and ``gang_victims`` (whole-gang victim plans per node, DEC-8).
What preempt shares with it is ``actions.victims``."""
