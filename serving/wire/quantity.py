"""Kubernetes ``resource.Quantity`` strings, written exactly as Go's apimachinery prints them.

The HPA reads every external metric value as a Quantity string and only ever looks at
``MilliValue()`` (``ceil(value * 1000)`` as an int64). This module writes a non-negative float
in the canonical form ``Quantity.String()`` gives for ``resource.MustParse(<shortest decimal of
the float>)``:

- the value is kept to nano precision, rounded *up* below that (as ``ParseQuantity`` does,
  so a tiny positive demand never reads as zero);
- the mantissa is an integer (no fractional digits) and the decimal exponent a multiple of 3,
  the largest that keeps the mantissa an integer, written with the suffixes
  ``n u m "" k M G T P``.

========== ===========
value      written as
========== ===========
0          ``0``
0.0004     ``400u``
1          ``1``
1.5        ``1500m``
12         ``12``
1500       ``1500``
2000       ``2k``
1e7        ``10M``
========== ===========

Examples
--------
>>> format_quantity(1.5)
'1500m'
>>> format_quantity(2000)
'2k'
>>> parse_quantity("1500m")
Decimal('1.5')
>>> milli_value("400u")
1
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_UP, Decimal, localcontext

from serving.exceptions import QuantityError

__all__ = ["MAX_QUANTITY", "format_quantity", "milli_value", "parse_quantity"]

# The HPA sums ``MilliValue()`` of the items as int64; above this a value overflows there, so
# refusing it here is the only way to keep the consumer from reading garbage.
MAX_QUANTITY = Decimal(2**63 - 1).scaleb(-3)

_NANO = Decimal("1e-9")

# Decimal exponent -> suffix, for the exponents the canonical form can produce below MAX.
_DECIMAL_SUFFIXES: dict[int, str] = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_SUFFIX_EXPONENT = {suffix: exp for exp, suffix in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# Same grammar as apimachinery's parseQuantityString: sign, digits, optional fraction, suffix.
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>|[numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)"
)


def _to_decimal(value: float | int | Decimal) -> Decimal:
    # bool is an int subclass; True -> "1" would hide a caller bug.
    if isinstance(value, bool) or not isinstance(value, float | int | Decimal):
        raise QuantityError(f"`value` must be a real number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"`value` must be finite, got {value!r}")
        # repr() is the shortest decimal that round-trips, so 0.1 stays 0.1 and does not
        # become 0.1000000000000000055511151231257827.
        return Decimal(repr(value))
    if isinstance(value, Decimal) and not value.is_finite():
        raise QuantityError(f"`value` must be finite, got {value!r}")
    return Decimal(value)


def format_quantity(value: float | int | Decimal) -> str:
    """Write a non-negative number as a canonical Kubernetes Quantity string.

    Parameters
    ----------
    value : float, int or Decimal
        The number to write. Must be finite, ``>= 0`` and at most :data:`MAX_QUANTITY`.
        ``-0.0`` counts as zero.

    Returns
    -------
    str
        The canonical Quantity, e.g. ``"1500m"``; put it in JSON as a string.

    Raises
    ------
    QuantityError
        If ``value`` is NaN, infinite, negative, above :data:`MAX_QUANTITY` or not a number.

    Examples
    --------
    >>> [format_quantity(v) for v in (0, 0.0004, 1, 1.5, 12, 1500, 2000, 1e7)]
    ['0', '400u', '1', '1500m', '12', '1500', '2k', '10M']
    """
    amount = _to_decimal(value)
    if amount < 0:
        raise QuantityError(f"`value` must be >= 0, got {value!r}")
    if amount > MAX_QUANTITY:
        raise QuantityError(
            f"`value` must be <= {MAX_QUANTITY} (the HPA reads milli-units as int64), got {value!r}"
        )
    with localcontext() as ctx:
        ctx.prec = 40  # MAX_QUANTITY at nano precision needs 25 digits; no silent rounding
        nanos = int(amount.quantize(_NANO, rounding=ROUND_UP).scaleb(9))
    if nanos == 0:
        return "0"
    exponent = -9
    while nanos % 10 == 0:
        nanos //= 10
        exponent += 1
    # Lower the exponent to a multiple of 3 by growing the mantissa, as AsCanonicalBytes does.
    shift = exponent % 3
    return f"{nanos * 10**shift}{_DECIMAL_SUFFIXES[exponent - shift]}"


def parse_quantity(text: str) -> Decimal:
    """Read a Kubernetes Quantity string into the value Go's ``ParseQuantity`` holds.

    Accepts every well-formed Quantity, canonical or not (``"1.5"``, ``"0.500"``, ``"1e3"``,
    ``"10Mi"``). Like Go, a non-zero value finer than 1n is rounded away from zero to 1n.

    Parameters
    ----------
    text : str
        The Quantity, without quotes.

    Returns
    -------
    Decimal
        The exact value.

    Raises
    ------
    QuantityError
        If ``text`` does not follow the Quantity grammar.

    Examples
    --------
    >>> parse_quantity("2k"), parse_quantity("1Ki"), parse_quantity("0.0000000001")
    (Decimal('2E+3'), Decimal('1024'), Decimal('1E-9'))
    """
    match = _QUANTITY_RE.fullmatch(text)
    if match is None or not (match["int"] or match["frac"]):
        raise QuantityError(f"`text` is not a Kubernetes quantity, got {text!r}")
    digits = f"{match['int'] or '0'}.{match['frac'] or '0'}"
    suffix = match["suffix"]
    with localcontext() as ctx:
        ctx.prec = 100
        try:
            amount = Decimal(digits)
            if suffix in _BINARY_SUFFIXES:
                amount *= 2 ** _BINARY_SUFFIXES[suffix]
            elif suffix in _SUFFIX_EXPONENT:
                amount = amount.scaleb(_SUFFIX_EXPONENT[suffix])
            else:
                amount = amount.scaleb(int(suffix[1:]))
            if amount != 0:
                amount = amount.quantize(_NANO, rounding=ROUND_UP).normalize()
        except ArithmeticError as exc:  # decimal signals: exponent beyond the context
            raise QuantityError(f"`text` is out of range for a quantity, got {text!r}") from exc
    return -amount if match["sign"] == "-" else amount


def milli_value(quantity: str | Decimal) -> int:
    """Return what the HPA reads from a Quantity: ``MilliValue()``, milli-units rounded up.

    Parameters
    ----------
    quantity : str or Decimal
        A Quantity string or a value from :func:`parse_quantity`.

    Returns
    -------
    int
        ``ceil(value * 1000)``; for a negative value, minus that of its magnitude.

    Examples
    --------
    >>> milli_value("1500m"), milli_value("400u"), milli_value("0")
    (1500, 1, 0)
    """
    amount = parse_quantity(quantity) if isinstance(quantity, str) else quantity
    millis = amount.scaleb(3)
    magnitude = math.ceil(abs(millis))
    return -magnitude if millis < 0 else magnitude
