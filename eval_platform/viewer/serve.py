"""`eval-platform view`: the results viewer on the data root's warehouse, read-only, on 127.0.0.1 by default.

Pages: the evaluators (config, daily numbers and trend), an evaluator's day (every verdict, sorted and filtered),
a trace or a session (conversation, spans, every verdict), compare, agreement, experiments and alerts.
"""

from __future__ import annotations

import argparse
import os

from eval_platform.settings import DATA_DIR_ENV, WAREHOUSE_URL_ENV, data_root
from eval_platform.viewer.links import DAGSTER_URL_ENV, dagster_url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform view", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=3100)
    parser.add_argument(
        "--dagster-url",
        default=None,
        help=f"the Dagster UI the pages link to (default: ${DAGSTER_URL_ENV} or http://127.0.0.1:3000)",
    )
    args = parser.parse_args(argv)
    root = data_root()
    if not (root / "warehouse").is_dir() and not os.environ.get(WAREHOUSE_URL_ENV):
        parser.error(
            f"no warehouse under {root}: judge a day first (eval-platform judge --day DAY) or set ${DATA_DIR_ENV}"
        )
    import uvicorn

    from eval_platform.llm.redaction import remember_env
    from eval_platform.viewer.app import build_app

    remember_env(os.environ)  # the keys of this environment are never shown, even if a row had one
    app = build_app(root, args.dagster_url or dagster_url())
    print(f"eval_platform viewer on http://{args.host}:{args.port} (data root {root}, read-only); Ctrl-C stops it")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
