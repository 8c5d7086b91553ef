"""Volcano's real admission webhooks: ``vc-webhook-manager`` (v1.15.1) serving HTTPS on loopback,
registered with the API server by the webhook configurations of Volcano's own Helm chart
(``chart/templates/webhooks.yaml`` rendered by ``helm template`` with the admissions enabled), each
``clientConfig.service`` replaced by the manager's ``https://127.0.0.1:PORT`` URL: the only change a
cluster without Services needs. The manager fills in their CA bundle itself, as in a real install.

The admissions default to those Volcano's own CI enables (``hack/run-e2e-kind.sh``: every webhook),
``CI_ADMISSIONS``; ``CHART_ADMISSIONS`` is the chart's default. With ``failurePolicy: Fail`` a
request the webhooks refuse, or cannot be asked about, fails: objects Volcano refuses (a PodGroup
in a queue that does not exist, a queue on a parent cycle) can only be written around them, as in
a cluster whose webhooks are off (:meth:`WebhookManager.suspended`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator


from controlplane import ApiError, ControlPlane, _Proc, free_port, issue_serving_cert
from volcano import render_chart

CI_ADMISSIONS = ("/pods/mutate,/queues/mutate,/podgroups/mutate,/jobs/mutate,/jobs/validate,/jobflows/validate,"
                 "/pods/validate,/queues/validate,/podgroups/validate,/hypernodes/validate,/cronjobs/validate")
CHART_ADMISSIONS = ("/jobs/mutate,/jobs/validate,/podgroups/validate,/queues/mutate,/queues/validate,"
                    "/hypernodes/validate,/cronjobs/validate")
RELEASE, NAMESPACE = "integration", "volcano-system"  # hack/run-e2e-kind.sh's release
KINDS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
         "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
REGISTRATION = "/apis/admissionregistration.k8s.io/v1"


def render_configurations(chart: Path, admissions: str, url: str) -> list[dict[str, Any]]:
    """The chart's webhook configurations for ``admissions``, each pointing at ``url`` + its path."""
    docs = render_chart(chart, "templates/webhooks.yaml",
                        "custom.enabled_admissions=" + admissions.replace(",", "\\,"), release=RELEASE, namespace=NAMESPACE)
    for doc in docs:
        for hook in doc["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"]["url"] = url + service["path"]
    return docs


def _path(doc: dict[str, Any]) -> str:
    return f"{REGISTRATION}/{KINDS[doc['kind']]}/{doc['metadata']['name']}"


class WebhookManager(_Proc):
    """``vc-webhook-manager`` and its webhook configurations. :meth:`start` returns once the API
    server calls it (a dry-run deletion of the ``default`` queue is refused by it)."""

    def __init__(self, cp: ControlPlane, volcano: Path, workdir: Path, *, admissions: str = CI_ADMISSIONS,
                 feature_gates: str = "", args: tuple[str, ...] = ()) -> None:
        self.cp, self.volcano, self.admissions = cp, volcano, admissions
        self.port = free_port()
        self.healthz_port = free_port()
        self.dir = workdir / "webhook-manager"
        self.dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = cp.kubeconfig(self.dir / "kubeconfig", cp.admin_token, user="vc-webhook-manager")
        self.url = f"https://127.0.0.1:{self.port}"
        cmd = [
            str(volcano / "vc-webhook-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--webhook-url={self.url}",
            "--listen-address=127.0.0.1",
            f"--port={self.port}",
            f"--tls-cert-file={self.dir / 'tls.crt'}",
            f"--tls-private-key-file={self.dir / 'tls.key'}",
            f"--ca-cert-file={cp.workdir / 'ca.crt'}",
            f"--admission-conf={volcano / 'volcano-admission.conf'}",
            f"--enabled-admission={admissions}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.healthz_port}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "-v=3",
        ]
        if feature_gates:
            cmd.append(f"--feature-gates={feature_gates}")
        cmd += list(args)
        super().__init__("vc-webhook-manager", cmd, workdir / "vc-webhook-manager.log")
        self.configurations = render_configurations(volcano / "chart", admissions, self.url)

    def start(self, timeout: float = 120.0) -> WebhookManager:  # type: ignore[override]
        issue_serving_cert(self.cp.workdir, self.dir / "tls.crt", self.dir / "tls.key", "vc-webhook-manager")
        self.register()
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.wait_effective(timeout)
        return self

    def restart(self) -> WebhookManager:
        """Stopped and started again (same port and configurations), effective on return."""
        self.stop()
        return self.start()

    def register(self) -> None:
        for doc in self.configurations:
            self.cp.admin.apply(doc)

    def unregister(self) -> None:
        for doc in self.configurations:
            self.cp.admin.delete(_path(doc))

    def refuses_deleting_default_queue(self) -> bool:
        try:
            self.cp.admin.request("DELETE", "/apis/scheduling.volcano.sh/v1beta1/queues/default", dryRun="All")
        except ApiError as exc:
            return "can not be deleted" in exc.body
        return False

    def wait_effective(self, timeout: float) -> None:
        """The manager has filled in every CA bundle and the API server calls it."""
        api = self.cp.admin
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"vc-webhook-manager exited:\n{self.tail()}")
            try:
                filled = all(h["clientConfig"].get("caBundle") for d in self.configurations
                             for h in api.get(_path(d))["webhooks"])
            except ApiError:
                filled = False
            if filled and ("/queues/validate" not in self.admissions or self.refuses_deleting_default_queue()):
                # Keep the filled-in bundles: a later register() (after suspended()) reuses them.
                self.configurations = [api.get(_path(d)) for d in self.configurations]
                for d in self.configurations:
                    d["metadata"] = {k: d["metadata"][k] for k in ("name", "labels") if k in d["metadata"]}
                return
            time.sleep(0.2)
        raise RuntimeError(f"vc-webhook-manager not effective after {timeout:.0f}s:\n{self.tail()}")

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Volcano's webhooks off while the block runs (their configurations deleted, then made
        again): for objects a cluster gets only where they are off."""
        self.unregister()
        deadline = time.monotonic() + 30
        while "/queues/validate" in self.admissions and self.refuses_deleting_default_queue():
            if time.monotonic() > deadline:
                raise RuntimeError("the API server still calls Volcano's webhooks 30 s after their removal")
            time.sleep(0.1)
        try:
            yield
        finally:
            self.register()
            deadline = time.monotonic() + 30
            while "/queues/validate" in self.admissions and not self.refuses_deleting_default_queue():
                if time.monotonic() > deadline:
                    raise RuntimeError("Volcano's webhooks not called 30 s after they were registered again")
                time.sleep(0.1)


def start_webhook_manager(cp: ControlPlane, volcano: Path, workdir: Path, **kw: Any) -> WebhookManager:
    return WebhookManager(cp, volcano, workdir, **kw).start()
