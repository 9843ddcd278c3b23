"""Run the local judge server until killed: `python -m eval_platform.local_judge [--port 8765] ...`."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from eval_platform.local_judge.server import LocalJudgeServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(prog="python -m eval_platform.local_judge", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before every chat completion")
    parser.add_argument("--rate-limit-rps", type=float, default=None, help="answer 429 above this many requests/s")
    parser.add_argument("--rate-limit-burst", type=int, default=10, help="requests allowed at once before the limit")
    parser.add_argument("--batch-delay-s", type=float, default=0.0, help="how long a batch stays in_progress")
    parser.add_argument(
        "--batch-expire-after", type=int, default=None, help="answer only the first N lines of a batch, then expire it"
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        default=None,
        help="holds sources/pandalm/ (default: $EVAL_PLATFORM_DATA_DIR or ./data)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT or SIGTERM, announcing the base URL on one line once ready."""
    args = parse_args(argv)
    server = LocalJudgeServer(
        data_root=args.data_root,
        latency_ms=args.latency_ms,
        host=args.host,
        port=args.port,
        rate_limit_rps=args.rate_limit_rps,
        rate_limit_burst=args.rate_limit_burst,
        batch_delay_s=args.batch_delay_s,
        batch_expire_after=args.batch_expire_after,
    )
    stopping = threading.Event()
    # SIGTERM would otherwise end the process without closing the listening socket cleanly.
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    with server:
        # Callers wait for this exact line to know the port is accepting connections.
        print(f"local judge listening on {server.base_url}", flush=True)
        try:
            stopping.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    from eval_platform.startup import start_process

    start_process()
    main()
