"""framework/reasons.py: the words of the reasons every reader shares — eviction reasons and why a
node fails a vGPU pod (the deviceshare predicate's reasons, found as data by model/devices)."""

from __future__ import annotations

import pytest

from tidesched.framework.reasons import RECLAIM, device_reason, evicted_by, eviction_reason
from tidesched.model import devices
from tidesched.model.devices import Reason


def test_eviction_reason_names_the_action() -> None:
    text = eviction_reason(RECLAIM, "ns/chat-0", "n1")
    assert text == "reclaim: evicted to make room for ns/chat-0 on node n1"
    assert evicted_by(text, RECLAIM) and not evicted_by(text, "preempt")


@pytest.mark.parametrize("reason, words", [
    (Reason(devices.NO_DEVICES), "node registers no vGPU devices"),
    (Reason(devices.MODE, names=("mig", "hami-core")), "pod asks for vGPU mode mig, node is hami-core"),
    (Reason(devices.TOO_FEW, need=8, total=4), "node has 4 GPUs, pod asks for 8"),
    (Reason(devices.UNUSABLE, need=1, have=0, total=2), "no usable GPU"),
    (Reason(devices.UNUSABLE, need=3, have=1, total=4), "1 of 4 GPUs qualify as usable GPU, 3 needed"),
    (Reason(devices.NO_SHARE, need=1, total=2),
     "no GPU with a free share (each takes at most its split count of pods)"),
    (Reason(devices.NOT_IDLE, need=2, have=1, total=2),
     "1 of 2 GPUs qualify as unshared GPU (a 100 % compute request takes a whole device), 2 needed"),
    (Reason(devices.COMPUTE, need=1, have=0, best=400, want=600), "no device with 60 % compute free; best has 40 %"),
    (Reason(devices.COMPUTE, need=1, best=995, want=1), "no device with 0.1 % compute free; best has 99.5 %"),
    (Reason(devices.COMPUTE, need=2, have=1, best=500, want=600),
     "only 1 devices with 60 % compute free, 2 needed; best has 50 %"),
    (Reason(devices.MEMORY, need=1, best=4096, want=8000), "no device with 8000 MiB memory free; best has 4096 MiB"),
    (Reason(devices.MEMORY, need=1, best=100, want=50, percent=True),
     "no device with 50 % memory free; best has 100 MiB"),
    (Reason(devices.GROUP_SPREAD, names=("ns/pg",)),
     "no GPU free of PodGroup ns/pg's pods (vgpu-podgroup-policy spread)"),
    (Reason(devices.COMBINATION), "no GPU with both the compute and the memory the pod asks for"),
])
def test_device_reasons_in_words(reason: Reason, words: str) -> None:
    assert device_reason(reason) == words


def test_only_reasons_no_eviction_can_fix_are_unresolvable() -> None:
    # preempt and reclaim skip unresolvable nodes: evicting pods frees compute, memory and shares,
    # never devices a node lacks or a mode it does not run.
    assert {k for k in (devices.NO_DEVICES, devices.MODE, devices.TOO_FEW, devices.UNUSABLE, devices.NO_SHARE,
                        devices.NOT_IDLE, devices.COMPUTE, devices.MEMORY, devices.GROUP_SPREAD,
                        devices.COMBINATION) if Reason(k).unresolvable} == {
        devices.NO_DEVICES, devices.MODE, devices.TOO_FEW, devices.UNUSABLE}
