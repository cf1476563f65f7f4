"""AST of the query language (docs/QUERY_LANGUAGE.md section 2).

Plain frozen dataclasses. Every node carries a `span` that points into the
query text; spans do not take part in equality, so `parse(format(ast)) == ast`
holds. Imports nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union


@dataclass(frozen=True)
class Span:
    """1-based line/column of the first character, end column exclusive."""

    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0


NO_SPAN = Span()


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)  # type: ignore[return-value]


# ---------------------------------------------------------------- patterns


@dataclass(frozen=True)
class EventPattern:
    """`Type [alias]`: one event of a type, bound to an alias."""

    type: str
    alias: str
    span: Span = _span()


@dataclass(frozen=True)
class Kleene:
    """`P+`: one or more repetitions of P."""

    inner: Pattern
    span: Span = _span()


@dataclass(frozen=True)
class Repeat:
    """Bounded repetition (SEMANTICS section 8): `P{n}` (lo = hi = n),
    `P{n,m}`, `P{n,}` (hi None), `P?` ({0,1}) and `P*` ({0,}). `P+` stays a
    `Kleene`; the parser writes `P{1,}` as `Kleene` and `P{1}` as P itself."""

    inner: Pattern
    lo: int
    hi: int | None
    span: Span = _span()

    @property
    def optional(self) -> bool:
        """The part may match no event."""
        return self.lo == 0

    @property
    def counted(self) -> bool:
        """A counted repetition (`P{n}`, `P{n,m}`, `P{n,}`, `P{0,m}` with m > 1), not `P?` or `P*`: it
        unrolls into copies (`structure.unroll`)."""
        return not (self.lo == 0 and self.hi in (1, None))


@dataclass(frozen=True)
class Seq:
    """`SEQ(P1, ..., Pn)`: parts in strictly increasing time."""

    parts: tuple[Pattern, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Not:
    """`NOT P`: only as a part of a SEQ."""

    inner: Pattern
    span: Span = _span()


Pattern = Union[EventPattern, Kleene, Repeat, Seq, Not]


# ------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Literal:
    """A number, a quoted string, or TRUE/FALSE."""

    value: int | float | str | bool
    span: Span = _span()


@dataclass(frozen=True)
class AttrRef:
    """`X.a`, `NEXT(X).a`, or an unqualified `a` (alias None)."""

    alias: str | None
    attr: str
    next: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class Unary:
    """`-e` or `NOT e`."""

    op: str
    operand: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Binary:
    """Arithmetic (`+ - * / %`), comparison (`= != < <= > >=`) or `AND`/`OR`.

    `<>` is normalized to `!=` by the parser.
    """

    op: str
    left: Expr
    right: Expr
    span: Span = _span()


Expr = Union[Literal, AttrRef, Unary, Binary]

ARITHMETIC_OPS = ("+", "-", "*", "/", "%")
COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
BOOLEAN_OPS = ("AND", "OR")


# -------------------------------------------------------------- predicates


@dataclass(frozen=True)
class Equivalence:
    """`[a, X.b]`: every event an attribute applies to carries one value."""

    attrs: tuple[AttrRef, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Condition:
    """A boolean expression: local (one alias) or edge (`X.a` and `NEXT(Y).b`)."""

    expr: Expr
    span: Span = _span()


Predicate = Union[Equivalence, Condition]


# ------------------------------------------------------------ return items



@dataclass(frozen=True)
class Aggregate:
    """`COUNT(*)` (alias None), `COUNT(X)` (attr None) or `FUNC(X.a)`."""

    func: str
    alias: str | None = None
    attr: str | None = None
    name: str | None = None
    span: Span = _span()

    @property
    def default_name(self) -> str:
        if self.alias is None:
            return "count"
        if self.attr is None:
            return f"{self.func.lower()}_{self.alias}"
        return f"{self.func.lower()}_{self.alias}_{self.attr}"

    @property
    def column(self) -> str:
        return self.name or self.default_name


@dataclass(frozen=True)
class GroupItem:
    """A GROUP-BY attribute listed in RETURN, optionally renamed."""

    attr: str
    name: str | None = None
    span: Span = _span()

    @property
    def column(self) -> str:
        return self.name or self.attr


ReturnItem = Union[Aggregate, GroupItem]


# ---------------------------------------------------------------- durations

UNIT_SECONDS: dict[str, Fraction] = {
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "min": Fraction(60),
    "h": Fraction(3600),
    "d": Fraction(86400),
}

UNIT_ALIASES: dict[str, str] = {
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "second": "s", "seconds": "s",
    "min": "min", "minute": "min", "minutes": "min",
    "h": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
}


@dataclass(frozen=True)
class Duration:
    """`<number> <unit>`; `seconds` is exact."""

    amount: Fraction
    unit: str
    span: Span = _span()

    @property
    def seconds(self) -> Fraction:
        return self.amount * UNIT_SECONDS[self.unit]


# -------------------------------------------------------------------- query

ANY_MATCH = "skip-till-any-match"
NEXT_MATCH = "skip-till-next-match"
CONTIGUOUS = "contiguous"
STRATEGIES = (ANY_MATCH, NEXT_MATCH, CONTIGUOUS)  # SEMANTICS section 8, the default first


@dataclass(frozen=True)
class Query:
    """A whole query. `returns` is empty when RETURN is `TRENDS` (CET mode)."""

    returns: tuple[ReturnItem, ...]
    pattern: Pattern
    where: tuple[Predicate, ...]
    group_by: tuple[str, ...]
    within: Duration
    slide: Duration | None = None
    trends: bool = False
    strategy: str = ANY_MATCH
    group_spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)
    span: Span = _span()

    @property
    def slide_or_within(self) -> Duration:
        return self.slide if self.slide is not None else self.within


# ------------------------------------------------------------------ helpers


def pattern_aliases(p: Pattern, negative: bool = False) -> list[tuple[EventPattern, bool]]:
    """Every `EventPattern` in `p` with whether it lies under a NOT, in text order."""
    if isinstance(p, EventPattern):
        return [(p, negative)]
    if isinstance(p, (Kleene, Repeat)):
        return pattern_aliases(p.inner, negative)
    if isinstance(p, Not):
        return pattern_aliases(p.inner, True)
    out: list[tuple[EventPattern, bool]] = []
    for part in p.parts:
        out.extend(pattern_aliases(part, negative))
    return out


def expr_refs(e: Expr) -> list[AttrRef]:
    """Every attribute reference in an expression, in text order."""
    if isinstance(e, AttrRef):
        return [e]
    if isinstance(e, Unary):
        return expr_refs(e.operand)
    if isinstance(e, Binary):
        return expr_refs(e.left) + expr_refs(e.right)
    return []
