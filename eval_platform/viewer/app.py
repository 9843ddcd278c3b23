"""The viewer's pages: Starlette routes rendering Jinja2 templates (autoescaped) over `queries.Warehouse`.

Server-rendered HTML, no client framework: a page is one request, its sorting, filters and pages are links and
forms (the URL says what is shown, so a view can be shared), and the only static files are the package's CSS.
Every text from the warehouse passes through autoescaping, and the free texts a judge or an app wrote (reasoning,
raw replies, conversations) through the redaction rule as well, so a key that reached a row in spite of it is
still not shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from eval_platform.llm.redaction import redact
from eval_platform.storage.location import DataRoot
from eval_platform.viewer import links
from eval_platform.viewer.comparison import ChangedPage, Side, compare
from eval_platform.viewer.history import config_hashes
from eval_platform.viewer.queries import PAGE_ROWS, SORTS, TABLE_PAGES, DayFilters, Warehouse, table_page
from eval_platform.viewer.trend import sparkline
from eval_platform.viewer.variants import DEFAULT_PAIR_BY, compare_variants, variant_mode

HERE = Path(__file__).resolve().parent
DEFAULT_DAYS = 7


def _number(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _cost(value: float | None) -> str:
    return "" if value is None else f"${value:,.4f}"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def _shown(value: Any) -> str:
    """Free text as shown: redacted (autoescaping happens in the template)."""
    if value is None:
        return ""
    return redact(str(value))


def _messages(value: str | None) -> list[dict[str, Any]]:
    """A stored conversation (JSON list of messages) as a list; a text that is not one shows as one message."""
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        return [{"role": "text", "content": value}]
    if isinstance(parsed, list):
        return [m if isinstance(m, dict) else {"role": "", "content": m} for m in parsed]
    return [{"role": "", "content": parsed}]


def _pretty(value: Any) -> str:
    """JSON content shown indented; any other text as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
        if isinstance(value, str):
            return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.ChainableUndefined
    )
    env.filters.update(number=_number, cost=_cost, percent=_percent, shown=_shown, pretty=_pretty)
    env.globals.update(
        day_path=links.day_path, trace_path=links.trace_path, session_path=links.session_path, messages=_messages
    )
    return env


def _query(request: Request, **changes: Any) -> str:
    """The current page's query string with some parameters changed (None removes one)."""
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    return "?" + urlencode(params) if params else "?"


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


def build_app(root: Path, dagster_url: str | None = None) -> Starlette:
    """The viewer over the data root `root`; `dagster_url`: the Dagster UI the pages link to."""
    warehouse = Warehouse(DataRoot.from_env(root))  # the viewer's process: the environment's store
    dagster = (dagster_url or links.dagster_url()).rstrip("/")
    templates = Jinja2Templates(env=_environment())

    def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        context.update(request=request, dagster_url=dagster, data_root=str(warehouse.root.path))
        return templates.TemplateResponse(request, template, context, status_code=status_code)

    def not_found(request: Request, what: str) -> Response:
        return page(request, "not_found.html", status_code=404, what=what)

    async def home(request: Request) -> Response:
        return RedirectResponse("/evaluators", status_code=307)

    def evaluators(request: Request) -> Response:
        days = max(1, min(_int(request.query_params.get("days"), DEFAULT_DAYS), 366))
        rows = warehouse.evaluators(days)
        for row in rows:
            row["trend"] = sparkline([(d["day"], d["mean_score"]) for d in row["days"]])
            row["pass_trend"] = sparkline([(d["day"], d["pass_rate"]) for d in row["days"]])
        return page(request, "evaluators.html", evaluators=rows, days=days)

    def evaluator_day(request: Request) -> Response:
        name, day = request.path_params["name"], request.path_params["day"]
        if not warehouse.has_day(name, day):
            return not_found(request, f"no verdicts of evaluator {name!r} for {day!r}")
        q = request.query_params
        filters = DayFilters(
            status=q.get("status", ""),
            reason=q.get("reason", ""),
            model=q.get("model", ""),
            variant=q.get("variant", ""),
            session=q.get("session", "").strip(),
            text=q.get("q", "").strip(),
            metadata=q.get("meta", "").strip(),
            min_score=_float(q.get("min")),
            max_score=_float(q.get("max")),
            final_only=q.get("members") != "1",
            sort=q.get("sort", "trace") if q.get("sort") in SORTS else "trace",
            descending=q.get("dir") == "desc",
            after=q.get("after", ""),
            before=q.get("before", ""),
            page=_int(q.get("page"), 0),
        )
        shown = warehouse.day_verdicts(name, day, filters)
        pages = max(1, -(-shown.total // PAGE_ROWS))
        # the page's number travels in its links (`n`), so it costs nothing; a cursor that is not understood
        # (another order, a broken link) shows the first page
        number = max(1, min(_int(q.get("n"), 1), pages)) if filters.cursor()[0] is not None else shown.number or 1
        return page(
            request,
            "evaluator_day.html",
            name=name,
            day=day,
            rows=shown.rows,
            total=shown.total,
            pages=pages,
            number=number,
            shown=shown,
            filters=filters,
            choices=warehouse.day_choices(name, day),
            summary=warehouse.partition_summary(name, day),
            days=warehouse.days(name),
            query=lambda **changes: _query(request, **changes),
            sorts=list(SORTS),
            page_rows=PAGE_ROWS,
            dagster_partition=links.dagster_partition_url(dagster, name, day),
            dagster_runs=links.dagster_runs_url(dagster, name, day),
        )

    def trace(request: Request) -> Response:
        day, trace_id = request.path_params["day"], request.path_params["trace_id"]
        found = warehouse.trace(day, trace_id)
        verdicts = warehouse.trace_verdicts(day, trace_id)
        if found is None and not verdicts:
            return not_found(request, f"no trace {trace_id!r} on {day!r}")
        return page(
            request,
            "trace.html",
            day=day,
            trace_id=trace_id,
            trace=found or {},
            spans=warehouse.spans(day, trace_id),
            verdicts=verdicts,
            labels=warehouse.labels(trace_id),
            dagster_day_links={
                v["evaluator"]: links.dagster_partition_url(dagster, v["evaluator"], day) for v in verdicts
            },
        )

    def session(request: Request) -> Response:
        day, session_id = request.path_params["day"], request.path_params["session_id"]
        traces, verdicts = warehouse.session(day, session_id)
        if not traces and not verdicts:
            return not_found(request, f"no session {session_id!r} on {day!r}")
        return page(request, "session.html", day=day, session_id=session_id, traces=traces, verdicts=verdicts)

    def compare_page(request: Request) -> Response:
        q = request.query_params
        judged = warehouse.judged_evaluators()
        day = q.get("day", "")
        days = {e: warehouse.days(e) for e in judged}
        all_days = sorted({d for e in judged for d in days[e]})
        sides = [
            Side(
                evaluator=q.get(f"{s}", ""),
                config_hash=q.get(f"{s}_hash", "").strip(),
                model=q.get(f"{s}_model", "").strip(),
                variant=q.get(f"{s}_variant", "").strip(),
            )
            for s in ("a", "b")
        ]
        # what each section needs of a side is asked once per request (the listings, the config hashes)
        judged_day = {e: day in days.get(e, ()) for e in {side.evaluator for side in sides}}
        ready = bool(day) and all(judged_day[side.evaluator] for side in sides)
        summary: dict[str, Any] | None = None
        shown: ChangedPage | None = None
        missing = [
            f"no verdicts of {side.evaluator!r} on {day!r}"
            for side in sides
            if day and side.evaluator and not judged_day[side.evaluator]
        ]
        # two variants answer the same inputs in different traces: paired by input (viewer/variants.py)
        by_input = variant_mode(sides[0], sides[1])
        pair_by = q.get("pair_by", "").strip() or DEFAULT_PAIR_BY
        after, before = q.get("after", ""), q.get("before", "")
        if ready and by_input:
            try:
                summary, shown = compare_variants(warehouse, day, sides[0], sides[1], pair_by, after, before)
            except ValueError as exc:
                missing.append(str(exc))
        elif ready:
            summary, shown = compare(warehouse, day, sides[0], sides[1], after, before)
        total_pages = max(1, -(-((summary or {}).get("changed") or 0) // PAGE_ROWS))
        # the page's number travels in its links (`n`), as on an evaluator's day; the first page has no cursor
        number = max(1, min(_int(q.get("n"), 1), total_pages)) if shown is not None and shown.has_previous else 1
        # each evaluator's config hashes once, however many sides name it
        hashes = {e: config_hashes(warehouse, e, day) if ok else [] for e, ok in judged_day.items()}
        return page(
            request,
            "compare.html",
            evaluators=judged,
            all_days=all_days,
            day=day,
            a=sides[0],
            b=sides[1],
            summary=summary,
            changed=shown.rows if shown is not None and not by_input else [],
            pairs=shown.rows if shown is not None and by_input else [],
            changed_page=shown,
            missing=missing,
            by_input=by_input,
            pair_by=pair_by,
            hashes={n: hashes[side.evaluator] for n, side in zip("ab", sides, strict=True)},
            current_page=number,
            total_pages=total_pages,
            query=lambda **changes: _query(request, **changes),
        )

    def table_view(table: str, template: str, filter_columns: tuple[str, ...]):
        def view(request: Request) -> Response:
            filters = {c: request.query_params.get(c, "") for c in filter_columns}
            rows = table_page(warehouse, table, filters)
            return page(request, template, rows=rows, filters=filters, table=table, columns=TABLE_PAGES[table][0])

        return view

    routes = [
        Route("/", home),
        Route("/evaluators", evaluators),
        Route("/evaluators/{name}/{day}", evaluator_day),
        Route("/traces/{day}/{trace_id:path}", trace),
        Route("/sessions/{day}/{session_id:path}", session),
        Route("/compare", compare_page),
        Route("/agreement", table_view("agreement", "agreement.html", ("section", "subject", "criterion"))),
        Route("/experiments", table_view("experiment_results", "experiments.html", ("experiment", "metric"))),
        Route("/alerts", table_view("alerts", "alerts.html", ("evaluator", "day"))),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.warehouse = warehouse
    return app
