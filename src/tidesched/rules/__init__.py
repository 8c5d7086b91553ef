"""Kubernetes' matching and scoring rules, vectorised over a node table: label selectors and node
affinity (``selectors``, over a ``node_index.NodeLabelIndex``), taints and tolerations
(``taints``), kube-scheduler's score formulas (``scoring``) and pod topology spread
(``topology_spread``). Pure functions of objects and arrays: no session, no cluster, no I/O.
(The live-cluster side of tidesched is :mod:`tidesched.cluster`.)
"""
