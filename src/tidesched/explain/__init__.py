"""Read-only explanations of a session, one home for every reader (the command line, the web
view of ``tidesched run``, the quota service): :mod:`~tidesched.explain.pod` (why a pod stays
pending), :mod:`~tidesched.explain.group` (why a gang waits: ``NS/podgroup/NAME``,
``NS/job/NAME``) and :mod:`~tidesched.explain.quota` (per queue and card model: quota, used,
inqueue, pending, OBS-2). Nothing here changes a session.
"""
