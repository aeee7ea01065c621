"""CEL device selectors for kube-scheduler's DRA allocator, as ``inspect --pod --dra`` runs them.

A DeviceClass's and a request's ``selectors[].cel.expression`` are CEL over one variable,
``device``, as ``k8s.io/dynamic-resource-allocation/cel`` (v0.37.2, the environment of
kube-scheduler v1.37.2 with its default feature gates: DRAConsumableCapacity on,
DRAListTypeAttributes off) declares it:

* ``device.driver``: the driver's name (a string);
* ``device.allowMultipleAllocations``: the device's field, false when unset;
* ``device.attributes[domain].name``: an attribute (string, int, bool, or a version as a
  semver value); a name without a domain is in the driver's; a domain the device has no
  attribute of is an empty map, so that ``device.attributes["x"].name`` errs with ``no such
  key: name`` (as does a name the domain lacks), and ``has(...)`` and ``in`` are false;
* ``device.capacity[domain].name``: a capacity's ``value`` as a quantity.

Of the Kubernetes CEL libraries the environment loads, the quantity library (``quantity``,
``isQuantity``, ``isInteger``, ``asInteger``, ``asApproximateFloat``, ``sign``, ``add``,
``sub``, ``isLessThan``, ``isGreaterThan``, ``compareTo``) and the semver library
(``semver``, ``isSemver``, ``major``, ``minor``, ``patch``, ``isLessThan``,
``isGreaterThan``, ``compareTo``) are bound here, and the strings extension (v2: ``charAt``,
``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``,
``substring``, ``trim``, ``join``), with CEL's standard functions and macros (cel-python's).
An expression using another of its functions (the lists library and extension but for
``indexOf``, regex ``find``, URLs, IPs, CIDRs, ``format``, ``strings.quote``, the sets
extension, ``cel.bind``, optional syntax ``.?``/``orValue``...) is not judged
(:class:`~stickypack.core.draalloc.SelectorNotModelled`), never a verdict. Equality is
CEL's heterogeneous one (values of different types are not equal, no error), numbers of
different kinds (int, uint, double) compared by value, as in ordering, as cel-go does. A
quantity is held as Kubernetes holds it (:func:`int64_amount`: ``isInteger`` and
``asInteger`` read that, not only the value; finer than nano is rounded up). Upstream's
cost limit (``CELSelectorExpressionMaxCost``) is not checked, nor are types at compile
time (the API server rejects a selector that fails them when it is created).

The binding is cel-python (``celpy``): a maintained, pure-Python CEL interpreter whose
functions, member functions included, are plain Python callables. It is kept out of
:mod:`stickypack.core` because building its parser reads its grammar file and raises the
interpreter's recursion limit (a process-wide setting).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import total_ordering
from typing import Any

import celpy
import celpy.evaluation
from celpy import celtypes
from celpy.evaluation import CELEvalError

from stickypack.core.draalloc import DeviceView, SelectorError, SelectorNotModelled
from stickypack.core.quantity import QuantityError, parse_quantity

#: Functions of the Kubernetes CEL environment (base libraries and extensions) not bound
#: here: an expression calling one is not judged.
NOT_MODELLED_FUNCTIONS = frozenset(
    {
        # lists
        "isSorted", "sum", "min", "max", "indexOf", "lastIndexOf",
        # regex
        "find", "findAll",
        # urls
        "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
        # ip, cidr
        "ip", "isIP", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
        "isLinkLocalUnicast", "isGlobalUnicast", "isCanonical", "cidr", "isCIDR", "containsIP",
        "containsCIDR", "masked", "prefixLength",
        # format, strings extension (quote), lists extension (v3)
        "format", "validate", "quote", "reverse", "slice", "flatten", "distinct", "sort", "sortBy",
        "first", "last", "range",
        # optional types, two-variable comprehensions, bindings
        "orValue", "hasValue", "value", "or", "optMap", "optFlatMap", "of", "none", "ofNonZeroValue",
        "bind", "transformList", "transformMap", "transformMapEntry",
        # the environment's other libraries
        "equivalent", "intersects", "greatest", "least", "encode", "decode",
    }
)  # fmt: skip

#: Receivers of namespaced functions (``sets.contains``, ``cel.bind``...): not judged.
_NAMESPACES = frozenset({"sets", "math", "base64", "optional", "cel", "strings", "lists"})

#: CEL's macros as cel-python parses them (calls, but no function).
_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "dyn"})

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


#: ``resource.Quantity``'s int64 representation, ``(value, scale)`` for value * 10**scale
#: (``int64Amount``); None where it keeps an ``inf.Dec`` instead.
Int64Amount = tuple[int, int] | None

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_QUANTITY_PARTS = re.compile(r"([+-]?)0*([0-9]*)(?:\.([0-9]*))?(.*)")


def _int64(value: int) -> int | None:
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def int64_amount(text: str) -> Int64Amount:
    """How ``resource.ParseQuantity`` holds ``text`` (a valid quantity): an ``int64Amount``
    when its digits fit 18 places (a binary suffix: fewer, and no fraction) and its scale
    is no finer than nano, else an ``inf.Dec`` (None)."""
    if text == "0":
        return (0, 0)
    m = _QUANTITY_PARTS.fullmatch(text)
    if m is None:
        return None
    sign, num, denom, suffix = m.group(1), m.group(2) or "0", m.group(3) or "", m.group(4)
    mantissa = 1
    if suffix in _BINARY_EXPONENTS:
        exponent, scale = _BINARY_EXPONENTS[suffix], 0
        if denom:
            return None
        mantissa = 1 << exponent
        precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        exponent = _DECIMAL_EXPONENTS[suffix] if suffix in _DECIMAL_EXPONENTS else int(suffix[1:])
        scale, precision = exponent, 18 - (len(num) + len(denom))
    scale -= len(denom)
    if precision < 0 or scale < -9:
        return None
    value = _int64(int(num + denom) * mantissa)
    if value is None:
        return None
    return (-value if sign == "-" else value, scale)


def _canonical_amount(value: Fraction) -> Int64Amount:
    """The representation of ``value`` written as a decimal quantity with the largest
    exponent, a multiple of 3, that keeps its mantissa whole (as Kubernetes serves one)."""
    scale = 0
    while value.denominator != 1 and scale > -9:
        value, scale = value * 1000, scale - 3
    if value.denominator != 1:
        return None
    whole = int(value)
    while whole and whole % 1000 == 0 and scale < 18:
        whole, scale = whole // 1000, scale + 3
    return (whole, scale) if _int64(whole) is not None and len(str(abs(whole))) <= 18 else None


def _as_int64(amount: Int64Amount) -> int | None:
    """``Quantity.AsInt64``: the value when held as an int64 of scale 0 or more that fits."""
    if amount is None or amount[1] < 0:
        return None
    return _int64(amount[0] * 10 ** amount[1])


def _amount_sum(a: Int64Amount, b: Int64Amount) -> Int64Amount:
    """``int64Amount.Add`` (None, an ``inf.Dec``, where it overflows): at the finer scale."""
    if a is None or b is None:
        return None
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    (av, ascale), (bv, bscale) = a, b
    scale = min(ascale, bscale)
    left, right = _int64(av * 10 ** (ascale - scale)), _int64(bv * 10 ** (bscale - scale))
    if left is None or right is None:
        return None
    total = _int64(left + right)
    return None if total is None else (total, scale)


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """A Kubernetes quantity in CEL (``apiservercel.Quantity``): compared by value;
    ``amount`` is how Kubernetes holds it (:func:`int64_amount`), which ``isInteger`` and
    ``asInteger`` read."""

    value: Fraction
    text: str
    amount: Int64Amount = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A semantic version (semver 2.0.0, as blang/semver parses it strictly): compared by
    precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> Semver | None:
        m = _SEMVER.match(text)
        if m is None:
            return None
        pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, text)

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key() and self.pre == other.pre

    def __lt__(self, other: Semver) -> bool:
        if self._key() != other._key():
            return self._key() < other._key()
        if not self.pre or not other.pre:
            return bool(self.pre) and not other.pre  # a pre-release precedes its release
        for a, b in zip(self.pre, other.pre, strict=False):
            if a == b:
                continue
            if isinstance(a, int) and isinstance(b, int):
                return a < b
            if isinstance(a, int) or isinstance(b, int):
                return isinstance(a, int)  # numeric identifiers precede alphanumeric ones
            return a < b
        return len(self.pre) < len(other.pre)

    def __hash__(self) -> int:
        return hash((self._key(), self.pre))


def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _compare(a: Any, b: Any) -> celtypes.IntType | CELEvalError:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return celtypes.IntType(0 if a == b else (-1 if a < b else 1))
    if isinstance(a, Semver) and isinstance(b, Semver):
        return celtypes.IntType(0 if a == b else (-1 if a < b else 1))
    return _error("no such overload")


#: ``resource.ErrFormatWrong``'s words; a text of that shape with a suffix Kubernetes does
#: not know is ``ErrSuffix``.
_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_QUANTITY_SHAPE = re.compile(r"[+-]?[0-9]*(?:\.[0-9]*)?[eEinumkKMGTP]*[+-]?[0-9]*")
_NANO = 10**9


def _quantity(text: Any) -> Quantity | CELEvalError:
    """``quantity(text)`` as ``resource.ParseQuantity`` reads it: a value finer than nano
    rounded up (away from zero) to a nano, a binary-suffixed one capped at 2**63 - 1."""
    text = str(text)
    try:
        value = parse_quantity(text)
    except QuantityError:
        if text and _QUANTITY_SHAPE.fullmatch(text):
            return _error("unable to parse quantity's suffix")
        return _error(_FORMAT_WRONG)
    amount = int64_amount(text)
    if amount is None:
        nanos = abs(value) * _NANO
        rounded = Fraction(-(-nanos.numerator // nanos.denominator), _NANO)
        value = rounded if value >= 0 else -rounded
        if text.endswith(tuple(_BINARY_EXPONENTS)) and value > _INT64_MAX:
            value = Fraction(_INT64_MAX)
    return Quantity(value, text, amount)


def _is_quantity(text: Any) -> celtypes.BoolType:
    return celtypes.BoolType(not isinstance(_quantity(text), CELEvalError))


def _normalized(text: str) -> str:
    """The Kubernetes semver library's normalization (``semver(s, true)``): a leading ``v``
    dropped, missing minor and patch versions added, leading zeros of each removed."""
    text = text.removeprefix("v")
    core, sep, rest = re.split(r"(?=[-+])", text, maxsplit=1)[0], "", ""
    if len(core) < len(text):
        sep, rest = text[len(core)], text[len(core) + 1 :]
    parts = core.split(".")
    if len(parts) > 3 or not all(p.isdigit() for p in parts):
        return text
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + (sep + rest if sep else "")


def _semver(text: Any, normalize: Any = False) -> Semver | CELEvalError:
    raw = _normalized(str(text)) if normalize else str(text)
    parsed = Semver.parse(raw)
    return parsed if parsed is not None else _error(f"could not parse {text!r} as semver")


def _is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    return celtypes.BoolType(not isinstance(_semver(text, normalize), CELEvalError))


def _int_or_quantity(value: Any) -> Fraction | None:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool | celtypes.BoolType):
        return Fraction(int(value))
    return None


def _add(a: Any, b: Any, sign: int = 1) -> Any:
    if not isinstance(a, Quantity) or (other := _int_or_quantity(b)) is None:
        return _error("no such overload")
    total = a.value + sign * other
    amount = b.amount if isinstance(b, Quantity) else _int64(int(b))
    if isinstance(amount, tuple):
        amount = (sign * amount[0], amount[1])
    elif isinstance(amount, int):
        amount = (sign * amount, 0)
    return Quantity(total, str(total), _amount_sum(a.amount, amount))


def _sub(a: Any, b: Any) -> Any:
    return _add(a, b, -1)


def _is_integer(q: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(_as_int64(q.amount) is not None)


def _as_integer(q: Any) -> Any:
    if not isinstance(q, Quantity):
        return _error("no such overload")
    value = _as_int64(q.amount)
    if value is None:
        return _error("cannot convert value to integer")
    return celtypes.IntType(value)


def _member(name: str, on_quantity: Callable[[Quantity], Any], on_semver: Callable[[Semver], Any]) -> Any:
    def call(target: Any) -> Any:
        if isinstance(target, Quantity):
            return on_quantity(target)
        if isinstance(target, Semver):
            return on_semver(target)
        return _error(f"no such overload: {name}")

    return call


def _no_overload(_: Any) -> Any:
    return _error("no such overload")


def _less(a: Any, b: Any) -> Any:
    c = _compare(a, b)
    return c if isinstance(c, CELEvalError) else celtypes.BoolType(c < 0)


def _greater(a: Any, b: Any) -> Any:
    c = _compare(a, b)
    return c if isinstance(c, CELEvalError) else celtypes.BoolType(c > 0)


def _kind(value: Any) -> str:
    if isinstance(value, celtypes.BoolType | bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _number_order(a: int | float, b: int | float) -> int | None:
    """How numbers of any of CEL's kinds (int, uint, double) compare by value, as cel-go's
    cross-type numeric comparisons do: -1, 0, 1, or None when one is NaN."""
    floats = [v for v in (a, b) if isinstance(v, float)]
    if any(math.isnan(v) for v in floats):
        return None
    if any(math.isinf(v) for v in floats):
        x, y = float(a), float(b)
    else:
        x, y = Fraction(a), Fraction(b)  # type: ignore[assignment]
    return (x > y) - (x < y)


def _relation(name: str, holds: Callable[[int], bool]) -> Callable[[Any, Any], Any]:
    """CEL's ordering operator ``name``: numbers by value whatever their kinds (cel-go),
    other values as cel-python orders them."""
    fallback = celpy.evaluation.base_functions[name]

    def call(a: Any, b: Any) -> Any:
        if _kind(a) == "number" and _kind(b) == "number":
            order = _number_order(a, b)
            return celtypes.BoolType(order is not None and holds(order))
        return fallback(a, b)

    return call


def _equal(a: Any, b: Any) -> Any:
    """CEL's heterogeneous equality (cel-go's): values of different types are not equal,
    but numbers are compared by value whatever their kinds (``8 == 8.0``)."""
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    if _kind(a) != _kind(b):
        return celtypes.BoolType(False)
    if _kind(a) == "number":
        return celtypes.BoolType(_number_order(a, b) == 0)
    if isinstance(a, Quantity | Semver):
        return celtypes.BoolType(a == b)
    if isinstance(a, celtypes.ListType) and isinstance(b, celtypes.ListType):
        if len(a) != len(b):
            return celtypes.BoolType(False)
        return celtypes.BoolType(all(bool(_equal(x, y)) for x, y in zip(a, b, strict=True)))  # fmt: skip
    if isinstance(a, celtypes.MapType) and isinstance(b, celtypes.MapType):
        if len(a) != len(b) or any(k not in b for k in a):
            return celtypes.BoolType(False)
        return celtypes.BoolType(all(bool(_equal(a[k], b[k])) for k in a))
    try:
        return celtypes.BoolType(a == b)
    except TypeError:
        return celtypes.BoolType(False)


def _in(item: Any, container: Any) -> Any:
    """``in``: a list holds a value equal to ``item`` (CEL's equality, :func:`_equal`)."""
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(any(bool(_equal(item, v)) for v in container))
    return celpy.evaluation.base_functions["_in_"](item, container)


def _not_equal(a: Any, b: Any) -> Any:
    same = _equal(a, b)
    return same if isinstance(same, CELEvalError) else celtypes.BoolType(not same)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _index_of(target: Any, item: Any, start: Any = None, last: bool = False) -> Any:
    """The strings extension's ``indexOf``/``lastIndexOf`` (cel-go v0.29's: code point
    offsets; a negative start errs, one at or past the end finds nothing but the empty
    string, there; ``lastIndexOf`` searches back from ``start``), and the lists library's on
    a list."""
    if isinstance(target, list) and start is None:
        found = [k for k, v in enumerate(target) if bool(_equal(v, item))]
        return celtypes.IntType((found[-1] if last else found[0]) if found else -1)
    if not _string(target) or not _string(item) or not isinstance(start, int | None):
        return _error("no such overload")
    if start is None:
        return celtypes.IntType(target.rfind(item) if last else target.find(item))
    offset = int(start)
    if offset < 0:
        return _error(f"index out of range: {offset}")
    if item == "":
        return celtypes.IntType(min(offset, len(target)))
    if offset >= len(target):
        return celtypes.IntType(-1)
    if last:
        offset = min(offset, len(target) - len(item))
        return celtypes.IntType(target.rfind(item, 0, offset + len(item)) if offset >= 0 else -1)
    return celtypes.IntType(target.find(item, offset))


def _last_index_of(target: Any, item: Any, start: Any = None) -> Any:
    return _index_of(target, item, start, last=True)


def _char_at(text: Any, index: Any) -> Any:
    if not _string(text) or not isinstance(index, int) or not 0 <= index <= len(text):
        return _error(f"index out of range: {index}")
    return celtypes.StringType(text[index : index + 1])


def _substring(text: Any, start: Any, end: Any = None) -> Any:
    stop = len(text) if end is None else end
    if not _string(text) or not 0 <= start <= stop <= len(text):
        return _error(
            f"index out of range: {start}"
            if end is None
            else f"invalid substring range. start: {start}, end: {end}"
        )
    return celtypes.StringType(text[start:stop])


def _ascii(text: Any, upper: bool) -> Any:
    if not _string(text):
        return _error("no such overload")
    table = {c: c - 32 if upper else c + 32 for c in range(97 if upper else 65, 123 if upper else 91)}
    return celtypes.StringType(str(text).translate(table))


def _replace(text: Any, old: Any, new: Any, count: Any = -1) -> Any:
    if not (_string(text) and _string(old) and _string(new)) or not isinstance(count, int):
        return _error("no such overload")
    return celtypes.StringType(str(text).replace(old, new, -1 if count < 0 else int(count)))


def _split(text: Any, sep: Any, count: Any = -1) -> Any:
    if not (_string(text) and _string(sep)) or not isinstance(count, int):
        return _error("no such overload")
    if count == 0:
        return celtypes.ListType([])
    parts = list(str(text)) if sep == "" else str(text).split(sep, -1 if count < 0 else int(count) - 1)
    if sep == "" and count > 0 and len(parts) > count:
        parts = [*parts[: count - 1], "".join(parts[count - 1 :])]
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _join(items: Any, sep: Any = "") -> Any:
    if not isinstance(items, list) or not all(_string(i) for i in items) or not _string(sep):
        return _error("no such overload")
    return celtypes.StringType(str(sep).join(items))


def _trim(text: Any) -> Any:
    return celtypes.StringType(text.strip()) if _string(text) else _error("no such overload")


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "isInteger": _member("isInteger", _is_integer, _no_overload),
    "asInteger": _as_integer,
    "asApproximateFloat": _member(
        "asApproximateFloat", lambda q: celtypes.DoubleType(float(q.value)), _no_overload
    ),
    "sign": _member("sign", lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)), _no_overload),
    "add": _add,
    "sub": _sub,
    "isLessThan": _less,
    "isGreaterThan": _greater,
    "compareTo": _compare,
    "major": _member("major", _no_overload, lambda v: celtypes.IntType(v.major)),
    "minor": _member("minor", _no_overload, lambda v: celtypes.IntType(v.minor)),
    "patch": _member("patch", _no_overload, lambda v: celtypes.IntType(v.patch)),
    "dyn": lambda value: value,
    # the strings extension (v2) and the lists library's indexOf/lastIndexOf
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda text: _ascii(text, upper=False),
    "upperAscii": lambda text: _ascii(text, upper=True),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _relation("_<_", lambda order: order < 0),
    "_<=_": _relation("_<=_", lambda order: order <= 0),
    "_>_": _relation("_>_", lambda order: order > 0),
    "_>=_": _relation("_>=_", lambda order: order >= 0),
    "_in_": _in,
}  # fmt: skip


class _DefaultMap(celtypes.MapType):
    """``device.attributes`` and ``device.capacity``: a domain the device has nothing in is
    an empty map (upstream's ``mapper`` with its default value)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


def _attribute_value(raw: Any) -> Any:
    """A DeviceAttribute (``{"string": ...}``, ``int``, ``bool``, ``version``) as a CEL value."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"attribute {raw!r} is not an object")
    if isinstance(raw.get("string"), str):
        return celtypes.StringType(raw["string"])
    if isinstance(raw.get("bool"), bool):
        return celtypes.BoolType(raw["bool"])
    if isinstance(raw.get("int"), int):
        return celtypes.IntType(raw["int"])
    if isinstance(raw.get("version"), str):
        version = Semver.parse(raw["version"])
        if version is None:
            raise SelectorError(f"parse semantic version: {raw['version']!r}")
        return version
    raise SelectorError("unsupported attribute value")


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def device_value(device: DeviceView) -> celtypes.MapType:
    """``device`` as the CEL variable (:mod:`k8s.io/dynamic-resource-allocation/cel`'s
    ``DeviceMatches`` input)."""
    attributes: dict[str, dict[Any, Any]] = {}
    for name, raw in device.attributes.items():
        domain, ident = _qualified(name, device.driver)
        attributes.setdefault(domain, {})[celtypes.StringType(ident)] = _attribute_value(raw)
    capacity: dict[str, dict[Any, Any]] = {}
    for name, value in device.capacity.items():
        domain, ident = _qualified(name, device.driver)
        text = device.capacity_text.get(name)
        amount = int64_amount(text) if text is not None else _canonical_amount(value)
        capacity.setdefault(domain, {})[celtypes.StringType(ident)] = Quantity(
            value, text or str(value), amount
        )
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(device.driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                device.allow_multiple_allocations
            ),
            celtypes.StringType("attributes"): _DefaultMap(
                {celtypes.StringType(d): celtypes.MapType(v) for d, v in attributes.items()}
            ),
            celtypes.StringType("capacity"): _DefaultMap(
                {celtypes.StringType(d): celtypes.MapType(v) for d, v in capacity.items()}
            ),
        }
    )


def _calls(tree: Any) -> tuple[set[str], set[str]]:
    """The names of the functions ``tree`` (cel-python's parse tree, a ``lark.Tree``) calls,
    and the namespaces it calls them in."""
    names: set[str] = set()
    namespaces: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data in ("ident_arg", "dot_ident_arg"):
            names.add(str(node.children[0]))
        elif node.data == "member_dot_arg":
            names.add(str(node.children[1]))
            receiver = node.children[0]
            if hasattr(receiver, "iter_subtrees"):
                idents = [t for t in receiver.iter_subtrees() if t.data == "ident"]
                if len(idents) == 1 and receiver.data in ("member", "primary", "ident"):
                    namespaces.add(str(idents[0].children[0]))
    return names, namespaces


_ENVIRONMENT: celpy.Environment | None = None
_BUILTINS: frozenset[str] | None = None


def _environment() -> tuple[celpy.Environment, frozenset[str]]:
    global _ENVIRONMENT, _BUILTINS
    if _ENVIRONMENT is None or _BUILTINS is None:
        from celpy.evaluation import base_functions

        _ENVIRONMENT = celpy.Environment()
        _BUILTINS = frozenset(base_functions) | _MACROS | frozenset(FUNCTIONS)
    return _ENVIRONMENT, _BUILTINS


class CelSelector:
    """One compiled selector expression (:class:`~stickypack.core.draalloc.Selector`). A
    compile error or an expression this binding does not model is raised when it is first
    matched against a device, as upstream's allocator finds a compile error when it first
    evaluates the selector."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self._program: Any = None
        # results by what the selector sees of a device: devices of one model on many nodes
        # are evaluated once (cel-python interprets its parse tree, ~0.5 ms an evaluation)
        self._results: dict[Any, bool | SelectorError | SelectorNotModelled] = {}
        self._compile_error: str | None = None
        self._not_modelled: str | None = None
        env, builtins = _environment()
        if ".?" in expression or "[?" in expression:
            self._not_modelled = "optional syntax (.? or [?)"
            return
        try:
            tree = env.compile(expression)
        except Exception as exc:  # celpy's parse errors (lark's) share no base class
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._compile_error = f"compilation failed: {first}"
            return
        names, namespaces = _calls(tree)
        unmodelled = sorted((names & NOT_MODELLED_FUNCTIONS) - frozenset(FUNCTIONS))
        if unmodelled or namespaces & _NAMESPACES:
            what = unmodelled or sorted(namespaces & _NAMESPACES)
            self._not_modelled = f"function {', '.join(what)}"
            return
        unknown = sorted(names - builtins - NOT_MODELLED_FUNCTIONS)
        if unknown:
            self._compile_error = f"compilation failed: undeclared reference to '{unknown[0]}'"
            return
        self._program = env.program(tree, functions=FUNCTIONS)

    def matches(self, device: DeviceView) -> bool:
        """Whether ``device`` passes; :class:`SelectorError` for a compile or runtime error
        (the message's detail as upstream's, where known), :class:`SelectorNotModelled`."""
        if self._not_modelled is not None:
            raise SelectorNotModelled(f"CEL {self._not_modelled} is not modelled")
        if self._compile_error is not None:
            raise SelectorError(self._compile_error, compile_error=True)
        key = _device_key(device)
        known = self._results.get(key) if key is not None else None
        if known is None:
            known = self._evaluate(device)
            if key is not None and len(self._results) < _MAX_RESULTS:
                self._results[key] = known
        if isinstance(known, SelectorError):
            raise SelectorError(str(known), compile_error=known.compile_error)
        if isinstance(known, SelectorNotModelled):
            raise SelectorNotModelled(str(known))
        return known

    def _evaluate(self, device: DeviceView) -> bool | SelectorError | SelectorNotModelled:
        try:
            result = self._program.evaluate({"device": device_value(device)})
        except CELEvalError as exc:
            return SelectorError(_runtime_message(exc))
        except SelectorError as exc:  # an attribute value that cannot be read
            return exc
        except Exception as exc:  # cel-python failing on its own (a recursion limit...): not judged
            return SelectorNotModelled(f"cel-python could not evaluate it ({type(exc).__name__}: {exc})")
        if isinstance(result, CELEvalError):
            return SelectorError(_runtime_message(result))
        if not isinstance(result, celtypes.BoolType):
            return SelectorError(f"CEL result of type {_not_bool(result)}")
        return bool(result)


def _not_bool(result: Any) -> str:
    """cel-go's words for a result that is not a bool (only an attribute's value, typed
    ``dyn``, gets that far: any other type is a compile error upstream)."""
    if isinstance(result, Semver):
        return (
            "kubernetes.Semver could not be converted to bool: type conversion error from 'Semver' to 'bool'"
        )
    if isinstance(result, str):
        return "string could not be converted to bool: unsupported native conversion from string to 'bool'"
    if isinstance(result, int):
        return "int could not be converted to bool: unsupported type conversion from 'int' to bool"
    kind = type(result).__name__.removesuffix("Type").lower()
    return f"{kind} could not be converted to bool"


#: At most this many results kept per selector.
_MAX_RESULTS = 100_000


def _device_key(device: DeviceView) -> Any:
    """What a selector sees of ``device``, hashable (None when an attribute is not as
    served: not kept)."""
    try:
        attributes = tuple(sorted((name, tuple(sorted(v.items()))) for name, v in device.attributes.items()))
        key = (
            device.driver,
            attributes,
            tuple(sorted(device.capacity.items())),
            device.allow_multiple_allocations,
            tuple(sorted(device.capacity_text.items())),
        )
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def _runtime_message(error: CELEvalError) -> str:
    """A cel-python evaluation error in cel-go's words where they differ (a missing map key:
    ``no such key: name``, with upstream's hint)."""
    text = str(error.args[0]) if error.args else str(error)
    missing = re.match(r"no such member in mapping: '(.*)'", text)
    if text == "no such key" and len(error.args) > 2 and error.args[2]:
        missing = re.match(r"(.*)", str(error.args[2][0]))
    if missing is not None:
        return (
            f"no such key: {missing.group(1)}. consider using CEL optional chaining (.? followed by "
            "orValue()) or guarding the check with has() for optional fields"
        )
    return text


def compile_selector(expression: str) -> CelSelector:
    """:data:`~stickypack.core.draalloc.CompileSelector` for the allocator."""
    return CelSelector(expression)
