"""Edge predicates as the columnar plan holds them: an OR of ANDs of comparisons `f(X) op g(NEXT(Y))`
(`conjunct`), each clause admitting a predecessor when all its comparisons hold; a comparison that
mixes the two events' values past that (`S.price * NEXT(S).volume > 1000`) is a pair program
(`pairs.py`), which only a scanned store reads."""

from __future__ import annotations

from greta_stream.compiler.expressions import edge_sides
from greta_stream.engine.columnar.bounds import bounded
from greta_stream.engine.columnar.columns import Unsupported
from greta_stream.engine.columnar.pairs import PAIR, pair_side
from greta_stream.engine.columnar.parts import loop_ends, skipped_to, spans_of
from greta_stream.query import ast

NegEdge = tuple[str, str, tuple[tuple[str, ast.Expr, ast.Expr], ...]]  # (X, Y, clause) within a negated SEQ
Conjunct = tuple[tuple[tuple[str, ast.Expr, ast.Expr], ...], ...]  # clauses (OR-ed) of comparisons (AND-ed)
MAX_COMPARISONS = 16  # comparisons of one edge predicate written out as an OR of ANDs


def conjunct(e: ast.Expr) -> Conjunct:
    """An edge predicate as an OR of ANDs of comparisons `f(X) op g(NEXT(Y))`, or `Unsupported`."""
    clauses = _dnf(e)
    if sum(len(c) for c in clauses) > MAX_COMPARISONS:
        raise Unsupported(f"an edge predicate of more than {MAX_COMPARISONS} comparisons written out as an OR of ANDs")
    out = []
    for clause in clauses:
        sides = tuple(edge_sides(c, unequal=True) or bounded(c) or pair_side(c) for c in clause)
        for c, side in zip(clause, sides):
            if side is None and is_edge(c):
                raise Unsupported("an edge predicate that is not a comparison of numbers of X with NEXT(Y)")
            if side is None:  # a comparison of one event under an OR with edge comparisons
                raise Unsupported("an edge predicate that is not a comparison of X with NEXT(Y)")
        out.append(tuple(side for side in sides if side is not None))
    return tuple(out)


def _dnf(e: ast.Expr) -> list[list[ast.Expr]]:
    """`e`'s clauses (OR-ed) of comparisons (AND-ed); a NOT goes down to the comparisons (De Morgan)."""
    if isinstance(e, ast.Unary) and e.op == "NOT":
        e = _negation(e.operand)
    if isinstance(e, ast.Binary) and e.op == "OR":
        return _dnf(e.left) + _dnf(e.right)
    if isinstance(e, ast.Binary) and e.op == "AND":
        right = _dnf(e.right)
        return [a + b for a in _dnf(e.left) for b in right]
    return [[e]]


_OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}


def _negation(e: ast.Expr) -> ast.Expr:
    """`NOT e` without the NOT where it goes down to comparisons, which it turns around: the columnar engine
    compares finite numbers only (a NaN hands the run to the general engine), where `NOT (a > b)` is
    `a <= b`; else `NOT e` as it was."""
    if isinstance(e, ast.Binary) and e.op in ("AND", "OR"):
        return ast.Binary("OR" if e.op == "AND" else "AND", _negation(e.left), _negation(e.right), e.span)
    if isinstance(e, ast.Binary) and e.op in _OPPOSITE:
        return ast.Binary(_OPPOSITE[e.op], e.left, e.right, e.span)
    if isinstance(e, ast.Unary) and e.op == "NOT":
        return e.operand
    return ast.Unary("NOT", e)


def edge_pair(e: ast.Expr, only: str | None) -> tuple[str, str]:
    """(X, Y) of an edge predicate over `X.a` and `NEXT(Y).b` (an unqualified attribute is alias `only`'s,
    the pattern's one alias)."""
    x = {r.alias or only for r in ast.expr_refs(e) if not r.next}
    y = {r.alias or only for r in ast.expr_refs(e) if r.next}
    if len(x) != 1 or len(y) != 1:
        raise Unsupported("an edge predicate over more than one pair of aliases")
    return str(x.pop()), str(y.pop())


def is_edge(e: ast.Expr) -> bool:
    """`e` reads a NEXT: an edge predicate."""
    return any(r.next for r in ast.expr_refs(e))


def negated_step_edges(edges: list[ast.Expr],
                       negated: list[list[tuple[str, bool, str]]]) -> tuple[list[ast.Expr], list[NegEdge]]:
    """The edge predicates between consecutive parts of a negated SEQ (each list of `negated`: (alias, a
    NOT inside it, its marks of a Kleene plus over a SEQ, `parts.State.group`), and on such a group's loop
    step from its last part back to its first (`NOT SEQ(C, (SEQ(G, H))+, D) WHERE H.v < NEXT(G).v`),
    apart: (X, Y, clause) per clause of the OR of ANDs of comparisons they make on their step together
    (entries of one step are OR-ed), by which `negseqs.py` searches the SEQ's matches; the others as they
    were. A step across a NOT inside the SEQ (`NOT SEQ(C, NOT E, D) WHERE C.v < NEXT(D).v`)
    is one more range of the search: the NOT is a range of times too (past `dominance.TREE_RANGES` ranges,
    however many, a scan of the pairs within a window's length). `Unsupported` for more than
    `MAX_COMPARISONS` clauses on one step once written out as an OR of ANDs, or a pair program."""
    steps: set[tuple[str, str]] = set()
    across: set[tuple[str, str]] = set()
    for aliases in negated:
        kept = [(a, k) for k, (a, no, _) in enumerate(aliases) if not no]
        for (a, i), (b, j) in zip(kept, kept[1:]):
            (steps if j == i + 1 else across).add((a, b))
        marks = [group for _, _, group in aliases]
        for k in range(len(aliases)):  # `NOT SEQ(C, D?, E) WHERE C.v < NEXT(E).v`: C is next to E too (`D*` too)
            steps.update((aliases[k][0], aliases[j][0]) for j in skipped_to(marks, k))
        for i, j in spans_of(marks):  # a group's loop steps, from each part an iteration may end at to each
            starts, stops = loop_ends(marks[i:j + 1])  # one it may start at (`(SEQ(G, H?))+`: H and G to G)
            steps.update((aliases[i + e][0], aliases[i + b][0]) for e in stops for b in starts)
        steps.update((a, a) for a, _, group in aliases if "+" in group)  # a Kleene event's loop inside a group
    rest: list[ast.Expr] = []
    ors: dict[tuple[str, str], list[tuple[tuple[str, ast.Expr, ast.Expr], ...]]] = {}
    for e in edges:
        x, y = edge_pair(e, None)
        if (x, y) not in steps | across:
            rest.append(e)
            continue
        clauses = conjunct(e)
        if any(c[0] == PAIR for clause in clauses for c in clause):
            raise Unsupported("an edge predicate within a negated SEQ other than comparisons of X with NEXT(Y) "
                              "under AND and OR")
        before = ors.get((x, y))  # two predicates on one step: both hold, an AND of their ORs
        ors[(x, y)] = list(clauses) if before is None else [a + b for a in before for b in clauses]
        if len(ors[(x, y)]) > MAX_COMPARISONS:
            raise Unsupported(f"edge predicates on one step of a negated SEQ of more than {MAX_COMPARISONS} "
                              "clauses written out as an OR of ANDs")
    return rest, [(x, y, tuple(clause)) for (x, y), clauses in ors.items() for clause in clauses]


def coded_attrs(edges: tuple[tuple[str, ast.Expr, ast.Expr], ...]) -> frozenset[str]:
    """The attributes every edge comparison reading them compares for equality as they are (`X.k =
    NEXT(Y).k`, `!=`): they may hold strings, compared by codes per kernel run (`keys.edge_values`)."""
    bare = [(x, y) for op, x, y in edges if op in ("=", "!=") and isinstance(x, ast.AttrRef)
            and isinstance(y, ast.AttrRef)]
    other = {r.attr for e in edges if not any(e[1:] == b for b in bare) for side in e[1:]
             for r in ast.expr_refs(side)}
    return frozenset(r.attr for b in bare for r in b if isinstance(r, ast.AttrRef)) - other
