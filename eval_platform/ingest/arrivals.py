"""What the new-files sensor knows between ticks: which day folders under `traces/` changed, and which files are
still being written.

A day folder is summed up by one digest of its settled files (relative path, modification time, size): a file
whose size or modification time changed within `EVAL_PLATFORM_FILE_SETTLE_S` seconds is still being written and
is left out, so its day is requested once it has settled (and again whenever a settled file is added, changed or
removed, whatever its modification time: a file copied with its old time, `cp -p` or `rsync -t`, changes the digest
too). The cursor holds one digest per day folder, never a name per file: it grows by one entry a day, not with
the files (a year of one-minute files: 365 entries).

The cursor also remembers, per day, the digest of the spans the day's last ingest left waiting for a root
(`next_day_spans` in the `traces` metadata, see `defs/traces.py`): the next day's ingest takes those whose root is
in it, so a late file into D re-ingests D+1 only when that set changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from eval_platform.ingest.traces import list_trace_files

CURSOR_VERSION = 2


@dataclass
class DayFolder:
    """One folder under `traces/`: the digest of its settled files (None: it has none) and the files still being
    written (relative to the data root)."""

    name: str
    digest: str | None
    waiting: list[str] = field(default_factory=list)


def _digest(lines: list[str]) -> str | None:
    if not lines:
        return None
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:20]


def _state(path: Path, root: Path) -> tuple[str, float]:
    stat = path.stat()
    return f"{path.relative_to(root).as_posix()} {stat.st_mtime_ns}:{stat.st_size}", stat.st_mtime


def scan_day_folders(root: Path, now: float, settle_s: float) -> dict[str, DayFolder]:
    """Every folder directly under `<root>/traces/` (days and misnamed folders alike), with the files ingest would
    read there (`list_trace_files`): settled ones in the digest, the others in `waiting`. `now` is a POSIX time."""
    base = Path(root) / "traces"
    folders: dict[str, DayFolder] = {}
    if not base.is_dir():
        return folders
    for entry in sorted(p for p in base.iterdir() if p.is_dir()):
        lines, waiting = [], []
        for path in list_trace_files(root, entry.name):
            try:
                line, mtime = _state(path, Path(root))
            except FileNotFoundError:  # removed (or renamed) between the listing and here: the next tick sees it
                continue
            if now - mtime >= settle_s:  # as `file_is_settled`
                lines.append(line)
            else:
                waiting.append(path.relative_to(root).as_posix())
        folders[entry.name] = DayFolder(entry.name, _digest(lines), waiting)
    return folders


@dataclass
class ArrivalCursor:
    """The sensor's state: per folder the digest last acted on (`days`), folders seen before they were day
    partitions (`early`: requested once they are one), the last `traces` materialization read (`seen`, a storage
    id) and per day the digest of the spans it hands to the next day (`handed`)."""

    days: dict[str, str] = field(default_factory=dict)
    early: dict[str, str] = field(default_factory=dict)
    seen: int | None = None
    handed: dict[str, str] = field(default_factory=dict)
    fresh: bool = True  # no cursor yet: the sensor's first tick

    @classmethod
    def load(cls, text: str | None) -> ArrivalCursor:
        if not text:
            return cls()
        data = json.loads(text)
        if data.get("v") != CURSOR_VERSION:  # the first layout: one "mtime:size" per file path
            return cls(days=_legacy_days(data), fresh=False)
        return cls(
            days=data.get("days", {}),
            early=data.get("early", {}),
            seen=data.get("seen"),
            handed=data.get("handed", {}),
            fresh=False,
        )

    def dump(self) -> str:
        data = {"v": CURSOR_VERSION, "days": self.days, "early": self.early, "seen": self.seen, "handed": self.handed}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _legacy_days(states: dict[str, str]) -> dict[str, str]:
    """The per-day digests of a first-layout cursor (`traces/<day>/<file>` -> `mtime_ns:size`), so that upgrading
    requests no day whose files did not change."""
    by_day: dict[str, list[str]] = {}
    for path, state in states.items():
        parts = path.split("/")
        if len(parts) >= 3:
            by_day.setdefault(parts[1], []).append(f"{path} {state}")
    return {day: digest for day, lines in by_day.items() if (digest := _digest(lines)) is not None}
