"""Bench results and the comparison of profiles at each concurrency."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from sgltui.core import units
from sgltui.tui import fmt
from sgltui.tui.model import BenchRun

# Result metric names differ between load generators; the first present wins
# (names from sgltui's load generator, other clients and SGLang's bench_serving JSON).
METRICS = {
    "out_tok_s": ("output_throughput", "output_token_throughput", "output_tok_s"),
    "req_s": ("request_throughput", "req_s"),
    "ttft": ("median_ttft_ms", "ttft_ms.median", "ttft.median", "ttft_median_ms"),
    "tpot": ("median_tpot_ms", "tpot_ms.median", "tpot.median", "tpot_median_ms"),
    "conc": ("concurrency", "avg_concurrency"),
    "accept": ("accept_length", "avg_accept_length", "spec_accept_length"),
    "failed": ("failed", "failed_requests"),
}


def metric(metrics: dict[str, Any], name: str) -> float | None:
    for key in METRICS[name]:
        node: Any = metrics
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            return float(node)
    return None


def comparison_rows(results: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Rows sorted by concurrency then throughput, each with its share of the best at that
    concurrency: the question is which profile finishes the job fastest at a given load."""
    best: dict[Any, float] = {}
    for r in results:
        out = metric(r.get("metrics") or {}, "out_tok_s")
        if out is not None:
            best[r.get("concurrency")] = max(best.get(r.get("concurrency"), 0.0), out)
    rows: list[tuple[str, ...]] = []
    for r in sorted(
        results,
        key=lambda r: (
            r.get("concurrency") or 0,
            -(metric(r.get("metrics") or {}, "out_tok_s") or 0),
        ),
    ):
        m = r.get("metrics") or {}
        out = metric(m, "out_tok_s")
        b = best.get(r.get("concurrency"))
        share = f"{out / b * 100:.0f}%" if out is not None and b else "-"
        mark = "★ " if out is not None and b and out >= b else "  "
        rows.append(
            (
                mark + str(r.get("profile", "?")),
                str(r.get("concurrency", "-")),
                units.sig3(out),
                share,
                fmt.num(metric(m, "req_s"), 2),
                fmt.num(metric(m, "ttft"), 0),
                fmt.num(metric(m, "tpot"), 1),
                fmt.num(metric(m, "accept"), 2),
                str((r.get("capacity") or {}).get("max_running_requests", "-")),
            )
        )
    return rows


def bench_comparison(result: dict[str, Any]) -> dict[str, Any] | None:
    """The comparison of a run file as `sgltui bench compare` builds it: rebuilt from the
    stored results (JSON stores the comparison's NaNs as null), with the run's job size."""
    from sgltui.bench import compare

    # A running run's file holds its finished points and no comparison yet: compared so far.
    ours = result.get("comparison") or result.get("state") == "running"
    if not ours or not result.get("results"):
        return None
    spec = result.get("spec") or {}
    return compare.build(
        result["results"],
        spec.get("job_completions"),
        spec.get("job_output_len"),
        spec.get("output_len"),
    )


def max_running(results: list[dict[str, Any]]) -> dict[str, int]:
    """Each profile's max running requests, from the capacity card its points recorded."""
    out: dict[str, int] = {}
    for r in results:
        cap = (r.get("capacity") or {}).get("max_running_requests")
        if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
            out[str(r.get("profile"))] = cap
    return out


def summary(comparison: dict[str, Any], caps: dict[str, int] | None = None) -> str:
    """The recommendation (the bench's own, for a job size) or each profile's best point, and
    a hint where the best point is the highest concurrency measured: it may go higher, unless
    the server runs no more requests at once than that (`caps`, its max running requests;
    the Insight tab says the same)."""
    best = comparison.get("best") or {}
    job = comparison.get("job")
    if job and job.get("recommendation"):
        text = job["recommendation"]
    elif best:
        ranked = sorted(best.items(), key=lambda kv: -(kv[1]["tok_s"].get("mean") or 0))
        text = (
            "Best: "
            + "; ".join(
                f"{p} at concurrency {b['concurrency']} ({units.tok_s(b['tok_s'].get('mean'))})"
                for p, b in ranked
            )
            + "."
        )
    else:
        text = "No successful measurement."
    for profile, b in best.items():
        tried = [r["concurrency"] for r in comparison.get("rows", []) if r["profile"] == profile]
        cap = (caps or {}).get(profile)
        if len(tried) > 1 and b["concurrency"] == max(tried) and cap and b["concurrency"] >= cap:
            text += (
                f" {profile} runs at most {cap} requests at once (max running {cap}): a higher"
                " concurrency only queues."
            )
        elif len(tried) > 1 and b["concurrency"] == max(tried):
            text += (
                f" {profile} was fastest at the highest concurrency tried ({b['concurrency']}):"
                " try higher."
            )
    return text


COLUMNS = (
    "profile",
    "conc",
    "out tok/s",
    "of best",
    "req/s",
    "TTFT ms",
    "TPOT ms",
    "accept",
    "max run",
)


class BenchPane(Vertical, can_focus=False):
    DEFAULT_CSS = """
    BenchPane #bench-status { height: auto; padding: 0 1; }
    BenchPane DataTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(
            "[dim]No bench runs yet. Press [b]b[/b] to benchmark the current profile.[/]",
            id="bench-status",
        )
        table: DataTable[str] = DataTable(id="bench-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table

    def show(self, runs: dict[str, BenchRun]) -> None:
        status = self.query_one("#bench-status", Static)
        table = self.query_one("#bench-table", DataTable)
        if not runs:
            return
        latest = list(runs.values())[-1]
        line = f"run [b]{escape(latest.run_id)}[/] {escape(latest.state)}"
        prog = latest.progress
        if latest.state == "running" and prog:
            bits = [
                f"{k} {escape(str(v))}"
                for k, v in (
                    ("profile", prog.profile),
                    ("concurrency", prog.concurrency),
                    ("phase", prog.phase),
                )
                if v is not None
            ]
            if prog.points:
                bits.append(f"point {prog.point or 0}/{prog.points}")
            if prog.total:
                bits.append(f"requests {prog.done or 0}/{prog.total}")
            line += "  " + "  ".join(bits)
        if latest.path:
            line += f"  [dim]{escape(latest.path)}[/]"
        done = [r for r in runs.values() if r.result]
        try:
            comparison = bench_comparison(done[-1].result or {}) if done else None
        except (TypeError, KeyError, ValueError) as exc:  # a run file of another version
            comparison = None
            line += f"\n[$warning]cannot compare this run: {escape(str(exc))}[/]"
        if comparison and comparison.get("rows"):
            # The bench's own comparison: the same table, ranking and recommendation as
            # `sgltui bench` prints, for the latest run.
            from sgltui.bench import compare

            columns: tuple[str, ...] = tuple(compare.HEADERS)
            rows = [tuple(r) for r in compare.table_rows(comparison)]
            so_far = ""
            if done[-1] is latest and latest.state == "running":
                measured = len((latest.result or {}).get("results") or [])
                of = f" of {prog.points}" if prog and prog.points else ""
                so_far = f"So far ({measured}{of} points): "
            caps = max_running((done[-1].result or {}).get("results") or [])
            line += "\n" + escape(so_far + summary(comparison, caps))
        else:
            results: list[dict[str, Any]] = []
            for run in done:
                results.extend((run.result or {}).get("results") or [])
            columns, rows = tuple(COLUMNS), comparison_rows(results)
        status.update(line)
        if (columns, rows) != getattr(self, "_rows", None):
            self._rows = (columns, rows)
            table.clear(columns=True)
            table.add_columns(*columns)
            for row in rows:
                table.add_row(*row)
