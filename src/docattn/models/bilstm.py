"""Flat Bi-LSTM baselines at CSPAN's sizes, with mean, max or attention pooling.

These are general-purpose baselines: dropout, 10 epochs and no step schedule. CSPAN's own "Bi-LSTM
alone" ablation, with its paper's training set-up, is ``cspan-bilstm`` (models/cspan.py).

word embeddings (300-d) -> Bi-LSTM (d/2 = 150 per direction) over the whole document
                        -> mean / max / additive attention over positions -> softmax

The backward LSTM reads each document reversed within its own length (as ``PaddedBiGRU``),
so padding never enters a real position's state and outputs match packed sequences exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch.nn as nn

from docattn.data.batching import FlatBatch
from docattn.models import register_model
from docattn.models.contract import FLAT, AttentionKind, pooling_kinds
from docattn.models.gru import PaddedBiLSTM
from docattn.models.layers import AttentionPooling, masked_max, masked_mean, max_pool_shares, mean_pool_shares
from docattn.models.output import ModelOutput

PAPER = "Jiang et al., CSPAN (ablation: Bi-LSTM alone); pooling variants as HAN's HN-AVE / HN-MAX / HN-ATT"
TRAINING = {"optimizer": "adam", "lr": 1e-3, "weight_decay": 1e-4, "batch_size": 64, "max_tokens": 1000}  # CSPAN's Adam


@dataclass
class BiLSTMConfig:
    embedding_dim: int = 300  # CSPAN: GloVe 300-d
    hidden_size: int = 150  # units per direction: d/2 (CSPAN)
    pooling: str = "mean"  # "mean", "max" or "attention"
    context_dim: int = 100  # attention: size of u_t and the context vector (HAN: 100)
    dropout: float = 0.1  # on embeddings and on the document vector

    def __post_init__(self):
        if self.pooling not in ("mean", "max", "attention"):
            raise ValueError(f"pooling must be mean, max or attention, got {self.pooling!r}")


class BiLSTMClassifier(nn.Module):
    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = BiLSTMConfig(**hparams)
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.encoder = PaddedBiLSTM(cfg.embedding_dim, cfg.hidden_size)
        if cfg.pooling == "attention":
            self.attention = AttentionPooling(2 * cfg.hidden_size, cfg.context_dim)
        self.dropout = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(2 * cfg.hidden_size, num_classes)

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return pooling_kinds(("token",), self.config.pooling)

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        mask = batch.mask  # (B, T)
        x = self.dropout(self.embedding(batch.tokens))  # (B, T, E)
        h = self.encoder(x, mask)  # (B, T, 2H)
        weights = None
        if self.config.pooling == "attention":
            v, weights, _ = self.attention(h, mask)  # (B, 2H), (B, T)
        elif self.config.pooling == "max":
            v = masked_max(h, mask)  # (B, 2H)
        else:
            v = masked_mean(h, mask)  # (B, 2H)
        out = ModelOutput(logits=self.classifier(self.dropout(v)))  # (B, C)
        if return_attention:
            if self.config.pooling == "max":
                weights = max_pool_shares(h, mask)
            elif self.config.pooling == "mean":
                weights = mean_pool_shares(mask)
            out.attentions = {"token": weights} if weights is not None else {}
        return out


def _variant(name: str, description: str, **defaults):
    @register_model(name, description=description, paper=PAPER, layout=FLAT, training=TRAINING, **defaults)
    def build(vocab_size: int, num_classes: int, **hparams) -> BiLSTMClassifier:
        return BiLSTMClassifier(vocab_size, num_classes, **hparams)

    return build


_variant(
    "bilstm",
    "Bi-LSTM over the whole document, mean pooling (CSPAN's sizes; its ablation is cspan-bilstm)",
    pooling="mean",
)
_variant("bilstm-max", "Bi-LSTM over the whole document, max pooling", pooling="max")
_variant("bilstm-attention", "Bi-LSTM over the whole document, additive attention pooling", pooling="attention")
