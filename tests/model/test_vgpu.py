"""Volcano's vGPU surface (model.vgpu): registration, pod requests, annotations. Cases ported from
Volcano's pkg/scheduler/api/devices/nvidia/vgpu/{device_info,utils}_test.go as our own."""

from __future__ import annotations

import pytest

from tidesched.model.objects import parse_node, parse_pod
from tidesched.model.vgpu import (
    ASSIGNED_IDS,
    ASSIGNED_NODE,
    DeviceUse,
    PodAssignment,
    RegisteredDevice,
    bind_annotations,
    decode_assignment,
    decode_node_register,
    encode_assignment,
    encode_node_register,
    node_devices,
    pod_request,
)
from vgpu_builders import vgpu_node, vgpu_pod


def test_registration_round_trip() -> None:
    devs = [RegisteredDevice("GPU-a", 10, 16384, "NVIDIA-Tesla-T4", True, "hami-core"),
            RegisteredDevice("GPU-b", 4, 32768, "NVIDIA-V100", False, "hami-core")]
    text = encode_node_register(devs)
    assert text == "GPU-a,10,16384,NVIDIA-Tesla-T4,true,hami-core:GPU-b,4,32768,NVIDIA-V100,false,hami-core:"
    got = decode_node_register(text)
    assert got is not None and got.devices == tuple(devs)


@pytest.mark.parametrize("text", ["", "GPU-a,10,16384,NVIDIA,true,hami-core", "GPU-a,10,16384,NVIDIA,true:"])
def test_registration_volcano_drops(text: str) -> None:
    # No ':' at all, or an entry of fewer than six fields: Volcano keeps no device of the node.
    assert decode_node_register(text) is None


def test_registration_lenient_fields() -> None:
    got = decode_node_register("GPU-a,x,-5,NVIDIA,yes,mig:GPU-b,+3,100,NVIDIA,T,hami-core:")
    assert got is not None
    a, b = got.devices
    assert (a.split, a.memory, a.healthy) == (0, 0, False)  # Atoi errors read 0; "yes" is no Go bool
    assert (b.split, b.memory, b.healthy) == (3, 100, True)
    assert got.mode == "hami-core"  # MIG needs Volcano's geometry ConfigMap: falls back


@pytest.mark.parametrize("missing", ["volcano.sh/vgpu-number", "volcano.sh/vgpu-cores", "volcano.sh/vgpu-memory"])
def test_devices_count_only_with_allocatable(missing: str) -> None:
    obj = vgpu_node("n1", gpus=2)
    assert parse_node(obj).vgpu is not None
    obj["status"]["allocatable"][missing] = "0"
    assert parse_node(obj).vgpu is None
    del obj["status"]["allocatable"][missing]
    assert parse_node(obj).vgpu is None


def test_node_devices_needs_annotation() -> None:
    assert node_devices({}, {"volcano.sh/vgpu-number": 1000.0}) is None


def _containers(*limits: dict[str, str], requests: dict[str, str] | None = None) -> dict:
    return {"containers": [{"name": f"c{i}", "resources": {"limits": lim, **({"requests": requests} if requests else {})}}
                           for i, lim in enumerate(limits)]}


def test_two_containers_request() -> None:
    # Volcano TestGetGPUMemoryOfPod: per container number and memory.
    req = pod_request(_containers({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"},
                                  {"volcano.sh/vgpu-number": "3", "volcano.sh/vgpu-memory": "5000"}), "ns", {})
    assert req is not None
    assert [(c.number, c.memory, c.percent) for c in req.containers] == [(1, 3000, None), (3, 5000, None)]
    assert req.devices == 4


def test_request_forms() -> None:
    # Memory alone names one device; no memory asked: the whole device; percentage wins over MiB.
    only_mem = pod_request(_containers({"volcano.sh/vgpu-memory": "2000"}), "ns", {})
    assert only_mem is not None and only_mem.containers[0].number == 1
    whole = pod_request(_containers({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "30"}), "ns", {})
    assert whole is not None
    c = whole.containers[0]
    assert (c.percent, c.cores, c.memory_on(16384)) == (100, 30, 16384)
    pct = pod_request(_containers({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "1000",
                                   "volcano.sh/vgpu-memory-percentage": "47"}), "ns", {})
    assert pct is not None and pct.containers[0].memory_on(16384) == 7700  # truncated, as Volcano
    sentinel = pod_request(_containers({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "101"}), "ns", {})
    assert sentinel is not None and sentinel.containers[0].percent == 100  # 101 is Volcano's "unset"


def test_vgpu_pod_needs_limits() -> None:
    # Volcano's checkVGPUResourcesInPod reads limits only.
    assert pod_request({"containers": [{"name": "c", "resources": {"requests": {"volcano.sh/vgpu-number": "1"}}}]}, "ns", {}) is None
    assert pod_request(_containers({"volcano.sh/vgpu-cores": "50"}), "ns", {}) is None
    # Memory from requests when limits do not name it.
    req = pod_request(_containers({"volcano.sh/vgpu-number": "2"}, requests={"volcano.sh/vgpu-memory": "123"}), "ns", {})
    assert req is not None and req.containers[0].memory == 123


def test_card_equivalents() -> None:
    req = pod_request(_containers({"volcano.sh/vgpu-number": "2", "volcano.sh/vgpu-cores": "30"},
                                  {"volcano.sh/vgpu-number": "1"}), "ns", {})
    assert req is not None and req.card_equivalents_milli() == 2 * 300 + 1000


TYPE_CASES = [
    ({"nvidia.com/use-gputype": "NVIDIA"}, True),
    ({"nvidia.com/use-gputype": "nvidia"}, True),
    ({"nvidia.com/use-gputype": "AMD,NVIDIA,INTEL"}, True),
    ({"nvidia.com/use-gputype": "AMD,INTEL,MLU"}, False),
    ({"nvidia.com/nouse-gputype": "NVIDIA"}, False),
    ({"nvidia.com/nouse-gputype": "nvidia"}, False),
    ({"nvidia.com/nouse-gputype": "AMD,NVIDIA,INTEL"}, False),
    ({"nvidia.com/nouse-gputype": "AMD,INTEL,MLU"}, True),
    ({}, True),
]


@pytest.mark.parametrize(("annotations", "want"), TYPE_CASES)
def test_gpu_type_filter(annotations: dict[str, str], want: bool) -> None:
    # Volcano TestCheckGPUtype.
    req = pod_request(_containers({"volcano.sh/vgpu-number": "1"}), "ns", annotations)
    assert req is not None and req.type_ok("NVIDIA") is want


UUID_CASES = [
    ({}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "  "}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": ", ,"}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0, GPU-1"}, "GPU-1", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0,, GPU-1,"}, "GPU-1", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-10"}, "GPU-1", False),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0,"}, "", False),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0, GPU-1"}, "GPU-1", False),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0,"}, "", False),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-1", "volcano.sh/vgpu-nouse-gpuuuid": "GPU-1"}, "GPU-1", False),
]


@pytest.mark.parametrize(("annotations", "uuid", "want"), UUID_CASES)
def test_uuid_filter(annotations: dict[str, str], uuid: str, want: bool) -> None:
    # Volcano TestCheckGPUUUID.
    req = pod_request(_containers({"volcano.sh/vgpu-number": "1"}), "ns", annotations)
    assert req is not None and req.uuid_ok(uuid) is want


@pytest.mark.parametrize(("annotations", "namespace", "want"), [
    ({}, "ns", ""),
    ({"scheduling.k8s.io/group-name": "my-pg"}, "default", "default/my-pg"),
    ({"scheduling.volcano.sh/group-name": "job-pg"}, "ns1", "ns1/job-pg"),
    ({"scheduling.k8s.io/group-name": "k8s-pg", "scheduling.volcano.sh/group-name": "volcano-pg"}, "ns", "ns/k8s-pg"),
])
def test_spread_group_key(annotations: dict[str, str], namespace: str, want: str) -> None:
    # Volcano TestGetPodGroupKey; the key matters only with the spread policy annotation.
    ann = {**annotations, "volcano.sh/vgpu-podgroup-policy": "spread"}
    req = pod_request(_containers({"volcano.sh/vgpu-number": "1"}), namespace, ann)
    assert req is not None and req.spread_group == want


@pytest.mark.parametrize(("text", "want"), [
    ("GPU-0,NVIDIA,4096,30:", [DeviceUse("GPU-0", 4096, 30)]),
    ("GPU-0,NVIDIA,-5,30:", []),
    ("GPU-0,NVIDIA,4096,-1:", []),
    ("GPU-0,NVIDIA,abc,30:", []),
    ("GPU-0,NVIDIA:", []),
    ("GPU-0,NVIDIA,-5,30:GPU-1,NVIDIA,2048,10:", [DeviceUse("GPU-1", 2048, 10)]),
])
def test_decode_assignment_skips_bad_entries(text: str, want: list[DeviceUse]) -> None:
    # Volcano TestDecodeContainerDevicesRejectsInvalidUsage.
    (got,) = decode_assignment(text)
    assert list(got) == want


def test_assignment_round_trip_and_bind_annotations() -> None:
    a = PodAssignment("n1", ((DeviceUse("GPU-0", 4096, 30), DeviceUse("GPU-1", 4096, 30)), (DeviceUse("GPU-2", 100, 0),)))
    text = encode_assignment(a.containers)
    assert text == "GPU-0,NVIDIA,4096,30:GPU-1,NVIDIA,4096,30:;GPU-2,NVIDIA,100,0:"
    assert decode_assignment(text) == a.containers
    ann = bind_annotations(a, 1700000000.7)
    assert ann == {
        "volcano.sh/vgpu-node": "n1", "volcano.sh/vgpu-time": "1700000000", "volcano.sh/vgpu-ids-new": text,
        "volcano.sh/devices-to-allocate": text, "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": "1700000000",
    }


def test_pod_record_reads_assignment() -> None:
    p = vgpu_pod("p", memory=1000, node="n1", phase="Running",
                 annotations={ASSIGNED_IDS: "GPU-0,NVIDIA,1000,0:", ASSIGNED_NODE: "n1"})
    rec = parse_pod(p)
    assert rec.vgpu is not None and rec.vgpu_assignment == PodAssignment("n1", ((DeviceUse("GPU-0", 1000, 0),),))
    plain = parse_pod(vgpu_pod("q", memory=1000) | {"metadata": {"name": "q", "annotations": {ASSIGNED_IDS: "x"}}})
    assert plain.vgpu_assignment is not None and plain.vgpu_assignment.containers == ((),)
