"""The live web view of ``tidesched run`` in a real browser (headless Chromium) against the real
control plane: the page loads from the scheduler alone, shows the queues the cluster holds, and
redraws after a pod is bound (issue 14)."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Iterator

import pytest

from cluster import bound, create_queue, gpu_node, replicaset_pods, wait_until

H200 = "NVIDIA-H200"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        path = None
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the web view test needs chromium and playwright in CI (.ci/run installs them)")
        pytest.skip("chromium or playwright not installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _row_used(page: Any, queue: str, resource: str) -> str | None:
    return page.evaluate(
        "([q, r]) => { const e = document.querySelector(`.qrow[data-queue=\"${q}\"][data-resource=\"${r}\"]`);"
        " return e ? e.dataset.used : null; }",
        [queue, resource],
    )


def test_web_view_shows_the_cluster_and_follows_binds(e2e, browser) -> None:
    api = e2e.api
    ns = e2e.namespace("ui")
    gpu_node(api, "h200-1", H200, cards=8)
    gpu_node(api, "h200-2", H200, cards=8)
    create_queue(api, "team-a", annotations={"volcano.sh/card.quota": json.dumps({H200: 12})})
    create_queue(api, "team-b", annotations={"volcano.sh/card.quota": json.dumps({H200: 4})})
    ann = {"volcano.sh/card.name": H200, "scheduling.volcano.sh/queue-name": "team-a"}
    first = replicaset_pods(api, ns, "serve", 1, annotations=ann, gpus=4, cpu="4", memory="8Gi")[0]
    sched = e2e.scheduler()
    wait_until(lambda: first in bound(api, ns), 30, "the first pod to bind")

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto(sched.url("/ui"))
    # The queues the cluster holds, with what the first pod uses.
    page.wait_for_selector('.queue[data-queue="team-b"]', timeout=20_000)
    names = page.eval_on_selector_all(".queue", "els => els.map(e => e.dataset.queue)")
    assert {"default", "team-a", "team-b"} <= set(names), names
    page.wait_for_function(
        "() => { const e = document.querySelector('.qrow[data-queue=\"team-a\"][data-resource=\"NVIDIA-H200\"]');"
        " return e && e.dataset.used === '4' && e.dataset.quota === '12'; }",
        timeout=20_000,
    )
    assert page.locator('.cell[data-node="h200-1"]').count() == 1
    session_before = int(page.evaluate("document.body.dataset.session"))

    # A second pod binds: the page redraws by itself with the new usage.
    second = replicaset_pods(api, ns, "serve", 1, start=1, annotations=ann, gpus=4, cpu="4", memory="8Gi")[0]
    wait_until(lambda: second in bound(api, ns), 30, "the second pod to bind")
    page.wait_for_function(
        "() => { const e = document.querySelector('.qrow[data-queue=\"team-a\"][data-resource=\"NVIDIA-H200\"]');"
        " return e && e.dataset.used === '8'; }",
        timeout=20_000,
    )
    assert int(page.evaluate("document.body.dataset.session")) > session_before
    # A pod over its queue's quota is listed as pending with the scheduler's reason.
    over = replicaset_pods(api, ns, "big", 1, annotations=ann, gpus=8, cpu="4", memory="8Gi")[0]
    row = page.wait_for_selector(f'#pending tr[data-pod="{ns}/{over}"]', timeout=20_000)
    assert "quota" in row.inner_text().lower(), row.inner_text()
    assert _row_used(page, "team-a", H200) == "8"
    assert page.locator("#status.ok").count() == 1
    assert not errors, errors
    origin = sched.url("")
    assert all(u.startswith(origin) for u in requests), [u for u in requests if not u.startswith(origin)]
    page.close()
