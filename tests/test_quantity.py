from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stickypack.core.quantity import QuantityError, ceil_fraction, int_value, milli_value, parse_quantity
from stickypack.core.resources import MAX_AMOUNT, parse_resource_list


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("450M", 450_000_000),
        ("2Gi", 2 * 1024**3),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1.5", Fraction(3, 2)),
        ("0.5Ki", 512),
        ("3Mi", 3 * 2**20),
        ("2Ti", 2 * 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1.5k", 1500),
        ("7G", 7 * 10**9),
        ("2T", 2 * 10**12),
        ("3P", 3 * 10**15),
        ("1E", 10**18),
        ("12n", Fraction(12, 10**9)),
        ("5u", Fraction(5, 10**6)),
        ("+3k", 3000),
        ("-1", -1),
        (".5", Fraction(1, 2)),
        ("1e-3", Fraction(1, 1000)),
        (2, 2),
        (0.1, Fraction(1, 10)),
    ],
)
def test_parse_exact(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "bad", ["", "abc", "1.2.3", "10 Gi", "1Zi", "1e", ".e", "+e+", "1ee3", True, None, float("nan")]
)
def test_parse_rejects(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize("text", ["+", "-", ".", "+.", "000", "m", "-m", "Ki", "+.Mi", "e3", "-.e5"])
def test_a_mantissa_without_digits_is_zero(text):
    """``resource.ParseQuantity`` (k8s.io/apimachinery v0.37.2, api/resource/quantity.go,
    ``parseQuantityString``) takes a missing numerator as "0": ``"m"``, ``"."`` and ``"+"``
    are 0, not errors (checked with a Go program on that module: each printed 0)."""
    assert parse_quantity(text) == 0
    assert milli_value(text) == 0 and int_value(text) == 0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e4294967296", 1),  # 2**32 wraps to 0
        ("1e4294967299", 1000),
        ("3e+4294967298", 300),
        ("2e-4294967293", 2000),
        ("1e9223372036854775807", Fraction(1, 10)),  # int64 max wraps to -1
        ("1e-9223372036854775808", 1),
    ],
)
def test_an_exponent_wraps_to_int32_as_kubernetes_reads_it(text, value):
    """``suffixHandler.interpret`` (api/resource/suffix.go) parses the exponent with
    ``strconv.ParseInt(..., 10, 64)`` and keeps ``int32(parsed)``: ``1e4294967296`` is 1
    (kube-scheduler counts such a pod as 1 cpu; the API server accepts and keeps that text).
    Values printed by a Go program on k8s.io/apimachinery v0.37.2."""
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["1e9223372036854775808", "1e-9223372036854775809", "1e99999999999999999999", "1e" + "9" * 5000]
)
def test_an_exponent_beyond_int64_is_refused(text):
    """``strconv.ParseInt`` fails there: "unable to parse quantity's suffix"."""
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_rounding_up_like_kubernetes():
    assert milli_value("100m") == 100
    assert milli_value("0.0001") == 1  # MilliValue rounds up
    assert milli_value("1") == 1000
    assert int_value("1.5") == 2
    assert int_value("450M") == 450_000_000


def test_resource_list_units():
    assert parse_resource_list({"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1"}) == {
        "cpu": 250,
        "memory": 1024**3,
        "nvidia.com/gpu": 1,
    }


def test_huge_exponents_saturate_instead_of_computing_the_power():
    """``1e9999999`` is accepted by the API server in a pod's limits; it is taken as 10**40
    (far past every clamp) and tiny values as 10**-40 (rounded up to 1 unit), exactly as the
    exact value would come out after clamping and rounding."""
    assert parse_quantity("1e9999999") == 10**40
    assert parse_quantity("-2e9999999") == -(10**40)
    assert milli_value("1e-9999999") == 1 and int_value("-1e-9999999") == 0
    assert parse_quantity("0e99999999") == 0
    assert parse_quantity("3e40") == 3 * 10**40  # within the slack: exact
    assert parse_quantity("25e-42") == Fraction(25, 10**42)
    assert parse_resource_list({"memory": "1e9999999"}) == {"memory": MAX_AMOUNT}


def test_a_number_of_thousands_of_digits_saturates_like_a_huge_exponent():
    # the API server keeps "1" * 5000 in a pod's limits as it is (tested on kube-apiserver
    # 1.37, test_extender_e2e.py); Python's int() refuses a string of more than 4,300 digits,
    # so the pod was refused ("Exceeds the limit (4300 digits) for integer string
    # conversion ... use sys.set_int_max_str_digits()"), the extender's cache left it out
    assert parse_quantity("1" * 5000) == 10**40
    assert parse_quantity("-" + "9" * 5000 + "Mi") == -(10**40) * 2**20
    assert parse_resource_list({"memory": "1" * 5000, "cpu": "1" * 5000 + "m"}) == {
        "memory": MAX_AMOUNT,
        "cpu": MAX_AMOUNT,
    }
    # many digits an exponent brings back into range: the first 100 followed exactly, the
    # rest rounded away from zero (as the callers round up)
    assert parse_quantity("1" * 5000 + "e-4999") == Fraction(int("1" * 100) + 1, 10**99)
    assert parse_quantity("2" + "0" * 5000 + "e-5000") == 2
    assert milli_value("0." + "0" * 5000 + "1") == 1  # a tiny positive amount is 1m, as rounded up
    assert milli_value("1." + "0" * 5000) == 1000 and milli_value("1." + "0" * 5000 + "1") == 1001
    assert parse_quantity("0" * 5000) == 0 and parse_quantity("-0." + "0" * 5000) == 0


@pytest.mark.parametrize("raw", [{"cpu": "-100m"}, {"memory": "-100Ei"}, {"nvidia.com/gpu": -1}])
def test_negative_amounts_are_refused(raw):
    with pytest.raises(QuantityError, match="negative"):
        parse_resource_list(raw)


@settings(deadline=None)  # a stall of the shared CI host is not a failure of the parse
@given(
    digits=st.from_regex(r"[0-9]{1,20}", fullmatch=True),
    suffix=st.sampled_from(["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
)
def test_integer_fast_path_equals_the_exact_parse(digits: str, suffix: str) -> None:
    # milli_value/int_value read "<digits><suffix>" with integer arithmetic: it must agree
    # with the Fraction parse, rounding up included ("1001m" -> 2)
    text = digits + suffix
    exact = parse_quantity(text)
    assert milli_value(text) == ceil_fraction(exact * 1000)
    assert int_value(text) == ceil_fraction(exact)


@pytest.mark.parametrize("text", ["\u0661", "\u0661m", " 1", "1\n", "1 ", "2 Gi"])
def test_what_parse_quantity_refuses_is_refused(text: str) -> None:
    # Unicode digits and surrounding space were once read as numbers; the API server refuses them
    with pytest.raises(QuantityError):
        parse_quantity(text)
    with pytest.raises(QuantityError):
        milli_value(text)


def test_leading_zeros_of_a_long_number_are_not_significant_digits():
    # past 100 characters a number keeps its first 100 significant digits; the zeros before
    # its first non-zero digit are not among them: "0" * 200 + "5" is 5, not 100 zeros then
    # a rounded-up rest of 101 digits (10**101)
    assert parse_quantity("0" * 200 + "5") == 5
    assert milli_value("0" * 200 + "1.5") == 1500  # 1.5 cores: 1500 millicores
    assert parse_quantity("-" + "0" * 200 + "25e-1") == Fraction(-5, 2)  # -25 * 10**-1


def test_the_integer_fast_path_rounds_up_to_whole_units():
    # "<digits><suffix>" is read without a Fraction; Quantity.Value() rounds up:
    # 1001m = 1.001 -> 2, 999m = 0.999 -> 1, 1000m = 1 exactly, 1m -> 1
    assert [int_value(t) for t in ("1001m", "999m", "1000m", "1m")] == [2, 1, 1, 1]


def test_an_exponent_within_the_slack_past_the_numbers_digits_is_followed_exactly():
    # exact while the exponent is at most the number's digits + 40 (_EXPONENT_SLACK), the
    # value 10**40 beyond: one digit, exact up to e41
    assert parse_quantity("3e41") == 3 * 10**41
    assert parse_quantity("3e42") == 10**40
    # 101 digits: the first 100 kept, the last rounded away from zero (mantissa
    # int("1" * 100) + 1, times 10**1), so e140 is 10**141 in all: 141 <= 101 + 40, exact
    many = "1" * 101
    assert parse_quantity(many + "e140") == (int("1" * 100) + 1) * 10**141
    assert parse_quantity(many + "e141") == 10**40


def test_an_amount_one_past_the_largest_is_clamped_and_the_largest_kept():
    # MAX_AMOUNT = 2**50 = 1125899906842624: one byte more is cut to it; 2**50 millicores stay
    assert MAX_AMOUNT == 1125899906842624
    assert parse_resource_list({"memory": "1125899906842625", "cpu": "1125899906842624m"}) == {
        "memory": 1125899906842624,
        "cpu": 1125899906842624,
    }
