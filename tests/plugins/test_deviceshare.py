"""The deviceshare plugin with vGPU, as scenarios through whole sessions. The cases port
Volcano's deviceshare_test.go, vgpu utils_test.go and spread_integration_test.go as our own,
plus the facts of issue 26 (whole-device memory, exclusive 100-core pods, explain reasons)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import podgroup, queue
from tidesched.framework.arguments import ConfigError
from tidesched.model.loader import Manifest
from tidesched.model.vgpu import ASSIGNED_IDS, ASSIGNED_NODE, decode_assignment, RegisteredDevice
from tidesched.scheduler import config_from_text, schedule_manifests
from vgpu_builders import devices, vgpu_config, vgpu_node, vgpu_pod


def run(objs: list[dict[str, Any]], config: str | None = None) -> tuple[Any, Any]:
    ms = [Manifest(f"obj{i}", o) for i, o in enumerate([queue("default", weight=1), *objs])]
    return schedule_manifests(ms, config_from_text(config or vgpu_config()))


def pending(name: str, group: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    """A pending vGPU pod with its own PodGroup."""
    return [podgroup(group or f"pg-{name}"), vgpu_pod(name, group=group or f"pg-{name}", **kw)]


def running(name: str, node: str, uses: str, **kw: Any) -> dict[str, Any]:
    """A pod already on ``node`` holding the devices the annotation names."""
    return vgpu_pod(name, node=node, phase="Running",
                    annotations={ASSIGNED_IDS: uses, ASSIGNED_NODE: node}, **kw)


def devices_of(d: Any, pod: str) -> list[str]:
    """The device UUIDs the decision gives ``pod``, container by container."""
    ann = d.bind_annotations[f"ns/{pod}"]
    return [u.uuid for c in decode_assignment(ann[ASSIGNED_IDS]) for u in c]


# -- arguments (Volcano TestArguments) -----------------------------------------------------


def test_arguments() -> None:
    cfg = config_from_text(vgpu_config("binpack", 10))
    (opt,) = [p for t in cfg.tiers for p in t.plugins if p.name == "deviceshare"]
    from tidesched.plugins.deviceshare import DeviceSharePlugin

    plugin = DeviceSharePlugin(opt.args)
    assert (plugin.vgpu, plugin.policy, plugin.weight) == (True, "binpack", 10)


@pytest.mark.parametrize("extra", ['"Binpack"', "most"])
def test_unknown_policy_refused(extra: str) -> None:
    with pytest.raises(ConfigError, match="SchedulePolicy"):
        config_from_text(vgpu_config(extra, 1))


def test_other_device_kinds_refused() -> None:
    text = vgpu_config().replace("deviceshare.VGPUEnable: true", "deviceshare.GPUSharingEnable: true")
    with pytest.raises(ConfigError, match="GPUSharingEnable"):
        config_from_text(text)


# -- fit ----------------------------------------------------------------------------------


def test_three_cards_of_different_memory() -> None:
    # Volcano Test_FilterNode: three devices (30000, 20000, 30000 MiB), a pod of 3 × 100 cores.
    devs = [RegisteredDevice(f"GPU-{i}", 10, m, "NVIDIA", True, "hami-core") for i, m in enumerate((30000, 20000, 30000))]
    _ssn, d = run([vgpu_node("n1", devs=devs), *pending("p1", number=3, cores=100)])
    assert d.bound == {"ns/p1": "n1"}
    assert sorted(devices_of(d, "p1")) == ["GPU-0", "GPU-1", "GPU-2"]


def test_no_memory_request_takes_whole_device() -> None:
    # Issue 26: a pod without a memory request takes a whole device's memory, so a second
    # pod finds no memory on that device however little compute either uses.
    objs = [vgpu_node("n1", gpus=1), *pending("a", cores=10), *pending("b", memory=1, cores=10)]
    ssn, d = run(objs)
    assert d.bound == {"ns/a": "n1"}
    assert "no device with 1 MiB memory free; best has 0 MiB" in ssn.jobs["ns/pg-b"].fit_errors[
        next(t.uid for t in ssn.tasks.values() if t.name == "b")].error()


def test_full_core_pod_needs_unused_device() -> None:
    # Issue 26: a 100-core pod needs a device no other pod uses, even one using 0 cores.
    objs = [vgpu_node("n1", gpus=1), running("r", "n1", "GPU-n1-0,NVIDIA,100,0:", memory=100),
            *pending("p", memory=100, cores=100)]
    _ssn, d = run(objs)
    assert d.bound == {}
    objs = [vgpu_node("n1", gpus=2), running("r", "n1", "GPU-n1-0,NVIDIA,100,0:", memory=100),
            *pending("p", memory=100, cores=100)]
    _ssn, d = run(objs)
    assert devices_of(d, "p") == ["GPU-n1-1"]


def test_zero_core_pod_not_on_full_device() -> None:
    objs = [vgpu_node("n1", gpus=1), running("r", "n1", "GPU-n1-0,NVIDIA,100,100:", memory=100, cores=100),
            *pending("p", memory=100)]
    _ssn, d = run(objs)
    assert d.bound == {}


def test_split_count_limits_pods_per_device() -> None:
    objs = [vgpu_node("n1", gpus=1, split=2)]
    for i in range(3):
        objs += pending(f"p{i}", memory=100, cores=10)
    _ssn, d = run(objs)
    assert sorted(d.bound) == ["ns/p0", "ns/p1"]


def test_compute_reason_names_best_device() -> None:
    objs = [vgpu_node("n1", gpus=2), running("r1", "n1", "GPU-n1-0,NVIDIA,100,60:", memory=100, cores=60),
            running("r2", "n1", "GPU-n1-1,NVIDIA,100,70:", memory=100, cores=70), *pending("p", memory=100, cores=60)]
    ssn, d = run(objs)
    assert d.bound == {}
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    assert ssn.jobs["ns/pg-p"].fit_errors[task.uid].error() == (
        "0/1 nodes are unavailable: 1 no device with 60 % compute free; best has 40 %."
    )


def test_too_many_devices_reason() -> None:
    ssn, d = run([vgpu_node("n1", gpus=4), *pending("p", number=8, memory=100)])
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    assert "node has 4 GPUs, pod asks for 8" in ssn.jobs["ns/pg-p"].fit_errors[task.uid].error()


def test_node_without_registration_fails_vgpu_pod() -> None:
    plain = vgpu_node("n0", gpus=2)
    del plain["metadata"]["annotations"]["volcano.sh/node-vgpu-register"]
    ssn, d = run([plain, *pending("p", memory=100)])
    assert d.bound == {}
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    assert "node registers no vGPU devices" in ssn.jobs["ns/pg-p"].fit_errors[task.uid].error()


def test_unhealthy_device_not_used() -> None:
    devs = devices(2, prefix="GPU")
    devs[1] = RegisteredDevice("GPU-1", 10, 16384, "NVIDIA-Tesla-T4", False, "hami-core")
    _ssn, d = run([vgpu_node("n1", devs=devs), *pending("p", memory=100)], vgpu_config("", 0))
    assert devices_of(d, "p") == ["GPU-0"]  # the unset policy tries the highest index first


def test_mode_annotation_must_match() -> None:
    objs = [vgpu_node("n1", gpus=1), *pending("p", memory=100, annotations={"volcano.sh/vgpu-mode": "mig"})]
    _ssn, d = run(objs)
    assert d.bound == {}


# -- UUID constraints (Volcano TestGPUUUIDConstraints) ---------------------------------------


@pytest.mark.parametrize(("annotations", "want"), [
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0000A"}, "GPU-0000A"),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0000B"}, "GPU-0000A"),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-unknown"}, None),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0000A,GPU-0000B"}, None),
])
def test_uuid_constraints(annotations: dict[str, str], want: str | None) -> None:
    devs = [RegisteredDevice(f"GPU-0000{c}", 4, 16384, "NVIDIA", True, "hami-core") for c in "AB"]
    ssn, d = run([vgpu_node("n1", devs=devs), *pending("p", memory=4096, cores=25, annotations=annotations)],
                 vgpu_config("", 0))
    if want is None:
        assert d.bound == {}
        task = next(t for t in ssn.tasks.values() if t.name == "p")
        assert "no usable GPU" in ssn.jobs["ns/pg-p"].fit_errors[task.uid].error()
    else:
        assert devices_of(d, "p") == [want]


# -- policies (Volcano TestSortedDeviceIndicesByPolicy, TestBinpackStacksSequentialPods) ----


@pytest.mark.parametrize(("policy", "gpus", "want"), [
    ("binpack", 2, "GPU-n1-0"),  # the busier device
    ("spread", 2, "GPU-n1-1"),  # the idle device
    ("", 3, "GPU-n1-2"),  # unset: the highest index, Volcano's legacy order
])
def test_policy_picks_device(policy: str, gpus: int, want: str) -> None:
    objs = [vgpu_node("n1", gpus=gpus, split=4), running("r", "n1", "GPU-n1-0,NVIDIA,4096,25:", memory=4096, cores=25),
            *pending("p", memory=4096, cores=25)]
    _ssn, d = run(objs, vgpu_config(policy, 0))
    assert devices_of(d, "p") == [want]


def test_binpack_stacks_sequential_pods() -> None:
    objs = [vgpu_node("n1", gpus=3, split=4)]
    for name in "abc":
        objs += pending(name, memory=4096, cores=25)
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert {devices_of(d, n)[0] for n in "abc"} == {"GPU-n1-0"}


def test_spread_spreads_sequential_pods() -> None:
    objs = [vgpu_node("n1", gpus=3, split=4)]
    for name in "abc":
        objs += pending(name, memory=4096, cores=25)
    _ssn, d = run(objs, vgpu_config("spread", 0))
    assert sorted(devices_of(d, n)[0] for n in "abc") == ["GPU-n1-0", "GPU-n1-1", "GPU-n1-2"]


# -- node scores (Volcano TestVgpuScore) -----------------------------------------------------


def _score_cluster() -> list[dict[str, Any]]:
    # node1: one 30000 MiB device holding a 3000 MiB pod; node2: one idle 30000 MiB device.
    n1 = vgpu_node("node1", devs=[RegisteredDevice("GPU-1", 10, 30000, "NVIDIA", True, "hami-core")])
    n2 = vgpu_node("node2", devs=[RegisteredDevice("GPU-2", 10, 30000, "NVIDIA", True, "hami-core")])
    return [n1, n2, running("r", "node1", "GPU-1,NVIDIA,3000,0:", memory=3000), *pending("p", memory=1000)]


def test_binpack_score_prefers_the_used_device() -> None:
    ssn, d = run(_score_cluster(), vgpu_config("binpack", 10))
    assert d.bound == {"ns/p": "node1"}


def test_binpack_score_values() -> None:
    # Scores of the state before any decision: a session that only enqueues.
    ssn, _d = run(_score_cluster(), vgpu_config("binpack", 10).replace("enqueue, allocate, backfill", "enqueue"))
    task = next(t for t in ssn.tasks.values() if t.name == "p")
    scores = ssn.table.devices.score_rows(task.pod.vgpu, "binpack")
    assert scores.tolist() == [13.0, 3.0]  # round(100 × 4000/30000), round(100 × 1000/30000)
    spread = ssn.table.devices.score_rows(task.pod.vgpu, "spread")
    assert spread.tolist() == [0.0, 100.0]


def test_spread_score_prefers_the_idle_device() -> None:
    _ssn, d = run(_score_cluster(), vgpu_config("spread", 10))
    assert d.bound == {"ns/p": "node2"}


def test_no_weight_no_score() -> None:
    # ScheduleWeight 0 (Volcano's default) registers no score: first node by name wins.
    objs = _score_cluster()
    objs[0]["metadata"]["name"], objs[1]["metadata"]["name"] = "node2", "node1"
    objs[2]["spec"]["nodeName"] = "node2"
    objs[2]["metadata"]["annotations"][ASSIGNED_NODE] = "node2"
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert d.bound == {"ns/p": "node1"}


# -- PodGroup spread (Volcano spread_integration_test.go) ------------------------------------

SPREAD = {"volcano.sh/vgpu-podgroup-policy": "spread"}


def _group_pods(names: str, group: str, spread: bool) -> list[dict[str, Any]]:
    ann = dict(SPREAD) if spread else {}
    return [vgpu_pod(n, group=group, memory=4096, cores=25, annotations=dict(ann)) for n in names]


def test_spread_prevents_co_location() -> None:
    objs = [vgpu_node("n1", gpus=2, split=4), podgroup("job-1", min_member=2), *_group_pods("ab", "job-1", True)]
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert devices_of(d, "a") != devices_of(d, "b")


def test_binpack_allows_co_location() -> None:
    objs = [vgpu_node("n1", gpus=2, split=4), podgroup("job-1", min_member=2), *_group_pods("ab", "job-1", False)]
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert devices_of(d, "a") == devices_of(d, "b")


def test_spread_different_groups_share() -> None:
    objs = [vgpu_node("n1", gpus=1, split=4), podgroup("job-1"), podgroup("job-2"),
            *_group_pods("a", "job-1", True), *_group_pods("b", "job-2", True)]
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert devices_of(d, "a") == devices_of(d, "b") == ["GPU-n1-0"]


def test_spread_with_no_room_fails() -> None:
    objs = [vgpu_node("n1", gpus=1, split=4), podgroup("job-1", min_member=1), *_group_pods("ab", "job-1", True)]
    ssn, d = run(objs, vgpu_config("binpack", 0))
    assert len(d.bound) == 1
    left = next(t for t in ssn.tasks.values() if f"ns/{t.name}" not in d.bound)
    assert "vgpu-podgroup-policy spread" in ssn.jobs["ns/job-1"].fit_errors[left.uid].error()


def test_spread_mixed_annotations() -> None:
    objs = [vgpu_node("n1", gpus=2, split=4), podgroup("job-1", min_member=2),
            *_group_pods("a", "job-1", True), *_group_pods("b", "job-1", False)]
    _ssn, d = run(objs, vgpu_config("binpack", 0))
    assert sorted(d.bound) == ["ns/a", "ns/b"]


# -- accounting of pods already placed (Volcano TestAddResource) ----------------------------


def test_pod_on_known_device_is_counted() -> None:
    objs = [vgpu_node("n1", gpus=1), running("r", "n1", "GPU-n1-0,NVIDIA,16000,0:", memory=16000),
            *pending("p", memory=1000)]
    _ssn, d = run(objs)
    assert d.bound == {}


def test_pod_with_unknown_device_still_counted() -> None:
    # Volcano skips an annotation naming a device the node does not have (the pod then holds
    # nothing in its view); tidesched counts the pod on the node's first usable devices, so a
    # device is never handed out twice.
    objs = [vgpu_node("n1", gpus=1), running("r", "n1", "GPU-5678,NVIDIA,16000,0:", memory=16000),
            *pending("p", memory=1000)]
    ssn, d = run(objs)
    assert d.bound == {}
    r = next(t for t in ssn.tasks.values() if t.name == "r")
    assert [u.uuid for u in r.devices.uses()] == ["GPU-n1-0"]


def test_discarded_gang_writes_no_annotations() -> None:
    # Volcano's Release drops the speculative annotations of an allocation that is undone: a
    # gang that cannot be placed whole binds nothing and annotates nothing.
    objs = [vgpu_node("n1", gpus=1), podgroup("job", min_member=2),
            vgpu_pod("a", group="job", cores=60, memory=100), vgpu_pod("b", group="job", cores=60, memory=100)]
    _ssn, d = run(objs)
    assert d.bound == {} and d.bind_annotations == {}


def test_vgpu_disabled_registers_nothing() -> None:
    text = vgpu_config().replace("deviceshare.VGPUEnable: true", "deviceshare.VGPUEnable: false")
    objs = [vgpu_node("n1", gpus=1), *pending("a", cores=40), *pending("b", cores=40)]
    _ssn, d = run(objs)
    assert sorted(d.bound) == ["ns/a"]  # each takes the whole device's memory
    _ssn, d = run(objs, text)
    # No device predicate: both go by the node's scalar resources alone, and nothing is annotated.
    assert sorted(d.bound) == ["ns/a", "ns/b"] and d.bind_annotations == {}


def test_vectorised_reasons_match_the_walk_per_row() -> None:
    # The failure reasons of a full cluster are computed for all rows at once; they must be the
    # per-row walk's, row by row.
    import random

    import numpy as np

    from tidesched.model.devices import CORE, MEM, NUM, DeviceTable
    from tidesched.model.objects import parse_node, parse_pod

    rng = random.Random(7)
    nodes = [parse_node(vgpu_node(f"n{i}", devs=devices(rng.randint(1, 4), memory=rng.choice([8000, 16384]),
                                                       split=rng.choice([1, 2, 4]), prefix=f"G{i}")))
             for i in range(40)]
    t = DeviceTable(nodes, [n.vgpu for n in nodes])
    for _ in range(60):
        shape = t.valid.shape
        t.now[MEM] = np.where(t.valid, np.random.randint(0, 17000, shape), 0)
        t.now[CORE] = np.where(t.valid, np.random.choice([0, 100, 300, 700, 1000], shape), 0)
        t.now[NUM] = np.where(t.valid, np.random.randint(0, 3, shape), 0)
        t.fut[:] = t.now
        req = parse_pod(vgpu_pod("p", number=rng.choice([1, 1, 2, 3]), cores=rng.choice([0, 30, 60, 100]),
                                 memory=rng.choice([None, 2000, 9000]), percent=rng.choice([None, 50]))).vgpu
        rows = np.arange(len(nodes))
        fast = dict(t.reasons(req, "now", rows))
        slow: dict[Any, list[int]] = {}
        for k in rows.tolist():
            slow.setdefault(t._row_reason(k, req, "now"), []).append(k)
        assert {k: np.flatnonzero(m).tolist() for k, m in fast.items()} == slow


def test_vectorised_scores_and_fit_match_the_walk_per_row() -> None:
    import random

    import numpy as np

    from tidesched.model.devices import CORE, MEM, NUM, DeviceTable
    from tidesched.model.objects import parse_node, parse_pod

    rng = random.Random(11)
    nodes = [parse_node(vgpu_node(f"n{i}", devs=devices(rng.randint(1, 4), memory=rng.choice([8000, 16384]),
                                                       split=rng.choice([2, 4]), prefix=f"G{i}")))
             for i in range(40)]
    t = DeviceTable(nodes, [n.vgpu for n in nodes])
    for _ in range(60):
        shape = t.valid.shape
        t.now[MEM] = np.where(t.valid, np.random.randint(0, 12000, shape), 0)
        t.now[CORE] = np.where(t.valid, np.random.choice([0, 100, 300, 700], shape), 0)
        t.now[NUM] = np.where(t.valid, np.random.randint(0, 2, shape), 0)
        t.fut[:] = t.now
        req = parse_pod(vgpu_pod("p", number=rng.choice([1, 1, 2]), cores=rng.choice([0, 30, 60, 100]),
                                 memory=rng.choice([None, 2000]), percent=rng.choice([None, 25]))).vgpu
        for policy in ("binpack", "spread", ""):
            t.policy = policy
            scores = t.score_rows(req, policy).tolist()
            fits = t.fit_rows(req, "idle").tolist()
            for i in range(len(nodes)):
                _picks, s, why = t.walk(i, req, "idle", policy)
                assert fits[i] == (why is None)
                assert scores[i] == (0.0 if why is not None else float(np.floor(s + 0.5))), (policy, i)


def test_explain_names_the_device_reason(tmp_path: Any) -> None:
    import yaml
    from typer.testing import CliRunner

    from tidesched.cli import app

    objs = [queue("default", weight=1), vgpu_node("n1", gpus=2),
            running("r1", "n1", "GPU-n1-0,NVIDIA,100,60:", memory=100, cores=60),
            running("r2", "n1", "GPU-n1-1,NVIDIA,100,70:", memory=100, cores=70), *pending("p", memory=100, cores=60)]
    f = tmp_path / "objs.yaml"
    f.write_text(yaml.safe_dump_all(objs))
    conf = tmp_path / "sched.conf"
    conf.write_text(vgpu_config())
    res = CliRunner().invoke(app, ["explain", "ns/p", "-c", str(conf), str(f)])
    assert res.exit_code == 0, res.output
    assert "Nodes: 0/1 nodes are unavailable: 1 no device with 60 % compute free; best has 40 %." in res.stdout
    res = CliRunner().invoke(app, ["schedule", "--format", "json", "-c", str(conf), str(f)])
    assert res.exit_code == 0 and '"bind_annotations"' not in res.stdout  # nothing bound, nothing annotated
