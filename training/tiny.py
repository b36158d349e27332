"""A tiny Qwen3-architecture model and tokenizer built locally, so the pipeline runs on a CPU
with no hub download. They prove the plumbing (templates, tool parsing, trainers, the
environment) and nothing about what a real model learns.

The tokenizer is a byte-level BPE trained on the conversations it will see, rendered with
TRL's vendored Qwen3 templates, and it carries the stock Qwen3 chat template byte for byte so
TRL recognises it: it attaches the Qwen3 tool-call parser and swaps in its training template.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from trl.chat_template_utils import qwen3_chat_template, qwen3_training_chat_template

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Ordinary added tokens in real Qwen3: they are part of the text the parser reads.
MARKUP_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
EOS, PAD = "<|im_end|>", "<|endoftext|>"


def _wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS, pad_token=PAD, padding_side="left"
    )
    wrapped.chat_template = qwen3_chat_template
    return wrapped


def _byte_level_bpe(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        # Its progress bars, hidden off a terminal, still wrote a blank line each to stdout.
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_tokens(MARKUP_TOKENS)
    return _wrap(tokenizer)


def render_corpus(
    conversations: Iterable[list[dict[str, Any]]], tools: list[dict[str, Any]]
) -> list[str]:
    """The conversations as both Qwen3 templates render them (tools included)."""
    # Any tokenizer can render a template; this throwaway one only carries the special tokens.
    renderer = _byte_level_bpe([""], vocab_size=300)
    return [
        renderer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
        for messages in conversations
        for template in (qwen3_chat_template, qwen3_training_chat_template)
    ]


def build_tokenizer(corpus: list[str], vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    return _byte_level_bpe(corpus, vocab_size)


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen3ForCausalLM:
    """About 0.1 M parameters; the context covers the prompt's tool schemas and a few turns."""
    import torch

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny(
    conversations: list[list[dict[str, Any]]],
    tools: list[dict[str, Any]],
    output_dir: Path,
    seed: int = 0,
) -> Path:
    """Build and save a tiny model and its tokenizer trained on `conversations`; returns the dir."""
    tokenizer = build_tokenizer(render_corpus(conversations, tools))
    model = build_model(tokenizer, seed)
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(output_dir)
    model.save_pretrained(output_dir)
    return output_dir
