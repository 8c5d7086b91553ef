"""extender plugin (Volcano v1.15.1 plugins/extender): hands scheduling decisions to an HTTP
service, in Volcano's extender protocol.

Arguments (Volcano's names; a verb left out is not asked)::

    extender.urlPrefix: http://127.0.0.1:8080
    extender.httpTimeout: 100ms            # per request; default 1s
    extender.onSessionOpenVerb: onSessionOpen
    extender.onSessionCloseVerb: onSessionClose
    extender.predicateVerb: predicate
    extender.prioritizeVerb: prioritize
    extender.preemptableVerb: preemptable
    extender.reclaimableVerb: reclaimable
    extender.queueOverusedVerb: queueOverused
    extender.jobEnqueueableVerb: jobEnqueueable
    extender.jobReadyVerb: jobReady
    extender.allocateFuncVerb: allocateFunc
    extender.deallocateFuncVerb: deallocateFunc
    extender.ignorable: false              # true: a failed call counts as "no objection"
    extender.managedResources: [nvidia.com/gpu]   # only pods requesting (or limiting) one of
                                                   # these are asked about (empty: every pod)

Each call is ``POST <urlPrefix>/<verb>`` with a JSON body (``plugins/extender_json.py``) and a
JSON answer of at most 10 MB; anything but HTTP 200 is a failure. Per hook, what is sent, what
is read, and what a failure means (ignorable / not):

* onSessionOpen ``{Jobs, Nodes, Queues, NamespaceInfo, RevocableNodes, NodeList}``; a failure
  when not ignorable registers no other hook for the session.
* predicate, per node ``{task, node}`` → ``{status: message, code}``: a message fails the node
  with it (code 3, UnschedulableAndUnresolvable, keeps preempt away from it); failure: the node
  passes / fails with the error.
* prioritize, per task ``{task, nodes}`` (the candidates) → ``{nodeScore: {node: score},
  errorMessage}``; failure or an error message: no extender score (see below).
* preemptable / reclaimable ``{evictor, evictees}`` → ``{status: vote, victims: [task]}``
  (victims matched by ``UID``); failure: permit / reject.
* jobEnqueueable ``{job}`` → ``{status: vote}``; failure: permit / reject.
* queueOverused ``{queue}`` → ``{overused}``; jobReady ``{job}`` → ``{status}``; failure:
  Volcano answers "not ignorable" to both — ignorable: not overused and not ready / not
  ignorable: overused and ready.
* allocateFunc, deallocateFunc ``{task}`` → ``{errorMessage}``, after a task is placed or
  unplaced; onSessionClose ``{}``.

Never crash, never stall: every failure (refused connection, timeout, HTTP error, malformed or
oversized answer) is logged and answered as above. A timeout or a connection failure also stops
the calls for the rest of the session (each later call counts as failed at once), so an
unreachable extender costs a session at most one ``httpTimeout`` per session, not one per node.

Differences from Volcano: where Volcano's prioritize failure (not ignorable) leaves the task
unplaced for the session, here the task is placed on the other plugins' scores; an error answered
to allocateFunc does not undo the allocation (Volcano rolls it back); both are said when the
config is loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import urllib3

from tidesched.framework.plugin import ABSTAIN, PERMIT, REJECT, EventHandler, NodeFailure, Plugin, PredicateResult
from tidesched.model.durations import parse_go_duration
from tidesched.model.problems import ObjectError
from tidesched.plugins import extender_json as wire

if TYPE_CHECKING:
    from tidesched.framework.arguments import Arguments
    from tidesched.framework.session import Session
    from tidesched.model.infos import JobInfo, QueueInfo, TaskInfo

log = logging.getLogger("tidesched.plugins.extender")

NAME = "extender"
MAX_BODY = 10 << 20  # Volcano maxBodySize
DEFAULT_TIMEOUT = 1.0
UNRESOLVABLE = 3  # Volcano api.UnschedulableAndUnresolvable
VERBS = ("onSessionOpen", "onSessionClose", "predicate", "prioritize", "preemptable", "reclaimable",
         "queueOverused", "jobEnqueueable", "jobReady", "allocateFunc", "deallocateFunc")


class ExtenderError(Exception):
    pass


@dataclass(frozen=True)
class ExtenderConfig:
    url_prefix: str = ""
    timeout: float = DEFAULT_TIMEOUT
    verbs: dict[str, str] = field(default_factory=dict)  # hook -> verb
    ignorable: bool = False
    managed: frozenset[str] = frozenset()


def parse_config(args: "Arguments") -> ExtenderConfig:
    verbs = {v: args.get_str(f"extender.{v}Verb", "") for v in VERBS}
    raw_timeout = args.get_str("extender.httpTimeout", "")
    timeout = DEFAULT_TIMEOUT
    if raw_timeout:
        try:
            timeout = parse_go_duration(raw_timeout, "extender.httpTimeout")
        except ObjectError:
            raise args.bad_value("extender.httpTimeout", "a duration such as 100ms or 1s", raw_timeout) from None
        if timeout <= 0:
            raise args.bad_value("extender.httpTimeout", "a positive duration", raw_timeout)
    url = args.get_str("extender.urlPrefix", "")
    if any(verbs.values()) and not url:
        raise args.bad_value("extender.urlPrefix", "the extender's address (verbs are set)", url)
    return ExtenderConfig(
        url_prefix=url.rstrip("/"),
        timeout=timeout,
        verbs={k: v for k, v in verbs.items() if v},
        ignorable=args.get_bool("extender.ignorable", False),
        managed=frozenset(args.get_str_list("extender.managedResources")),
    )


def has_managed_resources(containers: Sequence[Any], managed: frozenset[str]) -> bool:
    for c in containers:
        res = c.get("resources") if isinstance(c, Mapping) else None
        if not isinstance(res, Mapping):
            continue
        for section in ("requests", "limits"):
            names = res.get(section)
            if isinstance(names, Mapping) and managed.intersection(names):
                return True
    return False


def is_interested(spec: Mapping[str, Any], managed: frozenset[str]) -> bool:
    """Whether a pod is the extender's concern: it requests or limits a managed resource in a
    container or init container, or the extender manages none (Volcano IsInterested)."""
    if not managed:
        return True
    return any(has_managed_resources(spec.get(k) or [], managed) for k in ("containers", "initContainers"))


class Client:
    """POSTs to the extender; after a timeout or a connection failure, fails at once for the
    rest of the session."""

    def __init__(self, conf: ExtenderConfig) -> None:
        self.conf = conf
        self.http = urllib3.PoolManager(timeout=urllib3.Timeout(total=conf.timeout), retries=False)
        self.broken: str | None = None
        self.calls = 0

    def _post(self, url: str, payload: bytes) -> urllib3.BaseHTTPResponse:
        return self.http.request("POST", url, body=payload, headers={"Content-Type": "application/json"},
                                 preload_content=False)

    def send(self, verb: str, body: Any) -> Any:
        if self.broken is not None:
            raise ExtenderError(f"extender unreachable earlier in this session ({self.broken})")
        url = f"{self.conf.url_prefix}/{verb}"
        self.calls += 1
        payload = orjson.dumps(body, default=str)
        try:
            try:
                resp = self._post(url, payload)
            except urllib3.exceptions.ProtocolError:
                # A kept-alive connection the server had closed: once more, on a new one.
                resp = self._post(url, payload)
        except urllib3.exceptions.HTTPError as exc:
            self.broken = f"{verb}: {type(exc).__name__}"
            raise ExtenderError(f"{verb} at {url}: {exc}") from None
        try:
            if resp.status != 200:
                raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
            data = resp.read(MAX_BODY + 1)
        except urllib3.exceptions.HTTPError as exc:  # a timeout while reading the answer
            self.broken = f"{verb}: {type(exc).__name__}"
            raise ExtenderError(f"{verb} at {url}: {exc}") from None
        finally:
            resp.release_conn()
        if len(data) > MAX_BODY:
            raise ExtenderError(f"{verb} at {url}: answer larger than {MAX_BODY} bytes (http: request body too large)")
        try:
            return orjson.loads(data) if data.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"{verb} at {url}: answer is not JSON ({exc})") from None


def _get(answer: Any, key: str, default: Any) -> Any:
    return answer.get(key, default) if isinstance(answer, dict) else default


class ExtenderPlugin(Plugin):
    name = NAME

    def __init__(self, arguments: "Arguments") -> None:
        super().__init__(arguments)
        self.conf = parse_config(arguments)

    @classmethod
    def unhonoured(cls, arguments: "Arguments") -> list[str]:
        conf = parse_config(arguments)
        notes = []
        if "prioritize" in conf.verbs:
            notes.append("a failed prioritize call leaves the task to the other plugins' scores "
                         "(Volcano leaves it unplaced for the session)")
        if "allocateFunc" in conf.verbs:
            notes.append("an error answered to allocateFunc does not undo the allocation (Volcano rolls it back)")
        return notes

    def _failed(self, verb: str, exc: Exception) -> None:
        log.warning("extender %s failed: %s", verb, exc)

    def interested(self, task: "TaskInfo") -> bool:
        return is_interested(task.pod.raw_spec, self.conf.managed)

    def on_session_open(self, ssn: "Session") -> None:
        self.ssn = ssn
        self.client = Client(self.conf)
        verbs, ignorable = self.conf.verbs, self.conf.ignorable
        if "onSessionOpen" in verbs:
            try:
                self.client.send(verbs["onSessionOpen"], wire.session(ssn))
            except ExtenderError as exc:
                self._failed("onSessionOpen", exc)
                if not ignorable:
                    return
        if "predicate" in verbs:
            ssn.add_fn("predicate", self.name, self.predicate)
        if "prioritize" in verbs:
            ssn.add_fn("node_order", self.name, self.prioritize)
        if "preemptable" in verbs:
            ssn.add_fn("preemptable", self.name, lambda e, c: self._victims("preemptable", e, c))
        if "reclaimable" in verbs:
            ssn.add_fn("reclaimable", self.name, lambda e, c: self._victims("reclaimable", e, c))
        if "jobEnqueueable" in verbs:
            ssn.add_fn("job_enqueueable", self.name, self.job_enqueueable)
        if "queueOverused" in verbs:
            ssn.add_fn("overused", self.name, self.queue_overused)
        if "jobReady" in verbs:
            ssn.add_fn("job_ready", self.name, self.job_ready)
        if "allocateFunc" in verbs or "deallocateFunc" in verbs:
            ssn.add_event_handler(EventHandler(
                allocate=(lambda t: self._event("allocateFunc", t)) if "allocateFunc" in verbs else None,
                deallocate=(lambda t: self._event("deallocateFunc", t)) if "deallocateFunc" in verbs else None,
            ))

    def on_session_close(self, ssn: "Session") -> None:
        verb = self.conf.verbs.get("onSessionClose")
        if verb and hasattr(self, "client"):
            try:
                self.client.send(verb, {})
            except ExtenderError as exc:
                self._failed("onSessionClose", exc)

    # -- hooks -----------------------------------------------------------------------------

    def predicate(self, task: "TaskInfo") -> PredicateResult:
        n = len(self.ssn.table)
        passed = np.ones(n, dtype=bool)
        if not self.interested(task):
            return PredicateResult(passed)
        t = wire.task(task)
        failures: dict[tuple[str, bool], np.ndarray] = {}
        for row in range(n):
            try:
                answer = self.client.send(self.conf.verbs["predicate"], {"task": t, "node": wire.node(self.ssn, row)})
            except ExtenderError as exc:
                self._failed("predicate", exc)
                if self.conf.ignorable:
                    continue
                reason, unresolvable = str(exc), False
            else:
                message = _get(answer, "status", "")
                if not message:
                    continue
                reason, unresolvable = str(message), _get(answer, "code", 0) == UNRESOLVABLE
            failures.setdefault((reason, unresolvable), np.zeros(n, dtype=bool))[row] = True
            passed[row] = False
        return PredicateResult(passed, [NodeFailure(r, m, u) for (r, u), m in failures.items()])

    def prioritize(self, task: "TaskInfo", idx: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(idx))
        if not self.interested(task):
            return scores
        rows = idx.tolist()
        body = {"task": wire.task(task), "nodes": [wire.node(self.ssn, r) for r in rows]}
        try:
            answer = self.client.send(self.conf.verbs["prioritize"], body)
        except ExtenderError as exc:
            self._failed("prioritize", exc)
            return scores
        by_node = _get(answer, "nodeScore", None)
        if _get(answer, "errorMessage", "") or not isinstance(by_node, dict):
            self._failed("prioritize", ExtenderError(str(_get(answer, "errorMessage", "no nodeScore"))))
            return scores
        names = self.ssn.table.names
        for k, row in enumerate(rows):
            v = by_node.get(names[row], 0.0)
            scores[k] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
        return scores

    def _victims(self, hook: str, evictor: "TaskInfo", evictees: list["TaskInfo"]) -> tuple[list["TaskInfo"], int]:
        if not self.interested(evictor):
            return [], ABSTAIN
        body = {"evictor": wire.task(evictor), "evictees": [wire.task(t) for t in evictees]}
        try:
            answer = self.client.send(self.conf.verbs[hook], body)
        except ExtenderError as exc:
            self._failed(hook, exc)
            return [], PERMIT if self.conf.ignorable else REJECT
        by_uid = {t.uid: t for t in evictees}
        chosen = [by_uid[v["UID"]] for v in _get(answer, "victims", None) or []
                  if isinstance(v, dict) and v.get("UID") in by_uid]
        vote = _get(answer, "status", ABSTAIN)
        return chosen, vote if vote in (PERMIT, ABSTAIN, REJECT) else ABSTAIN

    def job_enqueueable(self, job: "JobInfo") -> int:
        try:
            answer = self.client.send(self.conf.verbs["jobEnqueueable"], {"job": wire.job(job)})
        except ExtenderError as exc:
            self._failed("jobEnqueueable", exc)
            return PERMIT if self.conf.ignorable else REJECT
        vote = _get(answer, "status", ABSTAIN)
        return vote if vote in (PERMIT, ABSTAIN, REJECT) else ABSTAIN

    def queue_overused(self, queue: "QueueInfo") -> bool:
        try:
            answer = self.client.send(self.conf.verbs["queueOverused"], {"queue": wire.queue(queue)})
        except ExtenderError as exc:
            self._failed("queueOverused", exc)
            return not self.conf.ignorable
        return _get(answer, "overused", False) is True

    def job_ready(self, job: "JobInfo") -> bool:
        try:
            answer = self.client.send(self.conf.verbs["jobReady"], {"job": wire.job(job)})
        except ExtenderError as exc:
            self._failed("jobReady", exc)
            return not self.conf.ignorable
        return _get(answer, "status", False) is True

    def _event(self, hook: str, task: "TaskInfo") -> None:
        if not self.interested(task):
            return
        try:
            answer = self.client.send(self.conf.verbs[hook], {"task": wire.task(task)})
        except ExtenderError as exc:
            self._failed(hook, exc)
            return
        message = _get(answer, "errorMessage", "")
        if message:
            log.warning("extender %s for %s: %s (the placement stands)", hook, task.key, message)
