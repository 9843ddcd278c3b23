"""A real Label Studio server for the tests, started from its own venv into a temp folder.

Label Studio (Django, many pins) cannot share the project's venv: `.ci/label-studio-venv` builds it from
`requirements-label-studio.lock` (CI does, as `.venv-label-studio` in the checkout), and the tests find it through
`EVAL_PLATFORM_LABEL_STUDIO_VENV`, else at that default place. Without it the tests are skipped with the command
that builds it, except under CI (`CI` set), where a missing server is a failure, never a silent skip.

`label-studio start` runs on 127.0.0.1 on a free port with its data folder, database and home in a fresh temp
folder, one admin user (email, password) and its legacy API token from the environment, legacy tokens enabled for
its organization, and a personal access token made through the API once it answers. No network: Sentry's DSNs are
emptied, analytics collection and the PyPI version check are off. The database starts from the migrated, empty
template the venv script made (a fresh one takes minutes to migrate), else it is migrated here.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from eval_platform_tests.postgres_server import free_port

VENV_ENV = "EVAL_PLATFORM_LABEL_STUDIO_VENV"
DEFAULT_VENV = Path(__file__).resolve().parents[1] / ".venv-label-studio"
TEMPLATE = Path("eval_platform-template") / "label_studio.sqlite3"
ADMIN_EMAIL = "admin@example.com"
# How long a start may take on a loaded 2-core machine before the fixture gives up; a guard, not a speed claim.
START_TIMEOUT_S = 900


def find_venv() -> Path | None:
    """The Label Studio venv: $EVAL_PLATFORM_LABEL_STUDIO_VENV, else .venv-label-studio in the checkout."""
    given = os.environ.get(VENV_ENV)
    venv = Path(given) if given else DEFAULT_VENV
    return venv if (venv / "bin" / "label-studio").is_file() else None


class LabelStudioServer:
    """One Label Studio server in a temp folder on 127.0.0.1, with an admin user and its API tokens."""

    def __init__(self, venv: Path):
        self.venv = venv
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="eval-platform-ls-"))
        self.data_dir = self.folder / "data"
        self.log_file = self.folder / "server.log"
        self.password = secrets.token_urlsafe(16)
        self.legacy_token = secrets.token_hex(20)
        self.personal_access_token: str | None = None
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "TZ") if name in os.environ}
        return {
            **keep,
            "HOME": str(self.folder),
            "TMPDIR": str(self.folder),
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.data_dir),
            "LABEL_STUDIO_USERNAME": ADMIN_EMAIL,
            "LABEL_STUDIO_PASSWORD": self.password,
            "LABEL_STUDIO_USER_TOKEN": self.legacy_token,
            # no network: no error reports to Sentry, no usage analytics, no PyPI version check
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "COLLECT_ANALYTICS": "false",
            "LATEST_VERSION_CHECK": "false",
        }

    def _log_tail(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""

    def start(self) -> None:
        self.data_dir.mkdir(parents=True)
        template = self.venv / TEMPLATE
        if template.is_file():
            shutil.copy2(template, self.data_dir / "label_studio.sqlite3")
        command = [
            str(self.venv / "bin" / "label-studio"),
            "start",
            "--no-browser",
            "--internal-host",
            "127.0.0.1",
            "--port",
            str(self.port),
            # Label Studio 1.23 creates a new organization with only personal access tokens enabled; the tests
            # use both kinds, as users of older and newer installs do.
            "--enable-legacy-api-token",
            "--log-level",
            "WARNING",
        ]
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                command, cwd=self.folder, env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready()
        # One personal access token per user (a second POST answers 409).
        made = httpx.post(f"{self.url}/api/token/", headers=self.legacy_headers(), timeout=60)
        made.raise_for_status()
        self.personal_access_token = made.json()["token"]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"label-studio exited with {self._process.returncode}:\n{self._log_tail()}")
            try:
                who = httpx.get(f"{self.url}/api/current-user/whoami", headers=self.legacy_headers(), timeout=10)
                if who.status_code == 200 and who.json().get("email") == ADMIN_EMAIL:
                    return
            except httpx.TransportError:
                pass
            time.sleep(1)
        raise RuntimeError(f"label-studio did not answer on {self.url} within {START_TIMEOUT_S} s:\n{self._log_tail()}")

    def legacy_headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.legacy_token}"}

    def admin(self) -> httpx.Client:
        """An HTTP client acting as the admin (legacy token), for what the tests do in place of annotators."""
        return httpx.Client(base_url=self.url, headers=self.legacy_headers(), timeout=60)

    def stop(self) -> None:
        try:
            if self._process is not None and self._process.poll() is None:
                os.killpg(self._process.pid, signal.SIGTERM)
                try:
                    self._process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self._process.pid, signal.SIGKILL)
                    self._process.wait(timeout=30)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def label_studio_server():
    """A Label Studio server for the whole session (it takes a while to start)."""
    venv = find_venv()
    if venv is None:
        message = (
            f"Label Studio's venv not found (${VENV_ENV}, else {DEFAULT_VENV}): build it with "
            "`.ci/label-studio-venv` (CI does)"
        )
        if os.environ.get("CI") or os.environ.get(VENV_ENV):  # CI, or a venv named that is not there: a failure
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    server = LabelStudioServer(venv)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()
