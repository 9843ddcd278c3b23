"""Whether the process that left something behind (a budget reservation, a staging folder) is still running.

Only a process of this host can be checked: one on another host is taken as alive (only its record's expiry, if
any, can tell otherwise)."""

from __future__ import annotations

import os
import socket

HOST = socket.gethostname()


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (a later process that reused the id counts as alive: what
    it guards is kept, never removed on a guess)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
