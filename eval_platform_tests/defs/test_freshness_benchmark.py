"""The freshness benchmark (`tools/perf/freshness.py`, issue 34) at a tiny size: two files of 20 traces written
into today's folder through a real `dagster dev`, the second tripping its alert rule. What is asserted is that it
reports a latency for every file and the alert, its steps and the one-shot day, and exits 0; never a timing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_freshness_benchmark_reports_every_files_latency_and_its_alert():
    command = [sys.executable, "-m", "tools.perf.freshness", "--files", "2", "--traces-per-file", "20"]
    command += ["--speedup", "60", "--idle-s", "40", "--timeout-s", "1500"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    assert "EVAL_PLATFORM_FILE_SETTLE_S=0.5;" in out  # the shipped 30 s at a speed-up of 60, printed
    rows = {int(m[0]): m[1:] for m in re.findall(r"^\| (\d+) \| (\d+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", out, re.M)}
    assert sorted(rows) == [1, 2]
    for _failing, ingested, scored, _alert in rows.values():
        assert float(ingested) >= 0 and float(scored) >= float(ingested)
    assert rows[1][0] == "0" and rows[1][3].strip() == "-"  # file 1 passes: no rule of its own
    assert rows[2][0] == "2" and float(rows[2][3]) >= float(rows[2][2])  # file 2 trips its rule: delivered
    assert "traces scored" in out and "(2 of 2 files)" in out and "(1 of 1 alerts)" in out
    for step in ("ingest", "judge", "rollups"):
        assert re.search(rf"^\| {step} \| [1-9]", out, re.M), out
    assert "one-shot day (40 traces" in out and "ratio" in out
