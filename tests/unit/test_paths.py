"""Every repository path that code and docs name exists, so a reader who follows one finds
the file. Applied migrations are history (their checksums forbid edits) and bench/results
are dated reports: both are left as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("memworker", "tasks", "tests", "bench", "docs", "sql", "ops", ".ci")
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*[\w-])")
PLACEHOLDER = re.compile(r"[A-Z]{3,}")  # sql/NNNN_name.sql, bench/results/NAME.md
SUFFIXES = (".py", ".md", ".sql", ".toml", ".yml", ".yaml", ".html", ".sh", ".cfg", ".txt")


def _named_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    keep = []
    for name in listed.stdout.split():
        if name.startswith("bench/results/") or re.match(r"sql/\d{4}_", name):
            continue
        if name.endswith(SUFFIXES) and (ROOT / name).is_file():
            keep.append(ROOT / name)
    return keep


def resolves(path: str) -> bool:
    """True when `path` is a file or folder, a module followed by an attribute
    (bench/_common.write_report), or the start of a name that exists (sql/0001, bench/results/ab_)."""
    if PLACEHOLDER.search(path) or (ROOT / path).exists():
        return True
    folder, _, last = path.rpartition("/")
    module = last.split(".", 1)[0]
    if (ROOT / folder / f"{module}.py").exists():
        return True
    parent = ROOT / folder
    return parent.is_dir() and any(p.name.startswith(last) for p in parent.iterdir())


def test_every_named_path_exists() -> None:
    missing = []
    for file in _named_files():
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            for match in PATH.finditer(line):
                if not resolves(match.group(1).rstrip(".")):
                    missing.append(f"{file.relative_to(ROOT)}:{number}: {match.group(1)}")
    assert not missing, "paths that name nothing:\n" + "\n".join(missing)


def test_a_moved_path_is_caught() -> None:
    moved = "memworker/" + "profile.py"  # spelled apart: this file is scanned too
    assert not resolves(moved)
    assert resolves("memworker/sleep/profile.py") and resolves("bench/_common.write_report")
