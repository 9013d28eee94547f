"""Label selectors: grammar, URL decoding, errors with positions, and the workload pick."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.exceptions import SelectorError
from serving.wire.selector import (
    Operator,
    Requirement,
    Selector,
    parse_selector,
    selector_from_query,
    workload_from_selector,
)

# (id, selector text, requirements after parsing, canonical string as Go prints it)
VALID = [
    ("equals", "workload=llm-a", [("workload", Operator.EQUALS, ("llm-a",))], "workload=llm-a"),
    (
        "double-equals",
        "workload==llm-a",
        [("workload", Operator.DOUBLE_EQUALS, ("llm-a",))],
        "workload==llm-a",
    ),
    (
        "not-equals",
        "workload!=llm-a",
        [("workload", Operator.NOT_EQUALS, ("llm-a",))],
        "workload!=llm-a",
    ),
    ("in", "tier in (gpu,cpu)", [("tier", Operator.IN, ("cpu", "gpu"))], "tier in (cpu,gpu)"),
    ("notin", "tier notin (gpu)", [("tier", Operator.NOT_IN, ("gpu",))], "tier notin (gpu)"),
    ("exists", "canary", [("canary", Operator.EXISTS, ())], "canary"),
    ("not-exists", "!canary", [("canary", Operator.DOES_NOT_EXIST, ())], "!canary"),
    ("greater", "gpus>2", [("gpus", Operator.GREATER_THAN, ("2",))], "gpus>2"),
    ("less", "gpus<-8", [("gpus", Operator.LESS_THAN, ("-8",))], "gpus<-8"),
    ("empty-value", "workload=", [("workload", Operator.EQUALS, ("",))], "workload="),
    (
        "whitespace",
        "  workload = llm-a ,\ttier in ( gpu , cpu )  ",
        [("tier", Operator.IN, ("cpu", "gpu")), ("workload", Operator.EQUALS, ("llm-a",))],
        "tier in (cpu,gpu),workload=llm-a",
    ),
    (
        "keda-label-sorted-by-key",
        "workload=llm-a,scaledobject.keda.sh/name=my-so",
        [
            ("scaledobject.keda.sh/name", Operator.EQUALS, ("my-so",)),
            ("workload", Operator.EQUALS, ("llm-a",)),
        ],
        "scaledobject.keda.sh/name=my-so,workload=llm-a",
    ),
    ("keyword-as-key", "in=x", [("in", Operator.EQUALS, ("x",))], "in=x"),
    (
        "keywords-as-values",
        "k notin (in,notin)",
        [("k", Operator.NOT_IN, ("in", "notin"))],
        "k notin (in,notin)",
    ),
    ("trailing-empty-member", "k in (a,)", [("k", Operator.IN, ("", "a"))], "k in (,a)"),
    ("duplicate-members", "k in (a,a,b)", [("k", Operator.IN, ("a", "b"))], "k in (a,b)"),
    (
        "all-name-chars",
        "a.b_c-D=E.f-9",
        [("a.b_c-D", Operator.EQUALS, ("E.f-9",))],
        "a.b_c-D=E.f-9",
    ),
    ("empty", "", [], ""),
    ("blank", "   ", [], ""),
]


@pytest.mark.parametrize(
    ("text", "requirements", "canonical"),
    [v[1:] for v in VALID],
    ids=[v[0] for v in VALID],
)
def test_parse_valid_selectors(
    text: str, requirements: list[tuple[str, Operator, tuple[str, ...]]], canonical: str
) -> None:
    selector = parse_selector(text)
    assert selector.requirements == tuple(Requirement(*r) for r in requirements)
    assert str(selector) == canonical
    assert parse_selector(canonical) == selector


# (id, raw query string, decoded selector as Go's labels.Parse + String() would give it)
QUERIES = [
    ("percent-encoded-equals", "labelSelector=workload%3Dllm-a", "workload=llm-a"),
    (
        "go-encoded-keda-label",
        "labelSelector=scaledobject.keda.sh%2Fname%3Dmy-so%2Cworkload%3Dllm-a",
        "scaledobject.keda.sh/name=my-so,workload=llm-a",
    ),
    ("plus-is-space", "labelSelector=tier+in+%28gpu%2Ccpu%29", "tier in (cpu,gpu)"),
    ("percent-20-is-space", "labelSelector=tier%20notin%20(gpu)", "tier notin (gpu)"),
    ("not-exists", "labelSelector=workload%3D%3Dllm-a%2C%21canary", "!canary,workload==llm-a"),
    ("among-other-params", "watch=false&labelSelector=workload%3Da&limit=5", "workload=a"),
    (
        "first-of-repeated-wins",
        "labelSelector=workload%3Da&labelSelector=workload%3Db",
        "workload=a",
    ),
    ("absent", "", ""),
    ("absent-among-others", "limit=5", ""),
    ("blank", "labelSelector=", ""),
]


@pytest.mark.parametrize(
    ("query", "expected"), [q[1:] for q in QUERIES], ids=[q[0] for q in QUERIES]
)
def test_selector_from_query_decodes_like_go_encodes(query: str, expected: str) -> None:
    assert str(selector_from_query(query)) == expected


def test_percent_2b_is_a_literal_plus_not_a_space() -> None:
    # `+` in a value is not a legal label character; %2B must reach the parser as `+`.
    with pytest.raises(SelectorError, match=r"invalid label value 'llm\+a'"):
        selector_from_query("labelSelector=workload%3Dllm%2Ba")


def test_selector_from_query_rejects_non_utf8_escapes() -> None:
    with pytest.raises(SelectorError, match="not UTF-8"):
        selector_from_query("labelSelector=workload%3D%FF")


# (id, selector, message fragment, 0-based position of the problem)
MALFORMED = [
    ("trailing-comma", "workload=llm-a,", "expected a label key or '!', found end of string", 15),
    ("double-comma", "a=b,,c=d", "expected a label key or '!', found ','", 4),
    ("missing-key", "=llm-a", "found '='", 0),
    ("missing-operator", "workload llm-a", "expected an operator", 9),
    ("space-in-key", "work load=a", "expected an operator", 5),
    ("space-in-value", "workload=a b", "expected ',' or end of string, found 'b'", 11),
    ("unclosed-set", "workload in (a", "expected ',' or ')', found end of string", 14),
    ("unclosed-set-after-comma", "workload in (a,b", "expected ',' or ')'", 16),
    ("empty-set", "workload in ()", "'in' needs at least one value", 13),
    ("set-without-parens", "workload in a", "expected '('", 12),
    ("set-missing-comma", "workload in (a b)", "expected ',' or ')', found 'b'", 15),
    ("value-in-parens", "workload=(a)", "expected a value, found '('", 9),
    ("stray-close", "k=v)", "expected ',' or end of string, found ')'", 3),
    ("not-exists-with-value", "!workload=a", "after '!key'", 9),
    ("bang-without-key", "!", "expected a label key, found end of string", 1),
    ("non-integer-gt", "gpus>two", "'>' needs an integer value, got 'two'", 5),
    ("gt-without-value", "gpus>", "expected a value, found end of string", 5),
    ("two-slashes", "a/b/c=1", "at most one '/'", 0),
    ("empty-prefix", "/name=1", "prefix before '/' must not be empty", 0),
    ("uppercase-prefix", "Keda.sh/name=1", "DNS subdomain", 0),
    ("key-too-long", "k" * 64 + "=1", "invalid label key", 0),
    ("value-too-long", "k=" + "v" * 64, "invalid label value", 2),
    ("value-starts-with-dash", "workload=-a", "invalid label value '-a'", 9),
    ("key-ends-with-dot", "app.=x", "invalid label key 'app.'", 0),
]


@pytest.mark.parametrize(
    ("text", "fragment", "position"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_selectors_name_the_selector_and_position(
    text: str, fragment: str, position: int
) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    message = str(info.value)
    assert fragment in message
    assert repr(text) in message
    assert f"at position {position}" in message
    assert info.value.position == position
    assert info.value.selector == text
    assert info.value.http_status == 400


# (id, selector, labels, matches?)
MATCHES = [
    ("equals-hit", "workload=a", {"workload": "a"}, True),
    ("equals-miss", "workload=a", {"workload": "b"}, False),
    ("equals-absent", "workload=a", {}, False),
    ("not-equals-absent", "workload!=a", {}, True),
    ("not-equals-same", "workload!=a", {"workload": "a"}, False),
    ("in-hit", "tier in (cpu,gpu)", {"tier": "gpu"}, True),
    ("notin-absent", "tier notin (gpu)", {}, True),
    ("notin-hit", "tier notin (gpu)", {"tier": "gpu"}, False),
    ("exists", "canary", {"canary": ""}, True),
    ("not-exists", "!canary", {"canary": "x"}, False),
    ("gt", "gpus>2", {"gpus": "3"}, True),
    ("gt-equal", "gpus>2", {"gpus": "2"}, False),
    ("gt-not-integer", "gpus>2", {"gpus": "many"}, False),
    ("lt-absent", "gpus<2", {}, False),
    ("conjunction", "workload=a,!canary", {"workload": "a", "canary": "1"}, False),
    ("empty-matches-all", "", {"anything": "x"}, True),
]


@pytest.mark.parametrize(
    ("text", "labels", "expected"), [m[1:] for m in MATCHES], ids=[m[0] for m in MATCHES]
)
def test_matches_follows_go_semantics(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


# (id, selector, workload)
PICKS = [
    ("equals", "workload=llm-a", "llm-a"),
    ("double-equals", "workload==llm-a", "llm-a"),
    ("in-one", "workload in (llm-a)", "llm-a"),
    ("keda-label-ignored", "scaledobject.keda.sh/name=my-so,workload=llm-a", "llm-a"),
    ("other-labels-ignored", "workload=llm-a,app!=x,!canary,tier in (a,b)", "llm-a"),
]


@pytest.mark.parametrize(("text", "workload"), [p[1:] for p in PICKS], ids=[p[0] for p in PICKS])
def test_workload_from_selector(text: str, workload: str) -> None:
    assert workload_from_selector(text) == workload
    assert workload_from_selector(parse_selector(text)) == workload


def test_workload_label_is_a_parameter() -> None:
    assert workload_from_selector("app=llm,workload=x", label="app") == "llm"


# (id, selector, message fragment)
NO_PICK = [
    ("empty", "", "does not name a workload"),
    ("keda-label-only", "scaledobject.keda.sh/name=my-so", "does not name a workload"),
    ("not-equals", "workload!=a", "must pin one workload"),
    ("notin", "workload notin (a)", "must pin one workload"),
    ("exists", "workload", "must pin one workload"),
    ("not-exists", "!workload", "must pin one workload"),
    ("in-two", "workload in (a,b)", "must pin one workload"),
    ("empty-value", "workload=", "must pin one workload"),
    ("twice", "workload=a,workload=b", "2 requirements on 'workload'"),
    ("malformed", "workload=a,", "malformed label selector"),
]


@pytest.mark.parametrize(
    ("text", "fragment"), [n[1:] for n in NO_PICK], ids=[n[0] for n in NO_PICK]
)
def test_workload_from_selector_rejects(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError, match=r"workload|malformed") as info:
        workload_from_selector(text)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


# --- properties ----------------------------------------------------------------------------

_alnum = st.sampled_from("abcxyzABZ019")
_middle = st.text(alphabet="abz09-_.", max_size=8)
names = st.builds(lambda a, m, b: a + m + b, _alnum, _middle, _alnum)
_lower = st.sampled_from("abz09")
dns_labels = st.one_of(
    _lower, st.builds(lambda a, m, b: a + m + b, _lower, st.text("az9-", max_size=6), _lower)
)
prefixes = st.lists(dns_labels, min_size=1, max_size=3).map(".".join)
keys = st.one_of(names, st.builds(lambda p, n: f"{p}/{n}", prefixes, names))
values_ = st.one_of(st.just(""), names)
integers = st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str)

requirements = st.one_of(
    st.builds(
        Requirement,
        keys,
        st.sampled_from([Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS]),
        values_.map(lambda v: (v,)),
    ),
    # Non-empty members only: an all-empty set prints as "k in ()" (in Go too), which no
    # parser reads back.
    st.builds(
        Requirement,
        keys,
        st.sampled_from([Operator.IN, Operator.NOT_IN]),
        st.sets(names, min_size=1, max_size=4).map(lambda s: tuple(sorted(s))),
    ),
    st.builds(Requirement, keys, st.sampled_from([Operator.EXISTS, Operator.DOES_NOT_EXIST])),
    st.builds(
        Requirement,
        keys,
        st.sampled_from([Operator.GREATER_THAN, Operator.LESS_THAN]),
        integers.map(lambda v: (v,)),
    ),
)


@given(st.lists(requirements, max_size=5))
def test_string_form_parses_back(reqs: list[Requirement]) -> None:
    selector = Selector(tuple(sorted(reqs, key=lambda r: r.key)))
    assert parse_selector(str(selector)) == selector


@given(st.lists(requirements, max_size=5))
def test_go_form_encoding_round_trips(reqs: list[Requirement]) -> None:
    # urlencode quotes like Go's url.Values.Encode: space as '+', everything else but
    # [A-Za-z0-9_.~-] as %XX.
    selector = Selector(tuple(sorted(reqs, key=lambda r: r.key)))
    query = urlencode({"labelSelector": str(selector)})
    assert selector_from_query(query) == selector


@given(st.text(alphabet="ab=!(),<> in\t/.-notx5", max_size=30))
def test_parser_only_ever_raises_selector_error_with_a_position_inside(text: str) -> None:
    try:
        parse_selector(text)
    except SelectorError as exc:
        assert exc.position is not None
        assert 0 <= exc.position <= len(text)
        assert repr(text) in str(exc)
