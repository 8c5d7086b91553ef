"""Read Kubernetes manifests (YAML or JSON, files or directories) into plain dicts.

Large inputs load fast: JSON goes through the json module and YAML through libyaml's C loader
when PyYAML was built with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson
import yaml

try:
    _YamlLoader: type = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml
    _YamlLoader = yaml.SafeLoader

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class InputError(ValueError):
    """Unreadable input; the message names the file (and line where known)."""


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str  # "file.yaml#3" — file and document index, for messages
    obj: Mapping[str, Any]


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.suffix in MANIFEST_SUFFIXES and f.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    return files


def _flatten(obj: Any, source: str) -> Iterator[Manifest]:
    if obj is None:
        return
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from _flatten(item, f"{source}[{i}]")
        return
    if not isinstance(obj, Mapping):
        raise InputError(f"{source}: expected a Kubernetes object (mapping), got {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str):
        shown = "missing" if kind is None else f"{type(kind).__name__} {kind!r}"[:80]
        raise InputError(f"{source}: field kind must be a string naming the object's kind, got {shown}")
    if kind == "List" or (kind.endswith("List") and "items" in obj):
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise InputError(f"{source}: List.items must be a list")
        for i, item in enumerate(items):
            yield from _flatten(item, f"{source}.items[{i}]")
        return
    yield Manifest(source, obj)


def _json_loads(text: str) -> Any:
    """orjson for speed (a 20,000-pod list parses several times faster); what it refuses but
    the standard parser takes (NaN, integers beyond 64 bits) goes to the standard parser, so
    the accepted input and its messages are the same as before."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def load_text(text: str, source: str) -> list[Manifest]:
    """Parse one file's text: JSON (object, list or List) or multi-document YAML."""
    stripped = text.lstrip()
    out: list[Manifest] = []
    if source.endswith(".json") or stripped[:1] in ("[", "{"):
        try:
            out.extend(_flatten(_json_loads(text), source))
            return out
        except json.JSONDecodeError:
            if source.endswith(".json"):
                # JSON Lines / one object per document: fall through to the YAML reader,
                # which accepts a stream of JSON documents separated by '---'.
                pass
        except InputError:
            raise
        except (RecursionError, ValueError) as exc:  # nested too deep; an integer too long
            raise InputError(f"{source}: invalid JSON: {exc}") from None
    try:
        for i, doc in enumerate(yaml.load_all(text, Loader=_YamlLoader)):
            out.extend(_flatten(doc, f"{source}#{i + 1}"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{source}{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{source}: invalid YAML: nested too deep") from None
    return out


def load_paths(paths: Iterable[str | Path]) -> list[Manifest]:
    manifests: list[Manifest] = []
    for f in _expand(paths):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{f}: cannot read: {exc}") from None
        manifests.extend(load_text(text, str(f)))
    return manifests
