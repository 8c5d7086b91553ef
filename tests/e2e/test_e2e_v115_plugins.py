"""Volcano v1.15.1's plugins on a real control plane (issue 32): ``tidesched run`` with the
deployed RBAC reads what they need from the API server and decides with them.

* resourcequota: a namespace's ResourceQuota (its status as kube-controller-manager's quota
  controller would write it) keeps a PodGroup whose minResources it cannot hold Pending, with
  the plugin's event, while one that fits is enqueued.
* every plugin of this part of issue 32 in one config (resource-strategy-fit, resourcequota,
  usage with a Prometheus source, rescheduling, numa-aware, extender): it starts and places
  pods by each one's input (the source and the extender are small servers of the test)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from cluster import GROUP_NAME, bound, create_node, create_podgroup, events, pod_body, podgroup, wait_until

CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: resourcequota
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_resourcequota_keeps_a_podgroup_out_of_the_queue(e2e) -> None:
    api = e2e.api
    ns = e2e.namespace("quota")
    api.post(f"/api/v1/namespaces/{ns}/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": ns},
        "spec": {"hard": {"requests.cpu": "3"}}})
    # kube-controller-manager's quota controller writes the status the plugin reads (nothing used yet).
    wait_until(lambda: (api.get(f"/api/v1/namespaces/{ns}/resourcequotas/team").get("status") or {}).get("hard"),
               30, "the quota controller to write the quota's status")
    create_podgroup(api, ns, "fits", min_member=1, min_resources={"cpu": "2", "requests.cpu": "2"})
    create_podgroup(api, ns, "too-big", min_member=1, min_resources={"cpu": "4", "requests.cpu": "4"})
    e2e.scheduler(CONFIG)
    wait_until(lambda: podgroup(api, ns, "fits")["status"].get("phase") == "Inqueue", 30, "the fitting PodGroup enqueued")
    refused = wait_until(lambda: events(api, ns, "too-big", "Unschedulable"), 30, "the quota event")
    assert any("resource quota insufficient" in e["message"] and "requests.cpu: 4" in e["message"]
               and "requests.cpu: 3" in e["message"] for e in refused), refused
    assert podgroup(api, ns, "too-big")["status"].get("phase") in (None, "Pending")


# -- every plugin of this part of issue 32 in one config ------------------------------------------

ALL_PLUGINS = """
actions: "enqueue, allocate, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: resourcequota
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: resource-strategy-fit
    arguments:
      resources: {cpu: {type: MostAllocated, weight: 1}}
  - name: usage
    arguments: {thresholds: {cpu: 80, mem: 80}}
  - name: rescheduling
    arguments: {interval: 1m, metricsPeriod: 10m}
  - name: numa-aware
  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.predicateVerb: predicate
      extender.httpTimeout: 2s
metrics:
  type: prometheus
  address: {url}
  interval: 1s
"""


class _Stub:
    """Prometheus's query API (node usage: ``loaded`` at 95 % cpu) and an extender refusing
    ``refused``, on one small server."""

    def __init__(self, loaded: str, refused: str) -> None:
        self.queries: list[str] = []
        self.predicates: list[tuple[str, str]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
                outer.queries.append(query)
                value = "95" if f'instance="{loaded}"' in query and "node_cpu" in query else "20"
                self._send({"status": "success", "data": {"resultType": "vector",
                                                          "result": [{"metric": {}, "value": [time.time(), value]}]}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                name = body["node"]["Name"]
                outer.predicates.append((body["task"]["Name"], name))
                self._send({"status": "refused by the extender" if name == refused else ""})

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _numatopology(name: str) -> dict:
    detail = {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)}
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name},
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                     "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}}, "cpuDetail": detail}}


def test_a_config_naming_every_v115_plugin_runs(e2e) -> None:
    """resource-strategy-fit, resourcequota, usage (with a Prometheus source), rescheduling,
    numa-aware (a Numatopology object) and extender (an HTTP server) in one config: the scheduler
    starts, reads each one's input from the cluster and outside, and places pods by them."""
    api = e2e.api
    ns = e2e.namespace("all")
    loaded, numa, refused = f"{ns}-loaded", f"{ns}-numa", f"{ns}-refused"
    stub = _Stub(loaded, refused)
    topo_path = f"/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies/{numa}"
    try:
        for name in (loaded, numa, refused):
            create_node(api, name, cpu="8", memory="32Gi")
        api.post("/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies", _numatopology(numa))
        e2e.scheduler(ALL_PLUGINS.replace("{url}", stub.url))
        # Usage known for every node (a poll a second) before the pods come.
        wait_until(lambda: sum(f'instance="{refused}"' in q for q in stub.queries) >= 4, 30, "two polls of the source")
        create_podgroup(api, ns, "plain", min_member=1)
        create_podgroup(api, ns, "pinned", min_member=1)
        api.post(f"/api/v1/namespaces/{ns}/pods", pod_body(ns, "plain-0", annotations={GROUP_NAME: "plain"}))
        body = pod_body(ns, "pinned-0", cpu="2", memory="1Gi",
                        annotations={GROUP_NAME: "pinned", "volcano.sh/numa-topology-policy": "single-numa-node"})
        body["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2", "memory": "1Gi"}
        api.post(f"/api/v1/namespaces/{ns}/pods", body)
        got = wait_until(lambda: (lambda b: b if len(b) == 2 else None)(bound(api, ns)), 30, "both pods bound")
        # usage keeps plain-0 off the loaded node and the extender off the refused one;
        # numa-aware puts the Guaranteed pod with a policy on the node with a Numatopology.
        assert got == {"plain-0": numa, "pinned-0": numa}, got
        assert ("plain-0", refused) in stub.predicates
    finally:
        api.delete(topo_path)
        stub.close()
