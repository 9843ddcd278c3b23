"""Page times of `eval-platform view` on a large synthetic warehouse: p50 and p95 per page over HTTP.

    python -m tools.perf.viewer [--rows 30000000] [--repeat 20] [--root DIR] [--keep]

Setup (not timed): `tools.perf.synthetic_warehouse.generate` writes a data root of 30 days of traces and
judge_scores for its ten evaluators, `--rows` verdicts in all (default 30,000,000: 1M verdicts a day over all
evaluators), unless `--root` already holds one; then the largest evaluator's last day is made `--day-verdicts` rows
(default 1,000,000: the issue's day of 1M verdicts in one partition), its rows and its day's traces repeated under
new trace ids. Then `eval-platform view`
runs in its own process on 127.0.0.1 and every page is requested `--repeat` times with httpx, one request at a
time, as one user clicks:

- evaluators (last 7 days), first request (cold: every partition's numbers read once, in one grouped scan) and
  then (warm: the same files, unchanged, are not read again);
- an evaluator's day: as opened, lowest first, each filter (status and reason, model, variant, session, score range,
  trace metadata `item_id=...` and as text, reasoning text, consensus members shown), and page 200 of lowest first
  reached by its keyset link (`after=` the 9,950th row's sort key: no OFFSET), the same page reached by a jump
  (`page=200`) and a jump to the last page;
- a trace (every evaluator's verdicts of its day, superseded ones included, its spans);
- compare two evaluators on the same traces, the changed verdicts largest first, and its second page (reached by
  the first page's next link, a keyset cursor);
- agreement, experiments and alerts (the tables as the synthetic root has them; empty ones still read).

Printed: a table of p50 / p95 / max in milliseconds per page with the viewer process's CPU time per request
(user + system, all its threads: what the request costs whatever else runs), the largest day's rows and the viewer
process's peak resident memory. Timings on a shared machine are noisy: the figure in docs/performance.md says
which machine and what else ran.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import duckdb
import httpx

from eval_platform.judging.day_numbers import write_day_numbers
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import PARTITION_FILE, partition_dir, write_partition
from eval_platform.viewer.queries import PAGE_ROWS, DayFilters, encode_cursor
from tools.perf.synthetic_warehouse import DAYS, FIRST_DAY, generate

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 120.0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _one(sql: str) -> tuple | None:
    with duckdb.connect() as conn:
        return conn.execute(sql).fetchone()


def _files(root: Path, table: str, keys: dict[str, str]) -> str:
    """A partition's files (one `part.parquet`, or a folder of parts) as a DuckDB glob."""
    return str(partition_dir(DataRoot.from_env(root), table, keys) / "**" / PARTITION_FILE)


def _has_files(root: Path, table: str, keys: dict[str, str]) -> bool:
    return any(partition_dir(DataRoot.from_env(root), table, keys).glob(f"**/{PARTITION_FILE}"))


def _largest_day(root: Path) -> tuple[str, str, int]:
    """The evaluator and day with the most verdicts (the last day of the largest evaluator)."""
    day = (FIRST_DAY + timedelta(days=DAYS - 1)).isoformat()
    best = ("", day, -1)
    for folder in sorted((root / "warehouse" / "judge_scores").glob("evaluator=*")):
        keys = {"evaluator": folder.name.removeprefix("evaluator="), "date": day}
        if _has_files(root, "judge_scores", keys):
            (rows,) = _one(f"SELECT count(*) FROM read_parquet('{_files(root, 'judge_scores', keys)}')") or (0,)
            name = folder.name.removeprefix("evaluator=")
            if rows > best[2]:
                best = (name, day, rows)
    return best


def _enlarge_day(root: Path, verdicts: int) -> None:
    """Make the largest evaluator's last day `verdicts` rows: its rows and its day's traces repeated under new
    trace ids (`<id>~<n>`), written through the storage layer as the asset writes a partition."""
    import polars as pl

    from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform

    evaluator, day, rows = _largest_day(root)
    if rows >= verdicts:
        return
    copies = -(-verdicts // rows)
    for table, keys, schema, limit in (
        ("traces", {"date": day}, TRACE_SCHEMA, None),
        ("judge_scores", {"evaluator": evaluator, "date": day}, JUDGE_SCORE_SCHEMA, verdicts),
    ):
        path = _files(root, table, keys)
        with duckdb.connect() as conn:
            frame = conn.sql(
                f"""SELECT * REPLACE (CASE WHEN c = 0 THEN trace_id ELSE trace_id || '~' || c END AS trace_id)
                    FROM read_parquet('{path}'), range({copies}) AS r(c) ORDER BY c, trace_id
                    {f"LIMIT {limit}" if limit else ""}"""
            ).to_arrow_table()
        rows_frame = pl.DataFrame(pl.from_arrow(frame))
        write_partition(DataRoot.from_env(root), table, keys, conform(rows_frame.drop("c"), schema))
        del frame
    write_day_numbers(DataRoot.from_env(root), evaluator, day)  # as the judge_scores asset writes them
    print(f"{evaluator} {day}: {verdicts:,} verdicts ({copies} copies of the day)", flush=True)


def _page_200(scores: str) -> str:
    """The keyset token of lowest first's page 200: the sort key of its 9,950th row, as the viewer's own
    next-page link names it after 199 clicks."""
    filters = DayFilters(sort="score")
    keys = [column for column, _, _ in filters.keys()]
    row = _one(
        f"SELECT {', '.join(keys)} FROM read_parquet('{scores}') WHERE role <> 'member' "
        f"ORDER BY {filters.order()} LIMIT 1 OFFSET {199 * PAGE_ROWS - 1}"
    )
    return encode_cursor("score", False, list(row or ()))


NEXT_OF = "next of "  # a page reached by the next link of another (resolved once the viewer runs)


def _next_link(client: httpx.Client, path: str) -> str:
    """The next link of the page at `path` (a keyset cursor the page itself names), as a path."""
    found = re.search(r'id="next" href="([^"]+)"', client.get(path).text)
    if found is None:
        raise SystemExit(f"{path}: no next link")
    return path.split("?", 1)[0] + html.unescape(found.group(1))


def _pages(root: Path) -> tuple[list[tuple[str, str]], int]:
    evaluator, day, rows = _largest_day(root)
    scores = _files(root, "judge_scores", {"evaluator": evaluator, "date": day})
    (trace_id,) = _one(
        f"SELECT trace_id FROM read_parquet('{scores}') ORDER BY trace_id LIMIT 1 OFFSET {rows // 2}"
    ) or ("",)
    other = next(
        p.name.removeprefix("evaluator=")
        for p in sorted((root / "warehouse" / "judge_scores").glob("evaluator=*"))
        if p.name != f"evaluator={evaluator}"
        and _has_files(root, "judge_scores", {"evaluator": p.name.removeprefix("evaluator="), "date": day})
    )
    traces = _files(root, "traces", {"date": day})
    (item,) = _one(
        f"SELECT json_extract_string(metadata, '$.item_id') FROM read_parquet('{traces}') WHERE trace_id = '{trace_id}'"
    ) or (None,)
    (model, variant, session) = _one(
        f"SELECT model, variant, session_id FROM read_parquet('{scores}') WHERE trace_id = '{trace_id}' LIMIT 1"
    ) or (None, None, None)
    base = f"/evaluators/{evaluator}/{day}"
    pages = [
        ("evaluators (warm)", "/evaluators?days=7"),
        ("day as opened", base),
        ("day lowest first", f"{base}?sort=score&dir=asc"),
        ("day page 200 (keyset)", f"{base}?sort=score&dir=asc&n=200&after={_page_200(scores)}"),
        ("day jump to page 200", f"{base}?sort=score&dir=asc&page=200"),
        ("day jump to the last page", f"{base}?page={-(-rows // PAGE_ROWS)}"),  # past the last: shows the last
        ("day status + reason", f"{base}?status=FAILED&reason=timeout"),
        ("day score range", f"{base}?min=0.2&max=0.3"),
        ("day reasoning text", f"{base}?q=contradicts"),
        ("day members shown", f"{base}?members=1"),
    ]
    if model:
        pages.append(("day model", f"{base}?model={quote(model)}"))
    if variant:
        pages.append(("day variant", f"{base}?variant={quote(variant)}"))
    if session:
        pages.append(("day session", f"{base}?session={quote(session)}"))
    if item:
        pages.append(("day metadata key=value", f"{base}?meta={quote(f'item_id={item}')}"))
        pages.append(("day metadata text", f"{base}?meta={quote(item)}"))
    pages += [
        ("trace", f"/traces/{day}/{quote(trace_id, safe='')}"),
        ("compare", f"/compare?day={day}&a={evaluator}&b={other}"),
        ("compare page 2 (its keyset link)", f"{NEXT_OF}/compare?day={day}&a={evaluator}&b={other}"),
        ("agreement", "/agreement"),
        ("experiments", "/experiments"),
        ("alerts", "/alerts"),
    ]
    return pages, rows


def _peak_rss_mb(pid: int) -> float | None:
    """A process's peak resident memory (Linux's VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system, all threads), in seconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _time(client: httpx.Client, url: str, pid: int, cpu: list[float]) -> float:
    """The request's wall time; its CPU time in the viewer process is appended to `cpu`."""
    before = _cpu_s(pid)
    started = time.perf_counter()
    reply = client.get(url)
    elapsed = time.perf_counter() - started
    cpu.append(_cpu_s(pid) - before)
    if reply.status_code != 200:
        raise SystemExit(f"{url}: HTTP {reply.status_code}\n{reply.text[:2000]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000_000, help="verdicts in all, over 30 days")
    parser.add_argument(
        "--day-verdicts", type=int, default=1_000_000, help="the largest evaluator's last day is made this large"
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--root", type=Path, help="a data root already generated (else a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data root")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    temporary = args.root is None
    root = args.root or Path(tempfile.mkdtemp(prefix="viewer-perf-")) / "data"
    if not (root / "warehouse" / "judge_scores").is_dir():
        started = time.perf_counter()
        written = generate(root, args.rows, annotations=2000, seed=args.seed)
        print(f"generated {written} under {root} in {time.perf_counter() - started:.0f} s", flush=True)
    _enlarge_day(root, args.day_verdicts)
    pages, rows = _pages(root)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server = subprocess.Popen(
        [sys.executable, "-m", "eval_platform.cli", "--data-dir", str(root), "view", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # the viewer process's CPU seconds per request (what a shared machine hides)
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                try:
                    client.get("/static/viewer.css")
                    break
                except httpx.HTTPError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(
                            f"the viewer did not start: {server.stderr.read() if server.stderr else ''}"
                        ) from None
                    time.sleep(0.3)
            first = "evaluators, first request (cold)"
            results[first] = [_time(client, "/evaluators?days=7", server.pid, cpu.setdefault(first, []))]
            pages = [(n, _next_link(client, p.removeprefix(NEXT_OF)) if p.startswith(NEXT_OF) else p) for n, p in pages]
            for _ in range(args.repeat):
                for name, path in pages:
                    results.setdefault(name, []).append(_time(client, path, server.pid, cpu.setdefault(name, [])))
            peak = _peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
        if temporary and not args.keep:
            shutil.rmtree(root.parent, ignore_errors=True)
    print(f"\nlargest evaluator day: {rows:,} verdicts; {args.repeat} requests per page, one at a time")
    print(f"the viewer's peak resident memory: {peak:,.0f} MB\n" if peak else "")
    print("| page | p50 ms | p95 ms | max ms | CPU ms p50 / p95 |\n| --- | ---: | ---: | ---: | ---: |")
    for name, times in results.items():
        ordered = sorted(times)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        used = sorted(cpu[name])
        used_p95 = used[min(len(used) - 1, round(0.95 * (len(used) - 1)))]
        print(
            f"| {name} | {1000 * statistics.median(ordered):.0f} | {1000 * p95:.0f} | {1000 * ordered[-1]:.0f} "
            f"| {1000 * statistics.median(used):.0f} / {1000 * used_p95:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
