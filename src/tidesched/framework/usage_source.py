"""The scheduler config's ``metrics`` section: where nodes' measured usage comes from (Volcano
v1.15.1 ``pkg/scheduler/metrics/source``), for the usage and rescheduling plugins.

    metrics:
      type: prometheus             # prometheus | elasticsearch | prometheus_adaptor
      address: http://prometheus.monitoring:9090
      interval: 30s                # how often to ask (default 30s)
      tls.insecureSkipVerify: "false"
      elasticsearch.index: metricbeat-*            # elasticsearch only (these are the defaults)
      elasticsearch.hostnameFieldName: host.hostname
      elasticsearch.username: ""
      elasticsearch.password: ""

Read and checked when the config is loaded (CONF-3): an unknown ``type``, a missing
``address`` or an unreadable ``interval`` is refused with the field named, where Volcano logs
an error on every poll (or, for the interval, quietly takes 30s). Without ``type`` no usage is
collected, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tidesched.framework.arguments import ConfigError
from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError

PROMETHEUS, ELASTICSEARCH, PROMETHEUS_ADAPTOR = "prometheus", "elasticsearch", "prometheus_adaptor"
TYPES = (ELASTICSEARCH, PROMETHEUS, PROMETHEUS_ADAPTOR)
DEFAULT_INTERVAL = 30.0  # Volcano defaultMetricsInternal
DEFAULT_ES_INDEX = "metricbeat-*"
DEFAULT_ES_HOSTNAME_FIELD = "host.hostname"


@dataclass(frozen=True)
class UsageSourceConf:
    type: str = ""  # "": no source
    address: str = ""
    interval: float = DEFAULT_INTERVAL
    insecure_skip_verify: bool = False
    es_index: str = DEFAULT_ES_INDEX
    es_hostname_field: str = DEFAULT_ES_HOSTNAME_FIELD
    es_username: str = ""
    es_password: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.type)


def usage_source_conf(metrics: Mapping[str, str], source: str = "<config>") -> UsageSourceConf:
    """The ``metrics`` section read, or a ConfigError naming the bad field."""

    def bad(key: str, reason: str) -> ConfigError:
        return ConfigError(reason, source=source, field=f"metrics[{key!r}]")

    kind = metrics.get("type", "")
    if not kind:
        return UsageSourceConf()
    if kind not in TYPES:
        raise bad("type", f"unknown metrics source {kind!r} (supported: {', '.join(TYPES)})")
    address = metrics.get("address", "")
    if kind != PROMETHEUS_ADAPTOR and not address:
        raise bad("address", f"the {kind} source needs an address")
    interval = DEFAULT_INTERVAL
    if metrics.get("interval"):
        try:
            interval = parse_go_duration(metrics["interval"], "interval")
        except ObjectError as exc:
            raise bad("interval", str(exc).split(": ", 1)[-1]) from None
        if interval <= 0:
            interval = DEFAULT_INTERVAL  # as Volcano: a non-positive interval means the default
    return UsageSourceConf(
        type=kind,
        address=address,
        interval=interval,
        insecure_skip_verify=metrics.get("tls.insecureSkipVerify", "") == "true",
        es_index=metrics.get("elasticsearch.index") or DEFAULT_ES_INDEX,
        es_hostname_field=metrics.get("elasticsearch.hostnameFieldName") or DEFAULT_ES_HOSTNAME_FIELD,
        es_username=metrics.get("elasticsearch.username", ""),
        es_password=metrics.get("elasticsearch.password", ""),
    )
