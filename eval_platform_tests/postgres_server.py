"""A real PostgreSQL server for the tests, started from the installed binaries into a temp folder.

`initdb` creates a cluster in a fresh folder, `pg_ctl` starts it on 127.0.0.1 (a free port, its socket in the
same folder) and stops it with `-m fast`; nothing is installed or left behind. PostgreSQL refuses to run as
root, so under uid 0 (CI) the binaries run as the `postgres` user (created by Debian's package) or `nobody`,
and the folder belongs to that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg2

SUPERUSER = "eval_platform"


def find_bin_dir() -> Path | None:
    """The folder holding `initdb` and `pg_ctl`: on PATH, else the newest /usr/lib/postgresql/<v>/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(candidates[-1]).parent if candidates else None


def _unprivileged_user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class PostgresDatabase:
    host: str
    port: int
    user: str
    password: str
    db_name: str

    def env(self) -> dict[str, str]:
        """The variables the shipped dagster.postgres.yaml reads."""
        return {
            "DAGSTER_POSTGRES_HOST": self.host,
            "DAGSTER_POSTGRES_PORT": str(self.port),
            "DAGSTER_POSTGRES_USER": self.user,
            "DAGSTER_POSTGRES_PASSWORD": self.password,
            "DAGSTER_POSTGRES_DB": self.db_name,
        }

    def url(self) -> str:
        """As the instance's config would give it (dagster-postgres's form of the URL)."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{self.db_name}"

    def connect(self):
        return psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.db_name
        )


class PostgresServer:
    """One PostgreSQL cluster in a temp folder, reachable over TCP on 127.0.0.1 with a password."""

    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir
        self.run_as = _unprivileged_user()
        self.password = secrets.token_hex(12)
        self.port = free_port()
        # mkdtemp, not pytest's tmp_path: the server's user must be able to enter every parent folder.
        self.folder = Path(tempfile.mkdtemp(prefix="eval-platform-pg-"))
        self.data_dir = self.folder / "data"
        self.log_file = self.folder / "server.log"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder)
        if done.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}")

    def start(self) -> None:
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n")
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            for path in (self.folder, password_file):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            f"--pwfile={password_file}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--no-locale",
        )
        password_file.unlink()
        for attempt in range(3):  # the free port can be taken by another process before the server binds it
            options = f"-h 127.0.0.1 -p {self.port} -k {self.folder}"
            try:
                self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-o", options, "-w", "start")
                return
            except RuntimeError as error:
                if attempt == 2 or "could not bind" not in str(error):
                    raise
                self.port = free_port()

    def stop(self) -> None:
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def create_database(self, name: str) -> PostgresDatabase:
        admin = psycopg2.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, password=self.password, dbname="postgres"
        )
        try:
            admin.autocommit = True  # CREATE DATABASE cannot run inside a transaction
            with admin.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            admin.close()
        return PostgresDatabase("127.0.0.1", self.port, SUPERUSER, self.password, name)
