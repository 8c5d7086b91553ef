"""Volcano's multi-dimensional ``Resource`` vector with its comparison semantics.

Units are Volcano's: ``milli_cpu`` in millicores, ``memory`` in bytes, and every
other resource ("scalar": GPUs, NPUs, hugepages, ephemeral-storage, ...) in
milli-units, so 5 GPUs are ``5000.0``.  ``pods`` is not a scalar: it sets
``max_task_num`` (a node's pod capacity) and is ignored by arithmetic.

Comparisons use Volcano's tolerance ``MIN_RESOURCE`` and its two policies for a
scalar dimension that one side does not list (``Dimension.ZERO`` /
``Dimension.INFINITY``).  The class is deliberately plain floats and a dict:
it is created and compared per task inside the scheduling loops.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import sys
from collections.abc import Mapping
from typing import Self

from tidesched.model.quantity import QuantityError, QuantityInput, format_amount, milli_value, value

__all__ = [
    "CPU",
    "MEMORY",
    "PODS",
    "MIN_RESOURCE",
    "Dimension",
    "Resource",
    "is_scalar_resource_name",
    "min_resource",
    "max_resource",
    "exceeded_part",
    "share",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

# Volcano's minResource: amounts below it count as zero, and two amounts closer
# than it count as equal (absorbs float drift from repeated add/sub).
MIN_RESOURCE = 0.1

# Scalar names ignored by emptiness checks (Volcano's ignoredScalarResources).
_IGNORED_SCALARS = frozenset({PODS})


# A Kubernetes qualified name's parts (apimachinery's IsQualifiedName): an optional DNS-1123
# subdomain prefix, then a name of at most 63 characters.
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUOTA_PREFIX = "requests."


def _is_qualified_name(name: str) -> bool:
    prefix, slash, part = name.rpartition("/")
    if slash:
        if "/" in prefix or not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return False
    return 0 < len(part) <= 63 and _QUALIFIED_PART.match(part) is not None


@functools.lru_cache(maxsize=1024)
def is_scalar_resource_name(name: str) -> bool:
    """Whether a resource name other than cpu, memory and pods counts as a scalar, as Volcano's
    ``NewResource`` decides (``pkg/scheduler/api/resource_info.go``): ``ephemeral-storage``,
    and what kube-scheduler's ``IsScalarResourceName`` accepts: extended resources
    (``nvidia.com/gpu``; not the ``requests.``-prefixed quota form), ``hugepages-*``,
    ``attachable-volumes-*`` and ``kubernetes.io/``-prefixed names. Object-count quotas
    (``count/pods``) and quota-style names (``requests.cpu``) are not resources.

    PodGroups written by Volcano's job and podgroup controllers carry both forms in
    ``spec.minResources`` (``cpu`` and ``requests.cpu``); only the first counts."""
    if name == "ephemeral-storage":
        return True
    if name.startswith("count/"):
        return False
    if name.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in name:
        return True
    # Extended: not native (a native name has no "/"), not already a quota name, and a valid
    # qualified name once prefixed the quota way.
    return "/" in name and not name.startswith(_QUOTA_PREFIX) and _is_qualified_name(_QUOTA_PREFIX + name)


class Dimension(enum.Enum):
    """How a scalar dimension missing from one operand is treated (DimensionDefaultValue)."""

    ZERO = "Zero"
    INFINITY = "Infinity"


_ZERO = Dimension.ZERO
_INFINITY = Dimension.INFINITY
_INF = math.inf


class Resource:
    """A resource vector: cpu (millicores), memory (bytes), scalars (milli-units).

    Mutating operations (``add``, ``sub``, ``multi``, ``fit_delta``,
    ``min_dimension_resource``) work in place and return ``self`` so they can be
    chained as in Volcano: ``req.clone().add(a).sub(b)``.
    """

    __slots__ = ("milli_cpu", "memory", "scalars", "max_task_num")

    milli_cpu: float
    memory: float
    scalars: dict[str, float]
    max_task_num: int

    def __init__(
        self,
        milli_cpu: float = 0.0,
        memory: float = 0.0,
        scalars: Mapping[str, float] | None = None,
        max_task_num: int = 0,
    ) -> None:
        self.milli_cpu = float(milli_cpu)
        self.memory = float(memory)
        # Always a private dict: an empty dict plays the role of Go's nil map.
        self.scalars = {name: float(v) for name, v in scalars.items()} if scalars else {}
        self.max_task_num = int(max_task_num)

    # ------------------------------------------------------------------ construction

    @classmethod
    def empty(cls) -> Self:
        return cls()

    @classmethod
    def infinite(cls) -> Self:
        """Volcano's InfiniteResource: max float cpu/memory, max int pods, no scalars."""
        return cls(sys.float_info.max, sys.float_info.max, None, sys.maxsize)

    @classmethod
    def from_resource_list(cls, rl: Mapping[str, QuantityInput]) -> Self:
        """Build from a k8s ResourceList (``{"cpu": "500m", "memory": "1Gi", ...}``).

        Raises QuantityError naming the resource when a quantity is invalid.
        """
        r = cls()
        scalars = r.scalars
        for name, raw in rl.items():
            try:
                if name == CPU:
                    r.milli_cpu += milli_value(raw)
                elif name == MEMORY:
                    r.memory += value(raw)
                elif name == PODS:
                    r.max_task_num += value(raw)
                elif is_scalar_resource_name(name):
                    scalars[name] = scalars.get(name, 0.0) + milli_value(raw)
                # else: a quota-style name (``requests.cpu``, ``count/pods``, ``limits.memory``)
                # or another native name Volcano's NewResource does not count: skipped as there.
            except QuantityError as exc:
                raise QuantityError(f"resource {name!r}: {exc}") from exc
        return r

    def clone(self) -> Resource:
        r = Resource.__new__(Resource)
        r.milli_cpu = self.milli_cpu
        r.memory = self.memory
        r.scalars = self.scalars.copy()
        r.max_task_num = self.max_task_num
        return r

    # ------------------------------------------------------------------ accessors

    def get(self, name: str) -> float:
        """Amount of ``name`` in internal units; ``pods`` reads max_task_num; missing -> 0."""
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == PODS and name not in self.scalars:
            return float(self.max_task_num)
        return self.scalars.get(name, 0.0)

    def set_scalar(self, name: str, quantity: float) -> None:
        self.scalars[name] = float(quantity)

    def add_scalar(self, name: str, quantity: float) -> None:
        self.scalars[name] = self.scalars.get(name, 0.0) + quantity

    def resource_names(self) -> list[str]:
        """Names of the dimensions holding at least MIN_RESOURCE (cpu, memory, sorted scalars)."""
        names: list[str] = []
        if self.milli_cpu >= MIN_RESOURCE:
            names.append(CPU)
        if self.memory >= MIN_RESOURCE:
            names.append(MEMORY)
        names.extend(sorted(n for n, v in self.scalars.items() if v >= MIN_RESOURCE))
        return names

    def is_empty(self) -> bool:
        """True when every dimension is below MIN_RESOURCE (``pods`` and max_task_num ignored)."""
        if self.milli_cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        for name, v in self.scalars.items():
            if v >= MIN_RESOURCE and name not in _IGNORED_SCALARS:
                return False
        return True

    def is_best_effort(self) -> bool:
        """A request with nothing in it (Volcano's BestEffort test on a task's request)."""
        return self.is_empty()

    def is_zero(self, name: str) -> bool:
        """True when dimension ``name`` is below MIN_RESOURCE; an unknown scalar is zero."""
        if name == CPU:
            return self.milli_cpu < MIN_RESOURCE
        if name == MEMORY:
            return self.memory < MIN_RESOURCE
        return self.scalars.get(name, 0.0) < MIN_RESOURCE

    # ------------------------------------------------------------------ arithmetic (in place)

    def add(self, rr: Resource) -> Self:
        """Add ``rr`` dimension-wise (max_task_num is untouched, as in Volcano)."""
        self.milli_cpu += rr.milli_cpu
        self.memory += rr.memory
        if rr.scalars:
            s = self.scalars
            for name, v in rr.scalars.items():
                s[name] = s.get(name, 0.0) + v
        return self

    def sub(self, rr: Resource) -> Self:
        """Subtract ``rr``; unlike Volcano there is no sufficiency assertion, results may go negative."""
        self.milli_cpu -= rr.milli_cpu
        self.memory -= rr.memory
        if rr.scalars:
            s = self.scalars
            for name, v in rr.scalars.items():
                s[name] = s.get(name, 0.0) - v
        return self

    def multi(self, ratio: float) -> Self:
        self.milli_cpu *= ratio
        self.memory *= ratio
        s = self.scalars
        for name, v in s.items():
            s[name] = v * ratio
        return self

    def set_max_resource(self, rr: Resource) -> None:
        """Raise every dimension to at least ``rr``'s (scalars missing here are taken from rr)."""
        if rr.milli_cpu > self.milli_cpu:
            self.milli_cpu = rr.milli_cpu
        if rr.memory > self.memory:
            self.memory = rr.memory
        s = self.scalars
        for name, v in rr.scalars.items():
            cur = s.get(name)
            if cur is None or v > cur:
                s[name] = v

    def fit_delta(self, rr: Resource) -> Self:
        """Subtract request ``rr`` plus MIN_RESOURCE per requested dimension; negative = insufficient."""
        if rr.milli_cpu > 0:
            self.milli_cpu -= rr.milli_cpu + MIN_RESOURCE
        if rr.memory > 0:
            self.memory -= rr.memory + MIN_RESOURCE
        s = self.scalars
        for name, v in rr.scalars.items():
            if v > 0:
                s[name] = s.get(name, 0.0) - (v + MIN_RESOURCE)
        return self

    def min_dimension_resource(self, rr: Resource, default: Dimension = _ZERO) -> Self:
        """Lower every dimension to ``rr``'s where smaller.

        A scalar of self missing from ``rr`` becomes 0 under ZERO and is kept
        under INFINITY; scalars only in ``rr`` are not added.
        """
        if rr.milli_cpu < self.milli_cpu:
            self.milli_cpu = rr.milli_cpu
        if rr.memory < self.memory:
            self.memory = rr.memory
        s = self.scalars
        rs = rr.scalars
        for name, v in s.items():
            other = rs.get(name)
            if other is not None:
                if other < v:
                    s[name] = other
            elif default is _ZERO:
                s[name] = 0.0
        return self

    # ------------------------------------------------------------------ comparisons
    # "l <= r" with tolerance is Volcano's `l < r || |l-r| < minResource`.  It is
    # written as `l < r or l - r < tol` (same result, since l >= r there) and not
    # as `l < r + tol`, which differs for large magnitudes where r + 0.1 == r.

    def less(self, rr: Resource, default: Dimension = _ZERO) -> bool:
        """Every dimension of self strictly below rr's (no tolerance)."""
        if not self.milli_cpu < rr.milli_cpu:
            return False
        if not self.memory < rr.memory:
            return False
        ls = self.scalars
        rs = rr.scalars
        if default is _INFINITY:
            # A dimension missing on the left is infinite: never less than a listed one.
            for name in rs:
                if name not in ls:
                    return False
            for name, lv in ls.items():
                rv = rs.get(name)
                if rv is not None and not lv < rv:
                    return False
            return True
        for name, lv in ls.items():
            if not lv < rs.get(name, 0.0):
                return False
        return True

    def less_equal(self, rr: Resource, default: Dimension = _ZERO) -> bool:
        """Every dimension of self at most rr's, within MIN_RESOURCE."""
        tol = MIN_RESOURCE
        lv = self.milli_cpu
        rv = rr.milli_cpu
        if not (lv < rv or lv - rv < tol):
            return False
        lv = self.memory
        rv = rr.memory
        if not (lv < rv or lv - rv < tol):
            return False
        ls = self.scalars
        rs = rr.scalars
        if default is _INFINITY:
            for name in rs:
                if name not in ls:
                    return False
            for name, lv in ls.items():
                rv2 = rs.get(name)
                if rv2 is not None and not (lv < rv2 or lv - rv2 < tol):
                    return False
            return True
        for name, lv in ls.items():
            rv = rs.get(name, 0.0)
            if not (lv < rv or lv - rv < tol):
                return False
        return True

    def less_partly(self, rr: Resource, default: Dimension = _ZERO) -> bool:
        """Some dimension of self strictly below rr's."""
        if self.milli_cpu < rr.milli_cpu or self.memory < rr.memory:
            return True
        ls = self.scalars
        rs = rr.scalars
        if default is _ZERO:
            # As in Volcano, a dimension listed only on the right counts as "left is 0 < right".
            for name in rs:
                if name not in ls:
                    return True
            for name, lv in ls.items():
                if lv < rs.get(name, 0.0):
                    return True
            return False
        for name, lv in ls.items():
            rv = rs.get(name)
            if rv is None or lv < rv:  # missing on the right = infinite
                return True
        return False

    def less_equal_partly(self, rr: Resource, default: Dimension = _ZERO) -> bool:
        """Some dimension of self at most rr's, within MIN_RESOURCE."""
        tol = MIN_RESOURCE
        lv = self.milli_cpu
        rv = rr.milli_cpu
        if lv < rv or lv - rv < tol:
            return True
        lv = self.memory
        rv = rr.memory
        if lv < rv or lv - rv < tol:
            return True
        ls = self.scalars
        rs = rr.scalars
        if default is _ZERO:
            for name in rs:
                if name not in ls:
                    return True
            for name, lv in ls.items():
                rv = rs.get(name, 0.0)
                if lv < rv or lv - rv < tol:
                    return True
            return False
        for name, lv in ls.items():
            rv2 = rs.get(name)
            if rv2 is None or lv < rv2 or lv - rv2 < tol:
                return True
        return False

    def less_equal_with_dimension(self, rr: Resource, req: Resource | None) -> bool:
        """``self <= rr`` on the dimensions ``req`` asks for (> 0) only.

        Used for quota checks: a job that requests no GPUs is not blocked by a
        queue whose GPU quota is exhausted.  As in Volcano this comparison has
        no tolerance, ignores ``pods``, and with ``req`` None falls back to
        ``less_equal(rr, ZERO)``.
        """
        if req is None:
            return self.less_equal(rr, _ZERO)
        if req.milli_cpu > 0 and self.milli_cpu > rr.milli_cpu:
            return False
        if req.memory > 0 and self.memory > rr.memory:
            return False
        ls = self.scalars
        if not ls:
            return True
        rs = rr.scalars
        for name, q in req.scalars.items():
            if q > 0 and name not in _IGNORED_SCALARS and ls.get(name, 0.0) > rs.get(name, 0.0):
                return False
        return True

    def less_equal_with_names(self, rr: Resource, default: Dimension = _ZERO) -> tuple[bool, list[str]]:
        """``less_equal`` that also lists the dimensions where self exceeds rr (for events)."""
        tol = MIN_RESOURCE
        names: list[str] = []
        if not (self.milli_cpu < rr.milli_cpu or self.milli_cpu - rr.milli_cpu < tol):
            names.append(CPU)
        if not (self.memory < rr.memory or self.memory - rr.memory < tol):
            names.append(MEMORY)
        rs = rr.scalars
        for name in sorted(self.scalars):
            lv = self.scalars[name]
            rv = rs.get(name)
            if rv is None:
                if default is _INFINITY:
                    continue
                rv = 0.0
            if not (lv < rv or lv - rv < tol):
                names.append(name)
        return (not names, names)

    def less_equal_with_dimension_names(self, rr: Resource, req: Resource | None) -> tuple[bool, list[str]]:
        """``less_equal_with_dimension`` that also lists the exceeded dimensions."""
        if req is None:
            return self.less_equal_with_names(rr, _ZERO)
        names: list[str] = []
        if req.milli_cpu > 0 and self.milli_cpu > rr.milli_cpu:
            names.append(CPU)
        if req.memory > 0 and self.memory > rr.memory:
            names.append(MEMORY)
        ls = self.scalars
        if ls:
            rs = rr.scalars
            for name in sorted(req.scalars):
                if req.scalars[name] > 0 and name not in _IGNORED_SCALARS and ls.get(name, 0.0) > rs.get(name, 0.0):
                    names.append(name)
        return (not names, names)

    def equal(self, rr: Resource, default: Dimension = _ZERO) -> bool:
        """All dimensions equal within MIN_RESOURCE.

        Symmetric over the union of scalar names: under ZERO a missing scalar is
        0, under INFINITY a scalar listed on only one side makes them unequal.
        """
        tol = MIN_RESOURCE
        if not (self.milli_cpu == rr.milli_cpu or abs(self.milli_cpu - rr.milli_cpu) < tol):
            return False
        if not (self.memory == rr.memory or abs(self.memory - rr.memory) < tol):
            return False
        ls = self.scalars
        rs = rr.scalars
        if default is _INFINITY:
            if ls.keys() != rs.keys():
                return False
        else:
            for name, rv in rs.items():
                if name not in ls and not abs(rv) < tol:
                    return False
        for name, lv in ls.items():
            rv = rs.get(name, 0.0)
            if not (lv == rv or abs(lv - rv) < tol):
                return False
        return True

    def diff(self, rr: Resource, default: Dimension = _ZERO) -> tuple[Resource, Resource]:
        """Split ``self - rr`` into (increased, decreased), both non-negative.

        ``increased`` holds where self is larger, ``decreased`` where rr is
        larger (ties land in ``decreased`` as 0, like Volcano).  Under INFINITY
        a scalar missing on one side yields ``math.inf`` on the other's side
        (Volcano marks that case with -1).
        """
        inc = Resource()
        dec = Resource()
        if self.milli_cpu > rr.milli_cpu:
            inc.milli_cpu = self.milli_cpu - rr.milli_cpu
        else:
            dec.milli_cpu = rr.milli_cpu - self.milli_cpu
        if self.memory > rr.memory:
            inc.memory = self.memory - rr.memory
        else:
            dec.memory = rr.memory - self.memory
        ls = self.scalars
        rs = rr.scalars
        inc_s = inc.scalars
        dec_s = dec.scalars
        infinite = default is _INFINITY
        for name, lv in ls.items():
            rv = rs.get(name)
            if rv is None:
                if infinite:
                    dec_s[name] = _INF
                    continue
                rv = 0.0
            if lv > rv:
                inc_s[name] = lv - rv
            else:
                dec_s[name] = rv - lv
        for name, rv in rs.items():
            if name in ls:
                continue
            if infinite:
                inc_s[name] = _INF
            elif rv < 0.0:
                inc_s[name] = -rv
            else:
                dec_s[name] = rv
        return inc, dec

    def exceeded_part(self, rr: Resource) -> Resource:
        """The part of self above rr in each dimension (missing scalars are 0)."""
        return self.diff(rr, _ZERO)[0]

    # ------------------------------------------------------------------ python protocol

    def __add__(self, other: Resource) -> Resource:
        if not isinstance(other, Resource):
            return NotImplemented
        return self.clone().add(other)

    def __sub__(self, other: Resource) -> Resource:
        if not isinstance(other, Resource):
            return NotImplemented
        return self.clone().sub(other)

    def __eq__(self, other: object) -> bool:
        """Exact equality of every dimension (no tolerance); a missing scalar equals 0."""
        if not isinstance(other, Resource):
            return NotImplemented
        if (
            self.milli_cpu != other.milli_cpu
            or self.memory != other.memory
            or self.max_task_num != other.max_task_num
        ):
            return False
        ls = self.scalars
        rs = other.scalars
        for name, v in ls.items():
            if rs.get(name, 0.0) != v:
                return False
        for name, v in rs.items():
            if name not in ls and v != 0.0:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable

    def to_natural(self) -> dict[str, str]:
        """Dimensions in k8s notation, e.g. {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}."""
        out = {CPU: format_amount(CPU, self.milli_cpu), MEMORY: format_amount(MEMORY, self.memory)}
        for name in sorted(self.scalars):
            out[name] = format_amount(name, self.scalars[name])
        if self.max_task_num:
            out.setdefault(PODS, format_amount(PODS, self.max_task_num))
        return out

    def __repr__(self) -> str:
        return ", ".join(f"{name} {amount}" for name, amount in self.to_natural().items())

    __str__ = __repr__


# ---------------------------------------------------------------------- module helpers

def min_resource(left: Resource, right: Resource) -> Resource:
    """Dimension-wise minimum (Volcano ``helpers.Min``).

    Scalars come from ``left`` only, compared with ``right``'s (missing = 0);
    if either side has no scalars at all the result has none.
    """
    res = Resource(min(left.milli_cpu, right.milli_cpu), min(left.memory, right.memory))
    if left.scalars and right.scalars:
        rs = right.scalars
        res.scalars = {name: min(v, rs.get(name, 0.0)) for name, v in left.scalars.items()}
    return res


def max_resource(left: Resource, right: Resource) -> Resource:
    """Dimension-wise maximum (Volcano ``helpers.Max``); only positive scalars are kept."""
    res = Resource(max(left.milli_cpu, right.milli_cpu), max(left.memory, right.memory))
    s = res.scalars
    for name, v in left.scalars.items():
        if v > 0:
            s[name] = v
    for name, v in right.scalars.items():
        if v > 0:
            s[name] = max(v, s.get(name, 0.0))
    return res


def exceeded_part(left: Resource | None, right: Resource | None) -> Resource:
    """The part of ``left`` above ``right`` (Volcano ``ExceededPart``; None-safe)."""
    if left is None:
        return Resource()
    if right is None:
        return left
    return left.exceeded_part(right)


def share(allocated: float, deserved: float) -> float:
    """``allocated / deserved`` with Volcano's zero rules: 0/0 = 0, x/0 = 1."""
    if deserved == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / deserved
