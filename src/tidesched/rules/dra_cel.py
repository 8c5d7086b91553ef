"""CEL device selectors of Dynamic Resource Allocation, as kube-scheduler evaluates them.

A DeviceClass or a request of a ResourceClaim selects devices with CEL expressions over one
``device`` variable: ``device.driver``, ``device.attributes[domain][name]``,
``device.capacity[domain][name]`` and ``device.allowMultipleAllocations``
(k8s.io/dynamic-resource-allocation/cel). Expressions are compiled and evaluated by the CEL
project's own C++ runtime (``cel-expr-python``), not by a hand-written interpreter; what
Kubernetes adds on top is registered here:

* the quantity library (``quantity``, ``isQuantity``, ``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``add``, ``sub``, ``sign``, ``asInteger``, ``isInteger``,
  ``asApproximateFloat``) and the semver library (``semver``, ``isSemver``, ``major``,
  ``minor``, ``patch``, ``compareTo``, ``isGreaterThan``, ``isLessThan``). Quantities and
  versions are values of one small message type (``kubernetes.Value``: a kind and the
  canonical text), so ``==`` compares values;
* ``cel.bind`` (CEL's bindings extension) and the strings extension, as Kubernetes' base
  environment has them;
* an attribute name without a domain is looked up under the device's driver, and a domain
  the device lacks reads as an empty map (``has(device.attributes["other"].x)`` is false).

A device's attributes never change while its ResourceSlice does not, so callers evaluate an
expression once per device and keep the answer. Type errors in an expression are found when
it is compiled (the API server checked it already when the object was written); errors at
evaluation (a missing attribute) are returned as :class:`CelError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


class CelError(ValueError):
    """An expression that does not compile, or whose evaluation failed for one device."""


# -- the two Kubernetes value types, as messages the CEL runtime understands ----------------

def _message_pool() -> tuple[Any, type, type]:
    fdp = descriptor_pb2.FileDescriptorProto(name="tidesched/k8s_cel.proto", package="kubernetes", syntax="proto3")
    msg = fdp.message_type.add(name="Value")
    for number, name in enumerate(("kind", "text"), 1):
        msg.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return pool, message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Value"))


# Quantities and versions are one message type (kind "quantity" or "semver"): the runtime
# dispatches member functions by the kind of value only, so two message types could not both
# have a compareTo.
_POOL, ValueMsg = _message_pool()
_Q = _S = cel.Type("kubernetes.Value")
QUANTITY, SEMVER = "quantity", "semver"
_INT, _BOOL, _STR, _DBL, _DYN = cel.Type.INT, cel.Type.BOOL, cel.Type.STRING, cel.Type.DOUBLE, cel.Type.DYN

# -- semver 2.0.0 (github.com/blang/semver, as Kubernetes parses versions) -----------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def parse_semver(text: str) -> tuple[int, int, int, tuple[Any, ...]]:
    """(major, minor, patch, pre-release parts); ValueError when not a semantic version."""
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"invalid semantic version {text!r}")
    pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def compare_semver(a: str, b: str) -> int:
    """Semantic version precedence: build metadata is ignored; a pre-release sorts before its
    release; numeric identifiers sort numerically and before alphanumeric ones."""
    ma, mb = parse_semver(a), parse_semver(b)
    if ma[:3] != mb[:3]:
        return -1 if ma[:3] < mb[:3] else 1
    pa, pb = ma[3], mb[3]
    if pa == pb:
        return 0
    if not pa or not pb:
        return 1 if not pa else -1
    for x, y in zip(pa, pb):
        if x == y:
            continue
        if isinstance(x, int) != isinstance(y, int):
            return -1 if isinstance(x, int) else 1
        return -1 if x < y else 1
    return -1 if len(pa) < len(pb) else 1


# -- the environment --------------------------------------------------------------------------

def _cmp(a: Decimal, b: Decimal) -> int:
    return (a > b) - (a < b)


def _ordered(a: Any, b: Any, val: Callable[[Any], Decimal]) -> int:
    """compareTo of two quantities or two semantic versions."""
    if a.kind == b.kind == QUANTITY:
        return _cmp(val(a), val(b))
    if a.kind == b.kind == SEMVER:
        return compare_semver(a.text, b.text)
    raise ValueError("compareTo needs two quantities or two semantic versions")


class DeviceCel:
    """The CEL environment of DRA device selectors. ``parse_quantity`` turns a Kubernetes
    quantity into an exact Decimal (``model.quantity.parse_quantity``; passed in because the
    rules layer sits below the model)."""

    def __init__(self, parse_quantity: Callable[[str], Decimal]) -> None:
        parse = functools.lru_cache(maxsize=4096)(parse_quantity)
        self._parse = parse

        def qty(d: Decimal) -> Any:
            return ValueMsg(kind=QUANTITY, text=str(d.normalize()) if d else "0")

        def val(q: Any) -> Decimal:
            if q.kind != QUANTITY:
                raise ValueError("not a quantity")
            return Decimal(q.text)

        def ver(s: Any) -> tuple[int, int, int, tuple[Any, ...]]:
            if s.kind != SEMVER:
                raise ValueError("not a semantic version")
            return parse_semver(s.text)

        def quantity(s: str) -> Any:
            return qty(parse(s))

        def is_quantity(s: str) -> bool:
            try:
                parse(s)
            except ValueError:
                return False
            return True

        def as_integer(q: Any) -> int:
            d = val(q)
            if d != d.to_integral_value() or not -(2**63) <= d < 2**63:
                raise ValueError("cannot convert value to integer")
            return int(d)

        def semver(s: str) -> Any:
            parse_semver(s)
            return ValueMsg(kind=SEMVER, text=s)

        def is_semver(s: str) -> bool:
            try:
                parse_semver(s)
            except ValueError:
                return False
            return True

        def ov(name: str, ret: Any, params: list[Any], impl: Callable[..., Any], member: bool = False) -> Any:
            return cel.Overload(name, ret, params, is_member=member, impl=impl)

        functions = [
            cel.FunctionDecl("quantity", [ov("quantity_string", _Q, [_STR], quantity)]),
            cel.FunctionDecl("isQuantity", [ov("isQuantity_string", _BOOL, [_STR], is_quantity)]),
            cel.FunctionDecl("sign", [ov("quantity_sign", _INT, [_Q], lambda q: _cmp(val(q), Decimal(0)), True)]),
            cel.FunctionDecl("asInteger", [ov("quantity_asInteger", _INT, [_Q], as_integer, True)]),
            cel.FunctionDecl("isInteger", [ov("quantity_isInteger", _BOOL, [_Q],
                                              lambda q: val(q) == val(q).to_integral_value() and -(2**63) <= val(q) < 2**63, True)]),
            cel.FunctionDecl("asApproximateFloat", [ov("quantity_asApproximateFloat", _DBL, [_Q], lambda q: float(val(q)), True)]),
            cel.FunctionDecl("add", [
                ov("quantity_add", _Q, [_Q, _Q], lambda a, b: qty(val(a) + val(b)), True),
                ov("quantity_add_int", _Q, [_Q, _INT], lambda a, b: qty(val(a) + b), True),
            ]),
            cel.FunctionDecl("sub", [
                ov("quantity_sub", _Q, [_Q, _Q], lambda a, b: qty(val(a) - val(b)), True),
                ov("quantity_sub_int", _Q, [_Q, _INT], lambda a, b: qty(val(a) - b), True),
            ]),
            cel.FunctionDecl("semver", [ov("semver_string", _S, [_STR], semver)]),
            cel.FunctionDecl("isSemver", [ov("isSemver_string", _BOOL, [_STR], is_semver)]),
            cel.FunctionDecl("major", [ov("semver_major", _INT, [_S], lambda s: ver(s)[0], True)]),
            cel.FunctionDecl("minor", [ov("semver_minor", _INT, [_S], lambda s: ver(s)[1], True)]),
            cel.FunctionDecl("patch", [ov("semver_patch", _INT, [_S], lambda s: ver(s)[2], True)]),
            cel.FunctionDecl("compareTo", [ov("k8s_compareTo", _INT, [_Q, _Q], lambda a, b: _ordered(a, b, val), True)]),
            cel.FunctionDecl("isGreaterThan", [
                ov("k8s_isGreaterThan", _BOOL, [_Q, _Q], lambda a, b: _ordered(a, b, val) > 0, True)]),
            cel.FunctionDecl("isLessThan", [
                ov("k8s_isLessThan", _BOOL, [_Q, _Q], lambda a, b: _ordered(a, b, val) < 0, True)]),
        ]
        self._env = cel.NewEnv(
            _POOL,
            variables={"device": cel.Type.Map(_STR, cel.Type.DYN)},
            extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
            functions=functions,
        )
        self._compiled: dict[str, Selector] = {}

    def compile(self, expression: str) -> "Selector":
        """The compiled selector (kept per expression); CelError when it does not compile or
        cannot be a boolean."""
        hit = self._compiled.get(expression)
        if hit is None:
            try:
                program = self._env.compile(expression)
            except RuntimeError as exc:
                raise CelError(_short(str(exc))) from None
            kind = program.return_type()
            if kind not in (cel.Type.BOOL, cel.Type.DYN):
                raise CelError(f"must evaluate to bool, not {kind.name().lower()}")
            domains = frozenset(m.group(2) for m in _DOMAIN.finditer(expression))
            hit = self._compiled[expression] = Selector(expression, program, domains)
        return hit

    def device_data(self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, str],
                    allow_multiple: bool) -> dict[str, Any]:
        """The ``device`` variable of one device: attributes as parsed values (``("version",
        text)`` for versions), capacity as quantity text, both keyed by domain then name."""
        attrs: dict[str, dict[str, Any]] = {}
        for name, value in attributes.items():
            domain, ident = split_qualified(name, driver)
            if isinstance(value, tuple):  # a version
                value = ValueMsg(kind=SEMVER, text=value[1])
            attrs.setdefault(domain, {})[ident] = value
        caps: dict[str, dict[str, Any]] = {}
        for name, text in capacity.items():
            domain, ident = split_qualified(name, driver)
            d = self._parse(text)
            caps.setdefault(domain, {})[ident] = ValueMsg(kind=QUANTITY, text=str(d.normalize()) if d else "0")
        return {"driver": driver, "allowMultipleAllocations": allow_multiple, "attributes": attrs, "capacity": caps}


_DOMAIN = re.compile(r"device\.(attributes|capacity)\[\s*[\"']([^\"']*)[\"']\s*\]")


@dataclass(frozen=True)
class Selector:
    expression: str
    program: Any
    domains: frozenset[str]  # domains the expression names: present (maybe empty) when evaluated

    def matches(self, device: Mapping[str, Any]) -> bool:
        """The selector's answer for one device (``DeviceCel.device_data``); CelError when the
        evaluation fails (a missing attribute, a value of the wrong type)."""
        data = device
        if self.domains:
            attrs, caps = device["attributes"], device["capacity"]
            if any(d not in attrs or d not in caps for d in self.domains):
                data = dict(device)
                data["attributes"] = {**{d: {} for d in self.domains}, **attrs}
                data["capacity"] = {**{d: {} for d in self.domains}, **caps}
        try:
            result = self.program.eval(data={"device": data})
        except Exception as exc:  # noqa: BLE001 - the runtime raises plain exceptions from impls
            raise CelError(_short(str(exc))) from None
        if result.type() == cel.Type.ERROR:
            raise CelError(_short(str(result.value())))
        value = result.value()
        if not isinstance(value, bool):
            raise CelError(f"result is not a bool: {value!r}")
        return value


def split_qualified(name: str, default_domain: str) -> tuple[str, str]:
    """A qualified attribute or capacity name as (domain, name): no domain means the driver's."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


def _short(message: str) -> str:
    """The first line of a runtime message, without its status-code suffix."""
    line = message.strip().splitlines()[0] if message.strip() else message
    return re.sub(r"\s*\[[A-Z_]+\]$", "", line)
