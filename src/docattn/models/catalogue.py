"""Every registered model at a glance, without importing torch: name, layout, paper, description.

The registry (``docattn.models``) fills itself by importing every model module, and so torch; listing
the models (``docattn models``) or suggesting a name for a typo needs none of that. This table says the
same as the registry, which ``tests/test_catalogue.py`` checks entry by entry, so it cannot go stale:
a new variant is registered in its model file and added here.

    CATALOGUE["han"].layout                      # "hierarchical"
    list_catalogue("hcan*")                      # [ModelEntry(...), ...], sorted by name
    closest_model("HAN-Max"), closest_model("hann")   # "han-max", "han"
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import get_close_matches

from docattn.models import PACKAGED_BESIDE, SANET_SMALL, SMALL_WITH_TABLE, SMALL_WITHOUT_TABLE, SMALL_WORD_DROPOUT
from docattn.models.contract import BAG, FLAT, HIERARCHICAL, Layout

# the hyper-parameters a CPU run (recipe "auto") shrinks, as ModelSpec.cpu gives them
CPU_SIZES = ("d_model", "heads", "embedding_dim", "dropout", "embedding_dropout")
# the registered training settings that cut documents short, as ModelSpec.training gives them
TRUNCATIONS = ("max_sentences", "max_words", "max_tokens")


@dataclass(frozen=True)
class ModelEntry:
    name: str
    layout: Layout
    paper: str
    description: str
    truncation: dict = field(default_factory=dict)  # what it reads unless told otherwise, e.g. {"max_tokens": 1000}
    cpu_sizes: dict = field(default_factory=dict)  # the sizes it trains at on a CPU under recipe "auto"
    large_sizes: dict = field(default_factory=dict)  # under recipe "auto", from models.LARGE_DATA training documents
    small_sizes: dict = field(default_factory=dict)  # under recipe "auto", under models.SMALL_DATA training documents
    beyond_small_sizes: dict = field(default_factory=dict)  # under recipe "auto", from models.SMALL_DATA on
    few_tokens_sizes: dict = field(default_factory=dict)  # under recipe "auto", under models.FEW_TOKENS tokens


HAN = "Yang et al. 2016, Hierarchical Attention Networks for Document Classification"
HPAN = "Ribeiro et al., Hierarchical Pruned / Sparsemax Attention Networks"
HCAN = "Gao et al. 2018, Hierarchical Convolutional Attention Networks for Text Classification"
HCAN_BASELINES = "Gao et al. 2018, Hierarchical Convolutional Attention Networks (Table 2 baselines)"
SANET = "Letarte et al. 2018, Self-Attention Network (SANet)"
CSPAN = "Jiang et al., Cascaded Semantic and Positional Self-Attention Network for Document Classification"
BILSTM = "Jiang et al., CSPAN (ablation: Bi-LSTM alone); pooling variants as HAN's HN-AVE / HN-MAX / HN-ATT"
KIM = "Kim 2014, Convolutional Neural Networks for Sentence Classification (HCAN Table 2 baseline)"
FASTTEXT = "Joulin et al. 2017, Bag of Tricks for Efficient Text Classification (fastText)"
FASTTEXT_LIB = "Joulin et al. 2017, Bag of Tricks for Efficient Text Classification (the fastText library)"

TOKENS_1000 = {"max_tokens": 1000}
WORDS_1000 = {"max_words": 1000}
HCAN_CPU = {"d_model": 64, "heads": 4, "embedding_dim": 64}
SANET_CPU = {"d_model": 128, "embedding_dim": 200}
HAN_LARGE = {"hidden_size": 100}
CSPAN_CPU = {"embedding_dim": 64, "dropout": 0.5, "embedding_dropout": 0.3}
CSPAN_LARGE = {"embedding_dim": 128}  # on a CPU only: it widens CSPAN_CPU (models.ModelSpec.large)
H, F = HIERARCHICAL, FLAT

# name, layout, paper, description[, truncation, cpu sizes]
_TABLE = [
    ("han", H, HAN, "HN-ATT: word and sentence BiGRU with additive attention at both levels"),
    ("han-ave", H, HAN, "HN-AVE: HAN with mean pooling instead of attention"),
    ("han-max", H, HAN, "HN-MAX: HAN with max pooling instead of attention"),
    ("hpan", H, HPAN, "HAN with pruned attention (weights < alpha_min zeroed, renormalised)"),
    ("hsan", H, HPAN, "HAN with sparsemax attention at both levels"),
    ("hsan-entmax15", H, HPAN, "HSAN with 1.5-entmax instead of sparsemax (less sparse)"),
    ("hcan", H, HCAN, "HCAN as in the paper (= hcan-two-target): words -> sentences -> document", WORDS_1000, HCAN_CPU),
    ("hcan-one-max", H, HCAN, "HCAN: one conv self-attention, max-pool, at both levels", WORDS_1000, HCAN_CPU),
    (
        "hcan-one-target",
        H,
        HCAN,
        "HCAN: one conv self-attention, target attention, at both levels",
        WORDS_1000,
        HCAN_CPU,
    ),
    ("hcan-two-max", H, HCAN, "HCAN: two conv self-attentions (A*B), max-pool, at both levels", WORDS_1000, HCAN_CPU),
    (
        "hcan-two-target",
        H,
        HCAN,
        "HCAN: two conv self-attentions (A*B), target attention, at both levels",
        WORDS_1000,
        HCAN_CPU,
    ),
    ("can-one-max", F, HCAN, "Conv Attention Network (flat): one conv self-attention, max-pool", TOKENS_1000, HCAN_CPU),
    (
        "can-one-target",
        F,
        HCAN,
        "Conv Attention Network (flat): one conv self-attention, target attention",
        TOKENS_1000,
        HCAN_CPU,
    ),
    (
        "can-two-max",
        F,
        HCAN,
        "Conv Attention Network (flat): two conv self-attentions (A*B), max-pool",
        TOKENS_1000,
        HCAN_CPU,
    ),
    (
        "can-two-target",
        F,
        HCAN,
        "Conv Attention Network (flat): two conv self-attentions (A*B), target attention",
        TOKENS_1000,
        HCAN_CPU,
    ),
    ("sanet", F, SANET, "SANet base: 1 self-attention block, d 128, global max pooling", TOKENS_1000, SANET_CPU),
    ("sanet-big", F, SANET, "SANet big: 2 self-attention blocks, d 256, global max pooling", TOKENS_1000),
    (
        "sanet-noatt",
        F,
        SANET,
        "SANet base baseline: self-attention replaced by a feed-forward layer",
        TOKENS_1000,
        SANET_CPU,
    ),
    ("sanet-big-noatt", F, SANET, "SANet big baseline: self-attention replaced by a feed-forward layer", TOKENS_1000),
    (
        "cspan",
        F,
        CSPAN,
        "CSPAN base: semantic self-attention -> Bi-LSTM -> positional self-attention, residual, 16-query attention",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    ("cspan-big", F, CSPAN, "CSPAN big: 3-layer Bi-LSTM, 128 queries", TOKENS_1000, CSPAN_CPU),
    ("cspan-bilstm", F, CSPAN, "CSPAN ablation (Table 3): Bi-LSTM alone, mean pooling", TOKENS_1000, CSPAN_CPU),
    (
        "cspan-bilstm-selfatt",
        F,
        CSPAN,
        "CSPAN ablation (Table 3): semantic self-attention -> Bi-LSTM, mean pooling",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    (
        "cspan-bilstm-selfatt-residual",
        F,
        CSPAN,
        "CSPAN ablation (Table 3): + positional self-attention and residual F = S + P, mean pooling",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    ("cspan-fusion-a", F, CSPAN, "CSPAN fusion (a): self-attention over embeddings only", TOKENS_1000, CSPAN_CPU),
    (
        "cspan-fusion-b",
        F,
        CSPAN,
        "CSPAN fusion (b): embeddings + sinusoidal position, self-attention",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    (
        "cspan-fusion-c",
        F,
        CSPAN,
        "CSPAN fusion (c): self-attention with relative positions (Shaw et al.)",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    (
        "cspan-fusion-d",
        F,
        CSPAN,
        "CSPAN fusion (d): self-attention and Bi-LSTM in parallel over embeddings, F = S + SelfAtt(H)",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    (
        "cspan-fusion-d-sum",
        F,
        CSPAN,
        "CSPAN fusion (d) as Figure 2 draws it: F = SelfAtt(D) + BiLSTM(D), one self-attention",
        TOKENS_1000,
        CSPAN_CPU,
    ),
    ("cspan-fusion-e", F, CSPAN, "CSPAN fusion (e): cascade, the same network as cspan", TOKENS_1000, CSPAN_CPU),
    (
        "bilstm",
        F,
        BILSTM,
        "Bi-LSTM over the whole document, mean pooling (CSPAN's sizes; its ablation is cspan-bilstm)",
        TOKENS_1000,
    ),
    ("bilstm-max", F, BILSTM, "Bi-LSTM over the whole document, max pooling", TOKENS_1000),
    ("bilstm-attention", F, BILSTM, "Bi-LSTM over the whole document, additive attention pooling", TOKENS_1000),
    ("kim-cnn", F, KIM, "Word CNN (Kim 2014): windows 3/4/5 x 100 maps, max-pool, dropout 0.5", TOKENS_1000),
    ("fasttext", F, FASTTEXT, "fastText: mean of word and hashed bigram embeddings, linear classifier"),
    (
        "fasttext-lib",
        BAG,
        FASTTEXT_LIB,
        "the original fastText library (optional extra): bag of words + bigrams, 10 hidden units",
    ),
    ("nb", BAG, HCAN_BASELINES, "tf-idf (uni+bigrams, min_df 5) + multinomial naive Bayes, alpha 0.1"),
    ("logreg", BAG, HCAN_BASELINES, "tf-idf (uni+bigrams, min_df 5, sublinear tf) + L2 logistic regression, C=10"),
    ("logreg-l1", BAG, HCAN_BASELINES, "HCAN's baseline: tf-idf (uni+bigrams, min_df 5) + L1 logistic regression, C=1"),
]
# HAN's GRU widens from models.LARGE_DATA training documents, and CSPAN's CPU word vectors
LARGE_SIZES = {HAN: HAN_LARGE, CSPAN: CSPAN_LARGE}
# every attention family hides words under models.SMALL_DATA training documents (models.SMALL_WORD_DROPOUT)
ATTENTION_FAMILIES = (HAN, HPAN, HCAN, SANET, CSPAN)
# and HCAN's words start from word2vec beside the packaged table there too (models.SMALL_WITH_TABLE), while
# HPAN's, HSAN's and SANet's read word2vec alone there, however few the tokens (models.SMALL_WITHOUT_TABLE), and
# SANet's rate warms up over the first tenth of its steps and its weights decay under Adam (models.SANET_SMALL)
SMALL_SIZES = {
    **{paper: SMALL_WORD_DROPOUT for paper in ATTENTION_FAMILIES},
    HCAN: SMALL_WITH_TABLE,
    HPAN: SMALL_WITHOUT_TABLE,
    SANET: SANET_SMALL,
}
# HCAN keeps the table from models.SMALL_DATA on, at every size
BEYOND_SMALL_SIZES = {HCAN: PACKAGED_BESIDE}
# HAN's and CSPAN's words start beside the table under models.FEW_TOKENS training tokens, however many documents,
# and HPAN's, HSAN's and SANet's there from models.SMALL_DATA documents on
FEW_TOKENS_SIZES = {HAN: PACKAGED_BESIDE, CSPAN: PACKAGED_BESIDE, HPAN: PACKAGED_BESIDE, SANET: PACKAGED_BESIDE}

CATALOGUE: dict[str, ModelEntry] = {
    row[0]: ModelEntry(
        *row,
        large_sizes=dict(LARGE_SIZES.get(row[2], {})),
        small_sizes=dict(SMALL_SIZES.get(row[2], {})),
        beyond_small_sizes=dict(BEYOND_SMALL_SIZES.get(row[2], {})),
        few_tokens_sizes=dict(FEW_TOKENS_SIZES.get(row[2], {})),
    )
    for row in _TABLE
}


def list_catalogue(pattern: str = "*") -> list[ModelEntry]:
    """The entries whose name matches the glob ``pattern`` (any case), sorted by name."""
    return [CATALOGUE[n] for n in sorted(CATALOGUE) if fnmatch.fnmatch(n, pattern.lower())]


def closest_models(name: str, n: int = 3, names: Iterable[str] = CATALOGUE) -> list[str]:
    """Up to ``n`` of ``names`` closest to ``name``: its exact match in any case alone, else difflib's picks."""
    names = list(names)
    exact = [known for known in names if known.lower() == name.strip().lower()]
    return exact or get_close_matches(name.strip().lower(), names, n=n, cutoff=0.6)


def closest_model(name: str) -> str | None:
    """The registered name ``name`` most likely means ("HAN" -> "han", "hann" -> "han"), or None."""
    close = closest_models(name, n=1)
    return close[0] if close else None
