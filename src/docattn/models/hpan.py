"""HPAN and HSAN: HAN with pruned or sparsemax attention (Ribeiro et al.).

The backbone is HAN (``docattn.models.han``); only the attention normaliser changes:
HPAN zeroes softmax weights under alpha_min and renormalises, HSAN uses sparsemax.
"""

from __future__ import annotations

from docattn.models import PACKAGED_BESIDE, SMALL_WITHOUT_TABLE, register_model
from docattn.models.contract import HIERARCHICAL
from docattn.models.han import HAN

PAPER = "Ribeiro et al., Hierarchical Pruned / Sparsemax Attention Networks"
TRAINING = {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "max_epochs": 3}


@register_model(
    "hpan",
    description="HAN with pruned attention (weights < alpha_min zeroed, renormalised)",
    paper=PAPER,
    layout=HIERARCHICAL,
    training=TRAINING,
    small=SMALL_WITHOUT_TABLE,
    few_tokens=PACKAGED_BESIDE,
    normalizer="pruned",
    alpha_min=0.05,
    dropout=0.1,
)
def hpan(vocab_size: int, num_classes: int, **hparams) -> HAN:
    return HAN(vocab_size, num_classes, **hparams)


@register_model(
    "hsan",
    description="HAN with sparsemax attention at both levels",
    paper=PAPER,
    layout=HIERARCHICAL,
    training=TRAINING,
    small=SMALL_WITHOUT_TABLE,
    few_tokens=PACKAGED_BESIDE,
    normalizer="sparsemax",
    dropout=0.1,
)
def hsan(vocab_size: int, num_classes: int, **hparams) -> HAN:
    return HAN(vocab_size, num_classes, **hparams)


@register_model(
    "hsan-entmax15",
    description="HSAN with 1.5-entmax instead of sparsemax (less sparse)",
    paper=PAPER,
    layout=HIERARCHICAL,
    training=TRAINING,
    small=SMALL_WITHOUT_TABLE,
    few_tokens=PACKAGED_BESIDE,
    normalizer="entmax15",
    dropout=0.1,
)
def hsan_entmax15(vocab_size: int, num_classes: int, **hparams) -> HAN:
    return HAN(vocab_size, num_classes, **hparams)
