"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<sign><digits>[.<digits>][<suffix>]`` (no digits at all is 0) where the
suffix is a binary SI suffix (``Ki Mi Gi Ti Pi Ei``), a decimal SI suffix
(``n u m "" k M G T P E``) or a decimal exponent
(``e3``, ``E-2``), as in ``k8s.io/apimachinery/pkg/api/resource``. Values are returned as
:class:`fractions.Fraction`, so nothing is lost to floating point; the scheduler's integer
units are taken by rounding *up*, as ``Quantity.MilliValue()`` and ``Quantity.Value()`` do.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# ASCII digits only, and no surrounding space: what resource.ParseQuantity takes (Python's
# \d would take any Unicode digit). The numerator may have no digits at all ("m", ".", "+"):
# parseQuantityString reads that as 0.
_QUANTITY = re.compile(
    r"(?P<num>[+-]?[0-9]*(?:\.[0-9]*)?)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))"
)


#: How far past 10**40 (or below 10**-40) an exponent is followed exactly. Beyond, the value
#: is taken as +-10**40 (or +-10**-40): every caller clamps amounts far below 10**40 and
#: rounds up, so the result is the same, and ``1e9999999`` (which the API server accepts in
#: a pod's limits) does not cost seconds of big-integer arithmetic.
_EXPONENT_SLACK = 40
#: Most significant digits of a quantity's number followed exactly. The API server keeps a
#: number of any length (``"1" * 5000`` in a pod's limits stays as written), which Python's
#: ``int()`` refuses past 4,300 digits; beyond these, the digits left are rounded away from
#: zero into the last one kept. Every caller clamps far below 10**100 and rounds up at a
#: thousandth, which such a value has as a digit of its own: the result is the same.
_MAX_DIGITS = 100


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float | Fraction) -> Fraction:
    """Parse a Kubernetes quantity (``"100m"``, ``"450M"``, ``"2Gi"``, ``"1e3"``) exactly.

    Integers, fractions and floats (as YAML may give them) are accepted too; a float is taken
    through its shortest decimal text so ``0.1`` means one tenth.
    """
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | Fraction):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a quantity: {value!r}")
        value = repr(value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    match = _QUANTITY.fullmatch(value) if value else None
    if match is None:
        raise QuantityError(f"not a quantity: {value!r}")
    num = match["num"]
    shift = 0  # the value is number * 10**shift
    if len(num) > _MAX_DIGITS:
        number, shift = _long_number(num)
    else:
        number = Fraction(num) if any(c.isdigit() for c in num) else Fraction(0)
    if match["exp"]:
        text = match["exp"][1:]
        exponent = int(text) if len(text.lstrip("+-0")) <= 19 else 2**63
        if not -(2**63) <= exponent < 2**63:  # strconv.ParseInt(..., 10, 64) fails
            raise QuantityError(f"not a quantity: {value!r}")
        # suffixHandler.interpret keeps int32(parsed): the exponent wraps around 2**32
        exponent = (exponent + 2**31) % 2**32 - 2**31
        return _scaled(number, shift + exponent, min(len(num), _MAX_DIGITS + 1))
    if shift:
        number = _scaled(number, shift, _MAX_DIGITS + 1)
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    return number * _DECIMAL[match["dec"] or ""]


def _long_number(num: str) -> tuple[Fraction, int]:
    """A number of more than :data:`_MAX_DIGITS` characters as ``(mantissa, shift)``, its
    value ``mantissa * 10**shift``: the mantissa its first ``_MAX_DIGITS`` significant
    digits, rounded away from zero when any digit after them is not 0."""
    sign = -1 if num.startswith("-") else 1
    whole, _, frac = num.lstrip("+-").partition(".")
    digits = (whole + frac).lstrip("0")
    shift = -len(frac)
    rest = digits[_MAX_DIGITS:]
    mantissa = int(digits[:_MAX_DIGITS] or "0")
    if rest:
        shift += len(rest)
        mantissa += 1 if rest.strip("0") else 0
    return Fraction(sign * mantissa), shift


def _scaled(number: Fraction, exponent: int, digits: int) -> Fraction:
    """``number * 10**exponent``, with ``|number|`` in ``[10**-digits, 10**digits)`` unless 0."""
    if number == 0:
        return number
    sign = 1 if number > 0 else -1
    if exponent > digits + _EXPONENT_SLACK:
        return Fraction(sign * 10**_EXPONENT_SLACK)
    if exponent < -(digits + _EXPONENT_SLACK):
        return Fraction(sign, 10**_EXPONENT_SLACK)
    return number * Fraction(10) ** exponent


def ceil_fraction(value: Fraction) -> int:
    """The smallest integer >= ``value`` (Kubernetes rounds quantities up)."""
    return -((-value.numerator) // value.denominator)


#: The common forms (``"500m"``, ``"2"``, ``"128Mi"``): digits and an optional suffix. Their
#: value is an integer number of thousandths, so plain integer arithmetic is exact and
#: skips the ``Fraction`` (a pod's requests are parsed on every watch event of it).
_MILLIS = {
    "m": 1,
    **{k: int(v * 1000) for k, v in _DECIMAL.items() if v >= 1},
    **{k: v * 1000 for k, v in _BINARY.items()},
}
_SIMPLE = re.compile(r"([0-9]{1,18})(" + "|".join(sorted(_MILLIS, key=len, reverse=True)) + ")")


def milli_value(value: str | int | float | Fraction) -> int:
    """A quantity in thousandths, rounded up: cpu ``"100m"`` -> 100 millicores."""
    if type(value) is str and (simple := _SIMPLE.fullmatch(value)):
        return int(simple[1]) * _MILLIS[simple[2]]
    return ceil_fraction(parse_quantity(value) * 1000)


def int_value(value: str | int | float | Fraction) -> int:
    """A quantity as an integer, rounded up: memory ``"2Gi"`` -> 2147483648 bytes."""
    if type(value) is str and (simple := _SIMPLE.fullmatch(value)):
        return -(-int(simple[1]) * _MILLIS[simple[2]] // 1000)
    return ceil_fraction(parse_quantity(value))
