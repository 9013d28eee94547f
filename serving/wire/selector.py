"""Kubernetes label selectors: the string grammar of ``labels.Parse`` and the workload pick.

The HPA sends its metric selector as ``?labelSelector=<selector.String()>``, form-encoded by
Go's ``url.Values.Encode`` (``=`` as ``%3D``, ``,`` as ``%2C``, ``/`` as ``%2F``, space as
``+``). :func:`selector_from_query` undoes that encoding; :func:`parse_selector` reads the
decoded text. Grammar, as in ``k8s.io/apimachinery/pkg/labels/selector.go``::

    selector    := "" | requirement ("," requirement)*
    requirement := key ("=" | "==" | "!=") value
                 | key ("in" | "notin") "(" value ("," value)* ")"
                 | key (">" | "<") integer
                 | key                       (exists)
                 | "!" key                   (does not exist)

Whitespace may separate tokens. Keys are qualified names (``prefix/name``), values are label
values (at most 63 characters, possibly empty), both validated as the API server does.

Examples
--------
>>> sel = parse_selector("workload=llm-a, scaledobject.keda.sh/name=my-so")
>>> str(sel)
'scaledobject.keda.sh/name=my-so,workload=llm-a'
>>> workload_from_selector(sel)
'llm-a'
>>> str(selector_from_query("labelSelector=tier+in+%28gpu%2Ccpu%29"))
'tier in (cpu,gpu)'
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import parse_qs

from forecaster.exceptions import shown
from serving.exceptions import SelectorError

__all__ = [
    "MAX_SELECTOR_CHARS",
    "WORKLOAD_LABEL",
    "Operator",
    "Requirement",
    "Selector",
    "parse_selector",
    "selector_from_query",
    "workload_from_selector",
]

WORKLOAD_LABEL = "workload"
"""The label whose value names a prewarm workload: ``labelSelector=workload=NAME``."""

MAX_SELECTOR_CHARS = 4096
"""Longest selector read, decoded (the HPA's are well under 200 characters). A longer one is
refused before it is parsed: parsing is linear in the text, on the event loop."""
_MAX_QUERY_CHARS = 3 * MAX_SELECTOR_CHARS  # every character of the longest one as %XX


class Operator(StrEnum):
    """Selector operators, with the values Go's ``selection.Operator`` uses."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SET_OPERATORS = frozenset({Operator.IN, Operator.NOT_IN})
_NUMERIC_OPERATORS = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})

# validation.IsQualifiedName / IsValidLabelValue / IsDNS1123Subdomain
_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_INT64_RE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Requirement:
    """One clause of a selector, e.g. ``tier in (cpu,gpu)``.

    Parameters
    ----------
    key : str
        The label key.
    operator : Operator
        The comparison.
    values : tuple of str
        Sorted, de-duplicated values: one for ``=``, ``==``, ``!=``, ``>``, ``<``; at least one
        for ``in`` / ``notin``; none for exists / does-not-exist.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Tell whether a label set satisfies this requirement, with Go's semantics.

        ``!=`` and ``notin`` match when the label is absent; ``>`` and ``<`` need the label to
        hold an integer.
        """
        present = self.key in labels
        op = self.operator
        if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
            return present and labels[self.key] in self.values
        if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            return not present or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        if not present or _INT64_RE.fullmatch(labels[self.key]) is None:
            return False
        have, want = int(labels[self.key]), int(self.values[0])
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op is Operator.EXISTS:
            return self.key
        if op in _SET_OPERATORS:
            return f"{self.key} {op.value} ({','.join(self.values)})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class Selector:
    """A parsed label selector: the conjunction of its requirements, sorted by key.

    The empty selector matches every label set.
    """

    requirements: tuple[Requirement, ...] = field(default=())

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Tell whether a label set satisfies every requirement."""
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# --- lexer ---------------------------------------------------------------------------------

_IDENT = "identifier"
_END = "end of string"
_SPECIAL = frozenset("=!(),<>")
_TWO_CHAR_TOKENS = frozenset({"!=", "=="})
_WHITESPACE = frozenset(" \t\r\n")


@dataclass(frozen=True)
class _Token:
    kind: str  # _IDENT, _END, "in", "notin", or the symbol itself
    text: str
    pos: int


def _tokens(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            yield _Token(_END, "", n)
            return
        if text[i] in _SPECIAL:
            width = 2 if text[i : i + 2] in _TWO_CHAR_TOKENS else 1
            yield _Token(text[i : i + width], text[i : i + width], i)
            i += width
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        yield _Token(word if word in ("in", "notin") else _IDENT, word, start)


# --- parser --------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = list(_tokens(text))
        self.index = 0

    def error(self, message: str, pos: int) -> SelectorError:
        return SelectorError(
            f"malformed label selector {shown(self.text)}: {message} at position {pos}",
            selector=self.text,
            position=pos,
        )

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def next(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != _END:
            self.index += 1
        return token

    def unexpected(self, token: _Token, expected: str) -> SelectorError:
        found = "end of string" if token.kind == _END else repr(token.text)
        return self.error(f"expected {expected}, found {found}", token.pos)

    @staticmethod
    def word(token: _Token) -> bool:
        # Where a key or value is expected, Go's lexer reads `in` / `notin` as plain words.
        return token.kind in (_IDENT, "in", "notin")

    def parse(self) -> Selector:
        requirements: list[Requirement] = []
        if self.peek().kind == _END:
            return Selector()
        while True:
            token = self.peek()
            if not (self.word(token) or token.kind == "!"):
                raise self.unexpected(token, "a label key or '!'")
            requirements.append(self.requirement())
            token = self.next()
            if token.kind == _END:
                break
            if token.kind != ",":
                raise self.unexpected(token, "',' or end of string")
        requirements.sort(key=lambda r: r.key)  # as labels.Parse does
        return Selector(tuple(requirements))

    def requirement(self) -> Requirement:
        negated = self.peek().kind == "!"
        if negated:
            self.next()
        key_token = self.next()
        if not self.word(key_token):
            raise self.unexpected(key_token, "a label key")
        self.check_key(key_token)
        key = key_token.text
        if self.peek().kind in (_END, ","):
            return Requirement(key, Operator.DOES_NOT_EXIST if negated else Operator.EXISTS)
        if negated:
            raise self.unexpected(self.peek(), "',' or end of string after '!key'")
        op_token = self.next()
        operator = {
            "=": Operator.EQUALS,
            "==": Operator.DOUBLE_EQUALS,
            "!=": Operator.NOT_EQUALS,
            "in": Operator.IN,
            "notin": Operator.NOT_IN,
            ">": Operator.GREATER_THAN,
            "<": Operator.LESS_THAN,
        }.get(op_token.kind)
        if operator is None:
            raise self.unexpected(op_token, "an operator (=, ==, !=, in, notin, >, <)")
        if operator in _SET_OPERATORS:
            values = self.value_set(op_token)
        else:
            values = (self.exact_value(op_token, operator),)
        return Requirement(key, operator, values)

    def exact_value(self, op_token: _Token, operator: Operator) -> str:
        if self.peek().kind in (_END, ",") and operator not in _NUMERIC_OPERATORS:
            return ""  # `k=` selects the empty value, as in Go
        token = self.next()
        if not self.word(token):
            raise self.unexpected(token, "a value")
        if operator in _NUMERIC_OPERATORS:
            if _INT64_RE.fullmatch(token.text) is None or not (-(2**63) <= int(token.text) < 2**63):
                raise self.error(
                    f"operator {op_token.text!r} needs an integer value, got {shown(token.text)}",
                    token.pos,
                )
        else:
            self.check_value(token)
        return token.text

    def value_set(self, op_token: _Token) -> tuple[str, ...]:
        token = self.next()
        if token.kind != "(":
            raise self.unexpected(token, "'('")
        values: set[str] = set()
        # Empty members are legal, as in Go: `k in (a,)` selects "a" or "".
        expect_value, empty_list = True, True
        while True:
            token = self.next()
            if token.kind == ")":
                if empty_list:
                    raise self.error(
                        f"operator {op_token.text!r} needs at least one value", token.pos
                    )
                if expect_value:
                    values.add("")
                break
            empty_list = False
            if token.kind == ",":
                if expect_value:
                    values.add("")
                expect_value = True
            elif self.word(token) and expect_value:
                self.check_value(token)
                values.add(token.text)
                expect_value = False
            else:
                expected = "a value, ',' or ')'" if expect_value else "',' or ')'"
                raise self.unexpected(token, expected)
        return tuple(sorted(values))

    def check_key(self, token: _Token) -> None:
        prefix, slash, name = token.text.rpartition("/")
        problem = None
        if "/" in prefix:
            problem = "a key holds at most one '/'"
        elif slash and not prefix:
            problem = "the prefix before '/' must not be empty"
        elif slash and (len(prefix) > 253 or _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None):
            problem = "the prefix must be a DNS subdomain (lowercase, at most 253 characters)"
        elif len(name) > 63 or _NAME_RE.fullmatch(name) is None:
            problem = (
                "the name must be at most 63 characters of [A-Za-z0-9-_.], "
                "starting and ending with an alphanumeric"
            )
        if problem is not None:
            raise self.error(f"invalid label key {shown(token.text)} ({problem})", token.pos)

    def check_value(self, token: _Token) -> None:
        if len(token.text) > 63 or _NAME_RE.fullmatch(token.text) is None:
            raise self.error(
                f"invalid label value {shown(token.text)} (at most 63 characters of "
                "[A-Za-z0-9-_.], starting and ending with an alphanumeric)",
                token.pos,
            )


def parse_selector(text: str) -> Selector:
    """Parse a decoded label selector string.

    Parameters
    ----------
    text : str
        The selector, e.g. ``"workload=llm-a,tier in (gpu)"``. Already URL-decoded: use
        :func:`selector_from_query` on a raw query string.

    Returns
    -------
    Selector
        The requirements, sorted by key. ``""`` gives the empty selector.

    Raises
    ------
    SelectorError
        If the text is longer than :data:`MAX_SELECTOR_CHARS`, breaks the grammar or holds an
        invalid key or value; the message names the selector and the 0-based position of the
        problem.

    Examples
    --------
    >>> parse_selector("!canary,workload==a").requirements[0]
    Requirement(key='canary', operator=<Operator.DOES_NOT_EXIST: '!'>, values=())
    """
    _check_length(text, MAX_SELECTOR_CHARS, "label selector")
    return _Parser(text).parse()


def _check_length(text: str, limit: int, what: str) -> None:
    if len(text) > limit:
        raise SelectorError(
            f"{what} too long: {len(text)} characters, at most {limit} are read",
            selector=text,
        )


def selector_from_query(query: str, param: str = "labelSelector") -> Selector:
    """Read and parse the selector from a raw (still encoded) URL query string.

    ``%XX`` escapes are decoded as UTF-8 and ``+`` as a space, matching Go's
    ``url.Values.Encode``. When the parameter repeats, the first one wins, as in the
    Kubernetes API server's ``ListOptions`` decoding. A missing parameter gives the empty
    selector, which is what the HPA sends when its metric has no selector.

    Parameters
    ----------
    query : str
        The query string without the leading ``?``, e.g. ``"labelSelector=workload%3Dllm-a"``.
    param : str, default "labelSelector"
        The parameter name.

    Returns
    -------
    Selector

    Raises
    ------
    SelectorError
        If the query is longer than three times :data:`MAX_SELECTOR_CHARS` (the longest
        selector, fully percent-encoded), the escapes are not valid UTF-8 or the selector is
        malformed.
    """
    _check_length(query, _MAX_QUERY_CHARS, "query string")
    try:
        values = parse_qs(query, keep_blank_values=True, errors="strict").get(param, [])
    except UnicodeDecodeError as exc:
        raise SelectorError(
            f"malformed label selector in query {shown(query)}: percent-escapes are not UTF-8",
            selector=query,
        ) from exc
    return parse_selector(values[0] if values else "")


def workload_from_selector(selector: Selector | str, *, label: str = WORKLOAD_LABEL) -> str:
    """Return the one workload a selector pins, ignoring requirements on other labels.

    The selector must hold exactly one requirement on ``label`` and it must name a single
    non-empty value: ``workload=NAME``, ``workload==NAME`` or ``workload in (NAME)``.

    Requirements on any other label are **ignored**. Prewarm's metric values carry only the
    ``workload`` label, and callers add labels prewarm does not model: KEDA puts
    ``scaledobject.keda.sh/name=<ScaledObject>`` on every metric of the HPA it owns, and users
    copy their app's ``matchLabels``. Evaluating those against the ``workload`` label alone
    would return an empty list, which the HPA treats as an error, so they are not evaluated.
    They never select a workload either: a selector with only
    ``scaledobject.keda.sh/name=...`` is rejected.

    Parameters
    ----------
    selector : Selector or str
        A parsed selector, or decoded selector text.
    label : str, default "workload"
        The label that names the workload.

    Returns
    -------
    str
        The workload name (not checked against the configured workloads).

    Raises
    ------
    SelectorError
        If the selector is malformed, has no requirement on ``label``, has several, or one
        that does not pin a single value (``!=``, ``notin``, exists, ``in`` with 2+ values).

    Examples
    --------
    >>> workload_from_selector("scaledobject.keda.sh/name=so,workload in (llm-a)")
    'llm-a'
    """
    parsed = parse_selector(selector) if isinstance(selector, str) else selector
    text = str(parsed) if not isinstance(selector, str) else selector
    on_label = [r for r in parsed.requirements if r.key == label]
    hint = f"use labelSelector={label}=NAME"
    if not on_label:
        raise SelectorError(
            f"label selector {shown(text)} does not name a workload: {hint}", selector=text
        )
    if len(on_label) > 1:
        raise SelectorError(
            f"label selector {shown(text)} has {len(on_label)} requirements on {label!r}; "
            f"{hint} once",
            selector=text,
        )
    (requirement,) = on_label
    pins_one = (
        requirement.operator
        in (
            Operator.EQUALS,
            Operator.DOUBLE_EQUALS,
            Operator.IN,
        )
        and len(requirement.values) == 1
    )
    if not pins_one or requirement.values[0] == "":
        raise SelectorError(
            f"label selector {shown(text)} must pin one workload, but {shown(str(requirement))} "
            "does "
            f"not: {hint}",
            selector=text,
        )
    return requirement.values[0]
