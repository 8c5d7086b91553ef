"""A list+watch cache of one collection in a thread, for the harness's own stand-ins (the kubelet's
view of nodes) and for tests that wait on many objects at once."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from controlplane import ApiError, ControlPlane


def object_path(collection: str, md: dict[str, Any], namespaced: bool) -> str:
    """``/api/v1/pods`` + metadata → ``/api/v1/namespaces/NS/pods/NAME``."""
    if not namespaced:
        return f"{collection}/{md['name']}"
    prefix, _, plural = collection.rpartition("/")
    return f"{prefix}/namespaces/{md['namespace']}/{plural}/{md['name']}"


class Informer:
    """One collection kept current by list + watch in a thread: ``objects`` by uid. Every change
    sets each of ``listeners`` (threading.Event). Relists when a watch fails (410 Gone, restart)."""

    def __init__(self, cp: ControlPlane, collection: str, kind: str, api_version: str, namespaced: bool) -> None:
        self.api = cp.client(cp.admin_token)
        self.collection, self.kind, self.api_version, self.namespaced = collection, kind, api_version, namespaced
        self.objects: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.listeners: list[threading.Event] = []
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer{collection}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.signal_stop()
        self._thread.join(10)
        self.api.close()

    def signal_stop(self) -> None:
        self._stop.set()

    def list(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.objects.values())

    def path(self, obj: dict[str, Any]) -> str:
        return object_path(self.collection, obj["metadata"], self.namespaced)

    def _notify(self) -> None:
        for ev in self.listeners:
            ev.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listing = self.api.get(self.collection)
                with self.lock:
                    self.objects = {o["metadata"]["uid"]: o for o in listing.get("items") or []}
                self.synced.set()
                self._notify()
                rv = listing["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    for ev in self.api.watch_lines(self.collection, rv, timeout=5):
                        obj = ev.get("object") or {}
                        kind = ev.get("type")
                        if kind == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), str(obj.get("message")), "WATCH", self.collection)
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if kind == "BOOKMARK":
                            continue
                        with self.lock:
                            if kind == "DELETED":
                                self.objects.pop(obj["metadata"]["uid"], None)
                            else:
                                self.objects[obj["metadata"]["uid"]] = obj
                        self._notify()
                        if self._stop.is_set():
                            return
            except (ApiError, httpx.HTTPError, KeyError, ValueError):
                self._stop.wait(0.3)
