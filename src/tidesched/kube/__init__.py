"""Kubernetes mode: the world adapter between a real API server and the scheduling core.

``store`` (informers), ``binder``, ``evictor``, ``status`` (status subresources, pod conditions,
aggregated events), ``leader`` (Lease election), ``server`` (metrics, health, quota API),
``usage`` (quota report), ``runner`` (the loop of ``tidesched run``). ``fakeapi`` is the
in-process fake API server the tests and the benchmark use; it is not used in production.

No scheduling logic lives here (RUN-4): decisions come from ``tidesched.scheduler``'s session.
"""
