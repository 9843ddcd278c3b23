"""The judge cache's write-ahead log does not stay large once the process that wrote it exits (issue 34: 1.29 GB of
log beside a 160 MB cache, kept after every process ended), and it holds every entry written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from eval_platform.llm.cache import ModelCache

REPO = Path(__file__).resolve().parents[2]

# A judge day as the cache sees it: lookups in read snapshots, renewed one after another in a thread of their own,
# while replies are written in batches; the process then ends without closing anything (as a run's does).
DAY = """
import sys, threading
from pathlib import Path
from eval_platform.llm.cache import ModelCache

cache = ModelCache(Path(sys.argv[1]))
cache.put("f" * 64, {"reply": "first"})
cache.flush()
stop = threading.Event()

def lookups():
    with cache.reading():
        i = 0
        while not stop.is_set():
            cache.get(f"{i % 5000:064x}")
            i += 1

thread = threading.Thread(target=lookups)
thread.start()
for i in range(int(sys.argv[2])):
    cache.put(f"{i:064x}", {"reply": "x" * 4000 + str(i)})
cache.flush()
stop.set()
thread.join()
print((Path(sys.argv[1]) / "replies.sqlite-wal").stat().st_size)
"""


def test_the_caches_log_does_not_stay_large_after_the_process_exits(tmp_path):
    folder, entries = tmp_path / "cache", 8000
    done = subprocess.run(
        [sys.executable, "-c", DAY, str(folder), str(entries)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    during = int(done.stdout.strip())
    assert during > 8_000_000  # the log grew with the day's writes (checkpoints could not reset it) ...
    log = folder / "replies.sqlite-wal"
    after = log.stat().st_size if log.exists() else 0
    assert after < 1_000_000, f"the log kept {after} bytes after the process exited"  # ... and did not stay
    cache = ModelCache(folder)
    assert cache.get("f" * 64) == {"reply": "first"}
    assert cache.get(f"{entries - 1:064x}") == {"reply": "x" * 4000 + str(entries - 1)}
