"""What an experiment places pods with: a bundled policy by name (``examples/policies/<name>.yaml``:
``random``, ``dotprod``, ``gpuclustering``, ``gpupacking``, ``bestfit``, ``fgd``) or any
scheduler config. Two paths (``run.run_one`` takes the one the config's plugins call for):

* a config with GPU placement plugins (``plugins/gpu_policy.py``) with a non-zero weight:
  ``placement.place_all``, the fast loop over those plugins' scores (their arguments and
  weights; the config's other plugins take no part);
* any other config: ``sessions.place_by_sessions``, one scheduling session per arriving pod with
  the whole config (its actions and plugins: binpack, nodeorder, predicates, deviceshare, …).
  Such a config needs an ``allocate`` action: nothing else places a pod that asks for resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig, load_config, load_config_file
from tidesched.plugins.fgd import FgdPlugin
from tidesched.plugins.gpu_policy import GpuPolicy
from tidesched.scheduler import PLUGINS, known_actions, known_plugins, load_registries, validate_arguments

POLICY_DIR = Path(__file__).resolve().parents[1] / "examples" / "policies"
POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
# The paper's names for the bundled policies (its result tables' sc_policy column).
PAPER_NAMES = {"random": "01-Random", "dotprod": "02-DotProd", "gpuclustering": "03-GpuClustering",
               "gpupacking": "04-GpuPacking", "bestfit": "05-BestFit", "fgd": "06-FGD"}


@dataclass(frozen=True)
class PolicySpec:
    """A policy to run: its label (the bundled name or the config file's stem) and config text."""

    label: str
    text: str
    source: str


def bundled(name: str) -> PolicySpec:
    path = POLICY_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown policy {name!r} (bundled: {', '.join(POLICIES)})")
    return PolicySpec(name, path.read_text(), str(path))


def from_file(path: str | Path) -> PolicySpec:
    p = Path(path)
    # errors name the file
    check_placeable(load_config_file(p, known_actions=known_actions(), known_plugins=known_plugins()))
    return PolicySpec(p.stem, p.read_text(), str(p))


def parse(spec: PolicySpec) -> SchedulerConfig:
    return load_config(spec.text, spec.source, known_actions=known_actions(), known_plugins=known_plugins())


def gpu_policies(config: SchedulerConfig) -> list[tuple[GpuPolicy, int]]:
    """The config's GPU placement plugins with a non-zero weight, in tier order (may be none)."""
    load_registries()
    out: list[tuple[GpuPolicy, int]] = []
    for tier in config.tiers:
        for option in tier.plugins:
            cls = PLUGINS.get(option.name)
            if cls is None or not issubclass(cls, GpuPolicy):
                continue
            plugin = cls(option.args)
            if plugin.weight:
                out.append((plugin, plugin.weight))
    return out


def placement_plugins(config: SchedulerConfig) -> list[tuple[GpuPolicy, int]]:
    """The config's GPU placement plugins (see ``gpu_policies``); refuses a config without one."""
    out = gpu_policies(config)
    if not out:
        raise ConfigError(
            f"{config.source}: no GPU placement plugin ({', '.join(POLICIES)}) with a non-zero weight; "
            "the experiment's fast loop places pods with those plugins' scores")
    return out


def check_placeable(config: SchedulerConfig) -> SchedulerConfig:
    """The config, its arguments checked, if an experiment can place pods with it: GPU placement
    plugins (the fast loop), or an ``allocate`` action (one session per pod)."""
    validate_arguments(config)
    if not gpu_policies(config) and "allocate" not in config.actions:
        raise ConfigError(
            f"{config.source}: neither a GPU placement plugin ({', '.join(POLICIES)}) with a non-zero weight "
            f"nor an allocate action (actions: {', '.join(config.actions) or 'none'}); "
            "nothing in this config would place the experiment's pods")
    return config


def measuring_fgd(policies: list[tuple[GpuPolicy, int]]) -> FgdPlugin:
    """The FGD settings that measure fragmentation: the config's fgd plugin, else the paper's."""
    for plugin, _ in policies:
        if isinstance(plugin, FgdPlugin):
            return plugin
    from tidesched.framework.arguments import Arguments

    return FgdPlugin(Arguments({}, owner="plugin 'fgd'"))
