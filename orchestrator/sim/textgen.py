"""Deterministic token text: prompt token counts, response lengths and the token script.

A response is a reasoning part, one end-of-thinking token, then the answer (see `answers.py`)
followed by pseudo-text until the natural length. Without thinking there is only the answer.
Everything derives from the prompt and a key (the request's `seed`, else the server's request
counter), so the same request on a fresh server gives the same tokens.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass

from orchestrator.sim.answers import Answer, answer_for
from orchestrator.sim.profiles import MEAN_RESPONSE_TOKENS, RESPONSE_SPREAD

REASONING_SHARE = 0.6  # of the natural length, when thinking
THINK_START = "<think>\n"
THINK_END = "</think>\n\n"
_MIN_PADDING = 8  # pseudo-text tokens after a padded answer's core

_PIECE = re.compile(r"\s*\S+|\s+")
_WORD = re.compile(r"\w+|[^\w\s]")

_WORDS = (
    "the a an this that each every step guide system network service model server request "
    "token batch memory cache latency throughput install configure check verify restart "
    "version package driver kernel engine worker process port host file path value option "
    "first next then finally carefully quickly simply also usually often always never "
    "should could would must can will may needs uses keeps makes sets runs reads writes "
    "starts stops waits returns gives shows helps moves loads saves sends builds tests "
    "user answer question detail reason example result error warning log line output input "
    "setting default limit budget time minute second hour load record plan phase state"
)
_VOCABULARY = tuple(_WORDS.split(" "))


def _build_pool(size: int = 4096, seed: int = 20260) -> tuple[str, ...]:
    rng = random.Random(seed)
    pieces: list[str] = []
    while len(pieces) < size:
        words = [rng.choice(_VOCABULARY) for _ in range(rng.randint(7, 17))]
        words[0] = words[0].capitalize()
        for i, word in enumerate(words):
            pieces.append(" " + word)
            if 0 < i < len(words) - 2 and rng.random() < 0.08:
                pieces.append(",")
        pieces.append(".")
    return tuple(pieces[:size])


POOL: tuple[str, ...] = _build_pool()
POOL_JSON: tuple[str, ...] = tuple(json.dumps(p, ensure_ascii=False) for p in POOL)


def pool_text(start: int, count: int) -> str:
    """The text of `count` consecutive pool pieces from `start` (wrapping around)."""
    size = len(POOL)
    start %= size
    parts = []
    while count > 0:
        take = min(count, size - start)
        parts.append("".join(POOL[start : start + take]))
        count -= take
        start = 0
    return "".join(parts)


def split_pieces(text: str) -> list[str]:
    """Token-like pieces whose concatenation is exactly `text`."""
    return _PIECE.findall(text)


def count_tokens(text: str) -> int:
    """A stable stand-in for a tokenizer: about one token per short word or symbol."""
    return sum(1 + len(w) // 8 for w in _WORD.findall(text))


def chat_prompt_tokens(contents: list[str]) -> int:
    """Prompt tokens of a chat: the messages plus chat-template framing."""
    return sum(count_tokens(c) + 4 for c in contents) + 3


def unit_interval(key: str) -> float:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def natural_length(prompt: str, key: str) -> int:
    """Tokens after which a thinking response ends by itself: MEAN +- SPREAD, uniform."""
    u = unit_interval(f"{key}\x00{prompt}")
    low = MEAN_RESPONSE_TOKENS * (1 - RESPONSE_SPREAD)
    return round(low + 2 * RESPONSE_SPREAD * MEAN_RESPONSE_TOKENS * u)


@dataclass(eq=False, slots=True)
class Script:
    """Token i of a response: what it says and whether it is reasoning.

    Token layout with thinking: [0, reasoning_count) reasoning, then one end-of-thinking
    token, then the answer; without thinking the answer starts at token 0.
    """

    opener: list[str]  # first reasoning pieces; pseudo-text follows
    reasoning_count: int
    answer: list[str]  # the answer's core pieces; pseudo-text follows
    thinking: bool
    natural_tokens: int
    offset: int

    @property
    def answer_start(self) -> int:
        return self.reasoning_count + 1 if self.thinking else 0

    def reasoning_piece(self, i: int) -> str:
        if i < len(self.opener):
            return self.opener[i]
        return POOL[(self.offset + i) % len(POOL)]

    def reasoning_piece_json(self, i: int) -> str:
        if i < len(self.opener):
            return json.dumps(self.opener[i], ensure_ascii=False)
        return POOL_JSON[(self.offset + i) % len(POOL)]

    def answer_piece(self, j: int) -> str:
        if j < len(self.answer):
            return self.answer[j]
        return POOL[(self.offset + 977 + j) % len(POOL)]

    def answer_piece_json(self, j: int) -> str:
        if j < len(self.answer):
            return json.dumps(self.answer[j], ensure_ascii=False)
        return POOL_JSON[(self.offset + 977 + j) % len(POOL)]

    def parts(self, count: int) -> tuple[str | None, str | None]:
        """(reasoning, answer) text of the first `count` tokens; None where none was reached."""
        if not self.thinking:
            return None, self._answer_text(count)
        reasoning = self._reasoning_text(min(count, self.reasoning_count))
        answer_count = count - self.answer_start
        if answer_count < 0:
            return reasoning, None
        return reasoning, self._answer_text(answer_count)

    # Same pieces as reasoning_piece/answer_piece, joined by slices (whole responses).
    def _reasoning_text(self, count: int) -> str:
        head = "".join(self.opener[:count])
        return head + pool_text(self.offset + len(self.opener), count - len(self.opener))

    def _answer_text(self, count: int) -> str:
        head = "".join(self.answer[:count])
        return head + pool_text(self.offset + 977 + len(self.answer), count - len(self.answer))

    def inline_text(self, count: int) -> str:
        """All text of the first `count` tokens with the reasoning inside <think> tags."""
        reasoning, answer = self.parts(count)
        if reasoning is None:
            return answer or ""
        text = THINK_START + reasoning
        if count > self.reasoning_count:
            text += THINK_END
        return text + (answer or "")


def build_script(prompt: str, key: str, thinking: bool) -> Script:
    """The deterministic response to `prompt` (the last user message) for this key."""
    answer: Answer = answer_for(prompt)
    natural = natural_length(prompt, key)
    core = split_pieces(answer.core)
    offset = int(unit_interval(f"offset\x00{key}\x00{prompt}") * len(POOL))
    reasoning_count = round(natural * REASONING_SHARE)
    if answer.padded:
        answer_count = max(natural - reasoning_count - 1, len(core) + _MIN_PADDING)
    else:
        answer_count = len(core)
    opener = split_pieces(
        f'The user asks: "{answer.topic}". Let me think about how to answer this well,'
        " step by step, before I write the answer."
    )
    total = reasoning_count + 1 + answer_count if thinking else answer_count
    return Script(opener, reasoning_count, core, thinking, total, offset)
