"""`memworker up` keeps its data dir private: what an older version left readable by other
local users (metrics files, beat's schedule, logs) is closed at start. That what it makes
afterwards is born private (its umask) is checked on a running stack in
tests/acceptance/test_up.py."""

from __future__ import annotations

import stat
from pathlib import Path

from memworker.local import stack


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_make_private_closes_everything_but_the_servers_folders(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "prometheus").mkdir(parents=True)
    (data / "logs").mkdir()
    (data / "pg").mkdir()
    files = [data / "prometheus" / "counter_1.db", data / "beat-schedule.db", data / "logs" / "api.log"]
    for f in files:
        f.write_text("x")
        f.chmod(0o644)
    for d in (data / "prometheus", data / "logs", data / "pg"):
        d.chmod(0o755)
    (data / "script").write_text("#!/bin/sh\n")
    (data / "script").chmod(0o755)
    outside = tmp_path / "outside"
    outside.write_text("not ours to change")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    data.chmod(0o755)

    stack.make_private(data)

    assert all(_mode(f) == 0o600 for f in files), [oct(_mode(f)) for f in files]
    assert _mode(data / "prometheus") == 0o700 and _mode(data / "logs") == 0o700
    assert _mode(data / "script") == 0o700  # the owner's bits are kept
    assert _mode(data / "pg") == 0o755  # the embedded server's folder: its own business
    assert _mode(outside) == 0o644  # a symlink is not followed
    assert _mode(data) == 0o755  # under root the servers' user must traverse it
