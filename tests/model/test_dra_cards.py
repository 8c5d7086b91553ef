"""The card models of DRA devices (model/dra/cards.py): what capacity-card charges a claimed
device to, and the plugin arguments that name the attributes."""

from __future__ import annotations

from typing import Any

import pytest

from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.model.dra.cards import CardNaming, DeviceCards
from tidesched.model.snapshot import build_snapshot
from tidesched.model.state import build_state
from tidesched.plugins.card_claims import card_naming

DRIVER = "gpu.nvidia.com"
CLASS = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"}}}


def rslice(node_name: str, devices: list[dict[str, Any]], driver: str = DRIVER) -> dict[str, Any]:
    return {"kind": "ResourceSlice", "metadata": {"name": f"{node_name}-{driver}"},
            "spec": {"driver": driver, "nodeName": node_name, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def dev(name: str, **attrs: str) -> dict[str, Any]:
    return {"name": name, "attributes": {k: {"string": v} for k, v in attrs.items()}}


def state_of(objects: list[dict[str, Any]]) -> Any:
    return build_state(build_snapshot(objects, strict_kinds=False), ("volcano",))


def cards_of(objects: list[dict[str, Any]], naming: CardNaming = CardNaming()) -> DeviceCards:
    return DeviceCards.of(state_of(objects).table.dra.index, naming)


def test_product_name_becomes_the_card_model_as_feature_discovery_labels_it() -> None:
    cards = cards_of([node("n1"), rslice("n1", [dev("gpu-0", productName="NVIDIA H200"),
                                                dev("gpu-1", productName="NVIDIA  A100-SXM4-80GB "),
                                                dev("nic-0", type="nic")])])
    assert [cards.model(i) for i in range(3)] == ["NVIDIA-H200", "NVIDIA-A100-SXM4-80GB", ""]
    assert cards.models == ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H200")
    assert cards.problems == ()


def test_mig_device_is_a_slice_named_as_card_1_names_mig_slices() -> None:
    cards = cards_of([node("n1"), rslice("n1", [dev("gpu-0-mig-19-0-1", type="mig", productName="NVIDIA H200", profile="1g.18gb")])])
    assert cards.model(0) == "NVIDIA-H200/mig-1g.18gb-mixed"


def test_a_qualified_attribute_of_another_domain_and_the_configured_names() -> None:
    devices = [{"name": "npu-0", "attributes": {"npu.example.com/model": {"string": "Ascend 910B"}}}]
    objects = [node("n1"), rslice("n1", devices, driver="dra.example.com")]
    assert cards_of(objects).model(0) == ""  # not NVIDIA's attribute: no card by default
    naming = CardNaming(("gpu.nvidia.com/productName", "npu.example.com/model"), ())
    assert cards_of(objects, naming).model(0) == "Ascend-910B"


def test_a_product_that_makes_no_model_name_is_reported_and_no_card() -> None:
    cards = cards_of([node("n1"), rslice("n1", [dev("gpu-0", productName="A|B"), dev("gpu-1", productName=" ")])])
    assert cards.model(0) == "" and cards.model(1) == ""
    assert len(cards.problems) == 2 and "is not a card model name" in cards.problems[0][1]


def test_counts_per_node_count_a_device_several_nodes_reach_once() -> None:
    shared = {"kind": "ResourceSlice", "metadata": {"name": "fabric"},
              "spec": {"driver": DRIVER, "allNodes": True, "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                       "devices": [dev("remote-0", productName="NVIDIA H200")]}}
    cards = cards_of([node("n1"), node("n2"), rslice("n2", [dev("gpu-0", productName="NVIDIA H200")]), shared])
    assert cards.per_node()["NVIDIA-H200"].tolist() == [1, 1]  # the shared device on n1 only
    assert cards.offers()["NVIDIA-H200"].tolist() == [True, True]


def test_card_naming_arguments_are_checked() -> None:
    assert card_naming(Arguments({"draCardModelAttributes": ["example.com/model"]}, owner="capacity-card")) == CardNaming(
        ("example.com/model",), ("gpu.nvidia.com/profile",))
    with pytest.raises(ConfigError, match="qualified device attribute names"):
        card_naming(Arguments({"draCardModelAttributes": ["productName"]}, owner="capacity-card"))
