"""The contract fuzzed inputs are held to (REL-1, REL-2), as plain functions.

* ``check_snapshot``: the loader/snapshot accepts each object or reports it with the file, the
  object and the field; nothing raises.
* ``check_session``: a session over what was accepted finishes, and its binds over-commit no
  node (all pods on the node + this session's binds <= allocatable in every dimension the new
  pods request; pod slots too), no queue capability (capacity/proportion) and no card quota
  (capacity-card), judged from the parsed records, not from the scheduler's own arrays; the
  session's node table agrees.
* ``check_cli``: ``tidesched schedule`` exits 0, or 2 with a message naming the file; never a
  traceback.
* ``check_cache``: the cache ``run`` and ``simulate`` feed drops a malformed object with a
  Warning event naming it and its field.

An ``AssertionError`` is a broken promise; any other exception is a crash. Both fail a test;
``benchmarks/fuzz.py`` counts them apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tidesched.model.cards import CardCatalog, parse_card_quota, pod_card_request
from tidesched.model.loader import Manifest
from tidesched.model.objects import Pod
from tidesched.model.resource import Resource
from tidesched.model.snapshot import ClusterSnapshot, UnknownKindError, build_snapshot
from tidesched.model.status import ALLOCATED_STATUSES, TaskStatus
from tidesched.scheduler import config_from_text, open_session, run_actions

SCHEDULER_NAMES = ("volcano",)
TOLERANCE = 0.5  # internal units (millicores, bytes, milli-cards): float noise only

_PLUGINS_T1 = """\
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
"""
CONFIGS: dict[str, str] = {
    "default": """\
actions: "enqueue, allocate, preempt, backfill"
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
""",
    "capacity": f"""\
actions: "enqueue, allocate, reclaim, backfill"
tiers:
{_PLUGINS_T1}- plugins:
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
""",
    "capacity-hierarchy": f"""\
actions: "enqueue, allocate, reclaim, backfill"
tiers:
{_PLUGINS_T1}- plugins:
  - name: predicates
  - name: capacity
    enableHierarchy: true
  - name: nodeorder
""",
    "capacity-card": f"""\
actions: "enqueue, allocate, reclaim, preempt, backfill"
tiers:
{_PLUGINS_T1}- plugins:
  - name: predicates
  - name: capacity-card
    arguments: {{cardUnlimitedCpuMemory: true}}
  - name: nodeorder
""",
}
_CONFIG_CACHE: dict[str, Any] = {}


def config(name: str) -> Any:
    if name not in _CONFIG_CACHE:
        _CONFIG_CACHE[name] = config_from_text(CONFIGS[name], f"<{name}>")
    return _CONFIG_CACHE[name]


# -- the loader / snapshot ----------------------------------------------------------------------

# The first segment of a field path: top-level fields of the kinds read.
_FIELD = re.compile(r"^(kind|apiVersion|value|globalDefault|metadata|spec|status|items)\b")


def manifests(objs: Sequence[Any], source: str = "fuzz.yaml") -> list[Manifest]:
    return [Manifest(f"{source}#{i + 1}", o) for i, o in enumerate(objs)]


def check_snapshot(objs: Sequence[Any], *, strict_kinds: bool = False) -> ClusterSnapshot | None:
    """Build a snapshot of ``objs`` as read from a file; every problem must name the file, the
    object and the field. Returns None when an unknown kind stopped a strict read (the CLI's
    exit 2), which is itself checked for naming the file."""
    ms = manifests(objs)
    try:
        snap = build_snapshot(ms, scheduler_names=SCHEDULER_NAMES, strict_kinds=strict_kinds)
    except UnknownKindError as exc:
        assert strict_kinds, "an unknown kind raised outside a strict read"
        assert re.match(r"^fuzz\.yaml#\d+: unknown kind ", str(exc)), str(exc)
        return None
    for p in snap.problems:
        assert p.type == "Warning", p
        assert re.match(r"^fuzz\.yaml#\d+: ", p.message), f"problem does not name the file: {p.message!r}"
        rest = p.message.split(": ", 1)[1]
        if p.reason == "InvalidObject":
            if rest.startswith("field kind") or rest.startswith("expected a Kubernetes object"):
                continue  # the object has no kind to name it by
            assert rest.startswith(f"{p.kind} "), f"problem does not name the object: {p.message!r}"
            obj_name = f"{p.namespace}/{p.name}" if p.namespace else p.name
            after = rest[len(p.kind) + 1 + len(obj_name):]
            assert rest[len(p.kind) + 1:].startswith(obj_name) and after.startswith(": "), \
                f"problem does not name the object: {p.message!r}"
            assert _FIELD.match(after[2:]), f"problem does not name the field: {p.message!r}"
        elif p.reason == "DuplicateObject":
            assert " also defined " in rest, p.message
        elif p.reason == "UnknownKind":
            assert rest.startswith("unknown kind "), p.message
        else:
            raise AssertionError(f"unexpected problem reason {p.reason}: {p.message}")
    return snap


# -- the session --------------------------------------------------------------------------------


def _in_session_statuses(pod: Pod) -> bool:
    return pod.status not in (TaskStatus.PENDING, TaskStatus.SUCCEEDED, TaskStatus.FAILED) and bool(pod.node_name)


def check_session(snap: ClusterSnapshot, config_name: str) -> Any:
    """Run a session over ``snap`` and check REL-2 on its binds. Returns the decisions."""
    ssn = open_session(snap, config(config_name), scheduler_names=SCHEDULER_NAMES)
    decisions = run_actions(ssn)
    pods = {p.key: p for p in snap.pods}
    nodes = {n.name: n for n in snap.nodes}
    new_by_node: dict[str, list[str]] = {}
    for pk, node in decisions.bound.items():
        assert pk in pods, f"bound unknown pod {pk}"
        assert pods[pk].status == TaskStatus.PENDING and not pods[pk].node_name, f"bound a pod that was not pending: {pk}"
        assert node in nodes, f"bound {pk} to missing node {node}"
        assert nodes[node].ready, f"bound {pk} to NotReady node {node}"
        new_by_node.setdefault(node, []).append(pk)

    # Nodes: every pod that occupies the node (ours or not, terminating or not) plus the binds.
    for node_name, new in sorted(new_by_node.items()):
        asked: set[str] = set()
        for pk in new:
            asked.update(pods[pk].resreq.resource_names())
        used, count = Resource(), 0
        for p in snap.pods:
            if (p.node_name == node_name and _in_session_statuses(p)) or p.key in new:
                used.add(p.resreq)
                count += 1
        alloc = nodes[node_name].allocatable
        for dim in sorted(asked):
            assert used.get(dim) <= alloc.get(dim) + TOLERANCE, (
                f"node {node_name} over-committed in {dim}: {used.get(dim)} > {alloc.get(dim)} (bound {new})")
        assert count <= alloc.max_task_num, f"node {node_name} holds {count} pods > {alloc.max_task_num}"
        # The session's own arrays agree.
        t = ssn.table
        row = t.index[node_name]
        for dim in sorted(asked):
            col = t.dim_index[dim]
            assert t.used[row, col] <= t.allocatable[row, col] + TOLERANCE, f"node table over-committed: {node_name} {dim}"

    if not decisions.bound:
        return decisions
    queues = {q.name: q for q in snap.queues}
    groups = {pg.key: pg for pg in snap.podgroups}

    def queue_of(p: Pod) -> str | None:
        if p.scheduler_name not in SCHEDULER_NAMES or not p.group_name:
            return None
        pg = groups.get(f"{p.meta.namespace}/{p.group_name}")
        return pg.queue if pg is not None and pg.queue in queues else None

    bound_queues: dict[str, list[str]] = {}
    for pk in decisions.bound:
        q = queue_of(pods[pk])
        if q is not None:
            bound_queues.setdefault(q, []).append(pk)

    if config_name in ("default", "capacity", "capacity-hierarchy"):
        # Queue capability: allocated tasks of the queue plus the binds, in the dimensions the
        # binds request and the capability sets (with a hierarchy, a queue's own usage is
        # bounded by its own capability too; a parent's subtree is not checked here).
        for q, new in sorted(bound_queues.items()):
            cap = queues[q].capability
            if not queues[q].capability_set:
                continue
            used = Resource()
            for p in snap.pods:
                if queue_of(p) == q and (p.key in decisions.bound or (p.status in ALLOCATED_STATUSES and p.meta.deletion == 0)):
                    used.add(p.resreq)
            asked = {d for pk in new for d in pods[pk].resreq.resource_names()}
            for dim in sorted(asked & set(cap.resource_names())):
                assert used.get(dim) <= cap.get(dim) + TOLERANCE, (
                    f"queue {q} over its capability in {dim}: {used.get(dim)} > {cap.get(dim)} (bound {sorted(new)})")

    if config_name == "capacity-card":
        catalog = CardCatalog.build((n.name, n.meta.labels, n.allocatable.scalars) for n in snap.nodes)

        def charge(p: Pod, node: str) -> tuple[str, float] | None:
            req = pod_card_request(p.meta.annotations, p.resreq.scalars, catalog)
            if req.count <= 0 or not req.resources:
                return None
            nc = catalog.nodes.get(node)
            model = nc.model_for_resource(req.resources[0]) if nc is not None else None
            return (model or "?", req.count)

        for q, new in sorted(bound_queues.items()):
            quota, _ = parse_card_quota(queues[q].meta.annotations.get("volcano.sh/card.quota"))
            used_cards: dict[str, float] = {}
            charged_models: set[str] = set()
            for p in snap.pods:
                if queue_of(p) != q:
                    continue
                node = decisions.bound.get(p.key) or (p.node_name if p.status in ALLOCATED_STATUSES and p.meta.deletion == 0 else "")
                if not node:
                    continue
                c = charge(p, node)
                if c is not None:
                    used_cards[c[0]] = used_cards.get(c[0], 0.0) + c[1]
                    if p.key in decisions.bound:
                        charged_models.add(c[0])
            for model in sorted(charged_models):
                assert used_cards[model] <= quota.get(model, 0.0) + 1e-6, (
                    f"queue {q} holds {used_cards[model] / 1000:g} {model} cards, quota {quota.get(model, 0.0) / 1000:g}")
    return decisions


# -- the command line ---------------------------------------------------------------------------


def check_cli(objs: Sequence[Any], tmp_dir: Any, runner: Any) -> int:
    """``tidesched schedule FILE -o json``: exit 0 with JSON, or 2 with a message naming the
    file; never a traceback. The objects are written as JSON (any value survives)."""
    from tidesched.cli import app

    from tidesched.model.loader import InputError, load_text

    path = tmp_dir / "fuzz.json"
    text = json.dumps(list(objs), ensure_ascii=True, allow_nan=True)
    path.write_text(text, encoding="utf-8")
    # What the command must say: exit 2 exactly when the file cannot be read, holds an unknown
    # kind or an object the snapshot refuses.
    try:
        snap = build_snapshot(load_text(text, str(path)), scheduler_names=SCHEDULER_NAMES)
        expected = 2 if snap.problems else 0
    except (InputError, UnknownKindError):
        expected = 2
    result = runner.invoke(app, ["schedule", str(path), "-o", "json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == expected, f"exit {result.exit_code}, expected {expected}: {result.output[-2000:]}"
    if result.exit_code == 2:
        text = result.output
        assert "error:" in text and str(path.name) in text, text[-2000:]
        assert "Traceback" not in text
    else:
        json.loads(result.stdout)
    return result.exit_code


# -- the cache (run, simulate) ------------------------------------------------------------------

_KIND_KEYS = {"Pod": True, "PodGroup": True, "PodDisruptionBudget": True, "Node": False, "Queue": False,
              "PriorityClass": False}


def check_cache(objs: Sequence[Any], config_name: str) -> None:
    """Feed ``objs`` to a ClusterCache as a list+watch would (kind and key from the object, as
    the store files it) and open a session: malformed ones are Warning events naming the
    object and the field, the session runs."""
    from tidesched.model.cache import ClusterCache

    cache = ClusterCache(scheduler_names=SCHEDULER_NAMES)
    fed: dict[tuple[str, str], Any] = {}
    for o in objs:
        if not isinstance(o, Mapping) or not isinstance(o.get("kind"), str) or o["kind"] not in _KIND_KEYS:
            continue  # the store only lists these kinds, and only mappings come off the wire
        meta = o.get("metadata") if isinstance(o.get("metadata"), Mapping) else {}
        name, ns = meta.get("name"), meta.get("namespace") or "default"
        if not isinstance(name, str) or not isinstance(ns, str):
            continue  # the API server never serves such an object
        key = f"{ns}/{name}" if _KIND_KEYS[o["kind"]] else name
        cache.update(o["kind"], key, o)
        fed[(o["kind"], key)] = o
    snap, state = cache.open()
    for p in snap.problems:
        assert p.type == "Warning" and p.reason == "InvalidObject", p
        key = f"{p.namespace}/{p.name}" if p.namespace else p.name
        prefix = f"{p.kind} {key}: "
        assert p.message.startswith(prefix) and _FIELD.match(p.message[len(prefix):]), p.message
    ssn = open_session(snap, config(config_name), scheduler_names=SCHEDULER_NAMES, state=state)
    run_actions(ssn)


# -- scheduler configs --------------------------------------------------------------------------


def check_config(text: str, objs: Sequence[Any]) -> bool:
    """A config text is accepted or refused with a ConfigError naming the file (and, where a
    field is at fault, its line and field); an accepted one runs a session over ``objs``.
    Returns whether it was accepted."""
    from tidesched.framework.arguments import ConfigError

    try:
        cfg = config_from_text(text, "fuzz.conf")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.conf"), f"config error does not name the file: {exc}"
        assert "Traceback" not in str(exc)
        return False
    snap = build_snapshot(objs, scheduler_names=SCHEDULER_NAMES)
    run_actions(open_session(snap, cfg, scheduler_names=SCHEDULER_NAMES))
    return True


# -- the simulator ------------------------------------------------------------------------------


def check_simulate(objs: Sequence[Any], duration: float = 900.0) -> bool:
    """``simulate`` over the objects as a manifest file: refused with a ScenarioError naming the
    file (an unknown kind, a nameless object, a bad simulator annotation), or run for
    ``duration`` simulated seconds with no invariant broken (REL-1 session crash, REL-2
    over-commit, TIDE-6, TIDE-4) and every object the scheduler refuses reported as a Warning
    event naming the file, the object and the field. Returns whether it ran."""
    from tidesched.model.cache import ClusterCache
    from tidesched.sim.runner import run
    from tidesched.sim.vocabulary import ScenarioError
    from tidesched.sim.scenario import scenario_from_manifests

    from tidesched.model.loader import InputError, load_text

    try:  # as `simulate fuzz.json` reads it
        ms = load_text(json.dumps(list(objs), allow_nan=True), "fuzz.json")
        sc = scenario_from_manifests(ms, "fuzz", "fuzz.json")
    except (InputError, ScenarioError) as exc:
        assert re.match(r"^fuzz\.json\[\d+\]", str(exc)), f"scenario error does not name the file: {exc}"
        return False
    sc.duration = duration
    sim = run(sc)
    violations = sim.result["invariants"]["violations"]
    assert not violations, violations[:3]
    warned = [e["message"] for e in sim.result["events"] if e["type"] == "Warning"]
    # Every object the scheduler refuses is named, with its file, in a Warning.
    cache = ClusterCache(scheduler_names=SCHEDULER_NAMES)
    for m in ms:
        kind = m.obj.get("kind")
        if kind in _KIND_KEYS:
            _record, problem = cache.parse(kind, m.source, m.obj)
            if problem is not None:
                field_msg = problem.message.split(": ", 1)[1]
                assert any(w.startswith(f"{m.source}: ") and w.endswith(field_msg) for w in warned), (
                    f"no Warning names {m.source} ({field_msg})")
    return True
