"""``tidesched explain NS/podgroup/NAME`` and ``NS/job/NAME`` from manifests: the gang condition,
per task-role counts, the queue's quota per card model, and the node reasons of pending pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from builders import BASIC_CONFIG, card_node, card_pod, card_queue, node, pod, podgroup
from tidesched.cli import app
from tidesched.explain.group import Target, TargetError, parse_target

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
TIDAL_CONF = ROOT / "tests/data/config/seed000_tidal.conf"
H200 = "NVIDIA-H200"


def _write(tmp_path: Path, objs: list[dict], name: str = "objs.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(objs))
    return p


def _basic(tmp_path: Path) -> Path:
    c = tmp_path / "sched.conf"
    c.write_text(BASIC_CONFIG)
    return c


def explain(*args: str) -> list[str]:
    res = runner.invoke(app, ["explain", *args], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def _volcano_job(name: str, ps: int, workers: int, min_member: int, worker_cpu: str = "3") -> list[dict]:
    """A Volcano Job's objects as its controller makes them: a PodGroup named NAME-UID owned by
    the Job, with minTaskMember per task, and pods annotated with the job and task names."""
    pg = podgroup(f"{name}-uid1", min_member, minTaskMember={"ps": 1, "worker": 3})
    pg["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": "uid1", "controller": True}
    ]
    objs = [pg]
    for role, count, cpu in (("ps", ps, "1"), ("worker", workers, worker_cpu)):
        for i in range(count):
            ann = {"volcano.sh/task-spec": role, "volcano.sh/job-name": name}
            running = role == "ps"
            objs.append(pod(f"{name}-{role}-{i}", f"{name}-uid1", cpu=cpu, annotations=ann,
                            node="n1" if running else "", phase="Running" if running else "Pending"))
    return objs


def test_a_volcano_job_resolves_to_its_podgroup_and_explains_the_gang(tmp_path: Path) -> None:
    # n1 holds the running ps (1 CPU) and one 3-CPU worker; n2 one; n3 (2 CPU) none: the third
    # worker fits nowhere, so the gang (minMember 4) binds nothing.
    objs = [node("n1", cpu="4"), node("n2", cpu="4"), node("n3", cpu="2"), *_volcano_job("train", 1, 4, 4)]
    f = _write(tmp_path, objs)
    lines = explain("ns/job/train", "-c", str(_basic(tmp_path)), str(f))
    assert lines[0] == "Volcano Job ns/train: PodGroup ns/train-uid1"
    assert lines[1] == "PodGroup ns/train-uid1 (queue default, owned by Job train)"
    assert lines[2] == ("Gang: minMember 4; 1 ready, 5 valid, 4 pending of 5 pods; "
                        "phase Inqueue, Unknown after this session.")
    text = "\n".join(lines)
    assert "condition this session: Unschedulable=True (NotEnoughResources): 3/5 tasks in gang unschedulable" in text
    assert "  ps: minTaskMember 1; 1 pod: 1 running, 0 bound, 0 pending, 0 other" in lines
    assert "  worker: minTaskMember 3; 4 pods: 0 running, 0 bound, 4 pending, 0 other" in lines
    # Without capacity-card: the queue's spec and its tasks (1 CPU running, 4 × 3 CPU pending).
    assert "  cpu: - / 1 / 0 / 12" in lines
    assert "This session: 0 bound, 0 pipelined, 0 evicted." in lines
    assert "Pending after this session: 4 pods." in lines
    # Two workers were placed (n1, n2) before the third found no node: all three nodes short of CPU.
    assert "    Insufficient cpu: 3 nodes, 1 pod" in lines
    assert "  3 pods not tried: allocation stops at the first pod of a gang that fits no node" in lines

    # The same PodGroup by its own name says the same, without the Job line.
    by_pg = explain("ns/podgroup/train-uid1", "-c", str(_basic(tmp_path)), str(f))
    assert by_pg == lines[1:]
    assert explain("ns/pg/train-uid1", "-c", str(_basic(tmp_path)), str(f)) == by_pg


def test_missing_pods_of_a_role_are_counted_against_min_task_member(tmp_path: Path) -> None:
    # Only 2 workers exist for minTaskMember 3 (the controller has not made the third).
    objs = [node("n1", cpu="16"), *_volcano_job("short", 1, 2, 4, worker_cpu="1")]
    lines = explain("ns/job/short", "-c", str(_basic(tmp_path)), str(_write(tmp_path, objs)))
    assert "  worker: minTaskMember 3; 2 pods: 0 running, 0 bound, 2 pending, 0 other  short by 1" in lines
    assert any(line.startswith("  The gang cannot start: only 3 valid pods for minMember 4 (1 missing, or failed).") for line in lines), lines


def test_node_reasons_are_aggregated_most_common_first(tmp_path: Path) -> None:
    objs = [
        node("n1", cpu="4", labels={"zone": "a"}), node("n2", cpu="4", labels={"zone": "a"}),
        node("n3", cpu="2", labels={"zone": "b"}), podgroup("mix", 1),
        pod("big-0", "mix", cpu="8"), pod("big-1", "mix", cpu="8"),
        pod("sel-0", "mix", cpu="1", spec={"nodeSelector": {"zone": "c"}}),
        pod("ok-0", "mix", cpu="1"),
    ]
    lines = explain("ns/podgroup/mix", "-c", str(_basic(tmp_path)), str(_write(tmp_path, objs)))
    assert "This session: 1 bound, 0 pipelined, 0 evicted (ns/ok-0 -> n1)." in lines
    assert "Pending after this session: 3 pods." in lines
    start = lines.index("  Top node reasons (nodes summed over the pending pods; pods), most common first:")
    assert lines[start + 1:start + 3] == [
        "    Insufficient cpu: 6 nodes, 2 pods",
        "    node(s) didn't match Pod's node affinity/selector: 3 nodes, 1 pod",
    ]


def test_quota_per_card_model_of_the_queue_is_the_quota_commands(tmp_path: Path) -> None:
    objs = [
        card_node("g1", H200, 8), card_node("g2", "NVIDIA-A100", 8),
        card_queue("team-a", json.dumps({H200: 6}), cpu=None),
        podgroup("serve", 2, queue="team-a"),
        card_pod("serve-0", H200, 4, queue_name="team-a", group="serve", node_name="g1", phase="Running"),
        card_pod("serve-1", H200, 4, queue_name="team-a", group="serve"),
    ]
    f = _write(tmp_path, objs)
    lines = explain("ns/podgroup/serve", "-c", str(TIDAL_CONF), str(f))
    res = runner.invoke(app, ["quota", "-c", str(TIDAL_CONF), "--format", "json", str(f)])
    assert res.exit_code == 0, res.output
    q = json.loads(res.stdout)["queues"]["team-a"][H200]
    assert (q["quota"], q["used"]) == (6, 4)
    start = lines.index("Queue team-a (capacity-card): resource quota / used / inqueue / pending")
    assert lines[start + 1] == f"  {H200}: {q['quota']:g} / {q['used']:g} / {q['inqueue']:g} / {q['pending']:g}"
    assert not any(line.startswith(("  cpu:", "  memory:")) for line in lines)  # all zero: only cards limited
    # The pending pod's reason is the queue's card quota, not a node.
    assert any("has insufficient <NVIDIA-H200> quota" in line and line.startswith("  1 pod: ") for line in lines), lines
    assert not any("Top node reasons" in line for line in lines)


def test_unknown_targets_fail_with_a_clear_message(tmp_path: Path) -> None:
    f = _write(tmp_path, [node("n1"), podgroup("pg", 1, queue="nowhere"), pod("a", "pg")])
    conf = str(_basic(tmp_path))
    res = runner.invoke(app, ["explain", "ns/podgroup/nope", "-c", conf, str(f)])
    assert res.exit_code == 2 and "PodGroup ns/nope: no PodGroup of it is scheduled" in res.output
    res = runner.invoke(app, ["explain", "ns/podgroup/pg", "-c", conf, str(f)])
    assert res.exit_code == 2 and "queue 'nowhere' of PodGroup ns/pg does not exist" in " ".join(res.output.split())
    res = runner.invoke(app, ["explain", "ns/job/nope", "-c", conf, str(f)])
    assert res.exit_code == 2 and "Volcano Job ns/nope" in res.output
    res = runner.invoke(app, ["explain", "ns/deployment/web", "-c", conf, str(f)])
    assert res.exit_code == 2 and "unknown kind 'deployment'" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    "text, target",
    [
        ("a", Target("pod", "default", "a")),
        ("ns/a", Target("pod", "ns", "a")),
        ("ns/pod/a", Target("pod", "ns", "a")),
        ("ns/podgroup/g", Target("podgroup", "ns", "g")),
        ("ns/PG/g", Target("podgroup", "ns", "g")),
        ("ns/job/j", Target("job", "ns", "j")),
        ("ns/vcjob/j", Target("job", "ns", "j")),
    ],
)
def test_target_forms(text: str, target: Target) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize("text", ["", "ns/", "/a", "ns//a", "a/b/c/d", "ns/queue/q"])
def test_bad_target_forms(text: str) -> None:
    with pytest.raises(TargetError):
        parse_target(text)


def test_a_job_without_owner_references_is_found_by_its_pods_job_name(tmp_path: Path) -> None:
    ann = {"volcano.sh/job-name": "etl", "volcano.sh/task-spec": "main"}
    objs = [
        node("n1", cpu="4"),
        podgroup("etl-group", 1), pod("etl-main-0", "etl-group", annotations=ann),
        # The same job name in another namespace is another job.
        podgroup("etl-group", 1, namespace="other"), pod("etl-main-0", "etl-group", namespace="other", annotations=ann),
    ]
    lines = explain("ns/job/etl", "-c", str(_basic(tmp_path)), str(_write(tmp_path, objs)))
    assert lines[0] == "Volcano Job ns/etl: PodGroup ns/etl-group"
    assert "This session: 1 bound, 0 pipelined, 0 evicted (ns/etl-main-0 -> n1)." in lines
