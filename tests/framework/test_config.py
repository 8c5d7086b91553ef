"""Tests for tidesched.framework.config (CONF-1, CONF-3)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tidesched.framework.config import (
    DEFAULT_OFF_HOOKS,
    HOOKS,
    SWITCH_KEYS,
    VOLCANO_SWITCH_KEYS,
    PluginOption,
    SchedulerConfig,
    Tier,
    default_config,
    load_config,
    load_config_file,
)
from tidesched.framework.arguments import Arguments, ConfigError

DATA = Path(__file__).parents[1] / "data" / "config"

ACTIONS = {"enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle", "gangpreempt", "gangreclaim"}
PLUGINS = {
    "gang", "priority", "conformance", "drf", "proportion", "capacity", "overcommit", "predicates",
    "nodeorder", "binpack", "sla", "capacity-card",
}


def load(text: str, source: str = "sched.conf", **kw) -> SchedulerConfig:
    return load_config(textwrap.dedent(text), source, known_actions=ACTIONS, known_plugins=PLUGINS, **kw)


def error_of(text: str, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(text, **kw)
    return info.value


# ------------------------------------------------------------------------------------------ seeds


def test_seed_000_tidal_config_loads() -> None:
    cfg = load_config_file(DATA / "seed000_tidal.conf", known_actions=ACTIONS, known_plugins=PLUGINS)
    assert cfg.actions == ["enqueue", "allocate", "backfill", "reclaim"]
    assert [[p.name for p in t] for t in cfg.tiers] == [
        ["priority", "gang", "conformance"],
        ["predicates", "capacity-card", "nodeorder"],
    ]
    gang = cfg.plugin("gang")
    assert gang is not None and not gang.enabled("reclaimable")
    assert gang.enabled("preemptable") and gang.enabled("job_ready")
    card = cfg.plugin("capacity-card")
    assert card is not None
    assert card.args.get_float("overCommitFactor", 1.0) == 2.0
    assert card.args.get_bool("cardUnlimitedCpuMemory", False) is True
    assert card.args.get_mapping("podOwnerReferenceToServiceType") == {
        "ReplicaSet": "inference",
        "Deployment": "inference",
        "Job": "training",
    }
    assert cfg.warnings == []
    assert cfg.source.endswith("seed000_tidal.conf")


def test_seed_002_capacity_card_config_loads() -> None:
    cfg = load_config_file(DATA / "seed002_capacity_card.conf", known_actions=ACTIONS, known_plugins=PLUGINS)
    assert cfg.actions == ["enqueue", "allocate", "backfill"]
    assert cfg.plugin_names() == [
        "priority", "gang", "conformance", "drf", "predicates", "capacity-card", "nodeorder", "binpack",
    ]
    for name in ("gang", "drf"):
        opt = cfg.plugin(name)
        assert opt is not None and opt.switches["preemptable"] is False
    assert cfg.plugin("capacity-card").args.get_bool("cardUnlimitedCpuMemory", False)  # type: ignore[union-attr]
    assert cfg.warnings == []


def test_seed_001_configmap_with_enabled_prefix() -> None:
    cfg = load_config_file(DATA / "seed001_configmap.yaml", known_actions=ACTIONS, known_plugins=PLUGINS)
    assert cfg.actions == ["enqueue", "allocate", "reclaim", "backfill", "preempt"]
    capacity = cfg.plugin("capacity")
    assert capacity is not None and capacity.enabled("hierarchy")
    # The file uses the non-upstream spelling: accepted, but the operator is told.
    assert len(cfg.warnings) == 1
    assert "seed001_configmap.yaml:13" in cfg.warnings[0]
    assert "enableHierarchy" in cfg.warnings[0]


# ------------------------------------------------------------------------------------- defaulting


def test_loader_defaults_unset_switches_on_except_hierarchy_and_cluster_order() -> None:
    cfg = load(
        """\
        actions: "allocate"
        tiers:
        - plugins:
          - name: gang
        """
    )
    gang = cfg.tiers[0].plugins[0]
    for hook in HOOKS:
        if hook in DEFAULT_OFF_HOOKS:
            assert gang.switches[hook] is None
            assert not gang.enabled(hook)
        else:
            assert gang.switches[hook] is True, hook
            assert gang.enabled(hook)
    assert DEFAULT_OFF_HOOKS == {"hierarchy", "cluster_order"}


def test_code_built_option_is_not_defaulted() -> None:
    opt = PluginOption("gang", switches={"job_ready": True, "preemptable": False})
    assert opt.enabled("job_ready")
    assert not opt.enabled("preemptable")
    assert not opt.enabled("job_order")  # unset == off, as in Go unit tests
    assert opt.switches["job_order"] is None
    defaulted = opt.apply_defaults()
    assert defaulted.enabled("job_order") and not defaulted.enabled("preemptable")
    assert not defaulted.enabled("hierarchy")
    assert opt.switches["job_order"] is None  # apply_defaults returns a copy


def test_code_built_option_validates_hooks() -> None:
    with pytest.raises(ValueError, match="unknown hook"):
        PluginOption("gang", switches={"jobOrder": True})
    with pytest.raises(TypeError):
        PluginOption("gang", switches={"job_order": "yes"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="unknown hook"):
        PluginOption("gang").enabled("job-order")


def test_explicit_false_survives_defaulting_and_null_means_unset() -> None:
    cfg = load(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: drf
            enableJobOrder: false
            enableHierarchy: true
            enableTaskOrder:
        """
    )
    drf = cfg.tiers[0].plugins[0]
    assert drf.switches["job_order"] is False
    assert drf.enabled("hierarchy")
    assert drf.enabled("task_order")  # null == unset, then defaulted


def test_default_config_matches_volcano_builtin() -> None:
    cfg = default_config(known_actions=ACTIONS, known_plugins=PLUGINS)
    assert cfg.actions == ["enqueue", "allocate", "backfill"]
    assert [[p.name for p in t] for t in cfg.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert all(p.enabled("job_order") and not p.enabled("hierarchy") for t in cfg.tiers for p in t)
    with pytest.raises(ConfigError, match="unknown plugin"):
        default_config(known_plugins={"gang"})


# ------------------------------------------------------------------------------------- spellings


def test_every_switch_accepts_both_prefixes() -> None:
    assert len(SWITCH_KEYS) == 2 * len(HOOKS)
    for hook, volcano_key in VOLCANO_SWITCH_KEYS.items():
        suffix = volcano_key.removeprefix("enabled").removeprefix("enable")
        for key in ("enable" + suffix, "enabled" + suffix):
            cfg = load(f"actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    {key}: false\n")
            assert cfg.tiers[0].plugins[0].switches[hook] is False, key
            upstream_spelling = key == volcano_key
            assert (cfg.warnings == []) == upstream_spelling, key


@pytest.mark.parametrize(
    "key,hook",
    [
        ("enabledJobOrder", "job_order"),
        ("enabledJobReady", "job_ready"),
        ("enabledJobPipelined", "job_pipelined"),
        ("enabledTaskOrder", "task_order"),
        ("enabledPreemptable", "preemptable"),
        ("enabledReclaimable", "reclaimable"),
        ("enableReclaimable", "reclaimable"),
        ("enabledQueueOrder", "queue_order"),
        ("enabledPredicate", "predicate"),
        ("enabledNodeOrder", "node_order"),
        ("enabledHierarchy", "hierarchy"),
        ("enableClusterOrder", "cluster_order"),
        ("enableVictim", "victim"),
        ("enabledVictim", "victim"),
        ("enablePreemptive", "preemptive"),
        ("enabledAllocatable", "allocatable"),
        ("enableOverused", "overused"),
        ("enabledHyperNodeGradient", "hyper_node_gradient"),
        ("enableSubJobOrder", "sub_job_order"),
    ],
)
def test_spec_listed_spellings(key: str, hook: str) -> None:
    assert SWITCH_KEYS[key] == hook


def test_same_value_under_both_spellings_is_accepted() -> None:
    cfg = load(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: gang
            enablePreemptable: false
            enabledPreemptable: false
        """
    )
    assert cfg.tiers[0].plugins[0].switches["preemptable"] is False
    assert any("duplicates enablePreemptable" in w for w in cfg.warnings)


def test_conflicting_spellings_are_rejected() -> None:
    err = error_of(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: gang
            enableJobReady: true
            enabledJobReady: false
        """
    )
    assert err.line == 6
    assert err.field == "tiers[0].plugins[0].enabledJobReady"
    assert "enableJobReady (line 5)" in str(err)
    assert str(err).startswith("sched.conf:6: ")


@pytest.mark.parametrize("value", ['"true"', "1", "[true]", "{a: 1}", "maybe"])
def test_non_bool_switch_is_rejected(value: str) -> None:
    err = error_of(f"actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: {value}\n")
    assert err.line == 5
    assert err.field == "tiers[0].plugins[0].enableJobOrder"
    assert "expected true or false" in err.reason


@pytest.mark.parametrize("value,expected", [("yes", True), ("off", False), ("y", True), ("N", False), ("True", True)])
def test_yaml11_booleans_as_go_yaml_reads_them(value: str, expected: bool) -> None:
    cfg = load(f"actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: {value}\n")
    assert cfg.tiers[0].plugins[0].switches["job_order"] is expected


def test_unknown_plugin_keys_are_warnings() -> None:
    cfg = load(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: gang
            enableJobOrdr: false
            EnabledClusterOrder: true
            enableNamespaceOrder: true
        """
    )
    gang = cfg.tiers[0].plugins[0]
    assert gang.enabled("job_order") and not gang.enabled("cluster_order")
    assert len(cfg.warnings) == 3
    assert cfg.warnings[0].startswith("sched.conf:5: tiers[0].plugins[0].enableJobOrdr: unknown key")
    assert 'did you mean "enableJobOrder"' in cfg.warnings[0]
    assert 'did you mean "enabledClusterOrder"' in cfg.warnings[1]
    assert "namespace" in cfg.warnings[2]


# ---------------------------------------------------------------------------- names and structure


def test_volcano_plugin_not_implemented_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in name: Volcano's plugins are being implemented one by one.
    import tidesched.framework.config as config_module

    monkeypatch.setattr(config_module, "VOLCANO_PLUGINS_NOT_IMPLEMENTED", frozenset({"volcano-only"}))
    err = error_of(
        """\
        actions: "enqueue, allocate"
        tiers:
        - plugins:
          - name: gang
          - name: volcano-only
        """
    )
    assert err.line == 5 and err.field == "tiers[0].plugins[1].name"
    assert 'plugin "volcano-only" is one of Volcano\'s that tidesched does not implement' in err.reason
    assert "supported: binpack, capacity, capacity-card" in err.reason and "sla" in err.reason
    assert "Replacing vc-scheduler" in err.reason


def test_volcano_ci_config_with_sla_is_read() -> None:
    # Volcano's own e2e runs install this config (hack/run-e2e-kind.sh): sla in the first tier.
    from tidesched.scheduler import config_from_text

    cfg = config_from_text(
        textwrap.dedent(
            """\
            actions: "enqueue, allocate, backfill, reclaim, preempt"
            tiers:
            - plugins:
              - name: priority
              - name: gang
                enablePreemptable: false
              - name: conformance
              - name: sla
            - plugins:
              - name: overcommit
              - name: drf
                enablePreemptable: false
              - name: predicates
              - name: proportion
              - name: nodeorder
              - name: binpack
            """
        )
    )
    assert [p.name for p in cfg.tiers[0]] == ["priority", "gang", "conformance", "sla"]


def test_volcano_1_15_ci_config_starts_and_says_what_is_not_honoured_yet() -> None:
    # Volcano v1.15.1's e2e config: network-topology-aware and the DRA switch of predicates.
    from tidesched.scheduler import config_from_text

    cfg = config_from_text(
        textwrap.dedent(
            """\
            actions: "enqueue, allocate, backfill, reclaim, preempt"
            tiers:
            - plugins:
              - name: priority
              - name: gang
                enablePreemptable: false
              - name: conformance
              - name: sla
            - plugins:
              - name: overcommit
              - name: drf
                enablePreemptable: false
              - name: predicates
                arguments:
                  predicate.DynamicResourceAllocationEnable: true
              - name: proportion
              - name: nodeorder
              - name: binpack
              - name: network-topology-aware
            """
        ),
        "ci.conf",
    )
    assert [p.name for p in cfg.tiers[1]][-1] == "network-topology-aware"
    notes = [w for w in cfg.warnings if "not honoured yet" in w]
    # DynamicResourceAllocationEnable is honoured: claims are allocated (docs/dra.md); HyperNodes
    # and networkTopology too (issue 34): nothing is said of either.
    assert not any("DynamicResourceAllocationEnable" in w for w in cfg.warnings), cfg.warnings
    assert not any("network-topology-aware" in w for w in cfg.warnings), cfg.warnings


@pytest.mark.parametrize("value", ['"3 seconds"', '"0s"', '"-1m"', "3"])
def test_sla_waiting_time_argument_must_be_a_positive_go_duration(value: str) -> None:
    from tidesched.scheduler import config_from_text

    text = f"actions: enqueue\ntiers:\n- plugins:\n  - name: sla\n    arguments:\n      sla-waiting-time: {value}\n"
    with pytest.raises(ConfigError, match="sla-waiting-time"):
        config_from_text(text, "sla.conf")


def test_unknown_plugin_names_line_and_field_and_known_list() -> None:
    err = error_of(
        """\
        actions: "enqueue, allocate"
        tiers:
        - plugins:
          - name: gang
        - plugins:
          - name: predicates
          - name: nodeorder
          - name: capacty
        """
    )
    assert err.source == "sched.conf" and err.line == 8
    assert err.field == "tiers[1].plugins[2].name"
    assert 'unknown plugin "capacty"' in err.reason
    assert "known: binpack, capacity, capacity-card" in err.reason
    assert 'did you mean "capacity"' in err.reason
    assert str(err).startswith('sched.conf:8: tiers[1].plugins[2].name: unknown plugin "capacty"')


def test_unknown_action() -> None:
    err = error_of(
        """\
        # scheduler
        actions: "enqueue, allocate, backfil"
        tiers: []
        """
    )
    assert err.line == 2 and err.field == "actions[2]"
    assert 'unknown action "backfil"' in err.reason and "known: allocate, backfill" in err.reason


def test_actions_whitespace_tolerant_and_empty_entries_rejected() -> None:
    cfg = load('actions: "  enqueue ,allocate,   backfill "\ntiers: [{plugins: [{name: gang}]}]\n')
    assert cfg.actions == ["enqueue", "allocate", "backfill"]
    err = error_of('actions: "enqueue, , allocate"\ntiers: []\n')
    assert err.field == "actions[1]" and "empty action name" in err.reason
    err = error_of('actions: "enqueue, allocate,"\ntiers: []\n')
    assert err.field == "actions[2]"


def test_missing_actions_is_an_error_missing_tiers_a_warning() -> None:
    err = error_of("tiers:\n- plugins:\n  - name: gang\n")
    assert err.field == "actions" and "missing" in err.reason
    cfg = load("actions: allocate\n")
    assert cfg.tiers == [] and any("no plugins configured" in w for w in cfg.warnings)
    err = error_of("")
    assert "empty configuration" in err.reason


def test_checks_can_be_skipped_with_none() -> None:
    cfg = load_config(
        "actions: anything\ntiers:\n- plugins:\n  - name: whatever\n", known_actions=None, known_plugins=None
    )
    assert cfg.actions == ["anything"] and cfg.plugin_names() == ["whatever"]


def test_plugin_entry_shape_errors() -> None:
    err = error_of("actions: allocate\ntiers:\n- plugins:\n  - gang\n")
    assert err.line == 4 and err.field == "tiers[0].plugins[0]"
    err = error_of("actions: allocate\ntiers:\n- plugins:\n  - enableJobOrder: true\n")
    assert err.field == "tiers[0].plugins[0].name" and "missing plugin name" in err.reason
    err = error_of("actions: allocate\ntiers:\n  plugins: []\n")
    assert err.field == "tiers" and "expected a list" in err.reason


def test_duplicate_plugin_is_rejected() -> None:
    err = error_of("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: gang\n")
    assert err.line == 6 and "listed twice" in err.reason and "line 4" in err.reason


def test_duplicate_yaml_keys_are_rejected() -> None:
    err = error_of("actions: allocate\ntiers: []\nactions: enqueue\n")
    assert err.line == 3 and "duplicate key 'actions'" in err.reason
    err = error_of(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: nodeorder
            arguments:
              leastrequested.weight: 1
              leastrequested.weight: 2
        """
    )
    assert err.line == 7


def test_unknown_top_level_key_is_a_warning() -> None:
    cfg = load("actions: allocate\ntiers: []\naction: enqueue\n")
    assert cfg.warnings[0].startswith("sched.conf:3: action: unknown key")
    assert 'did you mean "actions"' in cfg.warnings[0]


def test_drf_hierarchy_with_proportion_in_one_tier_is_rejected() -> None:
    err = error_of(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: proportion
          - name: drf
            enableHierarchy: true
        """
    )
    assert err.line == 5 and err.field == "tiers[0].plugins[1]"
    assert "proportion and drf with hierarchy" in err.reason
    # Different tiers, or drf without hierarchy, are fine (as upstream).
    load("actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n- plugins:\n  - name: drf\n    enableHierarchy: true\n")
    load("actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: drf\n    enableHierarchy: false\n")


# ------------------------------------------------------------------------------------------- YAML


def test_bad_yaml_reports_line() -> None:
    err = error_of("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n   enableJobOrder: true\n")
    assert err.line == 5 and "invalid YAML" in err.reason
    err = error_of('actions: "allocate\ntiers: []\n')
    assert err.line is not None and "invalid YAML" in err.reason


def test_root_must_be_mapping_and_single_document() -> None:
    err = error_of("- actions: allocate\n")
    assert "expected a mapping" in err.reason
    err = error_of("actions: allocate\n---\nactions: enqueue\n")
    assert "2 YAML documents" in err.reason and err.line == 3


def test_merge_keys_and_anchors() -> None:
    cfg = load(
        """\
        actions: allocate
        tiers:
        - plugins:
          - &g
            name: gang
            enableJobOrder: false
          - <<: *g
            name: priority
        """
    )
    assert [p.name for p in cfg.tiers[0]] == ["gang", "priority"]
    assert cfg.tiers[0].plugins[1].switches["job_order"] is False


# -------------------------------------------------------------------------------------- ConfigMap


CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: volcano-scheduler-configmap
data:
  volcano-scheduler.conf: |
    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gangg
"""


def test_configmap_wrapper_loads_and_maps_lines_to_manifest() -> None:
    cfg = load(CONFIGMAP.replace("gangg", "gang"), "cm.yaml")
    assert cfg.actions == ["enqueue", "allocate", "backfill"]
    assert cfg.plugin_names() == ["priority", "gang"]
    err = error_of(CONFIGMAP, source="cm.yaml")
    assert str(err).startswith('cm.yaml:11: tiers[0].plugins[1].name: unknown plugin "gangg"')


def test_configmap_bad_inner_yaml_line() -> None:
    broken = CONFIGMAP.replace("      - name: gangg\n", "      - name: gang\n     bad: [\n")
    err = error_of(broken, source="cm.yaml")
    assert err.source == "cm.yaml" and err.line is not None and err.line >= 11


def test_configmap_quoted_string_uses_key_label() -> None:
    text = (
        "kind: ConfigMap\napiVersion: v1\ndata:\n"
        '  sched.conf: "actions: allocate\\ntiers:\\n- plugins:\\n  - name: nope\\n"\n'
    )
    err = error_of(text, source="cm.yaml")
    assert err.source == "cm.yaml[sched.conf]" and err.line == 4


def test_configmap_key_selection() -> None:
    two = CONFIGMAP.replace("gangg", "gang") + "  other.conf: |\n    actions: enqueue\n"
    with pytest.raises(ConfigError, match="several scheduler configurations"):
        load(two)
    assert load(two, conf_key="other.conf").actions == ["enqueue"]
    with pytest.raises(ConfigError, match="no data key ending in '.conf'"):
        load("kind: ConfigMap\ndata:\n  x.yaml: hi\n")


def test_configmap_among_other_documents() -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n" + CONFIGMAP.replace("gangg", "gang")
    assert load(text).plugin_names() == ["priority", "gang"]


# ------------------------------------------------------------------------------ configurations


def test_action_configurations() -> None:
    cfg = load(
        """\
        actions: "allocate, preempt"
        tiers:
        - plugins:
          - name: gang
        configurations:
        - name: preempt
          arguments:
            enableTopologyAwarePreemption: true
            topologyAwarePreemptWorkerNum: 8
            minCandidateNodesPercentage: "ten"
        - name: allocate
          arguments:
            predicateErrorCacheEnable: false
        - name: preempt
          arguments: {ignored: 1}
        metrics:
          type: prometheus
          interval: 30s
        """
    )
    preempt = cfg.action_arguments("preempt")
    assert preempt.get_bool("enableTopologyAwarePreemption", False) is True
    assert preempt.get_int("topologyAwarePreemptWorkerNum", 16) == 8
    assert preempt.get_int("maxCandidateNodesAbsolute", 100) == 100
    with pytest.raises(ConfigError) as info:
        preempt.get_int("minCandidateNodesPercentage", 10)
    assert info.value.line == 10
    assert "action 'preempt'" in info.value.reason and "minCandidateNodesPercentage" in str(info.value)
    assert cfg.action_arguments("allocate").get_bool("predicateErrorCacheEnable", True) is False
    assert cfg.action_arguments("backfill") == {}
    assert cfg.configurations["preempt"] == {
        "enableTopologyAwarePreemption": True,
        "topologyAwarePreemptWorkerNum": 8,
        "minCandidateNodesPercentage": "ten",
    }
    assert any("second configuration" in w for w in cfg.warnings)
    assert cfg.metrics == {"type": "prometheus", "interval": "30s"}


def test_configuration_errors() -> None:
    err = error_of("actions: allocate\ntiers: []\nconfigurations:\n- name: prempt\n")
    assert err.line == 4 and 'unknown action "prempt"' in err.reason
    err = error_of("actions: allocate\ntiers: []\nconfigurations:\n- name: allocate\n  arguments: [1]\n")
    assert err.field == "configurations[0].arguments" and "expected a mapping" in err.reason
    cfg = load("actions: allocate\ntiers: []\nconfigurations:\n- name: preempt\n  arguments: {}\n")
    assert any("not listed in actions" in w for w in cfg.warnings)


def test_plugin_arguments_must_be_mapping() -> None:
    err = error_of("actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments: 3\n")
    assert err.line == 5 and err.field == "tiers[0].plugins[0].arguments"


# ------------------------------------------------------------------------------------- Arguments


def test_argument_getters_with_dotted_keys_and_error_location() -> None:
    cfg = load(
        """\
        actions: allocate
        tiers:
        - plugins:
          - name: nodeorder
            arguments:
              leastrequested.weight: 2
              mostrequested.weight: "1"
              balancedresource.weight: 1.5
              binpack.resources: nvidia.com/gpu
              since: 2024-01-01
        """
    )
    args = cfg.plugin("nodeorder").args  # type: ignore[union-attr]
    assert args.get_int("leastrequested.weight", 1) == 2
    assert args.get_int("podaffinity.weight", 2) == 2
    assert args.get_float("leastrequested.weight", 0.0) == 2.0
    assert args.get_float("balancedresource.weight", 1.0) == 1.5
    assert args.get_str("binpack.resources", "") == "nvidia.com/gpu"
    assert args.get_str("since", "") == "2024-01-01"  # timestamps stay text, as in Go
    with pytest.raises(ConfigError) as info:
        args.get_int("mostrequested.weight", 0)
    err = info.value
    assert err.line == 7 and err.source == "sched.conf"
    assert err.field == "tiers[0].plugins[0].arguments['mostrequested.weight']"
    assert "plugin 'nodeorder'" in err.reason and "without quotes" in err.reason
    with pytest.raises(ConfigError):
        args.get_int("balancedresource.weight", 1)  # 1.5 is not an int
    with pytest.raises(ConfigError):
        args.get_bool("leastrequested.weight", False)


def test_arguments_in_code() -> None:
    args = Arguments({"a": True, "b": 3, "c": None, "d": "true", "e": {"k": "v"}}, owner="plugin 'x'")
    assert args.get_bool("a", False) is True
    assert args.get_int("c", 7) == 7  # null == absent
    assert args.get_mapping("e") == {"k": "v"}
    assert dict(args) == {"a": True, "b": 3, "c": None, "d": "true", "e": {"k": "v"}}
    with pytest.raises(ConfigError, match="plugin 'x'"):
        args.get_bool("d", False)  # strings are never parsed, as upstream
    with pytest.raises(ConfigError):
        args.get_int("a", 0)  # bool is not an int
    with pytest.raises(ConfigError):
        args.get_float("a", 0.0)
    with pytest.raises(ConfigError):
        args.get_str("b", "")
    with pytest.raises(ConfigError):
        args.get_mapping("b")


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_int_arguments_round_trip(value: int) -> None:
    cfg = load(f"actions: allocate\ntiers:\n- plugins:\n  - name: sla\n    arguments: {{sla-waiting-time: {value}}}\n")
    args = cfg.plugin("sla").args  # type: ignore[union-attr]
    assert args.get_int("sla-waiting-time", 0) == value
    assert args.get_float("sla-waiting-time", 0.0) == float(value)


# ------------------------------------------------------------------------------------ data model


def test_tier_and_config_helpers() -> None:
    tier = Tier([PluginOption("gang"), PluginOption("priority", arguments={"x": 1})])
    cfg = SchedulerConfig(actions=["allocate"], tiers=[tier])
    assert cfg.plugin_names() == ["gang", "priority"]
    assert cfg.plugin("priority").args.get_int("x", 0) == 1  # type: ignore[union-attr]
    assert cfg.plugin("nope") is None
    assert cfg.has_action("allocate") and not cfg.has_action("enqueue")
    assert PluginOption("gang") == PluginOption("gang", switches={"job_order": None})


def test_load_config_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_config_file(tmp_path / "none.conf", known_actions=ACTIONS, known_plugins=PLUGINS)
    assert info.value.source is not None and info.value.source.endswith("none.conf")


# -- arguments are validated when the config is loaded (CONF-3) -------------------------------


@pytest.mark.parametrize(
    ("plugin_or_action", "snippet", "field"),
    [
        ("capacity-card", "tiers:\n- plugins:\n  - name: capacity-card\n    arguments: {overCommitFactor: abc}\n", "overCommitFactor"),
        ("nodeorder", "tiers:\n- plugins:\n  - name: nodeorder\n    arguments: {leastrequested.weight: many}\n", "leastrequested.weight"),
        ("predicates", "tiers:\n- plugins:\n  - name: predicates\n    arguments: {predicate.NodeAffinityEnable: 3}\n", "predicate.NodeAffinityEnable"),
        ("reclaim", "tiers:\n- plugins:\n  - name: gang\nconfigurations:\n- name: reclaim\n  arguments: {enableGangSafeReclaim: maybe}\n", "enableGangSafeReclaim"),
        ("preempt", "tiers:\n- plugins:\n  - name: gang\nconfigurations:\n- name: preempt\n  arguments: {minCandidateNodesPercentage: lots}\n", "minCandidateNodesPercentage"),
    ],
)
def test_bad_arguments_are_refused_at_load_with_their_line(plugin_or_action: str, snippet: str, field: str) -> None:
    from tidesched.scheduler import config_from_text

    text = 'actions: "enqueue, allocate, preempt, reclaim"\n' + snippet
    with pytest.raises(ConfigError) as info:
        config_from_text(text, "bad.conf")
    message = str(info.value)
    assert field in message and "bad.conf:" in message


def test_good_arguments_load() -> None:
    from tidesched.scheduler import config_from_text

    config = config_from_text(
        'actions: "enqueue, allocate, reclaim"\ntiers:\n- plugins:\n  - name: nodeorder\n'
        "    arguments: {leastrequested.weight: 2}\nconfigurations:\n- name: reclaim\n"
        "  arguments: {enableGangSafeReclaim: false}\n"
    )
    assert config.action_arguments("reclaim").get_bool("enableGangSafeReclaim", True) is False


def test_plugin_args_made_once_and_again_after_a_change() -> None:
    from tidesched.framework.config import PluginOption

    opt = PluginOption("binpack", arguments={"binpack.weight": 2})
    first = opt.args
    assert opt.args is first and first.get_int("binpack.weight", 1) == 2
    opt.arguments["binpack.weight"] = 5  # the dict is the option's own; a change is seen
    assert opt.args is not first and opt.args.get_int("binpack.weight", 1) == 5
    assert first.get_int("binpack.weight", 1) == 2  # what a plugin was given stays as it was
    assert opt == PluginOption("binpack", arguments={"binpack.weight": 5})  # the cache is no field
