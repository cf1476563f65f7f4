"""Human-readable dump of a compiled query: `greta-stream explain`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from greta_stream.compiler.compiled import CompiledQuery


def _num(x: object) -> str:
    return str(x) if getattr(x, "denominator", 1) != 1 else str(getattr(x, "numerator", x))


_STRATEGY_NOTES = {
    "skip-till-any-match": " (any event may be skipped)",
    "skip-till-next-match": " (a trend never skips an event that could take the next event's place)",
    "contiguous": " (a trend skips no event of the pattern's types in its partition)",
}


def explain(cq: CompiledQuery) -> str:
    """The query as written (comments and line breaks kept), then its templates,
    transitions, predicates, partition keys, aggregates and panes."""
    out = ["query:", *(f"  {line}".rstrip() for line in cq.text.strip("\n").splitlines()), ""]
    for tpl in cq.templates:
        kind = "negative" if tpl.negative else "positive"
        out.append(f"template T{tpl.id} ({kind}): {tpl.text}")
        for state in tpl.states:
            spec = cq.aliases[state]
            tags = [t for t, on in (("START", state in tpl.start), ("END", state in tpl.end)) if on]
            local = f"  where {' AND '.join(spec.local_text)}" if spec.local_text else ""
            copy = f" (iteration of {spec.origin})" if spec.origin else ""
            out.append(f"  state {state}: {spec.type}{copy} {' '.join(tags)}{local}".rstrip())
        for tr in tpl.transitions:
            parts = [f"  transition {tr.src} -> {tr.dst} ({tr.via})"]
            if tr.negation is not None:
                parts.append(f"unless T{tr.negation} between")
            if tr.edge_text:
                parts.append(f"if {tr.edge_text}")
            out.append(" ".join(parts))
        if tpl.leading is not None:
            out.append(f"  leading NOT: T{tpl.leading} before the first event")
        if tpl.trailing is not None:
            out.append(f"  trailing NOT: T{tpl.trailing} after the last event")
    out.append("")
    out.append(f"selection: {cq.strategy}" + _STRATEGY_NOTES.get(cq.strategy, ""))
    out.append(f"partition by: {', '.join(cq.common) or '(nothing)'}")
    for comp in cq.run_components:
        out.append(f"  equivalence {comp.attr} on {', '.join(sorted(comp.aliases))} (a trend's events of these aliases agree)")
    out.append(f"group by: {', '.join(cq.group_by) or '(all partitions roll up)'}")
    out.append("aggregates: " + ", ".join(f"{o.column}={o.func}" for o in cq.outputs))
    if cq.fields:
        out.append("propagated: " + ", ".join(
            f"{f.kind}({f.alias}{'.' + f.attr if f.attr else ''})" for f in cq.fields))
    w = cq.window
    out.append(
        f"windows: WITHIN {_num(w.within)} s SLIDE {_num(w.slide)} s; panes of {_num(w.pane)} s; "
        f"{w.windows_per_event} window(s) per event"
    )
    needed = cq.needed_by_type
    out.append("needed attributes: " + "; ".join(f"{t}: {', '.join(sorted(a)) or '-'}" for t, a in needed.items()))
    return "\n".join(out)
