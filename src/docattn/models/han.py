"""HAN: Hierarchical Attention Networks (Yang et al., 2016), with HN-AVE and HN-MAX.

word embeddings -> word BiGRU (eq. 1-4) -> word attention (eq. 5-7) -> sentence vectors s_i
               -> sentence BiGRU -> sentence attention (eq. 8-10) -> document vector v -> softmax (eq. 11)

The word level reads as the paper in ``HAN.encode_words``, the reference path; on a CPU the same
numbers come from length-sorted groups of sentences (``grouping.LengthGroups``, shared with HCAN)
whose input gates are read from a table of the batch's distinct words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn as nn

from docattn.data.batching import HierarchicalBatch
from docattn.models import PACKAGED_BESIDE, SMALL_WORD_DROPOUT, register_model
from docattn.models.contract import HIERARCHICAL, AttentionKind, pooling_kinds
from docattn.models.grouping import LengthGroups
from docattn.models.gru import PaddedBiGRU
from docattn.models.layers import (
    AttentionPooling,
    hide_words,
    masked_max,
    masked_mean,
    max_pool_shares,
    mean_pool_shares,
)
from docattn.models.output import ModelOutput

HAN_PAPER = "Yang et al. 2016, Hierarchical Attention Networks for Document Classification"
# Adam converges without the paper's grid search over SGD rates (`docattn tune` restores it). HAN
# overfits early, so the word vectors learn 4x slower and the best of 3 validations per epoch is kept
# (the measurements: benchmarks/README.md, IMDB).
HAN_TRAINING = {
    "optimizer": "adam",
    "lr": 2e-3,
    "batch_size": 64,
    "max_epochs": 3,
    "schedule": "cosine",
    "embedding_lr": 5e-4,
    "val_per_epoch": 3,
}
# the auto recipe's HAN: dropout 0.2 on the word vectors and the document vector instead of the slow
# embeddings above, which curbed overfitting on IMDB but left the vectors of a topic corpus's rarer words
# where word2vec put them (benchmarks/README.md, "Current defaults")
HAN_AUTO = {"dropout": 0.2, "embedding_lr": None}
# and from 10,000 training documents (models.LARGE_DATA) a GRU twice the paper's width: more documents fill
# it, where a few thousand overfit it (benchmarks/README.md, "Current defaults")
HAN_LARGE = {"hidden_size": 100}


def _read_gate_table(rnn: PaddedBiGRU, table: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The BiGRU over a group whose position (n, t) reads its input gates from ``table[rows[n, t]]``."""
    return rnn.forward_gates(table, mask, rows=rows)  # (n, w, 2H)


def _one_group_fits(positions: int, device: torch.device) -> bool:
    """Whether a GPU batch's sentences, all padded to the longest, fit comfortably in memory.

    Most 64-document IMDB training batches hold under 0.25M word positions; inference batches of
    1,024 documents can hold 10M+, and 1M positions take ~4 GB in the recurrence (HAN's sizes).
    Between 0.25M and 1M it asks the device: one group only with 16 KB free per position, so jobs
    sharing a GPU fall back to length groups instead of running out of memory.
    """
    if positions <= 1 << 18:
        return True
    if positions > 1 << 20 or device.type != "cuda":
        return False
    free, _ = torch.cuda.mem_get_info(device)
    return positions * (16 << 10) <= free


@dataclass
class HANConfig:
    embedding_dim: int = 200  # paper: 200-d word2vec
    hidden_size: int = 50  # GRU units per direction (paper: 50)
    context_dim: int = 100  # size of u_it and of the context vectors u_w, u_s (paper: 100)
    pooling: str = "attention"  # HN-ATT "attention", HN-AVE "mean", HN-MAX "max"
    normalizer: str = "softmax"  # "pruned" (HPAN), "sparsemax" / "entmax15" (HSAN)
    alpha_min: float = 0.05  # HPAN threshold at the word level
    alpha_min_sentence: float | None = None  # HPAN threshold at the sentence level (None: same)
    dropout: float = 0.0  # on embeddings and on the document vector (HPAN/HSAN: 0.1)
    word_dropout: float = 0.0  # in training, the share of words shown as UNK (the paper: none)
    # word encoder's length-sorted groups: 0 picks them per batch (CPU: least padding + steps; GPU: one), n: n equal
    length_groups: int = 0
    group_step_cost: float = 1024.0  # with length_groups=0: padded positions one more recurrence step is worth (CPU)
    # both BiGRUs as one packed-sequence call each, no length groups (on a GPU slower than one padded group)
    packed_rnn: bool = False


class Pooling(nn.Module):
    """One HAN level's pooling: attention (any normaliser), mean or max over real positions."""

    def __init__(self, dim: int, cfg: HANConfig, alpha_min: float):
        super().__init__()
        self.kind = cfg.pooling
        if self.kind == "attention":
            self.attention = AttentionPooling(dim, cfg.context_dim, cfg.normalizer, alpha_min)
        elif self.kind not in ("mean", "max"):
            raise ValueError(f"pooling must be attention, mean or max, got {self.kind!r}")

    def forward(self, h, mask, need_weights: bool = False):
        """h (N, T, D), mask (N, T) -> pooled (N, D), weights (N, T) or None, pruned mask or None.

        Attention returns its weights always; with ``need_weights`` mean pooling returns what each
        real position contributes (1/n: HN-AVE's "attention" is uniform) and max pooling the share of
        the D features each position wins (``max_pool_shares``), so every variant can be explained.
        """
        if self.kind == "attention":
            return self.attention(h, mask)
        if self.kind == "mean":
            weights = mean_pool_shares(mask) if need_weights else None
            return masked_mean(h, mask), weights, None
        return masked_max(h, mask), (max_pool_shares(h.detach(), mask) if need_weights else None), None


class HAN(nn.Module):
    layout = HIERARCHICAL

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = HANConfig(**hparams)
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.word_encoder = PaddedBiGRU(cfg.embedding_dim, cfg.hidden_size, packed=cfg.packed_rnn)
        self.word_pool = Pooling(2 * cfg.hidden_size, cfg, cfg.alpha_min)
        self.sentence_encoder = PaddedBiGRU(2 * cfg.hidden_size, cfg.hidden_size, packed=cfg.packed_rnn)
        sentence_alpha = cfg.alpha_min if cfg.alpha_min_sentence is None else cfg.alpha_min_sentence
        self.sentence_pool = Pooling(2 * cfg.hidden_size, cfg, sentence_alpha)
        self.dropout = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(2 * cfg.hidden_size, num_classes)

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return pooling_kinds(("word", "sentence"), self.config.pooling)

    def encode_sentences(self, words: torch.Tensor, word_mask: torch.Tensor, need_weights: bool = False):
        """Sentence vectors s_i (S, 2H) from word ids (S, W), with word weights (S, W) and pruned mask.

        The execution strategy is chosen here; all give the reference path's numbers. ``packed_rnn``, or
        a GPU where one padded group fits (a recurrence step costs about the same for 10 rows or
        10,000), runs the reference; otherwise length-sorted groups (``encode_in_groups``).
        """
        if self.word_encoder.packed or self._one_group(words):
            return self.encode_words(words, word_mask, need_weights)
        return self.encode_in_groups(words, word_mask, need_weights)

    def encode_words(self, words: torch.Tensor, word_mask: torch.Tensor, need_weights: bool = False):
        """The reference path, the paper's word level on sentences all padded to one width."""
        x = self.dropout(self.embedding(words))  # (S, W, E)   x_it = W_e w_it
        h = self.word_encoder(x, word_mask)  # (S, W, 2H)   eq. 1-4: h_it = [GRU->(x_it), GRU<-(x_it)]
        return self.word_pool(h, word_mask, need_weights)  # (S, 2H)   eq. 5-7: u_it, a_it, s_i = sum_t a_it h_it

    def _one_group(self, words: torch.Tensor) -> bool:
        """Whether every sentence goes in one padded group: on a GPU (fewest steps, no host sync) where it fits."""
        groups = self.config.length_groups
        on_gpu = words.device.type != "cpu"
        return on_gpu and (groups == 1 or (groups == 0 and _one_group_fits(words.numel(), words.device)))

    def encode_in_groups(self, words: torch.Tensor, word_mask: torch.Tensor, need_weights: bool = False):
        """``encode_words`` on length-sorted groups of sentences, each padded only to its own longest one.

        On the CPU kernel, without dropout, the input gates depend on the word alone (eq. 1-4 unchanged):
        each distinct word of the batch is projected once into a table the recurrence reads.
        """
        cfg, rnn = self.config, self.word_encoder
        groups = LengthGroups(word_mask, cfg.length_groups, cfg.group_step_cost)
        if rnn.fused_on(words.device) and not (self.training and cfg.dropout > 0):
            vocab, inputs = groups.distinct_words(words)  # [(n, w)]: rows of the table
            table = rnn.input_gates(self.embedding(vocab))  # (distinct words, 6H)
            encode = partial(_read_gate_table, rnn, table)
        else:
            inputs = groups.embed(lambda ids: self.dropout(self.embedding(ids)), words)  # [(n, w, E)]
            encode = rnn

        def encode_group(x, mask):
            s, a, pruned = self.word_pool(encode(x, mask), mask, need_weights)  # (n, 2H)   eq. 1-7
            return s, {name: w for name, w in (("word", a), ("pruned", pruned)) if w is not None}

        s, weights = groups.run(encode_group, inputs)  # (S, 2H), rows back in batch order
        return s, weights.get("word"), weights.get("pruned")

    def forward(self, batch: HierarchicalBatch, return_attention: bool = False) -> ModelOutput:
        words = hide_words(batch.words, batch.word_mask, self.config.word_dropout, self.training)
        s, word_w, word_pruned = self.encode_sentences(words, batch.word_mask, return_attention)  # (S, 2H)
        sent = s[batch.sentence_index]  # (B, L, 2H): sentences back in document order
        mask = batch.sentence_mask  # (B, L)
        h = self.sentence_encoder(sent, mask)  # (B, L, 2H)   eq. 1-4 over sentences: h_i = [GRU->(s_i), GRU<-(s_i)]
        v, sent_w, sent_pruned = self.sentence_pool(h, mask, return_attention)  # (B, 2H)   eq. 8-10
        logits = self.classifier(self.dropout(v))  # (B, C)   eq. 11
        out = ModelOutput(logits=logits)
        if word_pruned is not None:
            out.stats["pruned_words"] = word_pruned.sum() / batch.word_mask.sum()
            out.stats["pruned_sentences"] = sent_pruned.sum() / mask.sum()
        if return_attention:
            att = {}
            if word_w is not None:
                att["word"] = word_w[batch.sentence_index] * mask.unsqueeze(-1)  # (B, L, W)
                att["sentence"] = sent_w  # (B, L)
            out.attentions = att
        return out


def _variant(name: str, description: str, **defaults):
    @register_model(
        name,
        description=description,
        paper=HAN_PAPER,
        layout=HIERARCHICAL,
        training=HAN_TRAINING,
        auto=HAN_AUTO,
        large=HAN_LARGE,
        small=SMALL_WORD_DROPOUT,
        few_tokens=PACKAGED_BESIDE,
        **defaults,
    )
    def build(vocab_size: int, num_classes: int, **hparams) -> HAN:
        return HAN(vocab_size, num_classes, **hparams)

    return build


_variant("han", "HN-ATT: word and sentence BiGRU with additive attention at both levels", pooling="attention")
_variant("han-ave", "HN-AVE: HAN with mean pooling instead of attention", pooling="mean")
_variant("han-max", "HN-MAX: HAN with max pooling instead of attention", pooling="max")
