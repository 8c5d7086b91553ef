"""Card naming on its own (CARD-1..5, DEC-2..6, DEC-10, DEC-11): node discovery over many node
shapes (including malformed labels), pod/job requests and queue quotas."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidesched.model.cards import (
    CARD_NAME_ANNOTATION,
    MIG,
    MPS,
    NO_CARDS,
    WHOLE,
    CardCatalog,
    discover_node_cards,
    mig_model_name,
    mps_model_name,
    parse_card_quota,
    parse_card_request,
    pod_card_request,
    split_card_names,
)

H200_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H200",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "143771",
}


def k(n: float) -> float:
    """Cards to milli-units."""
    return n * 1000.0


def slots(nc) -> dict[str, tuple[str, tuple[str, ...], float]]:
    return {s.model: (s.kind, s.resources, s.count) for s in nc.slots}


# ---------------------------------------------------------------------------------- discovery


def test_whole_cards_from_product_label_and_vendor_resources() -> None:
    nc = discover_node_cards("n", H200_LABELS, {"nvidia.com/gpu": k(8)})
    assert slots(nc) == {"NVIDIA-H200": (WHOLE, ("nvidia.com/gpu",), k(8))}
    assert (nc.product, nc.vendor_domain, nc.card_type, nc.memory_mib, nc.label_count) == (
        "NVIDIA-H200",
        "nvidia.com",
        "gpu",
        143771,
        8,
    )
    assert nc.problems == ()


def test_mixed_node_seven_whole_h200_and_mig_slices_of_the_eighth() -> None:
    labels = dict(
        H200_LABELS,
        **{
            "nvidia.com/mig-1g.18gb.product": "NVIDIA-H200-MIG-1g.18gb",
            "nvidia.com/mig-1g.18gb.count": "3",
            "nvidia.com/mig-3g.71gb.count": "1",
        },
    )
    nc = discover_node_cards(
        "n", labels, {"nvidia.com/gpu": k(7), "nvidia.com/mig-1g.18gb": k(3), "nvidia.com/mig-3g.71gb": k(1)}
    )
    assert slots(nc) == {
        "NVIDIA-H200": (WHOLE, ("nvidia.com/gpu",), k(7)),
        "NVIDIA-H200/mig-1g.18gb-mixed": (MIG, ("nvidia.com/mig-1g.18gb",), k(3)),
        "NVIDIA-H200/mig-3g.71gb-mixed": (MIG, ("nvidia.com/mig-3g.71gb",), k(1)),
    }
    assert nc.problems == ()
    assert nc.model_for_resource("nvidia.com/mig-3g.71gb") == "NVIDIA-H200/mig-3g.71gb-mixed"
    assert nc.model_for_resource("nvidia.com/gpu") == "NVIDIA-H200"
    assert nc.model_for_resource("rdma/hca") is None


def test_mig_product_labels_do_not_name_the_whole_card() -> None:
    # DEC-10: nvidia.com/mig-1g.10gb.product sorts before nvidia.com/gpu.product would not
    # matter; a MIG label alone never becomes a whole-card product.
    labels = {
        "nvidia.com/mig-1g.10gb.product": "A100-MIG",
        "nvidia.com/mig-1g.10gb.memory": "10240",
        "nvidia.com/gpu.product": "Tesla-A100",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.memory": "40960",
    }
    nc = discover_node_cards("n", labels, {"nvidia.com/mig-1g.10gb": k(4), "nvidia.com/mig-2g.20gb": k(2)})
    assert slots(nc) == {
        "Tesla-A100/mig-1g.10gb-mixed": (MIG, ("nvidia.com/mig-1g.10gb",), k(4)),
        "Tesla-A100/mig-2g.20gb-mixed": (MIG, ("nvidia.com/mig-2g.20gb",), k(2)),
    }
    assert nc.product == "Tesla-A100"


def test_only_mig_labels_leave_slices_unnamed_with_a_problem() -> None:
    labels = {"nvidia.com/mig-1g.10gb.product": "A100-MIG", "nvidia.com/mig-1g.10gb.count": "7"}
    nc = discover_node_cards("n", labels, {"nvidia.com/mig-1g.10gb": k(7)})
    assert nc.slots == ()
    assert nc.unnamed_resources == ("nvidia.com/mig-1g.10gb",)
    assert any("without a card product label" in p for p in nc.problems)


def test_mps_slices_named_by_memory_and_replicas() -> None:
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H800",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.replicas": "2",
    }
    nc = discover_node_cards("n", labels, {"nvidia.com/gpu": k(2), "nvidia.com/gpu.shared": k(4)})
    assert slots(nc) == {
        "NVIDIA-H800": (WHOLE, ("nvidia.com/gpu",), k(2)),
        "NVIDIA-H800/mps-80g*1/2": (MPS, ("nvidia.com/gpu.shared",), k(4)),
    }


@pytest.mark.parametrize(
    ("memory_mib", "gi"),
    [(81920, 80), (97871, 96), (1536, 2), (1535, 1), (512, 1), (32768, 32)],
)
def test_mps_memory_rounds_half_up(memory_mib: int, gi: int) -> None:
    assert mps_model_name("X", memory_mib, 4) == f"X/mps-{gi}g*1/4"


def test_mig_name() -> None:
    assert mig_model_name("NVIDIA-H20", "1g.12gb") == "NVIDIA-H20/mig-1g.12gb-mixed"


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        ({"nvidia.com/gpu.replicas": "abc"}, "nvidia.com/gpu.replicas='abc' is not a non-negative integer"),
        ({"nvidia.com/gpu.replicas": "0"}, "needs label nvidia.com/gpu.replicas"),
        ({}, "needs label nvidia.com/gpu.replicas"),
        (
            {"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.memory": "lots"},
            "needs label nvidia.com/gpu.memory",
        ),
    ],
)
def test_mps_with_bad_labels_is_not_offered(labels: dict, problem: str) -> None:
    base = {"nvidia.com/gpu.product": "NVIDIA-H800", "nvidia.com/gpu.memory": "81920"}
    base.update(labels)
    if "lots" in labels.values():
        base["nvidia.com/gpu.memory"] = "lots"
    nc = discover_node_cards("n", base, {"nvidia.com/gpu": k(1), "nvidia.com/gpu.shared": k(4)})
    assert "NVIDIA-H800" in slots(nc)
    assert not any(s.kind == MPS for s in nc.slots)
    assert nc.unnamed_resources == ("nvidia.com/gpu.shared",)
    assert any(problem in p for p in nc.problems), nc.problems


def test_ascend_npu_under_its_own_domain() -> None:
    labels = {
        "huawei.com/npu.product": "Ascend-910B",
        "huawei.com/npu.count": "8",
        "huawei.com/npu.memory": "65536",
    }
    nc = discover_node_cards("n", labels, {"huawei.com/Ascend910": k(8), "rdma/hca": k(1)})
    assert slots(nc) == {"Ascend-910B": (WHOLE, ("huawei.com/Ascend910",), k(8))}
    assert nc.vendor_domain == "huawei.com"


def test_whole_count_sums_every_non_slice_resource_of_the_domain() -> None:
    labels = {"example.ai/ppu.product": "PPU-ZW810E", "example.ai/ppu.memory": "98304"}
    nc = discover_node_cards(
        "n", labels, {"example.ai/ppu": k(6), "example.ai/ppu-hp": k(2), "cpu-ish/x": k(1)}
    )
    assert slots(nc) == {"PPU-ZW810E": (WHOLE, ("example.ai/ppu", "example.ai/ppu-hp"), k(8))}


def test_non_card_scalars_are_ignored() -> None:
    nc = discover_node_cards(
        "n",
        H200_LABELS,
        {
            "nvidia.com/gpu": k(8),
            "rdma/hca": k(4),
            "hugepages-1Gi": k(1e9),
            "ephemeral-storage": k(1e11),
            "example.com/foo": k(3),
        },
    )
    assert slots(nc) == {"NVIDIA-H200": (WHOLE, ("nvidia.com/gpu",), k(8))}
    assert nc.problems == ()


def test_cpu_node_is_plain() -> None:
    nc = discover_node_cards("cpu1", {"kubernetes.io/hostname": "cpu1"}, {"rdma/hca": k(1)})
    assert nc.slots == () and nc.problems == () and nc.unnamed_resources == ()


def test_cpu_node_advertising_zero_gpus_is_not_a_problem() -> None:
    nc = discover_node_cards("cpu1", {}, {"nvidia.com/gpu": 0.0})
    assert nc.slots == () and nc.problems == ()


def test_zero_allocatable_still_names_the_model() -> None:
    # All cards failed or in transition: the model stays known, with nothing to give.
    nc = discover_node_cards("n", H200_LABELS, {"nvidia.com/gpu": 0.0})
    assert slots(nc) == {"NVIDIA-H200": (WHOLE, ("nvidia.com/gpu",), 0.0)}


@pytest.mark.parametrize(
    ("labels", "alloc", "expected_slots", "problem"),
    [
        # count label malformed: informational only, cards still offered
        (
            dict(H200_LABELS, **{"nvidia.com/gpu.count": "a"}),
            {"nvidia.com/gpu": k(8)},
            {"NVIDIA-H200"},
            "nvidia.com/gpu.count='a'",
        ),
        (
            dict(H200_LABELS, **{"nvidia.com/gpu.count": "-1"}),
            {"nvidia.com/gpu": k(8)},
            {"NVIDIA-H200"},
            "count",
        ),
        # product without a resource
        (H200_LABELS, {}, set(), "labelled but the node has no nvidia.com resource"),
        # empty product value
        (
            dict(H200_LABELS, **{"nvidia.com/gpu.product": ""}),
            {"nvidia.com/gpu": k(8)},
            set(),
            "not a valid card model name",
        ),
        # a separator would break alternatives
        (
            dict(H200_LABELS, **{"nvidia.com/gpu.product": "A|B"}),
            {"nvidia.com/gpu": k(8)},
            set(),
            "not a valid card model name",
        ),
        (
            dict(H200_LABELS, **{"nvidia.com/gpu.product": "has space"}),
            {"nvidia.com/gpu": k(8)},
            set(),
            "not a valid",
        ),
        # cards without any product label
        ({}, {"nvidia.com/gpu": k(8)}, set(), "nvidia.com/gpu has no <vendor-domain>/<type>.product label"),
        ({}, {"huawei.com/Ascend910": k(8)}, set(), "has no <vendor-domain>/<type>.product label"),
        ({}, {"nvidia.com/gpu.shared": k(8)}, set(), "without a card product label"),
    ],
)
def test_malformed_labels_are_reported_and_handled_conservatively(
    labels, alloc, expected_slots, problem
) -> None:
    nc = discover_node_cards("n", labels, alloc)
    assert set(slots(nc)) == expected_slots
    assert any(problem in p for p in nc.problems), nc.problems
    if not expected_slots and any(v > 0 for v in alloc.values()):
        assert nc.unnamed_resources  # the cards exist but are never handed out


def test_several_product_labels_prefer_nvidia_gpu_and_report() -> None:
    labels = dict(H200_LABELS, **{"example.ai/ppu.product": "PPU-1"})
    nc = discover_node_cards("n", labels, {"nvidia.com/gpu": k(8), "example.ai/ppu": k(2)})
    assert set(slots(nc)) == {"NVIDIA-H200"}
    assert any("several card product labels" in p for p in nc.problems)


def test_nan_and_negative_amounts_are_ignored() -> None:
    nc = discover_node_cards(
        "n", H200_LABELS, {"nvidia.com/gpu": float("nan"), "nvidia.com/mig-1g.18gb": -5.0}
    )
    assert nc.slots == ()


label_keys = st.sampled_from(
    [
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.count",
        "nvidia.com/gpu.memory",
        "nvidia.com/gpu.replicas",
        "nvidia.com/mig-1g.10gb.product",
        "huawei.com/npu.product",
        "example.ai/ppu.product",
        "weird/.product",
        "/x.product",
        "a/b.product.extra",
        "kubernetes.io/hostname",
    ]
)
label_values = st.one_of(
    st.sampled_from(["NVIDIA-H200", "8", "81920", "0", "-1", "", "A|B", "x y", "Ascend-910B"]),
    st.text(max_size=8),
)
resources = st.sampled_from(
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-",
        "huawei.com/Ascend910",
        "example.ai/ppu",
        "rdma/hca",
        "hugepages-1Gi",
        "amd.com/gpu",
    ]
)
amounts = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6).map(float))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(label_keys, label_values, max_size=8), st.dictionaries(resources, amounts, max_size=6))
def test_discovery_never_raises_and_is_consistent(labels: dict, alloc: dict) -> None:
    nc = discover_node_cards("n", labels, alloc)
    models = [s.model for s in nc.slots]
    assert len(models) == len(set(models))
    claimed = [r for s in nc.slots for r in s.resources]
    assert len(claimed) == len(set(claimed))  # a resource carries at most one model
    assert not set(claimed) & set(nc.unnamed_resources)
    for s in nc.slots:
        assert s.count >= 0 and "|" not in s.model and s.model
        assert all(alloc.get(r) is not None for r in s.resources)
    assert discover_node_cards("n", labels, alloc) == nc  # deterministic


# ---------------------------------------------------------------------------------- catalog


def catalog() -> CardCatalog:
    g4090 = {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090", "nvidia.com/gpu.memory": "24564"}
    g4090d = {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090-D", "nvidia.com/gpu.memory": "24564"}
    h20 = {"nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.memory": "97871"}
    h200 = dict(H200_LABELS)
    npu = {"huawei.com/npu.product": "Ascend-910B"}
    return CardCatalog.build(
        [
            ("a", g4090, {"nvidia.com/gpu": k(8)}),
            ("b", g4090d, {"nvidia.com/gpu": k(8)}),
            ("c", h20, {"nvidia.com/mig-1g.24gb": k(4), "nvidia.com/mig-1g.37gb": k(2)}),
            (
                "d",
                h200,
                {"nvidia.com/gpu": k(7), "nvidia.com/mig-1g.18gb": k(3), "nvidia.com/mig-3g.71gb": k(1)},
            ),
            ("e", npu, {"huawei.com/Ascend910": k(8)}),
            ("f", {}, {"nvidia.com/gpu": k(8)}),  # unlabelled
        ]
    )


def test_catalog_indexes_models_and_resources() -> None:
    cat = catalog()
    assert cat.models_by_resource["nvidia.com/gpu"] == (
        "NVIDIA-GeForce-RTX-4090",
        "NVIDIA-GeForce-RTX-4090-D",
        "NVIDIA-H200",
    )
    assert cat.model_resources["Ascend-910B"] == frozenset({"huawei.com/Ascend910"})
    assert cat.knows("NVIDIA-H20/mig-1g.24gb-mixed") and not cat.knows("NVIDIA-H20")
    assert cat.is_card_resource("nvidia.com/gpu") and cat.is_card_resource("nvidia.com/mig-2g.20gb")
    assert cat.is_card_resource("huawei.com/Ascend310P")
    assert not cat.is_card_resource("rdma/hca") and not cat.is_card_resource("hugepages-2Mi")
    assert [n for n, _ in cat.problems] == ["f"]


# ---------------------------------------------------------------------------------- pod requests


def req(name: str | None, gpus: float = 0):
    """A pod's card request with ``gpus`` × nvidia.com/gpu."""
    ann = {} if name is None else {CARD_NAME_ANNOTATION: name}
    return pod_card_request(ann, {"nvidia.com/gpu": k(gpus)} if gpus else {}, catalog())


def test_single_model_count_from_its_resource() -> None:
    r = req("NVIDIA-H200", gpus=4)
    assert (r.models, r.resources, r.count, r.named, r.error) == (
        ("NVIDIA-H200",),
        ("nvidia.com/gpu",),
        k(4),
        True,
        "",
    )


def test_slice_model_count_from_its_mig_resource() -> None:
    r = pod_card_request(
        {CARD_NAME_ANNOTATION: "NVIDIA-H200/mig-1g.18gb-mixed"}, {"nvidia.com/mig-1g.18gb": k(2)}, catalog()
    )
    assert r.count == k(2) and r.resources == ("nvidia.com/mig-1g.18gb",) and not r.error


def test_alternatives_with_one_resource_keep_their_order() -> None:
    r = req("NVIDIA-GeForce-RTX-4090-D|NVIDIA-GeForce-RTX-4090", gpus=1)
    assert r.models == ("NVIDIA-GeForce-RTX-4090-D", "NVIDIA-GeForce-RTX-4090")
    assert r.key == ("NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D")
    assert r.label == "NVIDIA-GeForce-RTX-4090-D|NVIDIA-GeForce-RTX-4090"


@pytest.mark.parametrize(
    ("name", "scalars", "message"),
    [
        (
            "NVIDIA-GeForce-RTX-4090|NVIDIA-H20/mig-1g.24gb-mixed",
            {"nvidia.com/gpu": k(1), "nvidia.com/mig-1g.24gb": k(1)},
            (
                'card alternatives "NVIDIA-GeForce-RTX-4090|NVIDIA-H20/mig-1g.24gb-mixed" use different resources '
                "(nvidia.com/gpu, nvidia.com/mig-1g.24gb)"
            ),
        ),
        (
            "NVIDIA-H20/mig-1g.24gb-mixed|NVIDIA-H20/mig-1g.37gb-mixed",
            {"nvidia.com/mig-1g.24gb": k(1)},
            (
                'card alternatives "NVIDIA-H20/mig-1g.24gb-mixed|NVIDIA-H20/mig-1g.37gb-mixed" use different resources '
                "(nvidia.com/mig-1g.24gb, nvidia.com/mig-1g.37gb)"
            ),
        ),
        (
            "NVIDIA-H200|Ascend-910B",
            {"nvidia.com/gpu": k(1)},
            'card alternatives "NVIDIA-H200|Ascend-910B" use different resources (nvidia.com/gpu, huawei.com/Ascend910)',
        ),
    ],
)
def test_alternatives_with_different_resources_are_refused(name: str, scalars: dict, message: str) -> None:
    r = pod_card_request({CARD_NAME_ANNOTATION: name}, scalars, catalog())
    assert r.error == message  # DEC-11 text


def test_unknown_model_is_an_error() -> None:
    assert req("NVIDIA-B300", gpus=1).error == 'unknown card model "NVIDIA-B300"'


def test_unknown_alternative_is_dropped_with_a_warning() -> None:
    r = req("NVIDIA-B300|NVIDIA-H200", gpus=1)
    assert r.models == ("NVIDIA-H200",) and not r.error
    assert r.warnings and 'unknown card model "NVIDIA-B300"' in r.warnings[0]


@pytest.mark.parametrize("name", ["", "  ", "A||B", "|A", "A|", "A B", "A|{x}"])
def test_malformed_card_names(name: str) -> None:
    r = req(name, gpus=1)
    assert r.error.startswith("malformed card name")
    assert r.uses_cards  # never treated as a card-less pod


def test_name_without_its_resource_is_refused() -> None:
    r = req("NVIDIA-H200")
    assert r.error == 'pod names card model "NVIDIA-H200" but requests no nvidia.com/gpu'
    r = pod_card_request({CARD_NAME_ANNOTATION: "NVIDIA-H200"}, {"nvidia.com/mig-1g.18gb": k(1)}, catalog())
    assert "(it requests nvidia.com/mig-1g.18gb)" in r.error


def test_card_resource_without_name_accepts_every_model_of_it() -> None:
    r = req(None, gpus=2)  # DEC-3
    assert r.models == ("NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D", "NVIDIA-H200")
    assert r.count == k(2) and not r.named and r.label == "nvidia.com/gpu" and not r.error


def test_unnamed_resource_no_model_offers() -> None:
    r = pod_card_request({}, {"amd.com/gpu": k(1)}, catalog())
    assert r.error == 'no card model offers resource "amd.com/gpu"'


def test_no_card_pod() -> None:
    assert pod_card_request({}, {"rdma/hca": k(1)}, catalog()) is NO_CARDS
    assert not NO_CARDS.uses_cards


def test_split_card_names_dedupes_and_strips() -> None:
    assert split_card_names(" A | B |A") == (("A", "B"), "")


@given(st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,10}", fullmatch=True), min_size=1, max_size=4))
def test_split_card_names_round_trip(names: list[str]) -> None:
    got, problem = split_card_names("|".join(names))
    assert problem == ""
    assert list(got) == list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------- job requests


def test_job_card_request() -> None:
    r = parse_card_request(
        '{"NVIDIA-H200":2,"NVIDIA-GeForce-RTX-4090|NVIDIA-GeForce-RTX-4090-D":3}', catalog()
    )
    assert [(d.models, d.count, d.label) for d in r.demands] == [
        (("NVIDIA-H200",), k(2), "NVIDIA-H200"),
        (
            ("NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D"),
            k(3),
            "NVIDIA-GeForce-RTX-4090|NVIDIA-GeForce-RTX-4090-D",
        ),
    ]
    assert r.present and not r.error and not r.problems


@pytest.mark.parametrize(
    "raw",
    [
        '{"NVIDIA-H200":',
        "[1,2]",
        '"x"',
        '{"NVIDIA-H200":-1}',
        '{"NVIDIA-H200":1.5}',
        '{"NVIDIA-H200":"2"}',
        '{"NVIDIA-H200":true}',
        '{"A||B":1}',
        '{"NVIDIA-H200":null}',
    ],
)
def test_malformed_job_card_request_is_ignored_whole(raw: str) -> None:
    r = parse_card_request(raw, catalog())
    assert r.demands == () and not r.error and not r.present
    assert r.problems and "card.request" in r.problems[0]


def test_job_card_request_unknown_or_mixed_is_an_error() -> None:
    assert parse_card_request('{"NVIDIA-B300":1}', catalog()).error == 'unknown card model "NVIDIA-B300"'
    r = parse_card_request('{"NVIDIA-H200|Ascend-910B":1}', catalog())
    assert r.error.startswith('card alternatives "NVIDIA-H200|Ascend-910B" use different resources')


def test_absent_or_empty_job_card_request() -> None:
    assert parse_card_request(None, catalog()) == parse_card_request("  ", catalog())
    assert not parse_card_request(None, catalog()).present
    assert parse_card_request('{"NVIDIA-H200":0}', catalog()).demands == ()


# ---------------------------------------------------------------------------------- queue quotas

SEED_QUOTA = (
    '{"NVIDIA-H200":3,"NVIDIA-H800":2,"NVIDIA-GeForce-RTX-4090":2,"NVIDIA-H800/mps-80g*1/2":2,'
    '"NVIDIA-H200/mig-1g.18gb-mixed":3,"NVIDIA-H200/mig-3g.71gb-mixed":1}'
)


def test_seed_002_quota_table() -> None:
    quota, problems = parse_card_quota(SEED_QUOTA)
    assert problems == []
    assert quota == {
        "NVIDIA-H200": k(3),
        "NVIDIA-H800": k(2),
        "NVIDIA-GeForce-RTX-4090": k(2),
        "NVIDIA-H800/mps-80g*1/2": k(2),
        "NVIDIA-H200/mig-1g.18gb-mixed": k(3),
        "NVIDIA-H200/mig-3g.71gb-mixed": k(1),
    }


def test_bad_quota_entries_are_dropped_one_by_one() -> None:
    quota, problems = parse_card_quota(
        '{"NVIDIA-H200":3,"NVIDIA-H800":-1,"X":1.5,"Y":"2","A|B":1,"Z":true,"W":3.0,"":1}'
    )
    assert quota == {"NVIDIA-H200": k(3), "W": k(3)}
    assert len(problems) == 6 and all("entry dropped" in p for p in problems)


@pytest.mark.parametrize("raw", ["{not json", "[1]", "3", '"NVIDIA-H200"'])
def test_unparsable_quota_means_no_card_quota(raw: str) -> None:
    quota, problems = parse_card_quota(raw)
    assert quota == {} and len(problems) == 1 and "every card model 0" in problems[0]


def test_absent_quota() -> None:
    assert parse_card_quota(None) == ({}, [])


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 10), st.floats(allow_nan=False), st.text(max_size=5)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_quota_and_request_parsing_never_raise(value) -> None:
    raw = json.dumps(value)
    quota, _problems = parse_card_quota(raw)
    assert all(v >= 0 and (v / 1000).is_integer() for v in quota.values())
    assert all("|" not in m for m in quota)
    r = parse_card_request(raw, catalog())
    assert all(d.count > 0 for d in r.demands)
    parse_card_quota(raw[: len(raw) // 2])  # truncated JSON
