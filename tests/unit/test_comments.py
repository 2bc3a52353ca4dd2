"""Comments and docs state rules and name things; they never point at a ticket or at a source
document kept outside the repository (a reader cannot follow either). Applied migrations are
history (their checksums forbid edits) and bench/results are dated reports: both are left as
written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A ticket: the word (or its plural) and a number; a source document: the word and a
# zero-padded number. A link to another project's tracker (.../issues/3149) names its place.
TICKET = re.compile(r"\b(?:issues?\s+#?\d+|seeds?\s+0\d\d)\b", re.IGNORECASE)
LEFT_AS_WRITTEN = re.compile(r"^(?:sql/\d{4}_|bench/results/)")


def _files() -> list[Path]:
    """Every file of the repository, committed or new (what .gitignore leaves out aside)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    names = sorted({n for n in listed.stdout.split("\0") if n and not LEFT_AS_WRITTEN.match(n)})
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def test_no_comment_or_doc_points_at_a_ticket_or_a_seed_document() -> None:
    found = []
    for path in _files():
        text = _text(path)
        if text is None:
            continue
        for match in TICKET.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    assert not found, "say the rule or name the file instead:\n" + "\n".join(found)


def test_the_pattern_catches_each_form() -> None:
    word, seed = "iss" + "ue", "se" + "ed"  # spelled apart, so this file passes its own test
    for text in (
        f"(sleep, {word} 5)",
        f"{word.title()} 18: bounded",
        f"{word}s 5 and 6",
        f"({word}\n18)",
        f"({seed} 004)",
        f"{seed.title()} 001's gate",
        f"{seed}s 000, 001",
    ):
        assert TICKET.search(text), text
    for text in ("uvicorn/issues/3149", "random seed 7", "the key issued 3 days ago", f"a t{word} 5"):
        assert not TICKET.search(text), text
