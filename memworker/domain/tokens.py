"""The BM25 tokenizer: NFKC, case folding, English words (stemmed, minus stop words),
and CJK text as overlapping character bigrams so Chinese and Japanese are searchable."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from functools import lru_cache

import snowballstemmer

# Han, Hiragana, Katakana, Hangul: scripts written without spaces between words.
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)*")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

# Lucene's English stop set plus pronouns, auxiliaries, the interrogatives (recall queries
# are often questions: "when did ...", "how does ..." must not match every memory that says
# "when" or "how") and a few conversational fillers; short on purpose.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "its",
        "them",
        "am",
        "been",
        "being",
        "do",
        "does",
        "did",
        "so",
        "than",
        "too",
        "very",
        "can",
        "just",
        "s",
        "t",
        "don",
        "have",
        "has",
        "had",
        "were",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "would",
        "should",
        "could",
        "oh",
        "ok",
        "okay",
        "yeah",
        "hey",
        "hi",
    ]
)

# A snowball stemmer keeps its working state on the instance, so two threads stemming at once
# (the API serves requests from a thread pool) corrupt each other: one stemmer per thread.
_local = threading.local()


@lru_cache(maxsize=65_536)
def stem_word(word: str) -> str:
    """The word's snowball stem (English)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def tokenize(text: str, *, stem: bool = True) -> list[str]:
    """Terms of text in order (with repeats), as BM25 counts them."""
    out: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text).casefold()):
        tok = match.group(0)
        if _CJK_RUN.match(tok):
            out.extend([tok] if len(tok) == 1 else [tok[i : i + 2] for i in range(len(tok) - 1)])
            continue
        tok = tok.replace("’", "'").split("'")[0]
        if not tok or tok in STOP_WORDS:
            continue
        out.append(stem_word(tok) if stem and not tok.isdigit() else tok)
    return out


def term_frequencies(text: str, *, stem: bool = True) -> tuple[Counter[str], int]:
    """(term -> count, document length) for one memory."""
    terms = tokenize(text, stem=stem)
    return Counter(terms), len(terms)
