"""Reading a scheduler config's YAML (CONF-1, CONF-3): values as Volcano's Go decoder takes them
(YAML 1.1 booleans, nulls), duplicate keys refused, every node's file and line kept for the
messages, and finding the config in a bare file or in a ConfigMap manifest."""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tidesched.framework.arguments import ConfigError

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

BOOL_TAG = "tag:yaml.org,2002:bool"
NULL_TAG = "tag:yaml.org,2002:null"
STR_TAG = "tag:yaml.org,2002:str"


class ValueConstructor(yaml.constructor.SafeConstructor):
    """Builds argument values the way Go's yaml decoder sees them in an ``interface{}``."""

    def construct_yaml_timestamp(self, node: Node) -> Any:  # type: ignore[override]
        # yaml.v2 only decodes timestamps into time.Time fields; in a free map they stay text.
        return self.construct_scalar(node)  # type: ignore[arg-type]


ValueConstructor.add_constructor("tag:yaml.org,2002:timestamp", ValueConstructor.construct_yaml_timestamp)


def construct(node: Node) -> Any:
    return ValueConstructor().construct_document(node)


def safe_construct(node: Node) -> Any:
    """construct for messages: never raises, falls back to the raw text."""
    try:
        return construct(node)
    except yaml.YAMLError:
        return getattr(node, "value", None)


def closest(word: str, candidates: Collection[str]) -> str:
    lowered = {c.lower(): c for c in candidates}
    if word.lower() in lowered:
        return f'; did you mean "{lowered[word.lower()]}"?'
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.75)
    return f'; did you mean "{match[0]}"?' if match else ""


class Reader:
    """Walks a composed YAML node tree, keeping file/line context for messages."""

    def __init__(self, source: str, line_offset: int) -> None:
        self.source = source
        self.line_offset = line_offset
        self.warnings: list[str] = []

    def line(self, node: Node) -> int:
        return node.start_mark.line + 1 + self.line_offset

    def error(self, node: Node | None, path: str | None, reason: str) -> ConfigError:
        return ConfigError(reason, source=self.source, line=None if node is None else self.line(node), field=path)

    def warn(self, node: Node, path: str, message: str) -> None:
        self.warnings.append(f"{self.source}:{self.line(node)}: {path}: {message}")

    def mapping(self, node: Node, path: str, what: str = "a mapping") -> list[tuple[str, Node, Node]]:
        """Key/value pairs of a mapping node; duplicate keys are an error, as in yaml.v2."""
        if not isinstance(node, MappingNode):
            raise self.error(node, path, f"expected {what}, got {node_kind(node)}")
        seen: dict[str, Node] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.key(key_node, path)
            if key in seen:
                raise self.error(
                    key_node, path, f"duplicate key {key!r} (first at line {self.line(seen[key])})"
                )
            seen[key] = key_node
        # Resolve "<<" merge keys; explicit keys come last and therefore win.
        try:
            yaml.constructor.SafeConstructor().flatten_mapping(node)
        except yaml.MarkedYAMLError as exc:
            raise self.error(node, path, f"invalid merge key: {exc.problem}") from None
        pairs: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            pairs[self.key(key_node, path)] = (key_node, value_node)
        return [(k, kn, vn) for k, (kn, vn) in pairs.items()]

    def key(self, node: Node, path: str) -> str:
        if not isinstance(node, ScalarNode):
            raise self.error(node, path, f"mapping keys must be scalars, got {node_kind(node)}")
        # Go decodes any scalar key into a string field by its text.
        return str(node.value)

    def sequence(self, node: Node, path: str) -> list[Node]:
        if is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            raise self.error(node, path, f"expected a list, got {node_kind(node)}")
        return list(node.value)

    def text(self, node: Node, path: str) -> str:
        if not isinstance(node, ScalarNode) or is_null(node):
            raise self.error(node, path, f"expected a string, got {node_kind(node)}")
        return str(node.value)

    def value_tree(self, node: Node, path: str) -> Any:
        """Plain Python value of a subtree; duplicate keys anywhere below are errors."""
        if isinstance(node, MappingNode):
            for key, _, child in self.mapping(node, path):
                self.value_tree(child, f"{path}[{key!r}]")
        elif isinstance(node, SequenceNode):
            for i, child in enumerate(node.value):
                self.value_tree(child, f"{path}[{i}]")
        try:
            return construct(node)
        except yaml.MarkedYAMLError as exc:
            raise self.error(node, path, f"cannot read value: {exc.problem}") from None


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == NULL_TAG


def node_kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if is_null(node):
        return "null"
    value = safe_construct(node)
    if isinstance(value, bool):
        return f"boolean {node.value}"
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return f"number {node.value}"
    return f"string {node.value!r}"


def compose_all(text: str, source: str, line_offset: int) -> list[Node]:
    try:
        return [doc for doc in yaml.compose_all(text, Loader=_Loader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1 + line_offset
        problem = exc.problem or exc.context or "malformed document"
        if exc.context and exc.problem:
            problem = f"{problem} ({exc.context})"
        raise ConfigError(f"invalid YAML: {problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None


def configmap_entries(reader: Reader, doc: Node) -> list[tuple[str, Node]] | None:
    """``*.conf`` entries of a ConfigMap document, or None when ``doc`` is not a ConfigMap."""
    if not isinstance(doc, MappingNode):
        return None
    pairs = {k: v for k, _, v in reader.mapping(doc, "")}
    kind = pairs.get("kind")
    if not (isinstance(kind, ScalarNode) and kind.value == "ConfigMap"):
        return None
    data = pairs.get("data")
    if data is None or is_null(data):
        return []
    return [(k, v) for k, _, v in reader.mapping(data, "data") if k.endswith(".conf")]


def select_config(
    text: str, source: str, conf_key: str | None
) -> tuple[Node | None, str, int]:
    """Return (root node of the scheduler config, source label, line offset)."""
    outer = Reader(source, 0)
    docs = compose_all(text, source, 0)
    if not docs:
        return None, source, 0

    entries: list[tuple[str, Node]] = []
    saw_configmap = False
    for doc in docs:
        found = configmap_entries(outer, doc)
        if found is not None:
            saw_configmap = True
            entries.extend(found)

    if not saw_configmap:
        if len(docs) > 1:
            raise ConfigError(
                f"{len(docs)} YAML documents found; expected one scheduler configuration",
                source=source,
                line=outer.line(docs[1]),
            )
        return docs[0], source, 0

    if conf_key is not None:
        entries = [(k, v) for k, v in entries if k == conf_key]
        if not entries:
            raise ConfigError(f"ConfigMap has no data key {conf_key!r}", source=source)
    if not entries:
        raise ConfigError("ConfigMap has no data key ending in '.conf'", source=source)
    if len(entries) > 1:
        keys = ", ".join(k for k, _ in entries)
        raise ConfigError(
            f"several scheduler configurations in ConfigMap data ({keys}); pass conf_key to choose",
            source=source,
            line=outer.line(entries[1][1]),
        )
    key, node = entries[0]
    if not isinstance(node, ScalarNode) or is_null(node):
        raise outer.error(node, f"data[{key!r}]", f"expected the configuration text, got {node_kind(node)}")
    inner_text = str(node.value)
    if node.style == "|":
        # Literal block content starts on the line after the indicator and keeps its line
        # breaks, so inner line N is outer line (indicator line + N).
        return root_of(inner_text, source, node.start_mark.line + 1), source, node.start_mark.line + 1
    label = f"{source}[{key}]"
    return root_of(inner_text, label, 0), label, 0


def root_of(text: str, source: str, line_offset: int) -> Node | None:
    docs = compose_all(text, source, line_offset)
    if len(docs) > 1:
        raise ConfigError(
            f"{len(docs)} YAML documents found; expected one scheduler configuration",
            source=source,
            line=docs[1].start_mark.line + 1 + line_offset,
        )
    return docs[0] if docs else None
