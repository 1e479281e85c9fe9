"""SANet: Self-Attention Network for text classification (Letarte et al., 2018).

word embeddings + sinusoidal positional encoding -> linear layer to d
    -> N x [single-head self-attention, Add & Norm -> FFN, Add & Norm]
    -> global max pooling over positions -> classifier

The paper's self-attention (section 3) has no 1/sqrt(d) scaling and folds the query and key
projections into one matrix: Self-Att(X) = softmax(X W_QK X^T) X W_V with W_QK = W_Q W_K^T, so
W_QK and W_V are the learned parameters. The baseline (``sanet-noatt``) is the same network
with each self-attention layer replaced by a feed-forward layer.

Attention outputs (``return_attention=True``):
  "self"  (B, N, T, T) the self-attention matrix of each block; row i is what word i attends
          to, summing to 1 over real words; 0 on padded keys and on padded rows.
  "token" (B, T) the share of the max-pooled feature dimensions each position supplies. Global
          max pooling picks, for each of the d dimensions, one position; a position that wins
          k of them gets k / d. It is exactly what reaches the classifier from each position,
          so it is an honest attribution for max pooling (CAM-like, which the paper's
          conclusion anticipates), not an attention distribution the model normalised itself.
          Sums to 1 over real positions, 0 on padding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from docattn.data.batching import FlatBatch
from docattn.models import PACKAGED_BESIDE, SANET_SMALL, register_model
from docattn.models.contract import FLAT, AttentionKind, pooling_kinds
from docattn.models.layers import attend, hide_words, masked_max, masked_softmax, max_pool_shares, sinusoidal_encoding
from docattn.models.output import ModelOutput

SANET_PAPER = "Letarte et al. 2018, Self-Attention Network (SANet)"
# Section 4: SGD, momentum 0.9, lr 0.01, batches of 128; the embeddings at lr 0.001 without
# momentum; 40 epochs, best epoch on a validation split of 20% of train; texts truncated at
# 1000 tokens. The big model halves all learning rates.
SANET_TRAINING = {
    "optimizer": "sgd",
    "lr": 0.01,
    "momentum": 0.9,
    "embedding_lr": 0.001,
    "embedding_momentum": 0.0,
    "batch_size": 128,
    "max_epochs": 40,
    "valid_fraction": 0.2,
    "max_tokens": 1000,
}
SANET_BIG_TRAINING = {**SANET_TRAINING, "lr": 0.005, "embedding_lr": 0.0005}
# the configuration SANet base was measured at on two CPU cores (benchmarks/README.md, "The IMDB comparison in
# one command"): Adam instead of 40 epochs of SGD. Its word vectors learn at an eighth of the rest's rate
# (embedding_lr), so 1,000 steps left them short: it trains at least 2,000, as CSPAN does (benchmarks/LOG.md)
SANET_CPU = {
    "min_steps": 2000,
    "optimizer": "adam",
    "lr": 2e-3,
    "batch_size": 64,
    "schedule": "cosine",
    "val_per_epoch": 2,
    "max_epochs": 3,
    "scaled": True,
    "d_model": 128,
    "embedding_dim": 200,
    "position_scale": 0.1,
    "embedding_lr": 2.5e-4,
}


@dataclass
class SANetConfig:
    embedding_dim: int = 100  # word vectors (paper: GloVe, 100 base, 200 big)
    d_model: int = 128  # hidden size d kept through the network (128 base, 256 big)
    layers: int = 1  # self-attention blocks N (1 base, 2 big)
    attention: bool = True  # False: the paper's baseline, self-attention replaced by a feed-forward layer
    dropout: float = 0.1  # on the output of every sub-layer (paper: 0.1)
    word_dropout: float = 0.0  # in training, the share of words shown as UNK (the paper: none)
    scaled: bool = False  # divide scores by sqrt(d) as Vaswani et al. do (the paper does not)
    # multiplies the sinusoidal positions (norm sqrt(E / 2), 7.1 at E 100) before they are added to the
    # word vectors: GloVe rows are about that long, but word2vec trained on a small corpus gives most
    # words a norm near 1, so at scale 1 the positions drown the words they are added to
    position_scale: float = 1.0


class SelfAttention(nn.Module):
    """Single-head self-attention softmax(X W_QK X^T) X W_V over real positions (paper, section 3)."""

    def __init__(self, d: int, scaled: bool = False):
        super().__init__()
        self.query_key = nn.Linear(d, d, bias=False)  # W_QK = W_Q W_K^T
        self.value = nn.Linear(d, d, bias=False)  # W_V
        self.scale = 1.0 / math.sqrt(d) if scaled else 1.0

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (B, T, d), mask (B, T) -> out (B, T, d), weights (B, T, T) or None."""
        q = self.query_key(x)  # (B, T, d): X W_QK, compared with the raw X as keys
        v = self.value(x)  # (B, T, d)
        if not need_weights:
            # an empty document attends over its pads instead of nothing (no NaN); rows are zeroed later
            keys = (mask | ~mask.any(-1, keepdim=True)).unsqueeze(1)  # (B, 1, T)
            out = attend(q, x, v, attn_mask=keys, scale=self.scale)  # (B, T, d)
            return out, None
        scores = (q @ x.transpose(1, 2)) * self.scale  # (B, T, T)
        w = masked_softmax(scores, mask.unsqueeze(1).expand_as(scores))  # (B, T, T), 0 on padded keys
        w = w * mask.unsqueeze(-1)  # padded query rows: 0
        return w @ v, w  # (B, T, d)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 with W1, W2 of size d x d."""

    def __init__(self, d: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        return self.net(x), None  # (B, T, d): position-wise, never looks at other words


class SelfAttentionBlock(nn.Module):
    """LayerNorm(x + Dropout(Self-Att(x))), then LayerNorm(x + Dropout(FFN(x))) (paper, Figure 1).

    In the baseline the first sub-layer is a feed-forward layer of the same shape as the FFN.
    """

    def __init__(self, cfg: SANetConfig):
        super().__init__()
        d = cfg.d_model
        self.interaction = SelfAttention(d, cfg.scaled) if cfg.attention else FeedForward(d)
        self.norm1 = nn.LayerNorm(d)
        self.ffn = FeedForward(d)
        self.norm2 = nn.LayerNorm(d)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (B, T, d) -> (B, T, d), attention weights (B, T, T) or None."""
        a, w = self.interaction(x, mask, need_weights)
        x = self.norm1(x + self.dropout(a))  # (B, T, d)
        f, _ = self.ffn(x, mask)
        x = self.norm2(x + self.dropout(f))  # (B, T, d)
        return x, w


class SANet(nn.Module):
    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = SANetConfig(**hparams)
        if cfg.layers < 1:
            raise ValueError(f"layers must be >= 1, got {cfg.layers}")
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.projection = nn.Linear(cfg.embedding_dim, cfg.d_model)
        self.blocks = nn.ModuleList(SelfAttentionBlock(cfg) for _ in range(cfg.layers))
        self.classifier = nn.Linear(cfg.d_model, num_classes)

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        kinds = pooling_kinds(("token",), "max")
        if self.config.attention:
            kinds += (AttentionKind("self", "token", "self", "(B, N, T, T)", "each block's self-attention, N blocks"),)
        return kinds

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        tokens, mask = batch.tokens, batch.mask  # (B, T)
        x = self.embedding(hide_words(tokens, mask, self.config.word_dropout, self.training))  # (B, T, E)
        pe = sinusoidal_encoding(tokens.shape[1], x.shape[-1], x.device, x.dtype)  # (T, E)
        x = x + self.config.position_scale * pe  # (B, T, E)
        h = self.projection(x)  # (B, T, d)
        weights = []
        for block in self.blocks:
            h, w = block(h, mask, need_weights=return_attention)  # (B, T, d), (B, T, T) or None
            if w is not None:
                weights.append(w)
        doc = masked_max(h, mask)  # (B, d): global max pooling over real positions
        out = ModelOutput(logits=self.classifier(doc))  # (B, C)
        if return_attention:
            att = {"token": max_pool_shares(h, mask)}  # (B, T)
            if weights:
                att["self"] = torch.stack(weights, dim=1)  # (B, N, T, T)
            out.attentions = att
        return out


def _variant(name: str, description: str, training: dict, cpu: dict | None = None, **defaults):
    @register_model(
        name,
        description=description,
        paper=SANET_PAPER,
        layout=FLAT,
        training=training,
        cpu=cpu,
        small=SANET_SMALL,
        few_tokens=PACKAGED_BESIDE,
        **defaults,
    )
    def build(vocab_size: int, num_classes: int, **hparams) -> SANet:
        return SANet(vocab_size, num_classes, **hparams)

    return build


BASE = {"embedding_dim": 100, "d_model": 128, "layers": 1}
BIG = {"embedding_dim": 200, "d_model": 256, "layers": 2}
_variant("sanet", "SANet base: 1 self-attention block, d 128, global max pooling", SANET_TRAINING, SANET_CPU, **BASE)
_variant("sanet-big", "SANet big: 2 self-attention blocks, d 256, global max pooling", SANET_BIG_TRAINING, **BIG)
_variant(
    "sanet-noatt",
    "SANet base baseline: self-attention replaced by a feed-forward layer",
    SANET_TRAINING,
    SANET_CPU,
    attention=False,
    **BASE,
)
_variant(
    "sanet-big-noatt",
    "SANet big baseline: self-attention replaced by a feed-forward layer",
    SANET_BIG_TRAINING,
    attention=False,
    **BIG,
)
