"""Token counting for context budgets: the WordPiece tokenizer that ships with the embedding
model (all-MiniLM-L6-v2 by default), loaded offline, once per process.

It is read from the model folder's tokenizer.json with the `tokenizers` library, the same
fast tokenizer transformers' AutoTokenizer would load from that folder, without importing
transformers (about 9 s at start against 0.2 s here). Truncation and padding, which the
file sets for embedding (128 tokens), are switched off: we count, we do not embed. A model
folder without tokenizer.json falls back to AutoTokenizer (offline).

These are MiniLM tokens, not the client LLM's: docs/sessions.md says how they compare."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path

from memworker import errors

NAME = "all-MiniLM-L6-v2 WordPiece (tokenizer.json of the embedding model)"

Counter = Callable[[str], int]
_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def counter(model_path: str) -> Counter:
    """A function text -> token count, for the model folder at model_path. Raises ConfigError."""
    path = Path(model_path or "")
    if not model_path or not path.is_dir():
        raise errors.ConfigError(f"embedding model not found at {model_path!r}: its tokenizer counts context tokens")
    file = path / "tokenizer.json"
    if file.exists():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(file))
        tok.no_truncation()
        tok.no_padding()

        def count(text: str) -> int:
            return len(tok.encode(text, add_special_tokens=False).ids) if text else 0

        return count
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(path), local_files_only=True)

    def count_auto(text: str) -> int:
        with _lock:  # slow tokenizers are not documented as thread-safe
            return len(auto.encode(text, add_special_tokens=False)) if text else 0

    return count_auto


def count(text: str, model_path: str) -> int:
    """Tokens in text under the model's tokenizer (no special tokens)."""
    return counter(model_path)(text)
