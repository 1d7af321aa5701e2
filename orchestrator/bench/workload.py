"""What each request asks for: prompts (fixed, synthetic or a JSONL dataset) rendered once
into ready-to-send request bodies, so the hot path never serializes JSON."""

from __future__ import annotations

import itertools
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import BenchError
from orchestrator.plan.models import Bench

DEFAULT_PROMPT = (
    "Write a detailed step-by-step guide to planting, growing and harvesting a vegetable "
    "garden, from preparing the soil to storing the harvest."
)

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}

# Short, common English words: each is about one token for the usual BPE tokenizers, so a
# synthetic prompt of N words is about N tokens. The server's usage reports the truth.
_WORDS = [
    "the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
    "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by",
    "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when",
    "up", "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time",
    "if", "will", "way", "about", "many", "then", "them", "write", "would", "like", "so",
    "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day",
    "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over",
    "know", "water", "than", "call", "first", "who", "may", "down", "side", "been", "now",
    "find",
]
_SYNTHETIC_VARIANTS = 64  # distinct synthetic prompts, so prefix caching cannot skip them
# A synthetic prompt's unique prefix is words of the same vocabulary, so it counts within the
# asked length: 4 words tell apart about 97**4 (88 million) requests.
PREFIX_WORDS = 4


@dataclass(frozen=True)
class Prompt:
    text: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None


def synthetic_prompt(input_len: int, rng: random.Random, words: list[str] = _WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(input_len))


class Counter(Protocol):
    """What counts tokens (tokens.TokenCounter): None when it cannot."""

    def count(self, text: str) -> int | None: ...


def synthetic_words(tokens: Counter | None) -> list[str]:
    """The words synthetic prompts are made of: with a tokenizer, those that are one token
    alone and after a space, so N words are N tokens; else all (about one token each for
    the usual tokenizers)."""
    if tokens is None:
        return _WORDS
    single = [w for w in _WORDS if tokens.count(w) == 1 and tokens.count(" " + w) == 1]
    return single if len(single) >= 2 else _WORDS


def prefix_words(config: Bench) -> int:
    """Words of a synthetic prompt's unique prefix (none when prompts are shared)."""
    if config.prompt_prefix != "unique" or not config.input_len:
        return 0
    return min(PREFIX_WORDS, config.input_len)


def synthetic_prompts(config: Bench, tokens: Counter | None = None) -> list[Prompt]:
    """`input_len` tokens each, the unique prefix's words included (they are drawn from the
    same words; `sample_prefix` stands in for them when the tokenizer checks the length)."""
    assert config.input_len
    rng = random.Random(config.seed)
    words = synthetic_words(tokens)
    lead = prefix_words(config)
    prompts = []
    for _ in range(_SYNTHETIC_VARIANTS):
        body = synthetic_prompt(config.input_len - lead, rng, words)
        if tokens is not None:
            body = _fit(body, config.input_len, lead, words, rng, tokens)
        prompts.append(Prompt(text=body))
    return prompts


def _fit(body: str, target: int, lead: int, words: list[str], rng: random.Random,
         tokens: Counter) -> str:
    """Add or drop body words until the tokenizer counts `target` tokens with the prefix
    (a tokenizer that merges across spaces); a few tries, then as it is."""
    for _ in range(4):
        counted = tokens.count(_joined(sample_prefix(lead, words), body))
        if counted is None or counted == target:
            break
        have = body.split()
        want = max(0, len(have) + target - counted)
        body = " ".join(have[:want] + [rng.choice(words) for _ in range(want - len(have))])
    return body


def sample_prefix(lead: int, words: list[str]) -> str:
    return " ".join(words[:1] * lead)


def _joined(prefix: str, body: str) -> str:
    return " ".join(part for part in (prefix, body) if part)


def load_dataset(path: Path) -> list[Prompt]:
    """JSONL, one request per line: {"prompt": str} or {"messages": [...]}, optionally
    with "max_tokens" (or "output_len")."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise BenchError(f"cannot read the dataset {path}: {error.strerror or error}") from None
    prompts: list[Prompt] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except ValueError as error:
            raise BenchError(f"{where}: not valid JSON ({error})") from None
        if not isinstance(item, dict):
            raise BenchError(f"{where}: expected a JSON object with `prompt` or `messages`")
        limit = item.get("max_tokens", item.get("output_len"))
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise BenchError(f"{where}: max_tokens must be a positive integer, got {limit!r}")
        if isinstance(item.get("prompt"), str):
            prompts.append(Prompt(text=item["prompt"], max_tokens=limit))
        elif isinstance(item.get("messages"), list) and item["messages"]:
            prompts.append(Prompt(messages=tuple(item["messages"]), max_tokens=limit))
        else:
            raise BenchError(
                f"{where}: expected a `prompt` string or a non-empty `messages` list",
                hint='e.g. {"prompt": "Explain TCP slow start"}',
            )
    if not prompts:
        raise BenchError(f"the dataset {path} holds no requests")
    return prompts


def prompts_for(config: Bench, *, base_dir: Path | None = None,
                tokens: Counter | None = None) -> list[Prompt]:
    """The prompts of a benchmark, in the order requests cycle through them."""
    if config.dataset:
        path = Path(config.dataset)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return load_dataset(path)
    if config.input_len:
        return synthetic_prompts(config, tokens)
    return [Prompt(text=config.prompt or DEFAULT_PROMPT)]


def request_body(prompt: Prompt, config: Bench, model: str | None) -> dict[str, Any]:
    """The JSON body of one streamed request."""
    limit = prompt.max_tokens or config.max_tokens
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    if config.endpoint == "chat":
        if prompt.messages is not None:
            body["messages"] = list(prompt.messages)
        else:
            body["messages"] = [{"role": "user", "content": prompt.text or ""}]
        # vLLM prefers max_completion_tokens; other servers still read max_tokens.
        body["max_tokens"] = limit
        body["max_completion_tokens"] = limit
        kwargs = dict(config.chat_template_kwargs)
        if config.thinking is not None:
            kwargs.setdefault("thinking", config.thinking)
            kwargs.setdefault("enable_thinking", config.thinking)
        if kwargs:
            body["chat_template_kwargs"] = kwargs
    else:
        if prompt.text is None:
            raise BenchError("the completions endpoint needs `prompt` entries, not `messages`")
        body["prompt"] = prompt.text
        body["max_tokens"] = limit
    body["stream"] = True
    # continuous_usage_stats: vLLM then puts the output tokens so far in every chunk, so
    # each chunk says how many tokens it brought (TTFT and ITL per token, request_record.py);
    # servers without it ignore the key
    body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if config.ignore_eos:
        body["ignore_eos"] = True
    if config.temperature is not None:
        body["temperature"] = config.temperature
    body.update(config.extra_body)
    return body


_SLOT = "\x00orch-prefix\x00"  # where a request's own prefix goes (JSON: \u0000...)
_SLOT_BYTES = json.dumps(_SLOT)[1:-1].encode()


def _with_slot(prompt: Prompt) -> Prompt:
    """The prompt with the prefix slot at the very start of its (first user) text."""
    if prompt.text is not None:
        return Prompt(text=_SLOT + prompt.text, max_tokens=prompt.max_tokens)
    messages = [dict(m) for m in prompt.messages or ()]
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = _SLOT + message["content"]
            break
    return Prompt(messages=tuple(messages), max_tokens=prompt.max_tokens)


class Workload:
    """Pre-encoded request bodies; request i uses body i modulo their number. With unique
    prefixes (the default), every request's prompt starts with `[r<salt>-<n>] `, n counting
    every request of the sweep, so no prompt is a prefix-cache hit of an earlier one; the
    body is still two ready byte strings around the prefix, joined on the hot path. A
    synthetic prompt (`input_len`) starts with PREFIX_WORDS words instead, which count
    within its length: the asked length is the length sent."""

    def __init__(self, config: Bench, model: str | None, *, base_dir: Path | None = None,
                 tokens: Counter | None = None) -> None:
        self.prompts = prompts_for(config, base_dir=base_dir, tokens=tokens)
        self.unique = config.prompt_prefix == "unique"
        self.input_len = config.input_len
        self._lead = prefix_words(config)
        words = synthetic_words(tokens) if self._lead else []
        self._digits = [w.encode() for w in words]
        self._salt_words = int.from_bytes(os.urandom(4)) % max(1, len(words) ** self._lead)

        def encode(prompts: list[Prompt]) -> list[bytes]:
            return [json.dumps(request_body(p, config, model), separators=(",", ":")).encode()
                    for p in prompts]

        self.bodies = encode(self.prompts)  # as written, without a prefix
        # what a tokenizer counts as a request's input: the prompt's own text, no template
        # (a synthetic prompt's with its prefix words: they are part of the asked length)
        self.prompt_texts = [
            _joined(sample_prefix(self._lead, words), p.text) if self._lead and p.text is not None
            else p.text if p.text is not None else "\n".join(
                str(m.get("content")) for m in p.messages or () if isinstance(m.get("content"), str))
            for p in self.prompts
        ]
        slotted = encode([_with_slot(p) for p in self.prompts]) if self.unique else self.bodies
        self._parts = [body.split(_SLOT_BYTES, 1) for body in slotted]
        self._salt = os.urandom(3).hex()  # a rerun against the same server misses its cache too
        self._sent = itertools.count()
        self.path = ENDPOINT_PATHS[config.endpoint]
        self.completions = config.endpoint == "completions"

    def body(self, index: int) -> bytes:
        if not self.unique:
            return self.bodies[index % len(self.bodies)]
        parts = self._parts[index % len(self._parts)]
        if len(parts) == 1:  # messages without a user text to put a prefix before
            return parts[0]
        head, tail = parts
        if self._lead:
            return b"".join((head, self._word_prefix(next(self._sent), tail), tail))
        return b"".join((head, b"[r", self._salt.encode(), b"-", str(next(self._sent)).encode(),
                         b"] ", tail))

    def _word_prefix(self, n: int, tail: bytes) -> bytes:
        """Request n's prefix words: n (plus the run's salt) in base len(words)."""
        value, base = self._salt_words + n, len(self._digits)
        picked = []
        for _ in range(self._lead):
            value, digit = divmod(value, base)
            picked.append(self._digits[digit])
        # a space before the body's words; none when the prefix is the whole prompt
        return b" ".join(picked) + (b"" if tail[:1] == b'"' else b" ")
