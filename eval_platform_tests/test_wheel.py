"""The package is the product: the wheel holds `eval_platform` and what it needs at run time, and its
`eval-platform` command works from a fresh venv (init a data root, check it, run the demo)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # The build runs in this venv (its setuptools), offline: nothing is fetched to build.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    (built,) = out.glob("eval_platform-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel; its dependencies are read from this venv's site-packages (a path entry,
    not an install: the wheel's own files are the only eval_platform it can import)."""
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
    assert "eval_platform/instance/dagster.yaml" in names and "eval_platform/templates/helpfulness.yaml" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "eval-platform = eval_platform.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_command_inits_and_checks_a_data_root(installed, tmp_path):
    found = subprocess.run(
        [installed / "bin" / "python", "-c", "import eval_platform; print(eval_platform.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
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


def test_the_installed_command_runs_the_demo(installed, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(
        REPO / "data", root, ignore=shutil.ignore_patterns("warehouse", "state", "dagster_home", "*.duckdb*")
    )
    done = _run(installed, "demo", "--days", "1", cwd=tmp_path, env={"EVAL_PLATFORM_DATA_DIR": str(root)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "judge_scores" in done.stdout and (root / "eval_platform.duckdb").exists()
