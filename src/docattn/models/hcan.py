"""HCAN: Hierarchical Convolutional Attention Networks (Gao et al., 2018), the eight variants of Table 2.

One *hierarchy* turns a sequence of vectors into one vector (``HierarchyBlock``):

    x = Dropout(E + P)                                   learned positions P (sec. 3.6), dropout 0.1 (sec. 3.8)
    A(x) = MultiHead(ELU(conv x), ELU(conv x), ELU(conv x))     eq. 2-3   ``ConvSelfAttention``
    B(x) = MultiHead(ELU(conv x), ELU(conv x), tanh(conv x))    eq. 4
    y = LayerNorm(A(x) * B(x))                                   eq. 4, sec. 3.8 (one self-attention: LayerNorm(A(x)))
    v = MultiHead(T, ELU(conv y), ELU(conv y))                   eq. 5     ``TargetAttention`` (or max over positions)

where conv is a window-3 Conv1D with d filters and MultiHead splits Q, K, V into h heads, runs
softmax(Q K^T / sqrt(d/h)) V per head (dropout 0.1 on the weights) and concatenates (eq. 1, 3).

``hcan-*`` runs a hierarchy over each sentence's words (-> sentence vectors) and another over the
sentence vectors (-> document vector); ``can-*`` ("Conv Attention Network") runs one hierarchy over
the whole document as a single sequence. Flat variants train with documents truncated to 1000
tokens (``max_tokens`` in their registered training settings) and hierarchical ones with sentences
truncated to 1000 words (``max_words``), since self-attention memory grows with the square of the
length: long IMDB reviews would otherwise dominate a flat batch, and one 8,000-word "sentence" of
20 Newsgroups (a uuencoded file) a hierarchical one.

Padding: every convolution sees zeros on padded positions (they are zeroed right before it), so
with ``padding=1`` a real position's window is exactly what it would be for the sequence alone;
keys are masked in every attention and max-pooling ignores padding, so a document's output does
not depend on its batch. Sequences with no real position at all (padded sentence slots) attend
over every position instead of none, which keeps everything finite; their outputs are never used.

Attention outputs (``return_attention=True``):
  target-attention variants: head-averaged target weights "token" (B, T) for flat, "word" (B, L, W)
  and "sentence" (B, L) for hierarchical (sum to 1 over real positions, exactly 0 on padding),
  and per head "token_heads" (B, h, T), "word_heads" (B, L, h, W), "sentence_heads" (B, h, L);
  max-pool variants: under the same keys, the share of the d feature dimensions whose maximum each
  position provides (what max-pooling actually takes from each position; sums to 1);
  all variants: self-attention matrices per head, "self_a" / "self_b" (B, h, T, T) for flat,
  "word_self_a" (S, h, W, W) and "sentence_self_a" (B, h, L, L) (and ``_b``) for hierarchical;
  rows of real queries sum to 1 over real keys, padded keys and padded queries are 0.

Choices the paper leaves open or that differ from it (the equations follow the paper):
  - one-self-attention variants normalise A(x) alone: y = LayerNorm(A(x)) (the paper does not say);
  - the attention scale is sqrt(d/h), the per-head width (Vaswani et al.; the authors' code does
    the same, the paper's eq. 1 writes sqrt(d) for one head);
  - target attention's values are ELU(conv(y)) as in eq. 5 (the authors' released code uses y);
  - word vectors start as N(0, 0.1) when no word2vec is loaded, the scale of the positional
    tables; N(0, 1) made the window-3 convolutions memorise word trigrams on small data;
  - W^q, W^k, W^v are one Conv1d with 3d filters (same parameters), computed as one matrix
    product over each position's 3-word window (``conv_window3``); on CPU the word hierarchy runs
    on length-sorted groups of sentences whose cuts are priced by padding and W^2 attention cost
    (``length_groups``), so short sentences carry less padding (``benchmarks/step_times.py``);
  - training: batches of 64 with Adam lr 2e-4 (paper: one document at a time, lr 2e-5), see below.
Memory: self-attention keeps (N, h, T, T) weights, so flat variants on 1000-token documents need
about N * h * 4 MB per attention at float32; hierarchical variants only (S, h, W, W) and (B, h, L, L).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from docattn.data.batching import FlatBatch, HierarchicalBatch
from docattn.errors import ConfigError
from docattn.models import PACKAGED_BESIDE, SMALL_WITH_TABLE, register_model
from docattn.models.contract import FLAT, HIERARCHICAL, AttentionKind, pooling_kinds
from docattn.models.grouping import LengthGroups
from docattn.models.layers import attend, hide_words, masked_max, masked_softmax, max_pool_shares
from docattn.models.output import ModelOutput

HCAN_PAPER = "Gao et al. 2018, Hierarchical Convolutional Attention Networks for Text Classification"
# The paper's Adam at 2e-5, one document at a time, barely moves at batch 64. Adam moves every weight by
# about lr per step whatever its fan-in, so the safe rate falls with width: at d 512, 1e-3 collapses the
# sentence attention and 2e-4 learns (benchmarks/hcan_saturation.py); at d 64, 2e-3 trains best.
_TRAINING = {"optimizer": "adam", "lr": 2e-4, "betas": (0.9, 0.99), "batch_size": 64, "hcan_clean": True}
# Self-attention memory grows with the square of a sequence's length: no sentence (hierarchical) or
# document (flat) passes 1000 positions, and a batch compares at most max_batch_pairs word pairs.
# The configuration HCAN was measured at on two CPU cores, where the paper's size is far slower
# (benchmarks/README.md, "The IMDB comparison in one command").
HCAN_CPU = {
    "lr": 2e-3,
    "schedule": "cosine",
    "val_per_epoch": 2,
    "max_epochs": 3,
    "d_model": 64,
    "heads": 4,
    "embedding_dim": 64,
}
HCAN_TRAINING = {**_TRAINING, "max_words": 1000, "max_batch_pairs": 8_000_000}
CAN_TRAINING = {**_TRAINING, "max_tokens": 1000, "max_batch_pairs": 8_000_000}


@dataclass
class HCANConfig:
    embedding_dim: int = 512  # paper: 512-d word2vec
    d_model: int = 512  # d: conv filters, width of Q, K, V and of the sentence/document vectors (paper: 512)
    heads: int = 8  # h; d_model must be a multiple of it (paper: 8)
    dropout: float = 0.1  # on embeddings + positions and on every attention's weights (paper: 0.1)
    word_dropout: float = 0.0  # in training, the share of words shown as UNK (the paper: none)
    max_positions: int = 1024  # rows of each positional table; later positions share the last row
    self_attentions: int = 2  # 2: LayerNorm(A(x) * B(x)) (eq. 4); 1: LayerNorm(A(x))
    pooling: str = "target"  # "target": target attention (eq. 5); "max": max over real positions
    length_groups: int = (
        0  # hierarchical word level: 0 picks length-sorted groups per batch (CPU: by cost; GPU: one), n: n equal groups
    )
    group_step_cost: float = 1024.0  # with length_groups=0: padded positions one more group is worth (measured on CPU)
    group_quadratic: float = (
        0.1  # with length_groups=0: a row of width W costs W + this * W^2 (self-attention's scores)
    )

    def __post_init__(self):
        if self.d_model % self.heads:
            raise ConfigError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.self_attentions not in (1, 2):
            raise ConfigError(f"self_attentions must be 1 or 2, got {self.self_attentions!r}")
        if self.pooling not in ("target", "max"):
            raise ConfigError(f"pooling must be 'target' or 'max', got {self.pooling!r}")
        if self.max_positions < 1:
            raise ConfigError(f"max_positions must be >= 1, got {self.max_positions}")
        if self.length_groups < 0:
            raise ConfigError(f"length_groups must be >= 0, got {self.length_groups}")
        if self.group_step_cost < 0 or self.group_quadratic < 0:
            raise ConfigError("group_step_cost and group_quadratic must be >= 0")


def conv_window3(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """``conv`` (window 3, padding 1) over positions as one matrix product: x (N, T, C_in) -> (N, T, C_out).

    Each position's window [x_t-1, x_t, x_t+1] (zeros beyond the ends) times the filters, exactly
    what ``conv`` computes, but about 1.5x faster than the native Conv1d on CPU (fwd + bwd).
    """
    N, T, C = x.shape
    windows = F.pad(x, (0, 0, 1, 1)).unfold(1, 3, 1).reshape(N, T, C * 3)  # (N, T, 3C), (channel, offset) order
    return F.linear(windows, conv.weight.reshape(conv.out_channels, C * 3), conv.bias)  # weight (out, C, 3)


def attention_mask(mask: torch.Tensor) -> torch.Tensor:
    """Keys a query may attend to: the real ones, or all of them where a row has none (keeps softmax finite)."""
    return mask | ~mask.any(dim=-1, keepdim=True)


class ConvSelfAttention(nn.Module):
    """Convolutional multi-head self-attention (eq. 2-4): Q, K, V = act(Conv1D_k3(x) + b), h heads.

    The three filter banks W^q, W^k, W^v are one Conv1d with 3d output channels (the same
    parameters, one call). ``value_activation`` is "elu" for self-attention A, "tanh" for B.
    """

    def __init__(self, in_dim: int, d_model: int, heads: int, dropout: float, value_activation: str):
        super().__init__()
        self.qkv = nn.Conv1d(in_dim, 3 * d_model, kernel_size=3, padding=1)
        self.heads, self.d_head = heads, d_model // heads
        self.dropout = dropout
        self.value_activation = value_activation

    def extra_repr(self) -> str:
        return f"heads={self.heads}, d_head={self.d_head}, value_activation={self.value_activation}"

    def forward(self, x: torch.Tensor, keys: torch.Tensor, need_weights: bool = False):
        """x (N, T, C) zero on padding, keys (N, T) from ``attention_mask``.

        Returns (N, T, d) and, on the reference path, the weights (N, h, T, T) before dropout.
        """
        N, T, _ = x.shape
        q, k, v = conv_window3(self.qkv, x).chunk(3, dim=-1)  # 3 x (N, T, d)   eq. 2 / 4
        q, k, v = F.elu(q), F.elu(k), (torch.tanh(v) if self.value_activation == "tanh" else F.elu(v))
        q, k, v = (t.reshape(N, T, self.heads, self.d_head).transpose(1, 2) for t in (q, k, v))  # (N, h, T, dh)
        mask = keys[:, None, None, :]  # (N, 1, 1, T)
        p = self.dropout if self.training else 0.0
        if not need_weights:  # fast path: fused kernel, no (T, T) matrix kept for explanations
            out = attend(q, k, v, attn_mask=mask, dropout_p=p)  # (N, h, T, dh)
            weights = None
        else:  # reference path, eq. 1: softmax(Q K^T / sqrt(dh)) V
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (N, h, T, T)
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (N, h, T, T)
            out = F.dropout(weights, p, self.training) @ v  # (N, h, T, dh)
        return out.transpose(1, 2).reshape(N, T, self.heads * self.d_head), weights  # heads concatenated (eq. 3)


class TargetAttention(nn.Module):
    """Convolutional multi-head target attention (eq. 5): one learned query T against K, V = ELU(Conv1D_k3(y) + b)."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.kv = nn.Conv1d(d_model, 2 * d_model, kernel_size=3, padding=1)  # W^k, W^v
        self.heads, self.d_head = heads, d_model // heads
        self.target = nn.Parameter(torch.randn(heads, self.d_head) / math.sqrt(self.d_head))  # T (1 x d), per head
        self.dropout = dropout

    def forward(self, y: torch.Tensor, mask: torch.Tensor):
        """y (N, T, d) zero on padding, mask (N, T) -> (N, d), weights (N, h, T) (0 on padding and empty rows)."""
        N, T, d = y.shape
        k, v = F.elu(conv_window3(self.kv, y)).reshape(N, T, 2, self.heads, self.d_head).unbind(2)  # (N, T, h, dh)
        scores = torch.einsum("nthe,he->nht", k, self.target) / math.sqrt(self.d_head)  # (N, h, T)
        weights = masked_softmax(scores, mask.unsqueeze(1))  # (N, h, T)
        dropped = F.dropout(weights, self.dropout, self.training)
        return torch.einsum("nht,nthe->nhe", dropped, v).reshape(N, d), weights  # (N, d)


class HierarchyBlock(nn.Module):
    """One hierarchy of Fig. 1: positions + dropout, one or two conv self-attentions, LayerNorm, pooling."""

    def __init__(self, in_dim: int, cfg: HCANConfig):
        super().__init__()
        self.positions = nn.Embedding(cfg.max_positions, in_dim)  # P, learned (sec. 3.6)
        nn.init.normal_(self.positions.weight, std=0.1)
        self.dropout = nn.Dropout(cfg.dropout)
        self.self_a = ConvSelfAttention(in_dim, cfg.d_model, cfg.heads, cfg.dropout, "elu")
        two = cfg.self_attentions == 2
        self.self_b = ConvSelfAttention(in_dim, cfg.d_model, cfg.heads, cfg.dropout, "tanh") if two else None
        self.norm = nn.LayerNorm(cfg.d_model)
        target = cfg.pooling == "target"
        self.target_attention = TargetAttention(cfg.d_model, cfg.heads, cfg.dropout) if target else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (N, T, C), mask (N, T) -> (N, d) and, when asked, weights by name."""
        T = x.shape[1]
        pos = torch.arange(T, device=x.device).clamp_max(self.positions.num_embeddings - 1)  # (T,)
        real = mask.unsqueeze(-1).to(x.dtype)  # (N, T, 1)
        x = self.dropout(x + self.positions(pos)) * real  # (N, T, C), zero on padding before the convs
        keys = attention_mask(mask)  # (N, T)
        y, w_a = self.self_a(x, keys, need_weights)  # (N, T, d)
        w_b = None
        if self.self_b is not None:
            b, w_b = self.self_b(x, keys, need_weights)  # (N, T, d)
            y = y * b  # eq. 4: elementwise product
        y = self.norm(y) * real.to(y.dtype)  # (N, T, d), zero on padding again for the next conv
        if self.target_attention is not None:
            v, pooled_w = self.target_attention(y, mask)  # (N, d), (N, h, T)   eq. 5
        else:
            v = masked_max(y, mask)  # (N, d)
            pooled_w = max_pool_shares(y.detach(), mask) if need_weights else None  # (N, T)
        if not need_weights:
            return v, {}
        pair = (mask.unsqueeze(-1) & mask.unsqueeze(-2)).unsqueeze(1)  # (N, 1, T, T): real query and real key
        weights = {"pool": pooled_w, "self_a": w_a * pair}
        if w_b is not None:
            weights["self_b"] = w_b * pair
        return v, weights


def hierarchy_kinds(level: str, cfg: HCANConfig, pooled: str, heads: str, matrices: str) -> tuple[AttentionKind, ...]:
    """The attentions one hierarchy reports at ``level``, with the shapes of its pooled, per-head and self weights."""
    if cfg.pooling == "target":
        kinds = (
            AttentionKind(level, level, "pooling", pooled, "target attention averaged over heads, eq. 5"),
            AttentionKind(f"{level}_heads", level, "heads", heads, "target attention of each head, eq. 5"),
        )
    else:
        kinds = pooling_kinds((level,), "max")
    prefix = "" if level == "token" else f"{level}_"
    for name in "ab"[: cfg.self_attentions]:
        kinds += (
            AttentionKind(f"{prefix}self_{name}", level, "self", matrices, f"self-attention {name.upper()}, eq. 2-4"),
        )
    return kinds


class _ConvAttentionBase(nn.Module):
    """What the flat and hierarchical models share: config, embedding, classifier."""

    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = HCANConfig(**hparams)
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        # random start at the scale of the positional table (and of word2vec's unseen rows): with
        # N(0, 1) vectors the window-3 convolutions memorise word trigrams long before they generalise
        nn.init.normal_(self.embedding.weight, std=0.1)
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.classifier = nn.Linear(cfg.d_model, num_classes)

    def hparams(self) -> dict:
        return asdict(self.config)


class ConvAttentionNetwork(_ConvAttentionBase):
    """Flat "Conv Attention Network": one hierarchy over the whole document (FlatBatch, truncated at max_tokens)."""

    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__(vocab_size, num_classes, **hparams)
        self.document = HierarchyBlock(self.config.embedding_dim, self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return hierarchy_kinds("token", self.config, "(B, T)", "(B, h, T)", "(B, h, T, T)")

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        tokens = hide_words(batch.tokens, batch.mask, self.config.word_dropout, self.training)  # (B, T)
        v, w = self.document(self.embedding(tokens), batch.mask, return_attention)  # (B, d)
        out = ModelOutput(logits=self.classifier(v))  # (B, C)
        if return_attention:
            att = {"self_a": w["self_a"]}  # (B, h, T, T)
            if "self_b" in w:
                att["self_b"] = w["self_b"]
            if self.config.pooling == "target":
                att["token"] = w["pool"].mean(1)  # (B, T)
                att["token_heads"] = w["pool"]  # (B, h, T)
            else:
                att["token"] = w["pool"]  # (B, T): max-pool feature shares
            out.attentions = att
        return out


class HCAN(_ConvAttentionBase):
    """Hierarchical: words -> sentence vectors (one hierarchy per sentence) -> document vector."""

    layout = HIERARCHICAL

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__(vocab_size, num_classes, **hparams)
        self.word_hierarchy = HierarchyBlock(self.config.embedding_dim, self.config)
        self.sentence_hierarchy = HierarchyBlock(self.config.d_model, self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return (
            *hierarchy_kinds("word", self.config, "(B, L, W)", "(B, L, h, W)", "(S, h, W, W)"),
            *hierarchy_kinds("sentence", self.config, "(B, L)", "(B, h, L)", "(B, h, L, L)"),
        )

    def encode_words(self, words: torch.Tensor, word_mask: torch.Tensor, need_weights: bool = False):
        """The reference path: every sentence in one group, padded to W (what an exported graph runs)."""
        return self.word_hierarchy(self.embedding(words), word_mask, need_weights)

    def encode_sentences(self, words: torch.Tensor, word_mask: torch.Tensor, need_weights: bool = False):
        """Sentence vectors (S, d) from word ids (S, W), with the word hierarchy's weights padded to W."""
        cfg = self.config
        if cfg.length_groups == 1 or words.shape[0] < 2 or (cfg.length_groups == 0 and words.is_cuda):
            return self.encode_words(words, word_mask, need_weights)
        # length-sorted groups, each padded only to its own longest sentence (outputs do not depend on padding)
        groups = LengthGroups(word_mask, cfg.length_groups, cfg.group_step_cost, cfg.group_quadratic, min_width=1)
        embedded = groups.embed(self.embedding, words)  # [(n, w, E)]
        encode = partial(
            self.word_hierarchy, need_weights=need_weights
        )  # (n, d), {"pool": (n, [h,] w), "self_*": (n, h, w, w)}
        return groups.run(encode, embedded, pairwise=("self_a", "self_b"))  # (S, d), weights padded to W

    def forward(self, batch: HierarchicalBatch, return_attention: bool = False) -> ModelOutput:
        words = hide_words(batch.words, batch.word_mask, self.config.word_dropout, self.training)  # (S, W)
        s, ww = self.encode_sentences(words, batch.word_mask, return_attention)  # (S, d)
        smask = batch.sentence_mask  # (B, L)
        sent = s[batch.sentence_index]  # (B, L, d): sentences back in document order
        doc, sw = self.sentence_hierarchy(sent, smask, return_attention)  # (B, d)
        out = ModelOutput(logits=self.classifier(doc))  # (B, C)
        if return_attention:
            keep = smask.unsqueeze(-1)  # (B, L, 1): padded sentence slots get no word weights
            att = {"word_self_a": ww["self_a"], "sentence_self_a": sw["self_a"]}  # (S, h, W, W), (B, h, L, L)
            if "self_b" in ww:
                att["word_self_b"], att["sentence_self_b"] = ww["self_b"], sw["self_b"]
            if self.config.pooling == "target":
                att["word"] = ww["pool"].mean(1)[batch.sentence_index] * keep  # (B, L, W)
                att["word_heads"] = ww["pool"][batch.sentence_index] * keep.unsqueeze(-1)  # (B, L, h, W)
                att["sentence"] = sw["pool"].mean(1)  # (B, L)
                att["sentence_heads"] = sw["pool"]  # (B, h, L)
            else:
                att["word"] = ww["pool"][batch.sentence_index] * keep  # (B, L, W): max-pool feature shares
                att["sentence"] = sw["pool"]  # (B, L)
            out.attentions = att
        return out


def _variant(name: str, description: str, hierarchical: bool, **defaults):
    cls = HCAN if hierarchical else ConvAttentionNetwork
    training = HCAN_TRAINING if hierarchical else CAN_TRAINING

    @register_model(
        name,
        description=description,
        paper=HCAN_PAPER,
        layout=cls.layout,
        training=training,
        cpu=HCAN_CPU,
        small=SMALL_WITH_TABLE,
        beyond_small=PACKAGED_BESIDE,
        **defaults,
    )
    def build(vocab_size: int, num_classes: int, **hparams):
        return cls(vocab_size, num_classes, **hparams)

    return build


# Table 2 of the paper, one row per variant: name, hierarchical, self-attentions, pooling
TABLE_2 = [
    ("can-one-max", False, 1, "max", "Conv Attention Network (flat): one conv self-attention, max-pool"),
    ("can-one-target", False, 1, "target", "Conv Attention Network (flat): one conv self-attention, target attention"),
    ("can-two-max", False, 2, "max", "Conv Attention Network (flat): two conv self-attentions (A*B), max-pool"),
    (
        "can-two-target",
        False,
        2,
        "target",
        "Conv Attention Network (flat): two conv self-attentions (A*B), target attention",
    ),
    ("hcan-one-max", True, 1, "max", "HCAN: one conv self-attention, max-pool, at both levels"),
    ("hcan-one-target", True, 1, "target", "HCAN: one conv self-attention, target attention, at both levels"),
    ("hcan-two-max", True, 2, "max", "HCAN: two conv self-attentions (A*B), max-pool, at both levels"),
    ("hcan-two-target", True, 2, "target", "HCAN: two conv self-attentions (A*B), target attention, at both levels"),
    ("hcan", True, 2, "target", "HCAN as in the paper (= hcan-two-target): words -> sentences -> document"),
]
for _name, _hierarchical, _n_self, _pooling, _description in TABLE_2:
    _variant(_name, _description, _hierarchical, self_attentions=_n_self, pooling=_pooling)
