"""``network-topology-aware``: Volcano's HyperNode placement of gangs (v1.12+), by config name.

tidesched does not place by network topology yet: a config naming the plugin is taken, the
plugin registers no hooks, and the scheduler says at start (and ``explain`` says) that
HyperNodes and PodGroups' ``networkTopology`` constraints are not honoured, rather than
refusing a Volcano v1.15 config outright.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidesched.framework.plugin import Plugin

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session


class NetworkTopologyAwarePlugin(Plugin):
    name = "network-topology-aware"

    @classmethod
    def unhonoured(cls, arguments: "Arguments") -> list[str]:
        return ["HyperNodes and PodGroups' spec.networkTopology are not read; gangs are placed "
                "without regard to network topology"]

    def on_session_open(self, ssn: "Session") -> None:
        pass
