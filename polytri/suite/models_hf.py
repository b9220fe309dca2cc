"""Hugging Face ``transformers`` models for the zoo, built from their configurations (random weights, no
download): BERT (an encoder) and GPT-2 (a causal decoder), each called with a batch of token ids and an
attention mask, returning the last hidden state.

``transformers`` is optional (``pip install 'polytri[transformers]'``): this module imports it only when a
model is built, so the zoo's names are known without it, and :func:`require` says how to install it.

Attention is the models' ``eager`` implementation (explicit products, a mask added to the scores and a
softmax).  Their ``sdpa`` implementation lowers just as completely (the same ops left to eager), but its
decomposition adds a pass over the probabilities that zeroes fully masked rows (an ``any``, then a
``where``): at width 64 with 2 layers and 16 tokens, 14 kernels against 13 for BERT, 12 against 11
for GPT-2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

#: The attention implementation the zoo's transformers are built with.
ATTENTION = "eager"


class LastHiddenState(nn.Module):
    """A transformers model called as ``model(input_ids, attention_mask)``, returning its last hidden state
    (a tensor, as the zoo's other models return)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return out


@dataclass(frozen=True)
class Size:
    """A transformer's size: layers, hidden width, heads and the longest sequence."""

    layers: int
    hidden: int
    heads: int
    positions: int


#: The vocabulary of both sizes: its embedding table is read by token, whatever its size.
VOCAB = 256
#: Tiny, for the tests: one layer (a second adds four kernels and as much compile time, and no op).
TEST_SIZE = Size(layers=1, hidden=32, heads=2, positions=32)
#: Small, for the benchmark.
BENCH_SIZE = Size(layers=2, hidden=256, heads=4, positions=128)


def require() -> Any:
    """The ``transformers`` module, or an ImportError that says how to install it."""
    try:
        import transformers
    except ImportError as exc:
        raise ImportError("the zoo's bert and gpt2 models need transformers: "
                          "pip install 'polytri[transformers]'") from exc
    return transformers


def bert(size: Size) -> nn.Module:
    """BERT (``BertModel``, no pooler) of ``size``: post-norm encoder layers, GELU (erf) MLPs of width 4x."""
    tf = require()
    config = tf.BertConfig(vocab_size=VOCAB, hidden_size=size.hidden, num_hidden_layers=size.layers,
                           num_attention_heads=size.heads, intermediate_size=4 * size.hidden,
                           max_position_embeddings=size.positions, initializer_range=0.1,
                           attn_implementation=ATTENTION)
    return LastHiddenState(tf.BertModel(config, add_pooling_layer=False))


def gpt2(size: Size) -> nn.Module:
    """GPT-2 (``GPT2Model``) of ``size``: pre-norm causal decoder layers, GELU (tanh) MLPs of width 4x, no
    key-value cache."""
    tf = require()
    config = tf.GPT2Config(vocab_size=VOCAB, n_embd=size.hidden, n_layer=size.layers, n_head=size.heads,
                           n_positions=size.positions, initializer_range=0.1, use_cache=False,
                           bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                           attn_implementation=ATTENTION)
    return LastHiddenState(tf.GPT2Model(config))


def token_inputs(shape: tuple[int, ...], gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """The arguments of a call at shape ``(batch, sequence)``: random token ids and an attention mask whose
    last sequence ends in a quarter of padding when the batch has several."""
    batch, seq = shape
    ids = torch.randint(0, VOCAB, shape, generator=gen)
    mask = torch.ones(shape, dtype=torch.int64)
    if batch > 1:
        mask[-1, seq - seq // 4:] = 0
    return ids, mask


def nontrivial_layer_norms(model: nn.Module, gen: torch.Generator) -> None:
    """Random scales and shifts for every layer norm: initialized, they are 1 and 0, which would hide a
    wrong lowering of the affine part."""
    for mod in model.modules():
        if isinstance(mod, nn.LayerNorm) and mod.weight is not None:
            mod.weight.data.copy_(torch.rand(mod.weight.shape, generator=gen) + 0.5)
            mod.bias.data.copy_(torch.rand(mod.bias.shape, generator=gen) - 0.5)
