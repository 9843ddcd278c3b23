"""Content-addressed cache of judge replies: an identical request is answered without calling the provider.

The key covers everything that shapes the reply (model, endpoint, messages, temperature, max_tokens and
the sample index, so several samples stay several calls). One small JSON file per entry, written to a
temporary name and renamed, so concurrent runs in different processes never see half an entry. The files are
written by one background thread (the judge's event loop only hands entries over: at hundreds of calls per
second the file writes were a measurable share of the judge path) and `flush()` waits for them; the runner
flushes at the end of every day.
Only replies that parsed into a verdict are stored: a failed call is retried by the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eval_platform.judging.client import JudgeRequest


def cache_key(request: JudgeRequest, sample: int, endpoint: str | None = None) -> str:
    """`endpoint` names where the reply comes from when the URL does not (the local judge's port changes
    from run to run); by default the request's api_base."""
    messages = json.dumps(request.messages, sort_keys=True)
    if request.fence_secret:
        # The fence secret is drawn per request; the same content must still find its cached reply.
        messages = messages.replace(request.fence_secret, "fence")
    material = {
        "model": request.model,
        "api_base": endpoint or request.api_base,
        "messages": messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "sample": sample,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class JudgeCache:
    def __init__(self, directory: Path):
        self.directory = directory
        self._lock = threading.Lock()
        self._writer: ThreadPoolExecutor | None = None
        self._writes: list[Future] = []
        self._unwritten: dict[str, dict[str, Any]] = {}  # handed to the writer, maybe not on disk yet

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._unwritten.get(key)
        if entry is not None:
            return entry
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-cache")
            self._unwritten[key] = entry
            self._writes.append(self._writer.submit(self._write, key, entry))

    def _write(self, key: str, entry: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, path)

    def flush(self) -> None:
        """Wait until every entry put so far is on disk; a failed write raises here."""
        with self._lock:
            writes, self._writes = self._writes, []
        try:
            for write in writes:
                write.result()
        finally:
            with self._lock:
                if not self._writes:
                    self._unwritten.clear()
