"""A plugin's or action's ``arguments`` (``Arguments``: typed getters that name the file, line
and field of a bad value) and ``ConfigError``, the one error a bad scheduler config raises
(CONF-3)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


# strconv.ParseBool's spellings.
GO_BOOL_STRINGS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
                   **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


class ConfigError(ValueError):
    """A configuration that must not be used.

    ``str(err)`` reads ``<source>:<line>: <field>: <reason>``; parts that are unknown are left
    out.  ``line`` is 1-based.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        location = ""
        if self.source is not None:
            location = self.source if self.line is None else f"{self.source}:{self.line}"
        elif self.line is not None:
            location = f"line {self.line}"
        parts = [p for p in (location, self.field) if p]
        parts.append(self.reason)
        return ": ".join(parts)


@dataclass(frozen=True)
class Origin:
    """Where a piece of configuration came from, for error messages."""

    source: str
    line: int | None
    path: str


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


class Arguments(Mapping[str, Any]):
    """Read-only ``arguments:`` map of a plugin or action, with typed getters.

    A getter returns ``default`` when the key is absent or null.  A value of the wrong type is
    a :class:`ConfigError` naming the owner and key (upstream only logs a warning and keeps
    the default, which hides typos such as a quoted number).  Types follow upstream's
    ``framework/arguments.go``: ints for ``get_int``, ints or floats for ``get_float``, real
    booleans for ``get_bool`` and strings for ``get_str``; strings are never parsed.
    Keys may contain dots (``leastrequested.weight``); they are plain keys, not paths.
    """

    __slots__ = ("_data", "_owner", "_origin", "_lines")

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        owner: str = "arguments",
        origin: Origin | None = None,
        lines: Mapping[str, int] | None = None,
    ) -> None:
        self._data: dict[str, Any] = dict(data or {})
        self._owner = owner
        self._origin = origin
        self._lines: dict[str, int] = dict(lines or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Arguments({self._data!r}, owner={self._owner!r})"

    @property
    def owner(self) -> str:
        return self._owner

    def locate(self, exc: Exception) -> ConfigError:
        """``exc`` from reading these arguments, placed at their file, line and field: a
        plugin's own check may raise a ConfigError without a location (or, by mistake, any
        exception); the operator still gets one message naming where to look."""
        if isinstance(exc, ConfigError):
            if exc.source is not None or self._origin is None:
                return exc
            reason, sub = exc.reason, exc.field or ""
        else:
            reason, sub = f"{self._owner}: invalid arguments: {type(exc).__name__}: {exc}", ""
        if self._origin is None:
            return ConfigError(reason, field=sub or None)
        key = sub[len("arguments["):].split("]", 1)[0].strip("'\"") if sub.startswith("arguments[") else ""
        field = self._origin.path + (sub[len("arguments"):] if sub.startswith("arguments") else (f".{sub}" if sub else ""))
        return ConfigError(reason, source=self._origin.source, line=self._lines.get(key, self._origin.line), field=field)

    def _bad(self, key: str, expected: str, value: Any, hint: str = "") -> ConfigError:
        reason = f"{self._owner}: expected {expected}, got {_describe(value)}{hint}"
        if self._origin is None:
            return ConfigError(reason, field=f"arguments[{key!r}]")
        return ConfigError(
            reason,
            source=self._origin.source,
            line=self._lines.get(key, self._origin.line),
            field=f"{self._origin.path}[{key!r}]",
        )

    def _lookup(self, key: str) -> Any:
        return self._data.get(key)

    @staticmethod
    def _quoted_hint(value: Any) -> str:
        if isinstance(value, str):
            return " (write the value without quotes)"
        return ""

    def get_int(self, key: str, default: int) -> int:
        value = self._lookup(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(key, "an integer", value, self._quoted_hint(value))
        return value

    def get_float(self, key: str, default: float) -> float:
        value = self._lookup(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(key, "a number", value, self._quoted_hint(value))
        return float(value)

    def get_bool(self, key: str, default: bool) -> bool:
        """A bool, or a string Go's ``strconv.ParseBool`` reads (``"true"``, ``"0"``, ``"F"``,
        ...), as Volcano v1.15's ``GetBool`` takes it (5ba79f316): its own e2e suites rewrite
        the scheduler ConfigMap with every argument as a string."""
        value = self._lookup(key)
        if value is None:
            return default
        if isinstance(value, str) and value in GO_BOOL_STRINGS:
            return GO_BOOL_STRINGS[value]
        if not isinstance(value, bool):
            raise self._bad(key, "true or false", value)
        return value

    def get_str(self, key: str, default: str) -> str:
        value = self._lookup(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(key, "a string", value, " (quote the value)")
        return value

    def bad_value(self, key: str, expected: str, value: Any) -> ConfigError:
        """The error for a value of the right type that a plugin still refuses (its range)."""
        return self._bad(key, expected, value)

    def get_str_list(self, key: str, default: Sequence[str] = ()) -> list[str]:
        """A list of strings (e.g. ``protectedModels``)."""
        value = self._lookup(key)
        if value is None:
            return list(default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, "a list of strings", value)
        return list(value)

    def get_mapping(self, key: str, default: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A nested mapping argument (e.g. ``podOwnerReferenceToServiceType``)."""
        value = self._lookup(key)
        if value is None:
            return dict(default or {})
        if not isinstance(value, Mapping):
            raise self._bad(key, "a mapping", value)
        return dict(value)
