"""Kubernetes mode: the world adapter between a real API server and the scheduling core.

``store`` (informers), ``binder``, ``evictor``, ``status`` (status subresources, pod conditions,
aggregated events), ``leader`` (Lease election), ``server`` (metrics, health, quota API),
``usage`` (quota report), ``runner`` (the loop of ``tidesched run``). Tested end to end against
a real kube-apiserver (``tests/e2e``).

No scheduling logic lives here (RUN-4): decisions come from ``tidesched.scheduler``'s session.
"""
