"""Importing the platform changes nothing process-wide; a process sets itself up where it starts.

Each check runs in a fresh interpreter with a clean environment (only PATH, HOME and PYTHONPATH): what a module
does on import is only visible the first time it is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eval_platform_tests.test_imports import PACKAGE, _modules

PROCESS_STATE = """
import gc, logging, os, warnings

def state():
    return {
        "environ": dict(os.environ),
        "record_factory": repr(logging.getLogRecordFactory()),
        "formatwarning": repr(warnings.formatwarning),
        "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count()],
    }
"""


def _run(code: str, tmp_path: Path) -> dict:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run(
        [sys.executable, "-c", PROCESS_STATE + code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_and_its_modules_leaves_the_process_as_it_was(tmp_path):
    # Every module but the code location, which is where Dagster's processes start (it sets the process up).
    modules = [m for m in _modules() if m != "eval_platform.definitions"]
    assert "eval_platform.cli" in modules and "eval_platform.judging.runner" in modules
    result = _run(
        f"""
import importlib, json
# The libraries' own import effects are theirs (polars sets _RJEM_MALLOC_CONF for its allocator): imported first.
import dagster, duckdb, polars, pyarrow
# Fork hooks (`os.register_at_fork`) cannot be listed once registered: the registrations are recorded as they come.
fork_hooks = []
register_at_fork = os.register_at_fork

def recording(**hooks):
    fork_hooks.extend(f"{{getattr(f, '__module__', '')}}.{{getattr(f, '__qualname__', f)}}" for f in hooks.values())
    register_at_fork(**hooks)

os.register_at_fork = recording
before = state()
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps({{"before": before, "after": state(), "fork_hooks": fork_hooks}}))
""",
        tmp_path,
    )
    before, after = result["before"], result["after"]
    assert after["environ"] == before["environ"]  # e.g. no LITELLM_LOCAL_MODEL_COST_MAP set behind the user's back
    assert after["record_factory"] == before["record_factory"]
    assert after["formatwarning"] == before["formatwarning"]
    assert after["gc"] == before["gc"]
    # the libraries' own hooks (logging's, asyncio's, ...) are theirs: none of the platform's
    assert not [hook for hook in result["fork_hooks"] if hook.startswith("eval_platform")], result["fork_hooks"]


def test_a_process_start_sets_up_the_key_redaction(tmp_path):
    """What the import no longer does, the process start does: every log record passes through the redaction."""
    result = _run(
        """
import json, logging
from eval_platform.startup import start_process
from eval_platform.llm.redaction import remember
before = state()
start_process()
remember("sk-live-0123456789abcdef")
record = logging.getLogger("any").makeRecord("any", logging.INFO, "x.py", 1, "key sk-live-0123456789abcdef", (), None)
print(json.dumps({"before": before, "after": state(), "message": record.getMessage()}))
""",
        tmp_path,
    )
    assert result["after"]["record_factory"] != result["before"]["record_factory"]
    assert "0123456789abcdef" not in result["message"] and "[REDACTED]" in result["message"]


def test_litellm_reads_its_bundled_price_map_and_the_environment_is_left_as_it_was(tmp_path):
    """litellm fetches its price map from the network on import unless told otherwise: the platform's one import of
    it tells it so, without leaving the variable set."""
    result = _run(
        """
import json
from eval_platform.llm.client import _litellm
before = state()
_litellm()
from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
print(json.dumps({"before": before, "after": state(), "source": get_model_cost_map_source_info()}))
""",
        tmp_path,
    )
    assert result["source"]["source"] == "local" and result["source"]["url"] is None
    assert result["after"]["environ"] == result["before"]["environ"]


def test_the_warehouse_resource_fills_no_module_level_state(tmp_path):
    """Reading `WarehouseResource.root`, or setting the resource up for a run, leaves every module-level container of
    the storage modules as it was: which store a data root uses is part of the value the storage functions are
    given, never remembered by the process."""
    result = _run(
        f"""
import json, sys
import dagster as dg
import eval_platform.storage.location, eval_platform.storage.parts, eval_platform.storage.warehouse
from eval_platform.defs.resources import WarehouseResource

def containers():
    return {{
        f"{{name}}.{{attr}}": repr(value)
        for name, module in sorted(sys.modules.items()) if name.startswith("eval_platform.storage")
        for attr, value in vars(module).items() if isinstance(value, (dict, list, set)) and not attr.startswith("__")
    }}

before = containers()
resource = WarehouseResource(data_dir={str(tmp_path)!r}, warehouse_url="s3://team-bucket/eval")
resource.root
with dg.build_resources({{"warehouse": resource}}) as resources:
    resources.warehouse.root
    during = containers()
print(json.dumps({{"before": before, "during": during}}))
""",
        tmp_path,
    )
    assert result["during"] == result["before"]
