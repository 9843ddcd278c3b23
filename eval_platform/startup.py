"""What a process of the platform sets up once, where it starts: importing the package changes nothing.

The process starts are the code location Dagster loads (`definitions.py`: its code server, and every run and step
process, import it first), the command line (`cli.py`), each module run with `python -m` (the demo, the dry run,
the local judge, ...), and the tests' conftest. Each calls `start_process()` before anything else.
"""

from __future__ import annotations

from eval_platform.llm.redaction import install_log_redaction


def start_process() -> None:
    """Set up this process (idempotent): every log record and printed warning passes through the key redaction
    (`llm/redaction.py`), so no log line, Dagster event or warning carries a provider key.

    litellm's price map needs no set-up here: litellm is imported in one place (`llm/client.py`), which tells it to
    read its bundled map rather than fetch one from the network."""
    install_log_redaction()
