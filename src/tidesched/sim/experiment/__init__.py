"""The FGD paper's policy experiments (Weng et al., USENIX ATC '23): the trace's GPU nodes, a
pod list tuned to a share of GPU capacity and shuffled (seeded), each pod placed once by the
GPU placement plugins, none leaving; the GPU allocation and fragmentation recorded as arrived
demand grows. ``tidesched experiment`` runs many at once.

Modules: ``workload`` (the nodes, the tuned and shuffled pods), ``placement`` (the loop),
``policies`` (bundled policies and configs → placement plugins), ``results`` (figures by
arrived per cent, ``summary.csv``), ``run`` (one run → ``result.json``), ``runs`` (many:
process pool or Dask), ``report`` (``report.html``).
"""
