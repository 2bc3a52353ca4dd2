"""The embedded servers belong to the user who started them. Another local
user cannot reach the embedded Postgres (its socket folder is closed to them, and every role
needs its password: no `trust`), a Redis client without the password gets NOAUTH, and the
secrets sit in 0600 files of the data dir, never on a command line."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psutil
import psycopg
import pytest
import redis

from memworker.local import embedded

OTHER_USER = "nobody"


def _embedded_only(services: dict[str, str], kind: str) -> None:
    if services[f"{kind}_external"]:
        pytest.skip(f"the fixtures use the {kind} server given by MEMWORKER_TEST_*, not an embedded one")


def _params(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _as_other_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("acting as another local user needs root and runuser")
    return subprocess.run(
        ["runuser", "-u", OTHER_USER, "--", *argv], capture_output=True, text=True, timeout=60, cwd="/"
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_another_local_user_cannot_connect_to_the_embedded_postgres(services: dict[str, str]) -> None:
    _embedded_only(services, "pg")
    url = services["pg"]
    sock = _params(url)["host"]
    psql = str(embedded.pg_tool("psql"))
    for target in (
        url,
        f"postgresql://postgres@/postgres?host={sock}",
        f"postgresql://memworker_app@/postgres?host={sock}",
    ):
        done = _as_other_user([psql, "-X", "-w", "-At", "-c", "SELECT current_user", target])
        assert done.returncode != 0, f"{OTHER_USER} connected as {done.stdout.strip()!r}"
        assert "Permission denied" in done.stderr or "password" in done.stderr, done.stderr


def test_every_role_needs_its_password(services: dict[str, str], tmp_path: Path) -> None:
    """Even a client that reaches the socket (root does) is refused without the password."""
    _embedded_only(services, "pg")
    sock = _params(services["pg"])["host"]
    for role in ("postgres", "memworker_app"):
        bare = f"postgresql://{role}@/postgres?host={sock}&passfile={tmp_path / 'none'}"
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(bare, connect_timeout=5).close()
    hba = Path(services["base"]) / "pg" / "pg_hba.conf"
    rules = [line.split() for line in hba.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert rules and all(rule[-1] == "scram-sha-256" for rule in rules), rules


def test_the_socket_folder_data_folder_and_password_file_are_private(services: dict[str, str]) -> None:
    _embedded_only(services, "pg")
    params = _params(services["pg"])
    server_uid = pwd.getpwnam(embedded.PG_SYSTEM_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    for folder in (Path(params["host"]), Path(services["base"]) / "pg"):
        assert (_mode(folder), folder.stat().st_uid) == (0o700, server_uid), folder
    passfile = Path(params["passfile"])
    assert _mode(passfile) == 0o600 and passfile.stat().st_uid == os.geteuid()
    with psycopg.connect(services["pg"]) as conn:  # the URL the fixtures hand out still works
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)


def test_redis_answers_noauth_without_the_password(services: dict[str, str]) -> None:
    _embedded_only(services, "redis")
    parts = urlsplit(services["redis"])
    assert parts.password, "the embedded Redis URL carries no password"
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=5) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(128).startswith(b"-NOAUTH"), "Redis answered a client that gave no password"
    wrong = redis.Redis(host=parts.hostname, port=parts.port, password="wrong", socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        wrong.ping()
    wrong.close()
    good = redis.Redis.from_url(services["redis"], socket_timeout=5)
    assert good.ping()
    good.close()
    base = Path(services["base"])
    for secret_file in ("redis-password", "redis.conf"):
        assert _mode(base / secret_file) == 0o600, secret_file
    for proc in psutil.process_iter(["cmdline"]):  # ps shows every command line to every user
        assert parts.password not in " ".join(proc.info["cmdline"] or []), proc.info["cmdline"]
