"""Kubernetes Quantity strings: the canonical Go form, the HPA's reading, and refusals."""

from __future__ import annotations

import math
import re
from decimal import ROUND_UP, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.exceptions import QuantityError
from serving.wire.quantity import MAX_QUANTITY, format_quantity, milli_value, parse_quantity

# Values and outputs from the table and interfaces.md 1.3 (Go's canonical output).
CANONICAL = [
    (0, "0"),
    (0.0, "0"),
    (0.0004, "400u"),
    (1, "1"),
    (1.0, "1"),
    (1.5, "1500m"),
    (12, "12"),
    (1500, "1500"),
    (2000, "2k"),
    (1e7, "10M"),
    (0.1, "100m"),
    (12_000_000, "12M"),
    (0.0015, "1500u"),
    # Further edges of the same rules.
    (0.001, "1m"),
    (1000, "1k"),
    (1024, "1024"),
    (1e-9, "1n"),
    (1.2345, "1234500u"),
    (123456789, "123456789"),
    (5e15, "5P"),
    (-0.0, "0"),
    (Decimal("0.500"), "500m"),
    (MAX_QUANTITY, "9223372036854775807m"),
    # Below 1n Go's parser rounds up, so a positive value never reads as zero.
    (1e-10, "1n"),
    (1.0000000001, "1000000001n"),
    (999.9999999999, "1k"),
]


@pytest.mark.parametrize(("value", "expected"), CANONICAL, ids=[repr(v) for v, _ in CANONICAL])
def test_format_quantity_canonical_table(value: float | int | Decimal, expected: str) -> None:
    assert format_quantity(value) == expected


REFUSED = [
    (math.nan, "finite"),
    (math.inf, "finite"),
    (-math.inf, "finite"),
    (Decimal("NaN"), "finite"),
    (-0.5, ">= 0"),
    (-1e-12, ">= 0"),
    (1e16, "<= 9223372036854775.807"),
    (True, "real number"),
    ("1", "real number"),
    (None, "real number"),
]


@pytest.mark.parametrize(("value", "match"), REFUSED, ids=[repr(v) for v, _ in REFUSED])
def test_format_quantity_refuses(value: object, match: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(match)) as info:
        format_quantity(value)  # type: ignore[arg-type]
    assert "`value`" in str(info.value)


PARSED = [
    ("1.5", Decimal("1.5")),
    ("0.500", Decimal("0.5")),
    ("2000", Decimal(2000)),
    ("1e3", Decimal(1000)),
    ("1E3", Decimal(1000)),
    ("1e-3", Decimal("0.001")),
    ("1E", Decimal("1e18")),
    ("10Mi", Decimal(10 * 2**20)),
    ("1536Mi", Decimal(1536 * 2**20)),
    ("-500m", Decimal("-0.5")),
    ("+1", Decimal(1)),
    (".5", Decimal("0.5")),
    ("1.", Decimal(1)),
    ("123456n", Decimal("0.000123456")),
    ("0", Decimal(0)),
    ("0.0000000001", Decimal("1e-9")),
]


@pytest.mark.parametrize(("text", "expected"), PARSED, ids=[t for t, _ in PARSED])
def test_parse_quantity_accepts_go_grammar(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("1.5", "1500m"), ("0.500", "500m"), ("2000", "2k"), ("1e3", "1k"), ("1500", "1500")],
)
def test_non_canonical_strings_are_re_emitted_canonically(text: str, canonical: str) -> None:
    assert format_quantity(parse_quantity(text)) == canonical


@pytest.mark.parametrize(
    "text", ["", ".", "1.5.5", "1K", "abc", "1ee3", " 1", "1 ", "e3", "1e", "--1", "1m5"]
)
def test_parse_quantity_rejects_malformed(text: str) -> None:
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1500m", 1500),
        ("400u", 1),
        ("1n", 1),
        ("0", 0),
        ("1", 1000),
        ("1.0001", 1001),
        ("2k", 2_000_000),
    ],
)
def test_milli_value_rounds_up_like_the_hpa(text: str, millis: int) -> None:
    assert milli_value(text) == millis


def _nano_ceiling(value: float) -> Decimal:
    return Decimal(repr(value)).quantize(Decimal("1e-9"), rounding=ROUND_UP)


values = st.floats(min_value=0, max_value=1e15, allow_nan=False, allow_infinity=False)


@given(values)
def test_round_trip_keeps_the_value_to_nano_precision(value: float) -> None:
    assert parse_quantity(format_quantity(value)) == _nano_ceiling(value)


@given(values)
def test_output_is_canonical(value: float) -> None:
    text = format_quantity(value)
    match = re.fullmatch(r"0|(?P<mantissa>[1-9][0-9]*)(?P<suffix>[numkMGTP]?)", text)
    assert match is not None, text
    if match["mantissa"]:
        # The largest suffix is used: a mantissa divisible by 1000 could move up one suffix.
        assert int(match["mantissa"]) % 1000 != 0
    assert format_quantity(parse_quantity(text)) == text


@given(values)
def test_hpa_reads_the_ceiling_in_milli_units(value: float) -> None:
    expected = math.ceil(Decimal(repr(value)) * 1000)
    assert milli_value(format_quantity(value)) == expected
    if value > 0:
        assert milli_value(format_quantity(value)) >= 1


@given(values, values)
def test_encoding_is_monotone(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert parse_quantity(format_quantity(low)) <= parse_quantity(format_quantity(high))
    assert milli_value(format_quantity(low)) <= milli_value(format_quantity(high))
