"""resourcequota plugin (Volcano v1.15.1 plugins/resourcequota): a PodGroup is enqueued only
while its namespace's Kubernetes ResourceQuotas can hold its ``spec.minResources``.

JobEnqueueable, for a PodGroup with ``minResources`` in a namespace with quotas: for each
quota (in name order), the PodGroup's amounts of the resources the quota limits (by name:
``cpu`` meets ``cpu``, ``requests.cpu`` meets ``requests.cpu``) are added to the quota's
``status.used`` and to what PodGroups of the namespace admitted earlier this session asked
for; if any is then above ``status.hard``, the PodGroup is rejected and stays Pending, with a
Normal ``Unschedulable`` event on it naming the resources, the request, the used amount and
the limit. Otherwise it is permitted and its whole ``minResources`` counts as pending for the
rest of the session. A PodGroup without ``minResources``, or in a namespace without quotas,
is permitted. The plugin takes no arguments; quota scopes are not read (as in Volcano).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import PERMIT, REJECT, Plugin
from tidesched.model.resource_quota import ResourceList, ResourceQuota, add, exceeded, format_list, mask

if TYPE_CHECKING:
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo


class ResourceQuotaPlugin(Plugin):
    name = "resourcequota"

    def on_session_open(self, ssn: "Session") -> None:
        quotas: dict[str, list[ResourceQuota]] = {}
        for rq in sorted(ssn.snapshot.resource_quotas, key=lambda q: q.key):
            quotas.setdefault(rq.namespace, []).append(rq)
        if not quotas:
            return  # every PodGroup would be permitted: no hook to ask
        pending: dict[str, ResourceList] = {}

        def enqueueable(job: "JobInfo") -> int:
            request = job.pod_group.min_resource_list
            namespace_quotas = quotas.get(job.namespace)
            if request is None or not namespace_quotas:
                return PERMIT
            earlier = pending.get(job.namespace, {})
            for rq in namespace_quotas:
                requested = mask(request, rq.hard)
                usage = mask(add(add(earlier, rq.used), requested), requested)
                over = exceeded(usage, rq.hard)
                if over:
                    msg = (
                        f"resource quota insufficient, requested: {format_list(mask(requested, over))}, "
                        f"used: {format_list(mask(rq.used, over))}, limited: {format_list(mask(rq.hard, over))}"
                    )
                    ssn.event("PodGroup", job.namespace, job.name, "Normal", "Unschedulable", msg)
                    return REJECT
            pending[job.namespace] = add(earlier, request)
            return PERMIT

        ssn.add_fn("job_enqueueable", self.name, enqueueable)
