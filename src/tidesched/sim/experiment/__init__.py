"""The FGD paper's policy experiments (Weng et al., USENIX ATC '23): the trace's GPU nodes, a
pod list tuned to a share of GPU capacity and shuffled (seeded), each pod placed once — by the
GPU placement plugins, or by scheduling sessions of any other config — none leaving; the GPU
allocation and fragmentation recorded as arrived demand grows. ``tidesched experiment`` runs
many at once.

Modules: ``workload`` (the nodes, the tuned and shuffled pods), ``placement`` (the loop over the
GPU placement plugins), ``sessions`` (any other config: one scheduling session per pod),
``policies`` (bundled policies and configs → which path), ``results`` (figures by arrived per
cent, ``summary.csv``), ``run`` (one run → ``result.json``), ``runs`` (many: process pool or
Dask), ``report`` (``report.html``).
"""
