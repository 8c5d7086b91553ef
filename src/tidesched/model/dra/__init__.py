"""Dynamic Resource Allocation (``resource.k8s.io/v1``): the objects (``objects``), node
selection (``nodes``), the devices and who holds them (``devices``), the allocator
(``allocator``, kube-scheduler's exhaustive search) and a session's ledger of claims
(``ledger``). See docs/dra.md."""
