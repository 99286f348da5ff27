"""Regex building blocks shared by the stages that match configured words on zh/en text."""

from __future__ import annotations

# `\b` as an ASCII word boundary: Han characters count as non-word (right for mixed
# Chinese/English text), and polars' regex engine keeps its fast DFA on non-ASCII input,
# where a Unicode `\b` makes every search fall back to a slow engine (100x on Chinese text).
ASCII_BOUNDARY = r"(?-u:\b)"


def ascii_boundaries(pattern: str) -> str:
    """The pattern with every `\\b` taken as an ASCII word boundary."""
    return pattern.replace(r"\b", ASCII_BOUNDARY)


def any_of(patterns: list[str]) -> str:
    """One alternation of the patterns, `\\b` taken as an ASCII word boundary."""
    return ascii_boundaries("|".join(f"(?:{p})" for p in patterns))
