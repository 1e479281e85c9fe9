"""CSPAN: Cascaded Semantic and Positional self-Attention Network (Jiang et al.).

word embeddings D -> semantic self-attention S = LayerNorm(softmax(D D^T / sqrt(d)) D)    eq. 4
    -> Bi-LSTM H = [h_fwd, h_bwd] over S (d/2 units per direction)                     eq. 5-7
    -> positional self-attention P = LayerNorm(Attention(H, H, H))                     eq. 8
    -> semantic and positional residual F_t = s_t + p_t                                eq. 9
    -> multi-query attention: u_t = tanh(F_t W_h + b_h), a_it = softmax_t(u_t . Q_i),
       F_i = sum_t a_it F_t, document = Concat(F_1..F_m) W_f (md -> d)                eq. 10-13
    -> softmax classifier                                                              eq. 14-15

Both self-attentions are projection-free (the paper drops the query/key/value matrices) and
scaled by 1/sqrt(d). d is the embedding size (GloVe 300), so S and P can be added. Where the word
vectors are wider than the model (``d_model``: word2vec beside the packaged table), one linear layer
brings them to d first.

The ablations of the paper's Tables 3 and 5 are the same model with ``encoder``, ``position`` and
``pooling`` switched (see ``ENCODERS`` and the registry at the bottom); the paper's text and its
Figure 2 describe fusion (d) differently, so it comes in both readings. Table 3 does not say how
the rows before "+ multi-query" pool the words into a document vector; they use the mean over real
positions, the pooling of the "standard" LSTM classifier the paper cites for its baselines
(Zhang et al. 2015 average the outputs of all LSTM cells).

Attention outputs (``return_attention=True``), each 0 on padding (padded keys and rows):
  "semantic_self"   (B, T, T) softmax(D D^T / sqrt(d)), rows sum to 1 over real words
  "positional_self" (B, T, T) softmax(H H^T / sqrt(d))
  "queries"         (B, m, T) a_it of each learned query
  "token"           (B, T) the queries' weights averaged (mean pooling: 1 / length), sums to 1
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from docattn.data.batching import FlatBatch
from docattn.models import PACKAGED_BESIDE, SMALL_WORD_DROPOUT, register_model
from docattn.models.contract import FLAT, AttentionKind, pooling_kinds
from docattn.models.gru import PaddedBiLSTM
from docattn.models.layers import attend, hide_words, masked_mean, masked_softmax, sinusoidal_encoding
from docattn.models.output import ModelOutput

CSPAN_PAPER = "Jiang et al., Cascaded Semantic and Positional Self-Attention Network for Document Classification"
# Section 3.2: Adam, lr 1e-3, weight decay 1e-4, batches of 64, lr divided by 10 at epochs 20 and
# 25; 30 epochs (base) or 60 (big). The paper truncates nothing; 1000 tokens bounds memory only.
CSPAN_TRAINING = {
    "optimizer": "adam",
    "lr": 1e-3,
    "weight_decay": 1e-4,
    # ... but not on the word vectors: Adam's coupled L2 moves every vector towards 0 by about lr per
    # step whether its word occurs or not, and on IMDB it had shrunk the median word2vec row from
    # norm 1.13 to 0.18 within one epoch (rare words lose what word2vec gave them)
    "embedding_weight_decay": 0.0,
    "batch_size": 64,
    "schedule": "multistep",
    "milestones": [20, 25],
    "gamma": 0.1,
    "max_epochs": 30,
    "max_tokens": 1000,
}
CSPAN_BIG_TRAINING = {**CSPAN_TRAINING, "max_epochs": 60}
# the configuration CSPAN was measured at on two CPU cores (benchmarks/README.md, "The IMDB comparison in one
# command"); cspan-big keeps its layers and queries. Half its features and 30% of its word vectors dropped, it
# learns the slowest of the families: 1,000 steps left its validation score still rising on 20 Newsgroups and
# AG titles, so it trains at least 2,000 (benchmarks/LOG.md)
CSPAN_CPU = {
    "min_steps": 2000,
    "optimizer": "adam",
    "lr": 2e-3,
    "batch_size": 64,
    "schedule": "cosine",
    "val_per_epoch": 2,
    "max_epochs": 3,
    "embedding_dim": 64,
    "dropout": 0.5,
    "embedding_dropout": 0.3,
}
# and from 10,000 training documents (models.LARGE_DATA) word vectors, and so every feature, twice that width:
# 64-d vectors were the likelier cause of its loss on 20 Newsgroups in full (benchmarks/README.md, "Current
# defaults"); the paper's 300 stays a GPU's (ModelSpec.large)
CSPAN_LARGE = {"embedding_dim": 128}

# How semantics (self-attention over D) and word order (Bi-LSTM) are combined into F:
ENCODERS = {
    "cascade": "S = SelfAtt(D); H = BiLSTM(S); P = SelfAtt(H); F = S + P (CSPAN, fusion e)",
    "parallel": "S = SelfAtt(D); H = BiLSTM(D); P = SelfAtt(H); F = S + P (fusion d, as the text reads)",
    "parallel-sum": "S = SelfAtt(D); H = BiLSTM(D); F = S + H (fusion d, as Figure 2 draws it)",
    "attention": "F = S = SelfAtt(D), no Bi-LSTM (fusion a, b, c)",
    "bilstm": "F = H = BiLSTM(D) (Table 3 baseline)",
    "attention-bilstm": "S = SelfAtt(D); F = H = BiLSTM(S) (Table 3: + self-att)",
}


@dataclass
class CSPANConfig:
    embedding_dim: int = 300  # d: GloVe 6B 300-d; S, H, P and F are all d wide (F = S + P)
    # d where it differs from the word vectors' width: a linear layer then maps D to d. Laying the packaged
    # table beside word2vec keeps the model at its own width this way; without it every feature would widen
    # with the words, and the whole model slow down with them (benchmarks/LOG.md)
    d_model: int | None = None
    layers: int = 1  # Bi-LSTM layers, d/2 units per direction (base 1, big 3)
    queries: int = 16  # m learned query vectors (base 16, big 128)
    encoder: str = "cascade"  # one of ENCODERS
    position: str = "none"  # "sinusoidal": PE added to D (fusion b); "relative": Shaw et al. 2018 (fusion c)
    relative_clip: int = 16  # k: relative distances clipped to [-k, k] (Shaw et al. 2018)
    pooling: str = "multi-query"  # "mean" for Table 3's rows before "+ multi-query"
    dropout: float = 0.0  # on the document vector before the classifier (the paper reports none)
    # on the word vectors D, before both the semantic self-attention and (fusion d) the Bi-LSTM; the
    # paper reports none. HAN's word-vector dropout was worth 0.3-1.0 points on IMDB and 20 Newsgroups
    embedding_dropout: float = 0.0
    word_dropout: float = 0.0  # in training, the share of words shown as UNK (the paper: none)
    # multiplies the semantic self-attention's 1/sqrt(d), whose sharpness depends on the word vectors'
    # length alone (no projections). The paper's GloVe rows are several times longer than the ~1.1 that
    # word2vec trained on one corpus gives, so here scores stay small and S mixes much of the document.
    # On IMDB (d 64, seed 0) sharper attention learned faster but overfitted sooner: 85.40 at 4
    # against 86.34 at 1, and the Bi-LSTM alone (cspan-bilstm) did best, 87.37. With dropout on the
    # word and document vectors (d 128, seed 0) it helps: 89.10, 89.22, 89.12 at 4, 8, 16 against
    # 88.58 at 1; over 3 seeds 89.12 at 8 against 88.70. The default stays the paper's 1
    semantic_scale: float = 1.0


class BiLSTMEncoder(nn.Module):
    """``layers`` stacked PaddedBiLSTM layers, d -> d (d/2 per direction)."""

    def __init__(self, d: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(PaddedBiLSTM(d, d // 2) for _ in range(layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d)
        return x


class ProjectionFreeSelfAttention(nn.Module):
    """LayerNorm(softmax(X X^T / sqrt(d)) X): X is query, key and value at once (eq. 4 and 8).

    With ``relative_clip`` it adds Shaw et al.'s (2018) learned relative-position vectors to the
    keys and values, a_{clip(j - i)}: e_ij = x_i . (x_j + aK_ij) / sqrt(d) and
    z_i = sum_j w_ij (x_j + aV_ij) (the paper's fusion c). SDPA cannot add aV, so that variant
    always takes the explicit path.
    """

    def __init__(self, d: int, relative_clip: int | None = None, scale: float = 1.0):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.scale = scale / math.sqrt(d)
        self.relative_clip = relative_clip
        if relative_clip is not None:
            n = 2 * relative_clip + 1
            self.relative_key = nn.Parameter(torch.empty(n, d).uniform_(-0.1, 0.1))  # aK, (2k+1, d)
            self.relative_value = nn.Parameter(torch.empty(n, d).uniform_(-0.1, 0.1))  # aV, (2k+1, d)

    def _relative_index(self, T: int, device) -> torch.Tensor:
        pos = torch.arange(T, device=device)
        k = self.relative_clip
        return (pos.unsqueeze(0) - pos.unsqueeze(1)).clamp(-k, k) + k  # (T, T): clip(j - i) + k

    def forward(self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """x (B, T, d), mask (B, T) -> out (B, T, d) zero on padding, weights (B, T, T) or None."""
        B, T, _ = x.shape
        real = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
        if not need_weights and self.relative_clip is None:
            # an empty document attends over its pads instead of nothing (no NaN); rows are zeroed below
            keys = (mask | ~mask.any(-1, keepdim=True)).unsqueeze(1)  # (B, 1, T)
            z = attend(x, x, x, attn_mask=keys, scale=self.scale)  # (B, T, d)
            return self.norm(z) * real, None
        scores = x @ x.transpose(1, 2)  # (B, T, T)
        if self.relative_clip is not None:
            idx = self._relative_index(T, x.device).expand(B, T, T)  # (B, T, T)
            scores = scores + (x @ self.relative_key.t()).gather(2, idx)  # x_i . aK_ij
        w = masked_softmax(scores * self.scale, mask.unsqueeze(1).expand(B, T, T))  # (B, T, T)
        w = w * real  # padded query rows: 0
        z = w @ x  # (B, T, d)
        if self.relative_clip is not None:
            per_distance = torch.zeros(B, T, self.relative_key.shape[0], device=x.device, dtype=w.dtype)
            per_distance.scatter_add_(2, idx, w)  # (B, T, 2k+1): weight each clipped distance gets
            z = z + per_distance @ self.relative_value  # sum_j w_ij aV_ij
        return self.norm(z) * real, w


class MultiQueryAttention(nn.Module):
    """m learned queries pool F into m vectors, fused by W_f into one document vector (eq. 10-13)."""

    def __init__(self, d: int, m: int):
        super().__init__()
        self.hidden = nn.Linear(d, d)  # W_h, b_h
        self.queries = nn.Parameter(torch.empty(m, d).uniform_(-0.1, 0.1))  # Q_1..Q_m
        self.fusion = nn.Linear(m * d, d, bias=False)  # W_f (md -> d)

    def forward(self, f: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """f (B, T, d), mask (B, T) -> document (B, d), weights (B, m, T) or None."""
        B = f.shape[0]
        has_any = mask.any(-1, keepdim=True)  # (B, 1)
        u = torch.tanh(self.hidden(f))  # (B, T, d)   eq. 10
        if not need_weights:
            keys = (mask | ~has_any).unsqueeze(1)  # (B, 1, T)
            q = self.queries.unsqueeze(0).expand(B, -1, -1)  # (B, m, d)
            pooled = attend(q, u, f, attn_mask=keys, scale=1.0)  # (B, m, d)   eq. 11-12
            w = None
        else:
            scores = torch.einsum("btd,md->bmt", u, self.queries)  # (B, m, T)
            w = masked_softmax(scores, mask.unsqueeze(1).expand_as(scores))  # (B, m, T)   eq. 11
            pooled = w @ f  # (B, m, d)   eq. 12
        pooled = pooled * has_any.unsqueeze(-1).to(pooled.dtype)  # an empty document pools to 0
        return self.fusion(pooled.flatten(1)), w  # (B, d)   eq. 13


class CSPAN(nn.Module):
    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = CSPANConfig(**hparams)
        if cfg.d_model is not None and cfg.d_model < 1:
            raise ValueError(f"d_model must be >= 1 (or None: the word vectors' width), got {cfg.d_model!r}")
        d = cfg.d_model or cfg.embedding_dim
        if cfg.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {cfg.encoder!r}")
        if cfg.position not in ("none", "sinusoidal", "relative"):
            raise ValueError(f"position must be none, sinusoidal or relative, got {cfg.position!r}")
        if cfg.pooling not in ("multi-query", "mean"):
            raise ValueError(f"pooling must be multi-query or mean, got {cfg.pooling!r}")
        for name in ("dropout", "embedding_dropout"):
            if not 0.0 <= getattr(cfg, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(cfg, name)!r}")
        if not cfg.semantic_scale > 0:
            raise ValueError(f"semantic_scale must be > 0, got {cfg.semantic_scale!r}")
        uses_lstm = cfg.encoder != "attention"
        if uses_lstm and (d % 2 or cfg.layers < 1):
            raise ValueError(f"the Bi-LSTM needs an even width and layers >= 1, got {d} and {cfg.layers}")
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.projection = nn.Linear(cfg.embedding_dim, d) if d != cfg.embedding_dim else None
        if cfg.encoder != "bilstm":
            rel = cfg.relative_clip if cfg.position == "relative" else None
            self.semantic_attention = ProjectionFreeSelfAttention(d, rel, cfg.semantic_scale)  # S, eq. 4
        if uses_lstm:
            self.bilstm = BiLSTMEncoder(d, cfg.layers)  # H, eq. 5-7
        if cfg.encoder in ("cascade", "parallel"):  # not parallel-sum: its F = S + H
            self.positional_attention = ProjectionFreeSelfAttention(d)  # P, eq. 8
        if cfg.pooling == "multi-query":
            self.multi_query = MultiQueryAttention(d, cfg.queries)  # eq. 10-13
        self.dropout = nn.Dropout(cfg.dropout)
        self.embedding_dropout = nn.Dropout(cfg.embedding_dropout)
        self.classifier = nn.Linear(d, num_classes)  # W_o, b_o   eq. 15

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        cfg, kinds = self.config, []
        if cfg.encoder != "bilstm":
            kinds.append(
                AttentionKind("semantic_self", "token", "self", "(B, T, T)", "softmax(D D^T / sqrt(d)), eq. 4")
            )
        if cfg.encoder in ("cascade", "parallel"):
            kinds.append(
                AttentionKind("positional_self", "token", "self", "(B, T, T)", "softmax(H H^T / sqrt(d)), eq. 8")
            )
        if cfg.pooling == "mean":
            return (*kinds, *pooling_kinds(("token",), "mean"))
        return (
            *kinds,
            AttentionKind("queries", "token", "heads", "(B, m, T)", "a_it of each learned query, eq. 11"),
            AttentionKind("token", "token", "pooling", "(B, T)", "the learned queries' weights averaged"),
        )

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """Word representations F (B, T, d), zero on padding, and the self-attention weights."""
        enc, att = self.config.encoder, {}
        x = self.embedding(tokens)  # (B, T, E): D
        if self.config.position == "sinusoidal":
            x = x + sinusoidal_encoding(tokens.shape[1], x.shape[-1], x.device, x.dtype)  # eq. 1-2
        x = self.embedding_dropout(x)  # (B, T, E)
        if self.projection is not None:
            x = self.projection(x)  # (B, T, d)
        if enc == "bilstm":
            return self.bilstm(x, mask), att  # (B, T, d)
        s, att["semantic_self"] = self.semantic_attention(x, mask, need_weights)  # (B, T, d)   eq. 4
        if enc == "attention":
            return s, att
        h = self.bilstm(x if enc.startswith("parallel") else s, mask)  # (B, T, d)   eq. 5-7
        if enc == "attention-bilstm":
            return h, att
        if enc == "parallel-sum":
            return s + h, att  # (B, T, d)
        p, att["positional_self"] = self.positional_attention(h, mask, need_weights)  # (B, T, d)   eq. 8
        return s + p, att  # (B, T, d)   eq. 9

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        mask = batch.mask  # (B, T)
        tokens = hide_words(batch.tokens, mask, self.config.word_dropout, self.training)  # (B, T)
        f, att = self.encode(tokens, mask, return_attention)  # (B, T, d)
        if self.config.pooling == "multi-query":
            doc, att["queries"] = self.multi_query(f, mask, return_attention)  # (B, d), (B, m, T)
        else:
            doc = masked_mean(f, mask)  # (B, d)
        out = ModelOutput(logits=self.classifier(self.dropout(doc)))  # (B, C)
        if return_attention:
            if self.config.pooling == "multi-query":
                att["token"] = att["queries"].mean(1)  # (B, T)
            else:
                real = mask.to(f.dtype)
                att["token"] = real / real.sum(-1, keepdim=True).clamp_min(1.0)  # (B, T): mean pooling
            out.attentions = att
        return out


def _variant(name: str, description: str, training: dict = CSPAN_TRAINING, **defaults):
    @register_model(
        name,
        description=description,
        paper=CSPAN_PAPER,
        layout=FLAT,
        training=training,
        cpu=CSPAN_CPU,
        large=CSPAN_LARGE,
        small=SMALL_WORD_DROPOUT,
        few_tokens=PACKAGED_BESIDE,
        **defaults,
    )
    def build(vocab_size: int, num_classes: int, **hparams) -> CSPAN:
        return CSPAN(vocab_size, num_classes, **hparams)

    return build


BASE = {"embedding_dim": 300, "layers": 1, "queries": 16}
_variant(
    "cspan",
    "CSPAN base: semantic self-attention -> Bi-LSTM -> positional self-attention, residual, 16-query attention",
    **BASE,
)
_variant(
    "cspan-big", "CSPAN big: 3-layer Bi-LSTM, 128 queries", CSPAN_BIG_TRAINING, embedding_dim=300, layers=3, queries=128
)
# Table 3: component-wise gains on AG's News
_variant(
    "cspan-bilstm", "CSPAN ablation (Table 3): Bi-LSTM alone, mean pooling", encoder="bilstm", pooling="mean", **BASE
)
_variant(
    "cspan-bilstm-selfatt",
    "CSPAN ablation (Table 3): semantic self-attention -> Bi-LSTM, mean pooling",
    encoder="attention-bilstm",
    pooling="mean",
    **BASE,
)
_variant(
    "cspan-bilstm-selfatt-residual",
    "CSPAN ablation (Table 3): + positional self-attention and residual F = S + P, mean pooling",
    encoder="cascade",
    pooling="mean",
    **BASE,
)
# Table 5: ways of fusing semantics and word order, all with multi-query attention
_variant("cspan-fusion-a", "CSPAN fusion (a): self-attention over embeddings only", encoder="attention", **BASE)
_variant(
    "cspan-fusion-b",
    "CSPAN fusion (b): embeddings + sinusoidal position, self-attention",
    encoder="attention",
    position="sinusoidal",
    **BASE,
)
_variant(
    "cspan-fusion-c",
    "CSPAN fusion (c): self-attention with relative positions (Shaw et al.)",
    encoder="attention",
    position="relative",
    **BASE,
)
# Table 5's (d) is "Embedding + Bi-LSTM": "Bi-LSTM directly on the input word vectors, i.e., a parallel
# combination". Read as (e) with the Bi-LSTM moved beside the first self-attention, it keeps the second
# one over H; Figure 2, whose six "Self Attention" boxes are one each for (a)-(d) and two for (e), draws
# no second one. Both readings are here; cspan-fusion-d keeps the first, which every recorded result used.
_variant(
    "cspan-fusion-d",
    "CSPAN fusion (d): self-attention and Bi-LSTM in parallel over embeddings, F = S + SelfAtt(H)",
    encoder="parallel",
    **BASE,
)
_variant(
    "cspan-fusion-d-sum",
    "CSPAN fusion (d) as Figure 2 draws it: F = SelfAtt(D) + BiLSTM(D), one self-attention",
    encoder="parallel-sum",
    **BASE,
)
_variant("cspan-fusion-e", "CSPAN fusion (e): cascade, the same network as cspan", **BASE)
