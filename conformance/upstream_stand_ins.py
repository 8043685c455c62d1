"""Stand-ins for the engine-side names upstream's block unit tests import (our own code).

``conformance/upstream_unit_tests.py`` rewrites ``from vllm.sequence import Logprob`` and
``from tests.core.utils import create_dummy_sequence, create_dummy_lora_sequence`` to this
module, so vLLM's ``tests/core/block/test_prefix_caching_block.py`` runs without the engine.

What is here is exactly what those tests and ``prefixcache.prefix_caching_block``'s
``ComputedBlocksTracker`` read of a sequence (``seq_id``, ``get_token_ids()``,
``extra_hash()``, ``is_prefill()``), plus what the tests drive: ``seq.data``'s
``update_num_computed_tokens`` (a sequence leaves prefill once every token is computed, and
never re-enters it) and ``append_token_id(token, {token: Logprob(...)})``. The extra hash is
None without an adapter, else a hash of ``(prompt adapter id, LoRA int id)``; the prompt
adapter id is always 0 here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "DummySequence",
    "DummySequenceData",
    "Logprob",
    "create_dummy_lora_sequence",
    "create_dummy_sequence",
]


@dataclass(frozen=True)
class Logprob:
    """A sampled token's log probability (rank and decoded text optional)."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class DummySequenceData:
    """A sequence's tokens (prompt, then outputs) and how many of them are computed."""

    def __init__(self, prompt_token_ids: Iterable[int]) -> None:
        self._prompt = list(prompt_token_ids)
        self._output: list[int] = []
        self._num_computed = 0
        self._cumulative_logprob = 0.0
        self._prefill = True

    def get_len(self) -> int:
        return len(self._prompt) + len(self._output)

    def get_token_ids(self) -> list[int]:
        return [*self._prompt, *self._output]

    def get_num_computed_tokens(self) -> int:
        return self._num_computed

    def get_num_uncomputed_tokens(self) -> int:
        return self.get_len() - self._num_computed

    def update_num_computed_tokens(self, num_new_computed_tokens: int) -> None:
        """Count more tokens computed; with none left uncomputed the sequence decodes."""
        if num_new_computed_tokens < 0:
            raise ValueError("the computed count only grows")
        if self._num_computed + num_new_computed_tokens > self.get_len():
            raise ValueError("more tokens computed than the sequence holds")
        self._num_computed += num_new_computed_tokens
        if self.get_num_uncomputed_tokens() == 0:
            self._prefill = False

    def append_token_id(self, token_id: int, logprob: float) -> None:
        self._output.append(token_id)
        self._cumulative_logprob += logprob

    @property
    def is_prefill(self) -> bool:
        return self._prefill


class DummySequence:
    """The sequence object ``ComputedBlocksTracker.get_num_cached_tokens`` reads."""

    def __init__(
        self, seq_id: int, token_ids: Iterable[int], block_size: int, lora_int_id: int = 0
    ) -> None:
        self.seq_id = seq_id
        self.block_size = block_size
        self.lora_int_id = lora_int_id
        self.prompt_adapter_id = 0
        self.data = DummySequenceData(token_ids)
        self.output_logprobs: list[Mapping[int, Logprob]] = []

    def get_token_ids(self) -> list[int]:
        return self.data.get_token_ids()

    def get_len(self) -> int:
        return self.data.get_len()

    def is_prefill(self) -> bool:
        return self.data.is_prefill

    def extra_hash(self) -> int | None:
        if self.prompt_adapter_id == 0 and self.lora_int_id == 0:
            return None
        return hash((self.prompt_adapter_id, self.lora_int_id))

    def append_token_id(self, token_id: int, logprobs: Mapping[int, Logprob]) -> None:
        if token_id not in logprobs:
            raise ValueError(f"no logprob given for the appended token {token_id}")
        self.output_logprobs.append(logprobs)
        self.data.append_token_id(token_id, logprobs[token_id].logprob)


def create_dummy_sequence(request_id: int, token_ids: list[int], block_size: int) -> DummySequence:
    """A prompt-only sequence with id ``request_id`` and no adapter."""
    return DummySequence(request_id, token_ids, block_size)


def create_dummy_lora_sequence(
    request_id: int, token_ids: list[int], block_size: int, lora_int_id: int
) -> DummySequence:
    """The same, served with the LoRA adapter ``lora_int_id`` (so its blocks hash apart)."""
    if lora_int_id <= 0:
        raise ValueError("a LoRA int id is positive")
    return DummySequence(request_id, token_ids, block_size, lora_int_id=lora_int_id)
