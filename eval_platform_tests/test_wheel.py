"""The package is the product: the wheel holds `eval_platform` and what it needs at run time, and its
`eval-platform` command works from a fresh venv (init a data root, check it, run the demo)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from eval_platform_tests.conftest import judge_requests

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the wheel is made of (nothing is written into the checkout, no stale build/ folder
    # is read), in this venv (its setuptools), offline: nothing is fetched to build.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "eval_platform", source / "eval_platform", ignore=shutil.ignore_patterns("__pycache__"))
    # the demo's inputs, without what a demo run in the checkout wrote beside them
    outputs = shutil.ignore_patterns("warehouse", "state", "dagster_home", "reports", "*.duckdb*")
    shutil.copytree(REPO / "data", source / "data", ignore=outputs)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    (built,) = out.glob("eval_platform-*.whl")
    return built


# A venv where the product was installed some other way, used instead of the built wheel: `.ci/public-install` sets
# it to the venv the README's set-up command made from the public package index, and runs the newcomer trial on it.
INSTALLED_VENV_ENV = "EVAL_PLATFORM_INSTALLED_VENV"


@pytest.fixture(scope="module")
def installed(request, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel; its dependencies are read from this venv's site-packages (a path entry,
    not an install: the wheel's own files are the only eval_platform it can import). With EVAL_PLATFORM_INSTALLED_VENV
    set: that venv (its `bin/eval-platform`), as it is."""
    given = os.environ.get(INSTALLED_VENV_ENV)
    if given:
        command = Path(given) / "bin" / "eval-platform"
        assert command.exists(), f"{INSTALLED_VENV_ENV}={given} has no bin/eval-platform"
        return Path(given)
    wheel = request.getfixturevalue("wheel")
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(purelib)
    (Path(purelib) / "_deps_from_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the console script the wheel's entry_points.txt declares
    script = env_dir / "bin" / "eval-platform"
    script.write_text(f"#!{python}\nimport sys\nfrom eval_platform.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_PLATFORM_", "DAGSTER_HOME", "PYTHON"))}
    return subprocess.run(
        [str(env_dir / "bin" / "eval-platform"), *args],
        cwd=cwd,
        env={**clean, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_wheel_holds_the_product_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"eval_platform", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    assert not [n for n in names if "eval_platform_tests" in n or n.startswith("tools/")]
    # development scripts live in tools/: no benchmark, no sample-data generator in the product
    assert not [n for n in names if n.startswith(("eval_platform/perf/", "eval_platform/sample_data/"))]
    # the local judge's test-only wires stay beside the tests (tools/local_judge_wires); mock and replay ship
    wires = ("faults", "echo_key", "scripted", "app_model", "message_batches", "azure")
    assert not [n for n in names if n.startswith(tuple(f"eval_platform/local_judge/{w}" for w in wires))]
    code = [n for n in names if n.endswith(".py")]
    assert not [n for n in code if "fault/" in zipfile.ZipFile(wheel).read(n).decode()]  # no test model named
    assert {"eval_platform/local_judge/mock_verdict.py", "eval_platform/local_judge/pandalm_replay.py"} <= set(names)
    # the demo's sample data, each source with its licence; no output of a run, no test-only source
    demo = "eval_platform/demo_data/"
    for licensed in ("pandalm", "llmbar", "gsm8k"):
        assert f"{demo}sources/{licensed}/LICENSE" in names and f"{demo}sources/{licensed}/PROVENANCE.md" in names
    assert f"{demo}evaluators/helpfulness.yaml" in names and f"{demo}README.md" in names
    assert [n for n in names if n.startswith(f"{demo}traces/2026-11-09/")]
    assert not [n for n in names if n.startswith((f"{demo}warehouse/", f"{demo}state/", f"{demo}sources/llmfao/"))]
    assert "eval_platform/instance/dagster.yaml" in names and "eval_platform/templates/helpfulness.yaml" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "eval-platform = eval_platform.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_command_inits_and_checks_a_data_root(installed, tmp_path):
    found = subprocess.run(
        [installed / "bin" / "python", "-c", "import eval_platform; print(eval_platform.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},  # as _run: the venv's own paths
    )
    assert str(installed) in found.stdout, found.stdout + found.stderr
    for verb in ("init", "demo", "ui", "dry-run", "check", "migrate-state", "local-judge"):
        shown = _run(installed, verb, "--help", cwd=tmp_path)
        assert shown.returncode == 0 and "usage:" in shown.stdout, (verb, shown.stderr)
    root = tmp_path / "my_app"
    done = _run(installed, "init", str(root), "--evaluator", "faithfulness", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (root / "evaluators" / "faithfulness.yaml").exists() and (root / "dagster_home" / "dagster.yaml").exists()
    checked = _run(installed, "--data-dir", str(root), "check", cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert checked.returncode == 1, checked.stdout + checked.stderr  # the key is not set: a problem, named
    assert "$OPENAI_API_KEY is not set" in checked.stdout


def test_the_installed_command_runs_the_demo_on_the_sample_data_it_ships(installed, tmp_path):
    """From a folder that is not the checkout, with no data root: the demo's inputs come from the wheel."""
    assert REPO not in tmp_path.parents
    done = _run(installed, "demo", "--days", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    root = tmp_path / "data"
    assert f"the bundled sample data copied into {root}" in done.stdout
    assert "judge_scores" in done.stdout and (root / "eval_platform.duckdb").exists()
    assert (root / "sources" / "pandalm" / "LICENSE").exists()
    # the PandaLM verdicts replayed from the shipped recordings: real rows, not placeholders
    assert re.search(r"pairwise_preference\s+local/replay/gpt-3\.5-turbo\s+\d+\s+[1-9]", done.stdout), done.stdout
    # a data root holding something else is refused, in one line naming what to do
    other = tmp_path / "mine"
    (other / "evaluators").mkdir(parents=True)
    refused = _run(installed, "--data-dir", str(other), "demo", cwd=tmp_path)
    assert refused.returncode != 0 and "pass --data-dir with a new folder" in refused.stderr, refused.stderr


def test_a_newcomer_scores_their_own_app_from_the_installed_command(installed, tmp_path):
    """The README's "your own app in ten minutes", as a newcomer runs it: init, 200 traces of their own, one
    evaluator on a provider's model (an OpenAI-compatible server on 127.0.0.1 answering for gpt-4o-mini), check,
    dry run, judge the day, then the three questions in SQL. The key never shows in what is printed."""
    import json
    from datetime import UTC, datetime, timedelta

    from tools.local_judge_wires import WiredJudgeServer

    day = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
    root = tmp_path / "support_bot"
    key = "sk-newcomer-SECRET-0123456789"
    server = WiredJudgeServer(aliases={"gpt-4o-mini": "mock"})
    server.start()
    try:
        env = {"EVAL_PLATFORM_DATA_DIR": str(root), "SUPPORT_BOT_KEY": key}
        done = _run(
            installed, "init", str(root), "--evaluator", "helpfulness", "--api-key-env", "SUPPORT_BOT_KEY", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        evaluator = root / "evaluators" / "helpfulness.yaml"
        evaluator.write_text(evaluator.read_text() + f"api_base: {server.base_url}\n")
        (root / "traces" / day).mkdir(parents=True)
        questions = [f"How do I reset my password on device {i % 40}?" for i in range(200)]
        with open(root / "traces" / day / "support.jsonl", "w") as out:
            for i, question in enumerate(questions):
                line = {"trace_id": f"t{i:03d}", "timestamp": f"{day}T12:{i % 60:02d}:00Z", "input": question}
                line |= {"output": f"Open Settings and choose Reset ({i % 40}).", "project_id": "support-bot"}
                out.write(json.dumps(line) + "\n")

        checked = _run(installed, "check", cwd=tmp_path, env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "$SUPPORT_BOT_KEY set" in checked.stdout and f"judging {day} would cost at most" in checked.stdout

        priced = _run(installed, "dry-run", "--start", day, "--end", day, cwd=tmp_path, env=env)
        assert priced.returncode == 0, priced.stdout + priced.stderr
        row = next(line.split() for line in priced.stdout.splitlines() if line.startswith("helpfulness"))
        distinct = int(row[4])
        assert 0 < distinct <= 40  # 40 distinct (input, output) pairs, a sample of them selected

        judged = _run(installed, "judge", "--day", day, cwd=tmp_path, env=env)
        assert judged.returncode == 0, judged.stdout[-3000:] + judged.stderr[-3000:]
        assert judge_requests(server) == distinct  # what the dry run said is what was sent: identical requests once

        lowest = _run(
            installed,
            "sql",
            "SELECT trace_id, score, reasoning FROM judge_scores WHERE evaluator = 'helpfulness' "
            f"AND date = '{day}' AND status = 'COMPLETED' AND is_final ORDER BY score LIMIT 10",
            cwd=tmp_path,
            env=env,
        )
        assert lowest.returncode == 0 and "10 rows" in lowest.stdout, lowest.stdout + lowest.stderr
        cost = _run(
            installed,
            "sql",
            "SELECT evaluator, sum(calls) AS calls, sum(spend_usd) AS spend_usd FROM judge_cost_daily GROUP BY ALL",
            cwd=tmp_path,
            env=env,
        )
        # the rollup's day is the day the calls were made (today), whichever partition they judged
        assert cost.returncode == 0 and re.search(rf"│\s*helpfulness\s*│\s*{distinct}\s*│", cost.stdout), cost.stdout
        today = _run(  # the README's query, as written
            installed,
            "sql",
            "SELECT evaluator, model, calls, cache_hits, spend_usd, budget_used_pct FROM judge_cost_daily "
            "WHERE day = strftime(current_date, '%Y-%m-%d')",
            cwd=tmp_path,
            env=env,
        )
        assert today.returncode == 0 and "helpfulness" in today.stdout, today.stdout + today.stderr
        trusted = _run(
            installed,
            "sql",
            "SELECT count(*) AS n FROM agreement WHERE section = 'judge_vs_human'",
            cwd=tmp_path,
            env=env,
        )
        assert trusted.returncode == 0 and "0" in trusted.stdout
        # A provider echoing the key in its reply: the command's output and the rows never carry it.
        echoing = root / "evaluators" / "echoing.yaml"
        echo_model = "model: openai/fault/echo_key_reply\ninput_cost_per_million: 0.15\noutput_cost_per_million: 0.6"
        echoing.write_text(evaluator.read_text().replace("model: openai/gpt-4o-mini", echo_model))
        echoed = _run(installed, "judge", "--day", day, "--evaluator", "echoing", cwd=tmp_path, env=env)
        assert echoed.returncode == 0, echoed.stdout[-3000:] + echoed.stderr[-3000:]
        text = "coalesce(reasoning, '') || coalesce(raw_response, '') || coalesce(provider_model, '')"
        rows = _run(
            installed,
            "sql",
            f"SELECT count(*) AS n, count(*) FILTER ({text} LIKE '%[REDACTED]%') AS redacted, "
            f"count(*) FILTER ({text} LIKE '%{key[-8:]}%') AS leaked FROM judge_scores "
            "WHERE evaluator = 'echoing' AND status <> 'SKIPPED'",  # FAILED out_of_range: the raw reply is kept
            cwd=tmp_path,
            env=env,
        )
        found = re.search(r"│\s*(\d+)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", rows.stdout)
        assert rows.returncode == 0 and found, rows.stdout + rows.stderr
        judged_rows, redacted, leaked = map(int, found.groups())
        assert judged_rows > 0 and redacted == judged_rows and leaked == 0, rows.stdout + echoed.stdout
        for shown in (checked, priced, judged, lowest, cost, today, trusted, echoed):
            assert key not in shown.stdout + shown.stderr and key[-8:] not in shown.stdout + shown.stderr
    finally:
        server.stop()
