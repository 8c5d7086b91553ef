"""extender plugin: Volcano v1.15.1's extender protocol against a small HTTP server run by the
test — the cases of plugins/extender/extender_test.go (IsInterested, hasManagedResources,
hasResourcesInList, the 10 MB answer limit) and each hook's request, answer and failure, with
the decisions they lead to. Timeouts and refused connections end neither the session nor the
test run: the session goes on without the extender."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from builders import node, pod, podgroup, queue
from tidesched.framework.arguments import Arguments, ConfigError
from tidesched.model.snapshot import build_snapshot
from tidesched.plugins.extender import (
    MAX_BODY,
    Client,
    ExtenderError,
    ExtenderPlugin,
    has_managed_resources,
    is_interested,
    parse_config,
)
from tidesched.scheduler import config_from_text, open_session, run_actions

Handler = Callable[[dict[str, Any]], Any]


class Extender:
    """An extender whose answers the test sets per verb; records every request."""

    def __init__(self) -> None:
        self.answers: dict[str, Handler] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.delay: dict[str, float] = {}
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                verb = self.path.lstrip("/")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                outer.requests.append((verb, body))
                time.sleep(outer.delay.get(verb, 0.0))
                handler = outer.answers.get(verb)
                if handler is None:
                    status, payload = 404, b"{}"
                else:
                    answer = handler(body)
                    status, payload = (answer if isinstance(answer, tuple) else (200, answer))
                    payload = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (a timeout)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def verbs(self) -> list[str]:
        return [v for v, _ in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ext() -> Iterator[Extender]:
    e = Extender()
    try:
        yield e
    finally:
        e.close()


def _config(url: str, actions: str = "enqueue, allocate", **args: Any) -> str:
    arguments = {"extender.urlPrefix": url, **args}
    return yaml.safe_dump({"actions": actions, "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "extender", "arguments": arguments}]},
        {"plugins": [{"name": "predicates"}, {"name": "nodeorder"}]}]})


def _objects(gpu: bool = False) -> list[dict]:
    extra = {"nvidia.com/gpu": "1"} if gpu else None
    return [node("n1", nvidia_com__gpu="4"), node("n2", nvidia_com__gpu="4"), queue("q"),
            podgroup("pg", 1, queue="q", phase="Pending"), pod("p", "pg", extra_requests=extra)]


def _run(config: str, objects: list[dict] | None = None):
    return run_actions(open_session(build_snapshot(objects or _objects()), config_from_text(config)))


# -- extender_test.go: which pods the extender is asked about ----------------------------------

def _c(requests: dict | None = None, limits: dict | None = None) -> dict:
    res = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"resources": res}


GPU = frozenset({"nvidia.com/gpu"})


@pytest.mark.parametrize("case, managed, spec, want", [
    ("empty managed resources", frozenset(), {"containers": [_c({"cpu": "100m"})]}, True),
    ("managed resource in requests", GPU, {"containers": [_c({"cpu": "100m", "nvidia.com/gpu": "1"})]}, True),
    ("managed resource in limits", GPU, {"containers": [_c(limits={"nvidia.com/gpu": "1"})]}, True),
    ("init container has managed resource", GPU,
     {"containers": [_c({"cpu": "100m"})], "initContainers": [_c({"nvidia.com/gpu": "1"})]}, True),
    ("no managed resources in containers", GPU, {"containers": [_c({"cpu": "100m", "memory": "128Mi"})]}, False),
    ("multiple managed resources - one match", frozenset({"nvidia.com/gpu", "amd.com/gpu"}),
     {"containers": [_c({"cpu": "100m", "amd.com/gpu": "1"})]}, True),
])
def test_is_interested(case: str, managed: frozenset, spec: dict, want: bool) -> None:
    assert is_interested(spec, managed) is want


@pytest.mark.parametrize("case, containers, want", [
    ("no containers", [], False),
    ("requests", [_c({"nvidia.com/gpu": "1"})], True),
    ("limits", [_c(limits={"nvidia.com/gpu": "1"})], True),
    ("both", [_c({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})], True),
    ("one of several containers", [_c({"cpu": "100m"}), _c({"nvidia.com/gpu": "1"})], True),
    ("none managed", [_c({"cpu": "100m", "memory": "128Mi"})], False),
    ("empty requirements", [_c()], False),
    ("partial match", [_c({"nvidia.com/gpu": "1", "intel.com/gpu": "1"})], True),
])
def test_has_managed_resources(case: str, containers: list, want: bool) -> None:
    assert has_managed_resources(containers, GPU) is want


def test_has_resources_in_list_cases() -> None:  # TestHasResourcesInList, through one container
    both = frozenset({"nvidia.com/gpu", "amd.com/gpu"})
    assert not has_managed_resources([_c({})], GPU)
    assert not has_managed_resources([{"resources": {"requests": None}}], GPU)
    assert has_managed_resources([_c({"cpu": "100m", "nvidia.com/gpu": "1", "amd.com/gpu": "1"})], both)
    assert not has_managed_resources([_c({"cpu": "100m", "nvidia.com/gpu": "1"})], frozenset())


def test_answer_over_the_body_limit(ext: Extender) -> None:  # TestMaxBodySizeLimit2
    ext.answers["test"] = lambda b: b'{"padding":"' + b"a" * (MAX_BODY + 1) + b'"}'
    client = Client(parse_config(Arguments({"extender.urlPrefix": ext.url})))
    with pytest.raises(ExtenderError, match="request body too large"):
        client.send("test", {"task": {}, "node": {}})


# -- hooks, with the decisions they lead to ----------------------------------------------------

def test_predicate_message_fails_the_node(ext: Extender) -> None:
    ext.answers["predicate"] = lambda b: {"status": "busy", "code": 3} if b["node"]["Name"] == "n1" else {"status": ""}
    d = _run(_config(ext.url, **{"extender.predicateVerb": "predicate"}))
    assert d.bound == {"ns/p": "n2"}
    asked = [b for v, b in ext.requests if v == "predicate"]
    assert {b["node"]["Name"] for b in asked} == {"n1", "n2"}
    task = asked[0]["task"]
    assert (task["Name"], task["Namespace"], task["Status"], task["Resreq"]["MilliCPU"]) == ("p", "ns", 1, 1000)
    assert asked[0]["node"]["Allocatable"]["ScalarResources"] == {"nvidia.com/gpu": 4000.0}


def test_predicate_reason_reaches_the_pods_event(ext: Extender) -> None:
    ext.answers["predicate"] = lambda b: {"status": "no licence here"}
    d = _run(_config(ext.url, **{"extender.predicateVerb": "predicate"}))
    assert d.bound == {}
    msgs = [e.message for e in d.events if e.reason == "FailedScheduling"]
    assert msgs and "no licence here" in msgs[0]


def test_prioritize_chooses_the_node(ext: Extender) -> None:
    ext.answers["prioritize"] = lambda b: {"nodeScore": {"n2": 1000.0}}
    d = _run(_config(ext.url, **{"extender.prioritizeVerb": "prioritize"}))
    assert d.bound == {"ns/p": "n2"}
    (body,) = [b for v, b in ext.requests if v == "prioritize"]
    assert [n["Name"] for n in body["nodes"]] == ["n1", "n2"]


def test_prioritize_error_message_leaves_the_other_scores(ext: Extender) -> None:
    ext.answers["prioritize"] = lambda b: {"errorMessage": "cannot score", "nodeScore": {"n2": 1000.0}}
    d = _run(_config(ext.url, **{"extender.prioritizeVerb": "prioritize"}))
    assert d.bound == {"ns/p": "n1"}


@pytest.mark.parametrize("vote, phase", [(1, "Inqueue"), (-1, "Pending")])
def test_job_enqueueable(ext: Extender, vote: int, phase: str) -> None:
    ext.answers["jobEnqueueable"] = lambda b: {"status": vote}
    d = _run(_config(ext.url, **{"extender.jobEnqueueableVerb": "jobEnqueueable"}))
    assert d.podgroups["ns/pg"] == phase if phase == "Pending" else d.podgroups["ns/pg"] in ("Inqueue", "Running")
    (body,) = [b for v, b in ext.requests if v == "jobEnqueueable"]
    assert body["job"]["Name"] == "pg" and body["job"]["PodGroup"]["spec"]["minMember"] == 1


def test_session_open_close_ready_overused_and_events(ext: Extender) -> None:
    for verb in ("onSessionOpen", "onSessionClose", "allocateFunc"):
        ext.answers[verb] = lambda b: {}
    ext.answers["jobReady"] = lambda b: {"status": True}
    ext.answers["queueOverused"] = lambda b: {"overused": False}
    cfg = _config(ext.url, **{f"extender.{v}Verb": v for v in
                              ("onSessionOpen", "onSessionClose", "allocateFunc", "jobReady", "queueOverused")})
    d = _run(cfg)
    assert d.bound == {"ns/p": "n1"}
    verbs = ext.verbs()
    assert verbs[0] == "onSessionOpen" and verbs[-1] == "onSessionClose"
    assert {"jobReady", "queueOverused", "allocateFunc"} <= set(verbs)
    opened = ext.requests[0][1]
    assert set(opened["Nodes"]) == {"n1", "n2"} and "ns/pg" in opened["Jobs"] and "q" in opened["Queues"]
    (alloc,) = [b for v, b in ext.requests if v == "allocateFunc"]
    assert alloc["task"]["Name"] == "p" and alloc["task"]["NodeName"] == "n1"


def test_preemptable_victims_by_uid(ext: Extender) -> None:
    ext.answers["preemptable"] = lambda b: {"status": 1, "victims": [b["evictees"][1]]}
    ssn = open_session(build_snapshot(_objects()), config_from_text(_config(ext.url, **{"extender.preemptableVerb": "preemptable"})))
    plugin = ssn.plugins["extender"]
    assert isinstance(plugin, ExtenderPlugin)
    (t,) = ssn.tasks.values()
    others = [t, t]  # any tasks: the answer names the second by UID
    chosen, vote = plugin._victims("preemptable", t, others)
    assert vote == 1 and chosen == [t]


def test_managed_resources_keep_other_pods_away_from_the_extender(ext: Extender) -> None:
    ext.answers["predicate"] = lambda b: {"status": "no"}
    cfg = _config(ext.url, **{"extender.predicateVerb": "predicate", "extender.managedResources": ["nvidia.com/gpu"]})
    assert _run(cfg).bound == {"ns/p": "n1"}  # a CPU pod: not asked, placed
    assert ext.requests == []
    assert _run(cfg, _objects(gpu=True)).bound == {}  # a GPU pod: asked, refused
    assert len(ext.requests) >= 2


# -- failures: never a crash, never a stall ------------------------------------------------------

def test_timeout_stops_the_calls_for_the_session(ext: Extender) -> None:
    ext.answers["predicate"] = lambda b: {"status": ""}
    ext.delay["predicate"] = 1.0
    cfg = _config(ext.url, **{"extender.predicateVerb": "predicate", "extender.httpTimeout": "50ms",
                              "extender.ignorable": True})
    d = _run(cfg, [node(f"n{i}") for i in range(10)] + _objects()[2:])
    assert d.bound == {"ns/p": "n0"}  # ignorable: the failed call is no objection
    assert ext.verbs().count("predicate") == 1  # one timeout, then no more calls this session


def test_timeout_not_ignorable_fails_the_nodes_with_the_error(ext: Extender) -> None:
    ext.answers["predicate"] = lambda b: {"status": ""}
    ext.delay["predicate"] = 1.0
    cfg = _config(ext.url, **{"extender.predicateVerb": "predicate", "extender.httpTimeout": "50ms"})
    d = _run(cfg)
    assert d.bound == {}
    msgs = [e.message for e in d.events if e.reason == "FailedScheduling"]
    assert msgs and "predicate" in msgs[0]


def test_unreachable_extender_session_open_not_ignorable_drops_the_hooks() -> None:
    cfg = _config("http://127.0.0.1:9", **{"extender.onSessionOpenVerb": "open", "extender.predicateVerb": "predicate",
                                           "extender.jobEnqueueableVerb": "enq", "extender.onSessionCloseVerb": "close"})
    d = _run(cfg)
    assert d.bound == {"ns/p": "n1"}  # no extender hook in this session: scheduled without it


def test_http_errors_and_bad_answers(ext: Extender) -> None:
    ext.answers["enq"] = lambda b: (500, {"oops": True})
    ext.answers["ready"] = lambda b: b"not json"
    cfg = _config(ext.url, **{"extender.jobEnqueueableVerb": "enq"})
    assert _run(cfg).podgroups["ns/pg"] == "Pending"  # not ignorable: reject
    cfg = _config(ext.url, **{"extender.jobEnqueueableVerb": "enq", "extender.ignorable": True})
    assert _run(cfg).bound == {"ns/p": "n1"}
    # jobReady answers !ignorable on a failure, as Volcano: ready when not ignorable, not ready
    # when ignorable
    cfg = _config(ext.url, **{"extender.jobReadyVerb": "ready"})
    assert _run(cfg).bound == {"ns/p": "n1"}
    cfg = _config(ext.url, **{"extender.jobReadyVerb": "ready", "extender.ignorable": True})
    assert _run(cfg).bound == {}


# -- arguments -------------------------------------------------------------------------------

def test_arguments() -> None:
    conf = parse_config(Arguments({"extender.urlPrefix": "http://x/", "extender.httpTimeout": "100ms",
                                   "extender.predicateVerb": "predicate", "extender.ignorable": True,
                                   "extender.managedResources": ["nvidia.com/gpu"]}))
    assert (conf.url_prefix, conf.timeout, conf.verbs, conf.ignorable, conf.managed) == (
        "http://x", 0.1, {"predicate": "predicate"}, True, GPU)
    assert parse_config(Arguments({})).timeout == 1.0


@pytest.mark.parametrize("args, match", [
    ({"extender.urlPrefix": "http://x", "extender.httpTimeout": "soon"}, "a duration"),
    ({"extender.predicateVerb": "predicate"}, "the extender's address"),
    ({"extender.urlPrefix": "http://x", "extender.managedResources": "nvidia.com/gpu"}, "a list of strings"),
    ({"extender.urlPrefix": "http://x", "extender.ignorable": "yes"}, "true or false"),
])
def test_bad_arguments_are_refused_at_load(args: dict, match: str) -> None:
    text = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [{"name": "extender", "arguments": args}]}]})
    with pytest.raises(ConfigError, match=match):
        config_from_text(text)


def test_unhonoured_notes() -> None:
    notes = ExtenderPlugin.unhonoured(Arguments({"extender.urlPrefix": "http://x", "extender.prioritizeVerb": "p",
                                                 "extender.allocateFuncVerb": "a"}))
    assert len(notes) == 2
