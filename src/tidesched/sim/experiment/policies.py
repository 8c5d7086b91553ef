"""Which GPU placement plugins an experiment places with: a bundled policy by name
(``examples/policies/<name>.yaml``: ``random``, ``dotprod``, ``gpuclustering``, ``gpupacking``,
``bestfit``, ``fgd``) or any scheduler config; the experiment takes the config's GPU placement
plugins (``plugins/gpu_policy.py``) with their arguments and weights. Other scorers of a config
(nodeorder, binpack, …) are not part of the experiment's placement loop, which a config made
of them alone is told."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidesched.framework.arguments import ConfigError
from tidesched.framework.config import SchedulerConfig, load_config, load_config_file
from tidesched.plugins.fgd import FgdPlugin
from tidesched.plugins.gpu_policy import GpuPolicy
from tidesched.scheduler import PLUGINS, known_actions, known_plugins, load_registries

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
    load_config_file(p, known_actions=known_actions(), known_plugins=known_plugins())  # errors name the file
    return PolicySpec(p.stem, p.read_text(), str(p))


def parse(spec: PolicySpec) -> SchedulerConfig:
    return load_config(spec.text, spec.source, known_actions=known_actions(), known_plugins=known_plugins())


def placement_plugins(config: SchedulerConfig) -> list[tuple[GpuPolicy, int]]:
    """The config's GPU placement plugins with a non-zero weight, in tier order."""
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
    if not out:
        raise ConfigError(
            f"{config.source}: no GPU placement plugin ({', '.join(POLICIES)}) with a non-zero weight; "
            "the experiment places pods with those plugins' scores")
    return out


def measuring_fgd(policies: list[tuple[GpuPolicy, int]]) -> FgdPlugin:
    """The FGD settings that measure fragmentation: the config's fgd plugin, else the paper's."""
    for plugin, _ in policies:
        if isinstance(plugin, FgdPlugin):
            return plugin
    from tidesched.framework.arguments import Arguments

    return FgdPlugin(Arguments({}, owner="plugin 'fgd'"))
