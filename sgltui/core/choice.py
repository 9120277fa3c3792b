"""A --choose job's trial and decision in words: one table for the CLI, the Jobs pane and the
report ("Why <winner>"), from the decision as `job_status` carries it (plain dicts)."""

from __future__ import annotations

from typing import Any

from sgltui.core import units

HEADER = ("candidate", "state", "tok/s (95% CI)", "requests", "swap", "projected finish", "energy")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def rate_cell(c: dict[str, Any]) -> str:
    tok_s, lo, hi = _num(c.get("tok_s")), _num(c.get("ci_low")), _num(c.get("ci_high"))
    if tok_s is None:
        return "-"
    if lo is None or hi is None or tok_s <= 0:
        return f"{tok_s:,.0f}"
    return f"{tok_s:,.0f} +-{(hi - lo) / 2 / tok_s:.1%}"


def energy_cell(c: dict[str, Any]) -> str:
    parts = []
    jpc, tpj = _num(c.get("j_per_completion")), _num(c.get("tok_per_j"))
    if jpc is not None:
        parts.append(f"{jpc:,.1f} J/compl")
    if tpj is not None:
        parts.append(f"{tpj:,.2f} tok/J")
    pj = _num(c.get("projected_j"))
    if pj is not None:
        parts.append(f"rest {pj / 1000:,.1f} kJ")
    return ", ".join(parts) or "-"


def state_cell(c: dict[str, Any], winner: str | None) -> str:
    if c.get("name") == winner:
        return "WINNER"
    if c.get("state") == "skipped":
        return f"skipped: {c.get('reason') or '?'}"
    return str(c.get("state") or "-")


def rows(decision: dict[str, Any]) -> list[tuple[str, ...]]:
    winner = decision.get("winner")
    out: list[tuple[str, ...]] = []
    for c in decision.get("candidates") or []:
        swap = _num(c.get("swap_s"))
        proj = _num(c.get("projected_s"))
        out.append(
            (
                str(c.get("name")),
                state_cell(c, winner),
                rate_cell(c),
                f"{int(c.get('requests') or 0):,}",
                "-" if swap is None else units.duration(swap),
                "-" if proj is None else units.duration(proj),
                energy_cell(c),
            )
        )
    return out


def table(decision: dict[str, Any]) -> list[str]:
    """The table as aligned text lines, header first."""
    body = rows(decision)
    widths = [max(len(r[i]) for r in [HEADER, *body]) for i in range(len(HEADER))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [HEADER, *body]
    ]


def summary(decision: dict[str, Any]) -> str:
    """One line: the trial's progress, or the decision and why."""
    winner = decision.get("winner")
    note = decision.get("note")
    objective = decision.get("objective") or "time"
    if decision.get("phase") == "trial":
        cur = decision.get("current")
        done = sum(1 for c in decision.get("candidates") or [] if c.get("state") == "measured")
        n = len(decision.get("candidates") or [])
        line = f"choosing: trial {done}/{n} measured" + (f", now {cur}" if cur else "")
        if decision.get("round", 1) > 1:
            line += f" (round {decision['round']})"
        return line
    if winner is None:
        return "no winner" + (f": {note}" if note else "")
    line = f"chose {winner} ({'fewest joules' if objective == 'energy' else 'soonest finish'})"
    if note:
        line += f"; {note}"
    if decision.get("watch"):
        line += f"; watch: {decision['watch']}"
    return line


def why_paragraphs(decision: dict[str, Any]) -> list[str]:
    """`--choose auto`: one paragraph per proposal of `sgltui advise`, tried or not: what bound
    the serving profile, what the change was expected to buy (and cost), what it measured."""
    cands = {c.get("name"): c for c in decision.get("candidates") or []}
    serving = next(iter(cands.values()), None)
    base = _num(serving.get("tok_s")) if serving else None
    winner = decision.get("winner")
    out: list[str] = []
    for a in decision.get("advice") or []:
        name = str(a.get("name") or "?")
        delta = ", ".join(f"{k} = {v}" for k, v in (a.get("delta") or {}).items())
        cost = (a.get("cost") or {}).get("text") or "-"
        c = cands.get(name)
        tok_s = _num(c.get("tok_s")) if c else None
        if c is None:
            got = "Not tried: beyond --choose-max."
        elif tok_s is None:
            got = f"Not measured: {c.get('reason') or c.get('state')}."
        else:
            vs = f", {tok_s / base:.2f}x the serving profile's" if base else ""
            got = (
                f"Measured {rate_cell(c)} tok/s{vs} on {int(c.get('requests') or 0):,} of the "
                f"job's requests ({c.get('reason') or c.get('state')})."
            )
        if name == winner:
            got += " It won."
        bound = a.get("bound") or "what bounds it was not known"
        out.append(
            f"**{name}** ({delta}): the serving profile was bound by {bound}. Expected: "
            f"{a.get('reason') or '-'} ({a.get('figure') or '-'}; cost: {cost}). {got}"
        )
    return out
