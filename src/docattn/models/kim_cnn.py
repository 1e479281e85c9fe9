"""Word CNN (Kim 2014), HCAN's Table 2 "Word CNN" baseline: the whole document as one sequence.

word embeddings (300-d) -> Conv1D windows 3, 4, 5 x 100 feature maps -> ReLU
                        -> max over the document's windows -> dropout 0.5 -> softmax

Every document is right-padded with zeros before the convolutions (embeddings are zeroed
past its end), and only windows that start inside it take part in the max: a document shorter
than a window gets the single window at its start, which sees its words then zeros, exactly
as when it is alone. So a document's logits never depend on the rest of its batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from docattn.data.batching import FlatBatch
from docattn.models import register_model
from docattn.models.contract import FLAT, AttentionKind
from docattn.models.output import ModelOutput

PAPER = "Kim 2014, Convolutional Neural Networks for Sentence Classification (HCAN Table 2 baseline)"
# Kim trains with Adadelta, batch 50; Adam at 1e-3 converges without tuning
TRAINING = {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "max_tokens": 1000}


@dataclass
class KimCNNConfig:
    embedding_dim: int = 300  # Kim: 300-d word2vec (HCAN's baselines used 512-d: embedding_dim=512)
    windows: tuple[int, ...] = (3, 4, 5)  # filter widths (Kim: 3, 4, 5)
    feature_maps: int = 100  # filters per width (Kim: 100)
    dropout: float = 0.5  # on the pooled features (Kim: 0.5)

    def __post_init__(self):
        self.windows = tuple(int(w) for w in self.windows)
        if not self.windows or min(self.windows) < 1 or self.feature_maps < 1:
            raise ValueError("windows must be positive widths and feature_maps >= 1")


class KimCNN(nn.Module):
    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = KimCNNConfig(**hparams)
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(cfg.embedding_dim, cfg.feature_maps, w) for w in cfg.windows)
        self.dropout = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(cfg.feature_maps * len(cfg.windows), num_classes)

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        meaning = "the share of the pooled feature maps whose winning window covers each word"
        return (AttentionKind("token", "token", "pooling", "(B, T)", meaning, computed=False),)

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        mask = batch.mask  # (B, T)
        B, T = mask.shape
        lengths = mask.sum(1, keepdim=True)  # (B, 1)
        x = self.embedding(batch.tokens) * mask.unsqueeze(-1).to(self.embedding.weight.dtype)  # (B, T, E)
        x = x.transpose(1, 2)  # (B, E, T)
        steps = torch.arange(T, device=mask.device).unsqueeze(0)  # (1, T)
        pooled, argmax = [], []
        for conv, width in zip(self.convs, self.config.windows):
            c = conv(F.pad(x, (0, width - 1)))  # (B, F, T): output t is the window over t .. t+width-1
            starts = steps < (lengths - width + 1).clamp_min(1)  # (B, T): windows starting in the document
            c = c.masked_fill(~starts.unsqueeze(1), float("-inf"))
            # max then ReLU = ReLU then max (ReLU is monotone); the argmax stays informative for
            # maps whose every window is negative
            m, idx = c.max(dim=-1)  # (B, F), (B, F)
            pooled.append(F.relu(m))
            argmax.append(idx)
        h = torch.cat(pooled, dim=-1)  # (B, F * n_windows)
        logits = self.classifier(self.dropout(h))  # (B, C)
        out = ModelOutput(logits=logits)
        if return_attention:
            out.attentions = {"token": self.window_attribution(argmax, lengths.squeeze(1), T)}
        return out

    def window_attribution(self, argmax: list[torch.Tensor], lengths: torch.Tensor, T: int) -> torch.Tensor:
        """(B, T) share of the pooled feature maps whose winning window covers each word.

        Each feature map's max comes from one window; that map gives 1 / (real words the window
        covers) to each real word it covers, and the weights are averaged over all maps. So a
        word's weight is the share of the document vector it took part in: it sums to 1 over the
        document's words and is exactly 0 on padding. (Not an attention the model computes:
        Kim's CNN has none; this is the standard max-pooling attribution.)
        """
        B = lengths.shape[0]
        weights = torch.zeros(B, T, device=lengths.device)
        n_maps = 0
        for idx, width in zip(argmax, self.config.windows):
            covered = (lengths.unsqueeze(1) - idx).clamp(max=width).to(weights.dtype)  # (B, F), >= 1
            share = 1.0 / covered
            for k in range(width):  # offsets within a window, not tokens
                pos = idx + k  # (B, F)
                inside = pos < lengths.unsqueeze(1)
                weights.scatter_add_(1, pos.clamp(max=T - 1), share * inside)
            n_maps += idx.shape[1]
        return weights / n_maps


@register_model(
    "kim-cnn",
    description="Word CNN (Kim 2014): windows 3/4/5 x 100 maps, max-pool, dropout 0.5",
    paper=PAPER,
    layout=FLAT,
    training=TRAINING,
)
def kim_cnn(vocab_size: int, num_classes: int, **hparams) -> KimCNN:
    return KimCNN(vocab_size, num_classes, **hparams)
