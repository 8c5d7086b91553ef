"""Alibaba GPU trace loader: tiny hand-written CSV snippets, and a slice of the real trace when present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tidesched.model.snapshot import build_snapshot
from tidesched.sim import events as ev, scenario as sc, trace as tr, vocabulary as vocab
from tidesched.sim.events import TimedEvent
from tidesched.sim.trace import TraceError, load_trace

REAL = Path(__file__).resolve().parents[3] / "shared" / "traces" / "alibaba-gpu-v2023"
needs_real = pytest.mark.skipif(not (REAL / "csv").is_dir(), reason=f"Alibaba trace not found at {REAL}")

NODES = """sn,cpu_milli,memory_mib,gpu,model
n-cpu,32000,262144,0,
n-t4-a,96000,393216,4,T4
n-t4-b,96000,393216,4,T4
n-v100,96000,786432,8,V100M32
"""

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
PODS = POD_HEADER + """p-ls,12000,16384,1,1000,,LS,Running,100,1100,100
p-be-share,6000,12288,1,460,T4,BE,Failed,150,400,160
p-be-8,64000,131072,8,1000,V100M32|V100M32,BE,Succeeded,200,5200,200
p-cpu,2000,4096,0,0,,LS,Running,300,900,300
p-pend,4000,8192,1,1000,T4|V100M32|T4,Burstable,Pending,400,460,
p-guar,1000,1024,2,1000,,Guaranteed,Running,500,700,500
"""


def write_trace(tmp_path: Path, pods: str = PODS, nodes: str = NODES) -> Path:
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir(parents=True, exist_ok=True)
    (csv_dir / tr.DEFAULT_POD_FILE).write_text(pods)
    (csv_dir / tr.DEFAULT_NODE_FILE).write_text(nodes)
    return tmp_path


def submitted(events: list[TimedEvent]) -> dict[str, dict[str, Any]]:
    """name → manifest of every submitted workload."""
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.action == "submit":
            for m in e.args["objects"]:
                out[m.obj["metadata"]["name"]] = dict(m.obj)
    return out


def times(events: list[TimedEvent]) -> dict[tuple[str, str], float]:
    """(action, pod name) → time."""
    out: dict[tuple[str, str], float] = {}
    for e in events:
        if e.action == "submit":
            out[("submit", e.args["objects"][0].obj["metadata"]["name"])] = e.at
        else:
            out[(e.action, e.args["name"].split("/")[-1])] = e.at
    return out


def pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "Deployment":
        return obj["spec"]["template"]
    return obj["spec"]["tasks"][0]["template"]


def requests(obj: dict[str, Any]) -> dict[str, str]:
    return pod_template(obj)["spec"]["containers"][0]["resources"]["requests"]


def build_small(tmp_path: Path, **kw: Any) -> tuple[list[dict[str, Any]], list[tr.TraceEvent], tr.TraceSummary]:
    root = write_trace(tmp_path)
    nodes = tr.read_nodes(root / "csv" / tr.DEFAULT_NODE_FILE)
    pods = tr.read_pods(root / "csv" / tr.DEFAULT_POD_FILE)
    return tr.build(nodes, pods, **kw)


# --------------------------------------------------------------------------- nodes


def test_nodes_get_card_labels_and_allocatable(tmp_path: Path) -> None:
    objects, _events = load_trace(write_trace(tmp_path), shared_fraction=0.0, gpu_sharing="mps")
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    assert set(nodes) == {"n-cpu", "n-t4-a", "n-t4-b", "n-v100"}
    cpu = nodes["n-cpu"]
    assert "nvidia.com/gpu.product" not in cpu["metadata"]["labels"]
    assert cpu["status"]["allocatable"] == {"cpu": "32000m", "memory": "262144Mi", "pods": "1001"}
    v100 = nodes["n-v100"]
    labels = v100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "Tesla-V100-32GB"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "32768"
    assert labels["alibabacloud.com/gpu-card-model"] == "V100M32"
    assert v100["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    # the scheduling core reads them without complaint
    snap = build_snapshot([o for o in objects if o["kind"] in ("Node", "Queue")])
    assert not snap.problems
    assert {n.name for n in snap.nodes} == set(nodes)


def test_shared_nodes_advertise_mps_slices(tmp_path: Path) -> None:
    objects, _events, summary = build_small(tmp_path, shared_fraction=0.5, seed=1, gpu_sharing="mps")
    shared = [o for o in objects if o["kind"] == "Node" and "nvidia.com/gpu.shared" in o["status"]["allocatable"]]
    # half of the T4 GPUs is one of the two 4-GPU nodes; the single 8-GPU V100 node is as far from
    # half shared as unshared, so it stays whole
    t4_shared = [o for o in shared if o["metadata"]["labels"]["nvidia.com/gpu.product"] == "Tesla-T4"]
    assert len(t4_shared) == 1
    node = t4_shared[0]
    assert node["status"]["allocatable"]["nvidia.com/gpu.shared"] == "40"
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "10"
    assert summary.cards["Tesla-T4/mps-16g*1/10"] == 40
    assert summary.cards["Tesla-T4"] == 4


def test_shared_fraction_defaults_to_the_fractional_demand(tmp_path: Path) -> None:
    _o, _e, summary = build_small(tmp_path, gpu_sharing="mps")
    # GPU demand in milli: 1000 + 460 + 8000 + 1000 + 2000; fractional 460
    assert summary.shared_fraction == pytest.approx(460 / 12460)
    assert summary.fractional == 1


def test_shared_node_choice_is_seeded_and_deterministic(tmp_path: Path) -> None:
    a = build_small(tmp_path, shared_fraction=0.5, seed=3, gpu_sharing="mps")
    b = build_small(tmp_path, shared_fraction=0.5, seed=3, gpu_sharing="mps")
    assert a[0] == b[0]
    choices = set()
    for seed in range(12):
        objs = build_small(tmp_path, shared_fraction=0.5, seed=seed, gpu_sharing="mps")[0]
        choices.add(tuple(o["metadata"]["name"] for o in objs
                          if o["kind"] == "Node" and "nvidia.com/gpu.shared" in o["status"]["allocatable"]))
    assert len(choices) > 1  # the seed matters


# --------------------------------------------------------------------------- workloads


def test_pods_become_deployments_and_volcano_jobs(tmp_path: Path) -> None:
    _objects, events = load_trace(write_trace(tmp_path), shared_fraction=0.0, gpu_sharing="mps")
    subs = submitted(events)
    assert set(subs) == {"p-ls", "p-be-share", "p-be-8", "p-cpu", "p-pend", "p-guar"}
    ls = subs["p-ls"]
    assert ls["kind"] == "Deployment" and ls["spec"]["replicas"] == 1
    assert ls["metadata"]["annotations"]["volcano.sh/service.type"] == "inference"
    tmpl = pod_template(ls)
    assert tmpl["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "queue-inference"
    # no gpu_spec: any model of the cluster, in model-table order
    assert tmpl["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-T4|Tesla-V100-32GB"
    assert requests(ls) == {"cpu": "12000m", "memory": "16384Mi", "nvidia.com/gpu": "1"}

    be = subs["p-be-8"]
    assert be["kind"] == "Job" and be["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert be["spec"]["queue"] == "queue-training" and be["spec"]["minAvailable"] == 1
    assert be["metadata"]["annotations"]["volcano.sh/service.type"] == "training"
    assert json.loads(be["metadata"]["annotations"]["volcano.sh/card.request"]) == {"Tesla-V100-32GB": 8}
    assert pod_template(be)["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-V100-32GB"  # de-duplicated
    assert requests(be)["nvidia.com/gpu"] == "8"

    cpu = subs["p-cpu"]
    assert "volcano.sh/card.name" not in pod_template(cpu)["metadata"]["annotations"]
    assert set(requests(cpu)) == {"cpu", "memory"}
    assert subs["p-pend"]["kind"] == "Job"  # Burstable → training
    assert subs["p-guar"]["kind"] == "Deployment"  # Guaranteed → inference
    assert pod_template(subs["p-pend"])["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-T4|Tesla-V100-32GB"


def test_fractional_gpu_becomes_mps_slices(tmp_path: Path) -> None:
    _objects, events = load_trace(write_trace(tmp_path), gpu_sharing="mps")
    share = submitted(events)["p-be-share"]
    assert requests(share)["nvidia.com/gpu.shared"] == "5"  # ceil(460 * 10 / 1000)
    assert "nvidia.com/gpu" not in requests(share)
    assert pod_template(share)["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-T4/mps-16g*1/10"
    _objects, events = load_trace(write_trace(tmp_path), mps_replicas=4, gpu_sharing="mps")
    share = submitted(events)["p-be-share"]
    assert requests(share)["nvidia.com/gpu.shared"] == "2"  # ceil(1.84)
    assert pod_template(share)["metadata"]["annotations"]["volcano.sh/card.name"] == "Tesla-T4/mps-16g*1/4"


def test_qos_map_override(tmp_path: Path) -> None:
    _o, events, summary = build_small(tmp_path, qos_map={"LS": "training"})
    assert summary.inference == 1 and summary.training == 5
    with pytest.raises(TraceError, match="qos_map"):
        build_small(tmp_path, qos_map={"LS": "batch"})


# --------------------------------------------------------------------------- time


def test_arrivals_and_run_times(tmp_path: Path) -> None:
    _o, events = load_trace(write_trace(tmp_path))
    at = times(events)
    assert at[("submit", "p-ls")] == 0.0  # relative to the first pod
    assert at[("submit", "p-be-share")] == 50.0
    assert at[("delete", "p-ls")] == 1000.0  # ran 100 → 1100
    assert at[("delete", "p-cpu")] == 200.0 + 600.0
    assert all(a.at <= b.at for a, b in zip(events, events[1:]))
    dele = [e for e in events if e.action == "delete"]
    assert {e.args["kind"] for e in dele} == {"Deployment"}
    assert {e.args["name"] for e in dele} == {"openb/p-ls", "openb/p-cpu", "openb/p-guar"}
    # training run time from scheduled (160 → 400) rides on the pod template
    be = submitted(events)["p-be-share"]
    assert pod_template(be)["metadata"]["annotations"][tr.DURATION_ANNOTATION] == "240"
    # never scheduled: run time counted from creation
    assert pod_template(submitted(events)["p-pend"])["metadata"]["annotations"][tr.DURATION_ANNOTATION] == "60"


def test_time_compression_divides_gaps_and_durations(tmp_path: Path) -> None:
    _o, events = load_trace(write_trace(tmp_path), time_compression=10.0)
    at = times(events)
    assert at[("submit", "p-be-share")] == 5.0
    assert at[("delete", "p-ls")] == 100.0
    be = submitted(events)["p-be-share"]
    assert pod_template(be)["metadata"]["annotations"][tr.DURATION_ANNOTATION] == "24"
    with pytest.raises(TraceError, match="time_compression"):
        load_trace(write_trace(tmp_path), time_compression=0)


def test_fill_submits_everything_at_zero(tmp_path: Path) -> None:
    _o, events = load_trace(write_trace(tmp_path), fill=True)
    subs = [e for e in events if e.action == "submit"]
    assert len(subs) == 6 and all(e.at == 0.0 for e in subs)
    assert times(events)[("delete", "p-ls")] == 1000.0  # run times are kept


def test_limit_keeps_the_first_pods(tmp_path: Path) -> None:
    _o, events = load_trace(write_trace(tmp_path), limit=2)
    assert set(submitted(events)) == {"p-ls", "p-be-share"}


# --------------------------------------------------------------------------- queues


def test_queues_online_and_offline_with_cluster_sized_quota(tmp_path: Path) -> None:
    objects, _ = load_trace(write_trace(tmp_path), shared_fraction=0.0, gpu_sharing="mps")
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Queue"}
    assert set(queues) == {"queue-inference", "queue-training"}
    online, offline = queues["queue-inference"], queues["queue-training"]
    assert online["spec"]["priority"] > offline["spec"]["priority"]
    assert online["spec"]["reclaimable"] is False and offline["spec"]["reclaimable"] is True
    quota = json.loads(offline["metadata"]["annotations"]["volcano.sh/card.quota"])
    assert quota == {"Tesla-T4": 8, "Tesla-V100-32GB": 8}
    assert offline["spec"]["capability"] == {"cpu": "320000m", "memory": "1835008Mi", "nvidia.com/gpu": "16"}
    objects, _ = load_trace(write_trace(tmp_path), shared_fraction=0.0, quota_fraction=0.5, gpu_sharing="mps")
    q = [o for o in objects if o["kind"] == "Queue"][0]
    assert json.loads(q["metadata"]["annotations"]["volcano.sh/card.quota"]) == {"Tesla-T4": 4, "Tesla-V100-32GB": 4}


# --------------------------------------------------------------------------- model map


def test_model_map_dict_and_yaml(tmp_path: Path) -> None:
    path = write_trace(tmp_path)
    objects, _ = load_trace(path, model_map={"T4": "NVIDIA-T4", "V100M32": {"name": "V100", "memory_mib": 32510}},
                            shared_fraction=0.0, gpu_sharing="mps")
    products = {o["metadata"]["labels"].get("nvidia.com/gpu.product") for o in objects if o["kind"] == "Node"}
    assert products == {None, "NVIDIA-T4", "V100"}
    mm = tmp_path / "models.yaml"
    mm.write_text("T4: My-T4\n")
    _objects, events = load_trace(path, model_map=mm, gpu_sharing="mps")
    share = submitted(events)["p-be-share"]
    assert pod_template(share)["metadata"]["annotations"]["volcano.sh/card.name"] == "My-T4/mps-16g*1/10"


@pytest.mark.parametrize("bad", [{"T4": 5}, {"T4": {"name": "x", "memory_mib": -1}}, {"T4": "a|b"}, ["T4"]])
def test_bad_model_map_is_refused(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(TraceError, match="model_map"):
        load_trace(write_trace(tmp_path), model_map=bad)


def test_unknown_model_code(tmp_path: Path) -> None:
    pods = POD_HEADER + "p1,1000,1024,1,1000,X99,BE,Running,0,10,0\n"
    with pytest.raises(TraceError, match="X99"):
        load_trace(write_trace(tmp_path, pods=pods))
    nodes = NODES + "n-x,1000,1024,1,X42\n"
    with pytest.raises(TraceError, match="X42"):
        load_trace(write_trace(tmp_path, nodes=nodes))


# --------------------------------------------------------------------------- bad input


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    pods = POD_HEADER + "p1,1000,1024,1,1000,,BE,Running,0,10,0\np2,lots,1024,1,1000,,BE,Running,0,10,0\n"
    with pytest.raises(TraceError, match=r"openb_pod_list_default\.csv:3: column 'cpu_milli'"):
        load_trace(write_trace(tmp_path, pods=pods))
    with pytest.raises(TraceError, match="missing column"):
        load_trace(write_trace(tmp_path, pods="name,cpu_milli\np,1\n"))
    with pytest.raises(TraceError, match="no such trace"):
        load_trace(tmp_path / "nowhere")
    dup = POD_HEADER + "p1,1000,1024,0,0,,BE,Running,0,10,0\np1,1000,1024,0,0,,BE,Running,0,10,0\n"
    with pytest.raises(TraceError, match="twice"):
        load_trace(write_trace(tmp_path, pods=dup))


def test_pod_file_path_and_explicit_node_file(tmp_path: Path) -> None:
    root = write_trace(tmp_path)
    a = load_trace(root)
    b = load_trace(root / "csv" / tr.DEFAULT_POD_FILE, node_file=root / "csv" / tr.DEFAULT_NODE_FILE)
    assert a[0] == b[0] and [(e.at, e.action) for e in a[1]] == [(e.at, e.action) for e in b[1]]


def test_multigpu_style_file_without_times(tmp_path: Path) -> None:
    pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,8,1000\np2,1000,1024,1,500\n"
    _o, events = load_trace(write_trace(tmp_path, pods=pods))
    assert [e.at for e in events] == [0.0, 0.0]
    subs = submitted(events)
    assert all(o["kind"] == "Job" for o in subs.values())  # no qos → training
    assert tr.DURATION_ANNOTATION not in pod_template(subs["p1"])["metadata"]["annotations"]


# --------------------------------------------------------------------------- real trace


@needs_real
def test_real_node_yaml_matches_node_csv() -> None:
    from_csv = tr.read_nodes(REAL / "csv" / "openb_node_list_gpu_node.csv")
    from_yaml = tr.read_nodes(REAL / "node_yaml" / "openb_node_list_gpu_node.yaml")
    assert len(from_csv) == 1213
    assert from_csv == from_yaml


@needs_real
def test_real_trace_slice() -> None:
    objects, events = load_trace(REAL, limit=300, time_compression=60.0)
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert len(nodes) == 1523
    gpus = sum(int(o["metadata"]["labels"].get("nvidia.com/gpu.count", 0)) for o in nodes)
    assert gpus == 6212
    subs = submitted(events)
    assert len(subs) == 300
    assert subs["openb-pod-0000"]["kind"] == "Deployment"
    assert all(e.at >= 0 for e in events)
    snap = build_snapshot([o for o in objects if o["kind"] in ("Node", "Queue")])
    assert not snap.problems and len(snap.nodes) == 1523


@needs_real
def test_real_gpuspec_file_gives_multi_model_card_names() -> None:
    _objects, events = load_trace(REAL / "csv" / "openb_pod_list_gpuspec33.csv", fill=True)
    names = [pod_template(o)["metadata"]["annotations"].get("volcano.sh/card.name", "")
             for o in submitted(events).values()]
    multi = [n for n in names if n.count("|") and "Alibaba-G3" not in n]
    assert any(n == "Tesla-V100-16GB|Tesla-V100-32GB" for n in multi)
    for n in names:
        parts = n.split("|") if n else []
        assert len(parts) == len(set(parts))  # duplicates removed


# --------------------------------------------------------------------------- engine hand-off


def test_events_are_scenario_events_and_duration_annotation_matches(tmp_path: Path) -> None:
    _o, events = load_trace(write_trace(tmp_path))
    assert all(isinstance(e, TimedEvent) for e in events)
    assert {e.action for e in events} == {"submit", "delete"}
    assert tr.DURATION_ANNOTATION == vocab.DURATION_ANNOTATION
    assert all(ev.object_kind(e.args["objects"][0].obj) in ("Job", "Deployment") for e in events if e.action == "submit")


def test_trace_scenario_is_ready_to_run(tmp_path: Path) -> None:
    scenario, summary = tr.trace_scenario(write_trace(tmp_path), fill=True, schedule_period=2.0, name="t")
    assert isinstance(scenario, ev.Scenario) and scenario.name == "t" and scenario.schedule_period == 2.0
    assert len(scenario.objects) == 4 + 2  # nodes + queues
    assert len([e for e in scenario.events if e.action == "submit"]) == summary.pods == 6


# -- simulate --trace (the command line) --------------------------------------------------------


def test_simulate_trace_from_the_command_line(tmp_path: Path) -> None:
    """The command replays exactly what the library replays for the same options."""
    from typer.testing import CliRunner

    from tidesched.cli import app
    from tidesched.sim.runner import result_json, run

    trace = write_trace(tmp_path / "trace")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    expected, _ = tr.trace_scenario(trace, name="trace trace")
    assert (out / "result.json").read_text() == result_json(run(expected).result)
    assert json.loads((out / "result.json").read_text())["summary"]["pods_bound"] >= 4
    assert (out / "report.html").stat().st_size > 0
    # --pods names another list in csv/; --limit, --fill and --compression reach the loader.
    (trace / "csv" / "two.csv").write_text(POD_HEADER + "\n".join(PODS.splitlines()[1:4]) + "\n")
    args = ["--pods", "two.csv", "--limit", "2", "--fill", "--compression", "10", "--seed", "3"]
    res = CliRunner().invoke(app, ["simulate", "--trace", str(trace), *args, "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    expected, summary = tr.trace_scenario(
        trace / "csv" / "two.csv", limit=2, fill=True, time_compression=10, seed=3, name="trace trace (two.csv)"
    )
    assert summary.pods == 2
    assert (out / "result.json").read_text() == result_json(run(expected, seed=3).result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pods", "missing.csv"], "not found"),
        (["--compression", "0"], "must be positive"),
        (["--limit", "-1"], "limit"),
        (["--gpu-sharing", "nvlink"], "gpu_sharing must be one of vgpu, mps"),
    ],
)
def test_simulate_trace_refuses_bad_options_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from tidesched.cli import app

    trace = write_trace(tmp_path / "trace")
    res = CliRunner().invoke(app, ["simulate", "--trace", str(trace), "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and message in res.output
    res = CliRunner().invoke(app, ["simulate", "--trace", str(tmp_path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "not a trace directory" in res.output
    res = CliRunner().invoke(app, ["simulate", "--limit", "3", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--trace only" in res.output


def test_a_scenario_file_names_a_trace(tmp_path: Path) -> None:
    """``trace:`` in a scenario reads the trace as --trace does, beside the scenario's own
    settings, objects and events."""
    from tidesched.sim.runner import run

    write_trace(tmp_path / "trace")
    (tmp_path / "scenario.yaml").write_text(
        "name: replay\nschedulePeriod: 2s\nduration: 2h\n"
        "trace: {dir: trace, limit: 4, compression: 2}\n"
        "events:\n- {at: 10m, cordon: {name: n-v100}}\n"
    )
    sc_ = sc.load_scenario(tmp_path / "scenario.yaml")
    assert sc_.name == "replay" and sc_.schedule_period == 2.0 and sc_.duration == 7200.0
    expected, summary = tr.trace_scenario(tmp_path / "trace", limit=4, time_compression=2)
    assert summary.pods == 4
    assert [m.obj for m in sc_.objects] == [m.obj for m in expected.objects]
    assert len(sc_.events) == len(expected.events) + 1  # the trace's, and the cordon
    assert sc_.config_source == expected.config_source and "deviceshare" in sc_.config_source
    assert run(sc_).result["summary"]["pods_bound"] >= 1


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        ("{dir: nowhere}", "not a trace directory"),
        ("{dir: trace, pods: missing.csv}", "not found"),
        ("{dir: trace, compression: 0}", "positive number"),
        ("{dir: trace, limit: -2}", "non-negative integer"),
        ("{dir: trace, speed: 2}", "unknown key"),
        ("{dir: trace, gpuSharing: nvlink}", "gpu_sharing must be one of"),
        ("[trace]", "expected a mapping"),
    ],
)
def test_a_bad_trace_entry_is_refused_with_its_field(tmp_path: Path, trace: str, message: str) -> None:
    write_trace(tmp_path / "trace")
    (tmp_path / "scenario.yaml").write_text(f"name: replay\ntrace: {trace}\n")
    with pytest.raises(vocab.ScenarioError, match=message) as err:
        sc.load_scenario(tmp_path / "scenario.yaml")
    assert "trace" in str(err.value)
