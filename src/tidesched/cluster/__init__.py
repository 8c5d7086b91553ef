"""The live cluster (Kubernetes mode, ``tidesched run``): the world adapter between a real API
server and the scheduling core. (Kubernetes' matching rules themselves are :mod:`tidesched.rules`.)

``api`` and ``curl`` (calls), ``store`` (informers), ``binder``, ``evictor``, ``status`` (status
subresources, pod conditions, aggregated events), ``leader`` (Lease election), ``server``
(metrics, health, quota API), ``webview`` (the live page), ``runner`` (the loop of ``tidesched
run``), ``commands`` (its command line, and reading a cluster once for ``quota``, ``explain``
and the what-if). Tested end to end against a real kube-apiserver (``tests/e2e``).

No scheduling logic lives here (RUN-4): decisions come from ``tidesched.scheduler``'s session.
"""
