"""Print the API's OpenAPI document (JSON) to stdout, or write it to the file named by the
first argument. Built from the app factory without its lifespan: nothing is connected, so
no server, database or Redis is needed (the URLs below are never dialled)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memworker.api.app import create_app
from memworker.settings import Settings


def document() -> dict[str, Any]:
    settings = Settings.from_env(
        {"MEMWORKER_DATABASE_URL": "postgresql://unused/unused", "MEMWORKER_REDIS_URL": "redis://unused:1"}
    )
    return create_app(settings).openapi()


def main(argv: list[str]) -> None:
    text = json.dumps(document(), indent=2, sort_keys=False) + "\n"
    if len(argv) > 1:
        Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[1]).write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv)
