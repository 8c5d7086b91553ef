"""cdp plugin: what the scenarios (tests/scenarios/cdp.yaml) do not show — the session's time,
the label before the annotation, and the simulator marking bound pods scheduled."""

from __future__ import annotations

from typing import Any

from builders import decide, filter_config, node, pod, podgroup, queue
from tidesched.model.objects import parse_pod, parse_time
from tidesched.sim.clock import Clock
from tidesched.sim.world import World

CONFIG = filter_config("cdp")
SCHEDULED = "2024-01-01T00:00:00Z"


def _cluster(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    victim = pod("v-0", "victims", node="n1", phase="Running", labels=labels, annotations=annotations)
    victim["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2023-01-01T00:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": SCHEDULED},
    ]
    return [{"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}, queue("q"), node("n1", cpu="1"),
            podgroup("victims", 0, queue="q", phase="Running"), victim,
            podgroup("p", 1, queue="q", priorityClassName="high"), pod("p-0", "p", spec={"priorityClassName": "high"})]


def _run(objs: list[dict[str, Any]], now: str):
    return decide(objs, CONFIG, now=parse_time(now, "now"))


def test_protection_runs_out_with_the_session_clock_and_asks_for_a_session_then() -> None:
    objs = _cluster(annotations={"volcano.sh/cooldown-time": "10m"})
    early = _run(objs, "2024-01-01T00:09:59Z")
    assert early.evicted == [] and early.wake_at == parse_time("2024-01-01T00:10:00Z", "t")
    late = _run(objs, "2024-01-01T00:10:01Z")
    assert late.evicted == ["ns/v-0"]


def test_the_label_is_read_before_the_annotation() -> None:
    objs = _cluster(labels={"volcano.sh/cooldown-time": "1s"}, annotations={"volcano.sh/cooldown-time": "1h"})
    assert _run(objs, "2024-01-01T00:01:00Z").evicted == ["ns/v-0"]


def test_a_pod_not_yet_running_is_not_protected() -> None:
    objs = _cluster(annotations={"volcano.sh/cooldown-time": "1h"})
    objs[4]["status"]["phase"] = "Pending"  # bound, not started
    assert _run(objs, "2024-01-01T00:01:00Z").evicted == ["ns/v-0"]


def test_the_simulator_marks_a_bound_pod_scheduled() -> None:
    world = World(Clock())
    world.put("Node", node("n1"))
    world.put("Pod", pod("p", node=""))
    assert world.bind_pod("ns/p", "n1", 120.0)
    bound = parse_pod(world.get("Pod", "ns/p"))
    assert bound.scheduled_time and bound.scheduled_time == bound.start_time
