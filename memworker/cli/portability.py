"""`memworker export --agent A > FILE` (or --subject S) and `memworker import FILE --agent A`:
data portability through the SDK (docs/export.md), with progress on stderr."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from memworker import errors
from memworker.cli import common
from memworker.settings import Settings


def register(sub: Any) -> None:
    ex = sub.add_parser("export", help="an agent's data (or one subject's across agents) as NDJSON on stdout")
    who = ex.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="export everything this agent holds")
    who.add_argument("--subject", help="export one subject's data across the tenant's agents")
    ex.add_argument("--embeddings", action="store_true", help="include each memory's vector")
    ex.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    ex.set_defaults(func=cmd_export)
    im = sub.add_parser("import", help="import a memworker export, a JSONL of texts, LangGraph items or a Mem0 export")
    im.add_argument("file", type=Path)
    im.add_argument("--agent", required=True)
    im.add_argument("--format", choices=["auto", "memworker", "jsonl", "langgraph", "mem0"], default="auto")
    im.add_argument("--json", action="store_true", help="print the report as JSON")
    im.set_defaults(func=cmd_import)


class Progress:
    """A one-line progress report on stderr, redrawn at most 10 times a second; silent when
    stderr is not a terminal (a script's log gets the final line only)."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label, self.total, self.done, self.drawn = label, total, 0, 0.0
        self.live = sys.stderr.isatty()

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.live and now - self.drawn >= 0.1:
            self.drawn = now
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)

    def line(self) -> str:
        mb = self.done / 1e6
        if not self.total:
            return f"{self.label}: {mb:.1f} MB"
        share = min(1.0, self.done / self.total)
        bar = "#" * int(share * 30)
        return f"{self.label}: [{bar:<30}] {share:4.0%} {mb:.1f}/{self.total / 1e6:.1f} MB"

    def close(self, note: str = "") -> None:
        print(("\r" if self.live else "") + self.line() + (f" {note}" if note else ""), file=sys.stderr)


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    client = common.client(settings)
    progress = Progress("export")
    try:
        if args.agent:
            chunks = client.export_chunks(args.agent, embeddings=args.embeddings)
        else:
            chunks = client.subject_export_chunks(args.subject, embeddings=args.embeddings)
        if args.output:
            with args.output.open("wb") as out:
                _copy(chunks, out, progress)
        else:
            _copy(chunks, sys.stdout.buffer, progress)
            sys.stdout.flush()
    finally:
        client.close()
    progress.close()
    return 0


def _copy(chunks: Any, out: BinaryIO, progress: Progress) -> None:
    for chunk in chunks:
        out.write(chunk)
        progress.add(len(chunk))


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise errors.InvalidInput(f"no file {args.file}")
    client = common.client(settings)
    progress = Progress("upload", args.file.stat().st_size)
    try:
        report = client.import_file(args.agent, args.file, format=args.format, progress=progress.add)
    finally:
        client.close()
    progress.close("done")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['format']}: {report['lines']} lines")
    for key, value in sorted(report.items()):
        if key not in ("format", "lines") and value:
            print(f"  {key:<22} {value}")
    return 0
