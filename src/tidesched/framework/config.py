"""Scheduler configuration in Volcano's format (CONF-1, CONF-3).

The accepted document is the one ``volcano-scheduler`` reads from ``--scheduler-conf``::

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: gang
        enablePreemptable: false
      - name: nodeorder
        arguments: {leastrequested.weight: 1}
    configurations:
    - name: preempt
      arguments: {enableTopologyAwarePreemption: true}
    metrics: {...}

It may also be given as a Kubernetes ConfigMap manifest whose ``data`` holds a ``*.conf`` key
(``volcano-scheduler.conf: |``); line numbers in errors then point into the manifest.

Differences from upstream, all on the side of telling the operator more:

* Every per-plugin switch is accepted under both the ``enable<X>`` and ``enabled<X>``
  spelling (upstream knows exactly one spelling per switch and silently ignores the other).
  The non-upstream spelling produces a warning so nobody is surprised when the same file
  behaves differently under real Volcano.
* Unknown plugins, unknown actions (also in ``configurations``), non-boolean switches,
  duplicate YAML keys and bad argument types are errors that name file, line and field,
  instead of log lines.
* Unknown keys are collected in ``SchedulerConfig.warnings``.

Switch defaulting follows upstream: after a YAML file is parsed every unset switch becomes
``True`` except ``hierarchy`` and ``cluster_order``; a hook counts as enabled only when its
switch is set and true. ``PluginOption`` built in code is *not* defaulted, like the tiers that
Volcano's Go unit tests build by hand.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from yaml.nodes import Node, ScalarNode

from tidesched.framework.arguments import Arguments, ConfigError, Origin
from tidesched.framework.config_yaml import (
    BOOL_TAG,
    STR_TAG,
    Reader,
    closest,
    construct,
    is_null,
    node_kind,
    select_config,
)

__all__ = [
    "HOOKS",
    "DEFAULT_OFF_HOOKS",
    "VOLCANO_SWITCH_KEYS",
    "SWITCH_KEYS",
    "DEFAULT_CONFIG_TEXT",
    "PluginOption",
    "Tier",
    "SchedulerConfig",
    "load_config",
    "load_config_file",
    "default_config",
]

# --------------------------------------------------------------------------------------------
# Switches
# --------------------------------------------------------------------------------------------

# Canonical hook name -> the one YAML key upstream Volcano reads for it.  Upstream mixes the
# "enable" and "enabled" prefixes; this table records which one each switch really uses.
VOLCANO_SWITCH_KEYS: Mapping[str, str] = {
    "job_order": "enableJobOrder",
    "hierarchy": "enableHierarchy",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "task_order": "enableTaskOrder",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
    "preemptive": "enablePreemptive",
    "queue_order": "enableQueueOrder",
    "cluster_order": "enabledClusterOrder",
    "predicate": "enablePredicate",
    "best_node": "enableBestNode",
    "node_order": "enableNodeOrder",
    "target_job": "enableTargetJob",
    "reserved_nodes": "enableReservedNodes",
    "job_enqueued": "enableJobEnqueued",
    "victim": "enabledVictim",
    "job_starving": "enableJobStarving",
    "overused": "enabledOverused",
    "allocatable": "enabledAllocatable",
    "hyper_node_order": "enabledHyperNodeOrder",
    "sub_job_ready": "enabledSubJobReady",
    "sub_job_pipelined": "enabledSubJobPipelined",
    "sub_job_order": "enabledSubJobOrder",
    "hyper_node_gradient": "enabledHyperNodeGradient",
}

HOOKS: tuple[str, ...] = tuple(VOLCANO_SWITCH_KEYS)

# Upstream leaves these unset (hence off) when a config file does not mention them.
DEFAULT_OFF_HOOKS: frozenset[str] = frozenset({"hierarchy", "cluster_order"})


def _both_spellings(volcano_key: str) -> tuple[str, str]:
    if volcano_key.startswith("enabled"):
        suffix = volcano_key[len("enabled"):]
    else:
        suffix = volcano_key[len("enable"):]
    return "enable" + suffix, "enabled" + suffix


# Every accepted YAML switch key -> canonical hook.
SWITCH_KEYS: Mapping[str, str] = {
    spelling: hook
    for hook, key in VOLCANO_SWITCH_KEYS.items()
    for spelling in _both_spellings(key)
}

# Keys that older Volcano releases read; accepted with a warning so old files still load.
_OBSOLETE_PLUGIN_KEYS = {
    "enableNamespaceOrder": "namespace ordering was removed from Volcano; the key is ignored",
    "enabledNamespaceOrder": "namespace ordering was removed from Volcano; the key is ignored",
}

# Volcano's built-in configuration (pkg/scheduler/util.go), used when no file is given.
DEFAULT_CONFIG_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

_TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=True)
class PluginOption:
    """One ``- name: ...`` entry of a tier.

    ``switches`` is keyed by canonical hook name (see :data:`HOOKS`); every hook is present,
    ``None`` meaning unset.  Constructing one in code does no defaulting: an unset switch is
    off, exactly like a Go ``conf.PluginOption{}`` literal.  The loader calls
    :meth:`apply_defaults`.
    """

    name: str
    switches: dict[str, bool | None] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    origin: Origin | None = field(default=None, compare=False, repr=False)
    argument_lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        normalized: dict[str, bool | None] = dict.fromkeys(HOOKS)
        for hook, value in self.switches.items():
            if hook not in normalized:
                raise ValueError(f"plugin {self.name!r}: unknown hook {hook!r} (known: {', '.join(HOOKS)})")
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"plugin {self.name!r}: switch {hook!r} must be bool or None, got {value!r}")
            normalized[hook] = value
        object.__setattr__(self, "switches", normalized)
        object.__setattr__(self, "arguments", dict(self.arguments))

    def __repr__(self) -> str:
        set_switches = {h: v for h, v in self.switches.items() if v is not None}
        return f"PluginOption(name={self.name!r}, switches={set_switches!r}, arguments={self.arguments!r})"

    def enabled(self, hook: str) -> bool:
        """True only if the switch is set and true (upstream ``isEnabled``)."""
        try:
            return self.switches[hook] is True
        except KeyError:
            raise ValueError(f"unknown hook {hook!r} (known: {', '.join(HOOKS)})") from None

    def apply_defaults(self) -> PluginOption:
        """Copy with every unset switch turned on, except the hooks in DEFAULT_OFF_HOOKS."""
        switches = {
            hook: (True if value is None and hook not in DEFAULT_OFF_HOOKS else value)
            for hook, value in self.switches.items()
        }
        return PluginOption(
            self.name,
            switches=switches,
            arguments=self.arguments,
            origin=self.origin,
            argument_lines=self.argument_lines,
        )

    @property
    def args(self) -> Arguments:
        """The plugin's ``arguments`` with typed getters whose errors point at the file (made
        once while ``arguments`` stays the same: every session asks for it, per plugin)."""
        cached = self.__dict__.get("_args")
        if cached is not None and cached[0] == self.arguments and cached[1] == self.argument_lines:
            return cached[2]
        origin = None
        if self.origin is not None:
            origin = Origin(self.origin.source, self.origin.line, self.origin.path + ".arguments")
        args = Arguments(
            self.arguments, owner=f"plugin {self.name!r}", origin=origin, lines=self.argument_lines
        )
        object.__setattr__(self, "_args", (dict(self.arguments), dict(self.argument_lines), args))
        return args


@dataclass
class Tier:
    plugins: list[PluginOption] = field(default_factory=list)

    def __iter__(self) -> Iterator[PluginOption]:
        return iter(self.plugins)


@dataclass
class SchedulerConfig:
    """A validated scheduler configuration."""

    actions: list[str]
    tiers: list[Tier]
    configurations: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    source: str = "<config>"
    warnings: list[str] = field(default_factory=list)
    # Where each action's arguments were written, for Arguments error messages.
    configuration_origins: dict[str, Origin] = field(default_factory=dict, compare=False, repr=False)
    configuration_lines: dict[str, dict[str, int]] = field(default_factory=dict, compare=False, repr=False)
    # What a plugin keeps from one session to the next while this config is in use (where
    # Volcano's plugins keep package variables: rescheduling's last run), by plugin name.
    plugin_state: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def action_arguments(self, name: str) -> Arguments:
        """Arguments of ``configurations: - name: <name>``; empty if none were given."""
        origin = self.configuration_origins.get(name)
        if origin is not None:
            origin = Origin(origin.source, origin.line, origin.path + ".arguments")
        return Arguments(
            self.configurations.get(name, {}),
            owner=f"action {name!r}",
            origin=origin,
            lines=self.configuration_lines.get(name),
        )

    def has_action(self, name: str) -> bool:
        return name in self.actions

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier.plugins]

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for option in tier.plugins:
                if option.name == name:
                    return option
        return None


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _parse_switch(reader: Reader, key: str, node: Node, path: str) -> bool | None:
    if is_null(node):
        return None  # "enableX:" with no value leaves the pointer unset in Go
    if isinstance(node, ScalarNode):
        if node.tag == BOOL_TAG:
            return bool(construct(node))
        # yaml.v2 also resolves plain y/Y/n/N as booleans; PyYAML does not.
        if node.style in (None, "") and node.tag == STR_TAG and node.value in ("y", "Y", "n", "N"):
            return node.value in ("y", "Y")
    raise reader.error(node, f"{path}.{key}", f"expected true or false, got {node_kind(node)}")


# Volcano's plugins (its plugins/factory.go, master) that tidesched does not implement: named as
# such when a config enables one, rather than as a typo. Since issue 32 every plugin of v1.15.1
# is implemented; the set stays for Volcano's next ones.
VOLCANO_PLUGINS_NOT_IMPLEMENTED: frozenset[str] = frozenset()
PLUGINS_DOC = 'docs/operations.md, "Replacing vc-scheduler in a Volcano install"'


def _parse_plugin(
    reader: Reader,
    node: Node,
    path: str,
    known_plugins: Collection[str] | None,
) -> PluginOption:
    pairs = reader.mapping(node, path, "a plugin entry (a mapping with 'name')")
    name: str | None = None
    switches: dict[str, bool | None] = {}
    switch_keys: dict[str, tuple[str, Node]] = {}
    arguments: dict[str, Any] = {}
    argument_lines: dict[str, int] = {}
    for key, key_node, value_node in pairs:
        if key == "name":
            name = reader.text(value_node, f"{path}.name")
            if known_plugins is not None and name not in known_plugins:
                supported = ", ".join(sorted(known_plugins))
                if name in VOLCANO_PLUGINS_NOT_IMPLEMENTED:
                    reason = (f'plugin "{name}" is one of Volcano\'s that tidesched does not implement '
                              f"(supported: {supported}); remove it or see {PLUGINS_DOC}")
                else:
                    reason = f'unknown plugin "{name}" (known: {supported})' + closest(name, known_plugins)
                raise reader.error(value_node, f"{path}.name", reason)
            continue
        if key == "arguments":
            if is_null(value_node):
                continue
            for arg, arg_key_node, arg_node in reader.mapping(value_node, f"{path}.arguments"):
                arguments[arg] = reader.value_tree(arg_node, f"{path}.arguments[{arg!r}]")
                argument_lines[arg] = reader.line(arg_key_node)
            continue
        hook = SWITCH_KEYS.get(key)
        if hook is None:
            if key in _OBSOLETE_PLUGIN_KEYS:
                reader.warn(key_node, f"{path}.{key}", _OBSOLETE_PLUGIN_KEYS[key])
            else:
                known_keys = ["name", "arguments", *SWITCH_KEYS]
                reader.warn(key_node, f"{path}.{key}", "unknown key, ignored" + closest(key, known_keys))
            continue
        value = _parse_switch(reader, key, value_node, path)
        if hook in switch_keys:
            other_key, other_node = switch_keys[hook]
            if switches[hook] != value:
                raise reader.error(
                    key_node,
                    f"{path}.{key}",
                    f"conflicts with {other_key} (line {reader.line(other_node)}): "
                    f"both set switch {hook!r}, to {value} and {switches[hook]}",
                )
            reader.warn(key_node, f"{path}.{key}", f"duplicates {other_key}; both set {hook!r}")
        switch_keys[hook] = (key, key_node)
        switches[hook] = value
        volcano_key = VOLCANO_SWITCH_KEYS[hook]
        if key != volcano_key:
            reader.warn(
                key_node,
                f"{path}.{key}",
                f'accepted as "{volcano_key}"; upstream Volcano only reads "{volcano_key}" '
                "and would ignore this key",
            )
    if name is None:
        raise reader.error(node, f"{path}.name", "missing plugin name")
    return PluginOption(
        name,
        switches=switches,
        arguments=arguments,
        origin=Origin(reader.source, reader.line(node), path),
        argument_lines=argument_lines,
    )


def _parse_actions(reader: Reader, node: Node, known_actions: Collection[str] | None) -> list[str]:
    raw = reader.text(node, "actions")
    actions: list[str] = []
    for i, part in enumerate(raw.split(",")):
        name = part.strip()
        if not name:
            raise reader.error(node, f"actions[{i}]", f"empty action name in {raw!r}")
        if known_actions is not None and name not in known_actions:
            raise reader.error(
                node,
                f"actions[{i}]",
                f'unknown action "{name}" (known: {", ".join(sorted(known_actions))})'
                + closest(name, known_actions),
            )
        if name in actions:
            reader.warn(node, f"actions[{i}]", f'action "{name}" listed more than once; it runs each time')
        actions.append(name)
    return actions


def _parse_tiers(
    reader: Reader, node: Node, known_plugins: Collection[str] | None
) -> list[Tier]:
    tiers: list[Tier] = []
    first_seen: dict[str, PluginOption] = {}
    for t, tier_node in enumerate(reader.sequence(node, "tiers")):
        tier_path = f"tiers[{t}]"
        if is_null(tier_node):
            reader.warn(tier_node, tier_path, "empty tier")
            tiers.append(Tier())
            continue
        plugins_node: Node | None = None
        for key, key_node, value_node in reader.mapping(tier_node, tier_path, "a tier (a mapping with 'plugins')"):
            if key == "plugins":
                plugins_node = value_node
            else:
                reader.warn(key_node, f"{tier_path}.{key}", "unknown key, ignored" + closest(key, ["plugins"]))
        plugins: list[PluginOption] = []
        plugin_nodes = [] if plugins_node is None else reader.sequence(plugins_node, f"{tier_path}.plugins")
        if not plugin_nodes:
            reader.warn(tier_node, tier_path, "tier has no plugins")
        for p, plugin_node in enumerate(plugin_nodes):
            option = _parse_plugin(reader, plugin_node, f"{tier_path}.plugins[{p}]", known_plugins)
            earlier = first_seen.get(option.name)
            if earlier is not None and earlier.origin is not None:
                # Upstream would build the plugin twice and let hook registrations collide.
                raise reader.error(
                    plugin_node,
                    f"{tier_path}.plugins[{p}].name",
                    f'plugin "{option.name}" is listed twice (first at {earlier.origin.path}, '
                    f"line {earlier.origin.line})",
                )
            first_seen[option.name] = option
            plugins.append(option)
        _check_drf_hierarchy(reader, tier_node, tier_path, plugins)
        tiers.append(Tier([option.apply_defaults() for option in plugins]))
    return tiers


def _check_drf_hierarchy(reader: Reader, tier_node: Node, path: str, plugins: list[PluginOption]) -> None:
    # Hierarchical drf and proportion both order queues; upstream refuses them in one tier.
    hdrf = next((p for p in plugins if p.name == "drf" and p.switches["hierarchy"] is True), None)
    if hdrf is not None and any(p.name == "proportion" for p in plugins):
        origin = hdrf.origin
        raise ConfigError(
            "proportion and drf with hierarchy enabled conflict in the same tier",
            source=reader.source,
            line=origin.line if origin else reader.line(tier_node),
            field=origin.path if origin else path,
        )


def _parse_configurations(
    reader: Reader,
    node: Node,
    known_actions: Collection[str] | None,
    actions: list[str],
) -> tuple[dict[str, dict[str, Any]], dict[str, Origin], dict[str, dict[str, int]]]:
    configurations: dict[str, dict[str, Any]] = {}
    origins: dict[str, Origin] = {}
    lines: dict[str, dict[str, int]] = {}
    for i, entry in enumerate(reader.sequence(node, "configurations")):
        path = f"configurations[{i}]"
        name: str | None = None
        arguments: dict[str, Any] = {}
        arg_lines: dict[str, int] = {}
        for key, key_node, value_node in reader.mapping(entry, path, "an action configuration"):
            if key == "name":
                name = reader.text(value_node, f"{path}.name")
                if known_actions is not None and name not in known_actions:
                    raise reader.error(
                        value_node,
                        f"{path}.name",
                        f'unknown action "{name}" (known: {", ".join(sorted(known_actions))})'
                        + closest(name, known_actions),
                    )
            elif key == "arguments":
                if is_null(value_node):
                    continue
                for arg, arg_key_node, arg_node in reader.mapping(value_node, f"{path}.arguments"):
                    arguments[arg] = reader.value_tree(arg_node, f"{path}.arguments[{arg!r}]")
                    arg_lines[arg] = reader.line(arg_key_node)
            else:
                reader.warn(key_node, f"{path}.{key}", "unknown key, ignored" + closest(key, ["name", "arguments"]))
        if name is None:
            raise reader.error(entry, f"{path}.name", "missing action name")
        if name in configurations:
            # Upstream looks up the first entry with a matching name.
            reader.warn(entry, path, f'second configuration for action "{name}" is ignored')
            continue
        if name not in actions:
            reader.warn(entry, path, f'action "{name}" is configured but not listed in actions')
        configurations[name] = arguments
        origins[name] = Origin(reader.source, reader.line(entry), path)
        lines[name] = arg_lines
    return configurations, origins, lines


def _parse_metrics(reader: Reader, node: Node) -> dict[str, str]:
    if is_null(node):
        return {}
    metrics: dict[str, str] = {}
    for key, _, value_node in reader.mapping(node, "metrics"):
        if not isinstance(value_node, ScalarNode):
            raise reader.error(value_node, f"metrics[{key!r}]", f"expected a string, got {node_kind(value_node)}")
        # Upstream decodes metrics into map[string]string: scalars keep their text.
        metrics[key] = "" if is_null(value_node) else str(value_node.value)
    return metrics


def load_config(
    text: str,
    source: str = "<config>",
    *,
    known_actions: Collection[str] | None,
    known_plugins: Collection[str] | None,
    conf_key: str | None = None,
) -> SchedulerConfig:
    """Parse and validate a scheduler configuration.

    ``text`` is either the bare configuration or a ConfigMap manifest whose ``data`` has a
    ``*.conf`` key (``conf_key`` picks one when there are several).  ``known_actions`` and
    ``known_plugins`` are the names this build implements; ``None`` skips that check.
    Plugin switches are defaulted as upstream does.  Raises :class:`ConfigError`.
    """
    root, label, offset = select_config(text, source, conf_key)
    reader = Reader(label, offset)
    if root is None:
        raise ConfigError("empty configuration: 'actions' and 'tiers' are required", source=label, line=1 + offset)

    fields: dict[str, tuple[Node, Node]] = {}
    for key, key_node, value_node in reader.mapping(root, "", "a mapping with 'actions' and 'tiers'"):
        if key in _TOP_LEVEL_KEYS:
            fields[key] = (key_node, value_node)
        else:
            reader.warn(key_node, key, "unknown key, ignored" + closest(key, _TOP_LEVEL_KEYS))

    # Upstream splits an absent actions string into [""] and fails on the empty name.
    if "actions" not in fields or is_null(fields["actions"][1]):
        node = fields["actions"][1] if "actions" in fields else root
        raise reader.error(node, "actions", 'missing; list the actions to run, e.g. "enqueue, allocate, backfill"')
    actions = _parse_actions(reader, fields["actions"][1], known_actions)

    if "tiers" in fields:
        tiers = _parse_tiers(reader, fields["tiers"][1], known_plugins)
    else:
        tiers = []
    if not any(tier.plugins for tier in tiers):
        # Upstream accepts this, but a session without plugins has no gang, no predicates.
        reader.warn(fields["tiers"][0] if "tiers" in fields else root, "tiers", "no plugins configured")

    configurations: dict[str, dict[str, Any]] = {}
    origins: dict[str, Origin] = {}
    lines: dict[str, dict[str, int]] = {}
    if "configurations" in fields:
        configurations, origins, lines = _parse_configurations(
            reader, fields["configurations"][1], known_actions, actions
        )
    metrics = _parse_metrics(reader, fields["metrics"][1]) if "metrics" in fields else {}

    return SchedulerConfig(
        actions=actions,
        tiers=tiers,
        configurations=configurations,
        metrics=metrics,
        source=label,
        warnings=reader.warnings,
        configuration_origins=origins,
        configuration_lines=lines,
    )


def load_config_file(
    path: str | os.PathLike[str],
    *,
    known_actions: Collection[str] | None,
    known_plugins: Collection[str] | None,
    conf_key: str | None = None,
) -> SchedulerConfig:
    """Read ``path`` (UTF-8) and :func:`load_config` it; I/O problems are ConfigErrors too."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read configuration: {exc}", source=source) from None
    return load_config(
        text, source, known_actions=known_actions, known_plugins=known_plugins, conf_key=conf_key
    )


def default_config(
    *,
    known_actions: Collection[str] | None = None,
    known_plugins: Collection[str] | None = None,
) -> SchedulerConfig:
    """Volcano's built-in configuration, defaulted; validated against the given names."""
    return load_config(
        DEFAULT_CONFIG_TEXT,
        "<built-in default>",
        known_actions=known_actions,
        known_plugins=known_plugins,
    )

