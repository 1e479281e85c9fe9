"""fastText (Joulin et al. 2017): the average of word and hashed word-bigram embeddings, then a linear classifier.

word ids -> embeddings of words + embeddings of bigram buckets -> mean over the document
         -> linear -> softmax

Bigrams are hashed as in fastText's ``addWordNgrams`` (h = h * 116049371 + id), computed on
the token id tensor, reduced modulo the bucket count after each step so int64 never overflows.
The paper's SANet and CSPAN cite it as a baseline; it has no attention.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from docattn.data.batching import FlatBatch
from docattn.models import register_model
from docattn.models.contract import FLAT, AttentionKind
from docattn.models.output import ModelOutput

PAPER = "Joulin et al. 2017, Bag of Tricks for Efficient Text Classification (fastText)"
# fastText: SGD with a linearly decaying rate from scratch; Adam at 1e-2 with random
# initialisation gets there in a few epochs (IMDB: best validation after 2)
TRAINING = {"optimizer": "adam", "lr": 1e-2, "batch_size": 64, "max_epochs": 5, "embeddings": "random"}
HASH_MULTIPLIER = 116049371  # fastText's n-gram hash constant


@dataclass
class FastTextConfig:
    embedding_dim: int = 20  # fastText's -dim (paper: 10; CLI default: 100)
    word_ngrams: int = 2  # 1: words only; 2: + bigrams (paper's "bigram" rows)
    # hashed n-gram rows (fastText: 2M). Adam updates every row each step, so the table sets the
    # step time: a smaller table reached the same IMDB accuracy several times faster
    buckets: int = 400_000

    def __post_init__(self):
        if self.word_ngrams < 1 or self.buckets < 1 or self.buckets >= 2**31:
            raise ValueError("word_ngrams must be >= 1 and buckets in 1 .. 2**31 - 1")


def hash_ngrams(tokens: torch.Tensor, n: int, buckets: int) -> torch.Tensor:
    """Bucket of every n-gram of ``tokens`` (B, T): (B, T - n + 1) int64, deterministic.

    Depends on the n ids only (not on position, batch or device).
    """
    m = tokens.shape[1] - n + 1
    h = tokens[:, :m].long() % buckets  # (B, m)
    for j in range(1, n):  # positions within an n-gram, not tokens
        h = (h * HASH_MULTIPLIER + tokens[:, j : j + m].long()) % buckets  # < 2**31 * 2**27: no overflow
    return h


class FastText(nn.Module):
    layout = FLAT

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__()
        self.config = cfg = FastTextConfig(**hparams)
        self.num_classes = num_classes
        d = cfg.embedding_dim
        self.embedding = nn.Embedding(vocab_size, d, padding_idx=0)  # words (word2vec can fill it)
        self.ngram_embedding = nn.Embedding(cfg.buckets, d) if cfg.word_ngrams > 1 else None
        self.classifier = nn.Linear(d, num_classes)
        # fastText's initialisation: input rows uniform(-1/d, 1/d), output zero
        with torch.no_grad():
            for emb in (self.embedding, self.ngram_embedding):
                if emb is not None:
                    emb.weight.uniform_(-1.0 / d, 1.0 / d)
            self.embedding.weight[0].zero_()
            self.classifier.weight.zero_()
            self.classifier.bias.zero_()

    def hparams(self) -> dict:
        return asdict(self.config)

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return ()  # a plain average: nothing to weigh

    def forward(self, batch: FlatBatch, return_attention: bool = False) -> ModelOutput:
        tokens, mask = batch.tokens, batch.mask  # (B, T)
        dtype = self.embedding.weight.dtype
        total = (self.embedding(tokens) * mask.unsqueeze(-1).to(dtype)).sum(1)  # (B, D)
        count = mask.sum(1)  # (B,)
        for n in range(2, self.config.word_ngrams + 1):
            if tokens.shape[1] < n:
                break
            real = mask[:, n - 1 :]  # (B, T-n+1): right padding, so the n-gram's last word decides
            ids = hash_ngrams(tokens, n, self.config.buckets)  # (B, T-n+1)
            total = total + (self.ngram_embedding(ids) * real.unsqueeze(-1).to(dtype)).sum(1)
            count = count + real.sum(1)
        doc = total / count.clamp_min(1).unsqueeze(-1).to(dtype)  # (B, D): padding excluded from the mean
        out = ModelOutput(logits=self.classifier(doc))  # (B, C)
        if return_attention:
            out.attentions = {}  # no attention: a plain average
        return out


@register_model(
    "fasttext",
    description="fastText: mean of word and hashed bigram embeddings, linear classifier",
    paper=PAPER,
    layout=FLAT,
    training=TRAINING,
)
def fasttext(vocab_size: int, num_classes: int, **hparams) -> FastText:
    return FastText(vocab_size, num_classes, **hparams)
