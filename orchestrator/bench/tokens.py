"""Token counts from a local tokenizer, for servers that send no usage (`--tokenizer PATH`).

The hot path keeps only the raw JSON-escaped text of each token-bearing chunk when a
tokenizer is given (`RequestRecord.text_raw`); after a phase has ended the text is decoded
and counted here, as `vllm bench serve --tokenizer` counts: the output text re-encoded
without special tokens, and the prompt's own text (not the chat template around it) for
input tokens. The server's usage, when it sends one, always wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.bench.request_record import RequestRecord
from orchestrator.errors import BenchError

if TYPE_CHECKING:
    # only a --tokenizer loads it (start-up time)
    from tokenizers import Tokenizer


class TokenCounter:
    """A Hugging Face `tokenizer.json`, read with the `tokenizers` library."""

    def __init__(self, encoder: Tokenizer, source: Path) -> None:
        self._encoder = encoder
        self.source = source

    def count(self, text: str) -> int | None:
        """Tokens of `text`; None when the tokenizer cannot take it (the caller then keeps
        to the chunks it counted)."""
        # a lone surrogate (`\ud83d` in the JSON) is no str the library takes
        clean = text.encode("utf-8", "replace").decode("utf-8")
        try:
            return len(self._encoder.encode(clean, add_special_tokens=False).ids)
        except Exception:  # the library's own errors: never a lost level
            return None

    def fill(self, records: Iterable[RequestRecord], prompts: Sequence[str]) -> None:
        """Counts for the successful records whose server sent no usage; `prompts[i % len]`
        is the text of request i's prompt (workload order)."""
        prompt_counts: dict[int, int | None] = {}
        for record in records:
            if record.ok and record.completion_tokens is None:
                content = self.count(decode_text(record.text_raw or ()))
                reasoning = self.count(decode_text(record.reasoning_raw or ()))
                if content is not None and reasoning is not None:
                    record.tokenized_tokens = content + reasoning
                    record.tokenized_reasoning_tokens = reasoning
            if record.ok and record.prompt_tokens is None and prompts:
                slot = record.index % len(prompts)
                if slot not in prompt_counts:
                    prompt_counts[slot] = self.count(prompts[slot])
                record.tokenized_prompt_tokens = prompt_counts[slot]
            record.text_raw = record.reasoning_raw = None  # counted: not kept any longer


def decode_text(parts: Iterable[bytes]) -> str:
    """The text of JSON-escaped string bodies (each as it stood between its quotes)."""
    out = []
    for part in parts:
        try:
            value = json.loads(b'"' + part + b'"')
        except ValueError:  # not valid JSON after all: its bytes as they are
            value = part.decode("utf-8", "replace")
        out.append(value if isinstance(value, str) else "")
    return "".join(out)


def load_tokenizer(path: str | Path, *, base_dir: Path | None = None) -> TokenCounter:
    """The tokenizer of a local folder (its tokenizer.json) or of a tokenizer.json file;
    a BenchError that says what is missing otherwise."""
    given = Path(path).expanduser()
    if base_dir is not None and not given.is_absolute():
        given = base_dir / given
    file = given / "tokenizer.json" if given.is_dir() else given
    if not file.is_file():
        raise BenchError(
            f"no tokenizer at {given}: expected a tokenizer folder with tokenizer.json "
            "(a Hugging Face model folder) or the path of a tokenizer.json",
            hint="e.g. --tokenizer ~/models/Kimi-K2.5 (a local folder: orch downloads nothing)",
        )
    try:
        # only a --tokenizer loads it (start-up time)
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - a dependency of orch
        raise BenchError("the `tokenizers` package is missing", hint="pip install tokenizers") from None
    try:
        encoder = Tokenizer.from_file(str(file))
    except Exception as error:  # the library raises its own Exception subclass
        raise BenchError(f"{file}: not a tokenizer this version can read ({error})") from None
    return TokenCounter(encoder, file)
