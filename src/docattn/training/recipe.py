"""The training recipe sized to the data: how long to train, when to stop, how long word2vec trains,
how classes are weighted, by which score the best weights are chosen, and how wide the model is.

``resolve`` turns the options a user left to the recipe (None, "auto") into numbers for one training
split, so a run's config.json records what it actually did and ``--resume`` repeats it. Each rule:

- epochs: enough for ``min_steps`` optimizer steps, at least the model's registered epochs, at most
  ``epoch_limit``: 2,000 documents at batch 64 make 32 steps an epoch, and 3 epochs left HAN untrained
  (CSPAN's CPU configuration, which drops half its features, and SANet's, whose word vectors learn at an
  eighth of the rate, ask for 2,000 steps: ``ModelSpec.cpu``);
- patience: once ``min_steps`` are done, stop after 3 epochs' worth of validations without improvement,
  keeping the best weights (only where the epochs were left to the recipe: ``max_epochs=N`` trains N
  epochs); a small validation set's score saturates early, and stopping before the minimum cut BBC's
  training at a third of its steps;
- word2vec passes: about ``word2vec_tokens`` (250M) tokens in all, 5 to 50 passes, since a small corpus
  gives word2vec too few updates in gensim's 5 passes, and a corpus of a few million tokens still gains
  up to 50;
- class weights: where the largest class has over 3x the documents of the smallest, the square root of
  inverse frequency for neural models and inverse frequency itself for the linear baselines, and then the
  best weights are the ones with the best macro-F1, not accuracy. A neural model trained for many epochs
  learns a rare class's few documents anyway, and full weights (a class 1,000x rarer weighing 1,000x more)
  made it trade many errors on the large classes for a few on the tiny ones; a penalised linear model's
  penalty shrinks a rare class's coefficients, which full weights offset. On multi-label data, each
  class's positives weighed by its negatives / positives for the logistic-regression baselines, whose
  penalty otherwise sets a rare class's coefficients to nothing;
- output layer refit on multi-label data (neural models): after training, each class's row of the output
  layer is refit on the model's own document vectors as the logistic-regression baseline fits its own
  (``training/refit.py``): the trained rows never ranked a class with a handful of training documents high;
- label smoothing 0.1 on single-label data: the training targets keep 10% of their probability spread
  over all classes, so a model stops pushing the training documents it already gets right (multi-label
  data keeps 0, since its per-class thresholds are tuned on the plain probabilities).
- averaged weights: the mean of the weights of the ``AVERAGE_BEST`` (5) best validations replaces the best
  weights where it validates no more than one standard error under them (``callbacks.BestWeights``,
  ``engine.averaging_tolerance``): the best single validation of a small validation set is partly luck,
  and weights averaged along one stretch of training sit at a flatter point; the mean's one validation is
  compared with the highest of many, so a tie would ask it to be luckier than the best; not under
  ``ema_decay``, which averages the weights already.
- model size and regularisation: from ``LARGE_DATA`` (10,000) training documents, the family's
  ``ModelSpec.large`` settings (HAN: a GRU of 100 per direction, the paper's 50 below; CSPAN on a CPU: 128-d
  word vectors, its CPU configuration's 64 below), since a few thousand documents overfit the wider model and
  more documents fill it; under ``SMALL_DATA`` (2,000), the family's
  ``ModelSpec.small`` settings (every attention family: 30% of the words hidden as <unk> in training,
  ``models.SMALL_WORD_DROPOUT``), since the 1,000-step minimum then shows the model each document 30 times or
  more, and it learns a few words of each by heart; SANet's rate there also rises over the first tenth of the
  planned steps (``warmup_fraction``, ``models.SANET_SMALL``), since Adam's first updates, before its moment
  estimates settle, are its largest, and SANet's paired runs gained with it where the other families' did not;
  and SANet's weights decay there, decoupled from Adam's step (``optimizer="adamw"``, ``weight_decay=0.5``,
  ``models.SMALL_DECAY``; not for an SGD run), so that a weight no gradient keeps up loses a third to a half over
  the run: its pairs gained on sentiment and topics, HPAN's and HSAN's lost on topics;
- word vectors: under ``FEW_TOKENS`` (1M) training tokens, the words of HAN, CSPAN, HPAN, HSAN and SANet start
  from word2vec's vectors beside the packaged general-English table (``embeddings="word2vec+wordllama"``,
  ``ModelSpec.few_tokens``), and under ``SMALL_DATA`` training documents HCAN's (``models.SMALL_WITH_TABLE``),
  a width of the model's own (HAN, HPAN and HSAN: the paper's 200; HCAN and CSPAN: their CPU configurations'
  64; SANet's 200) plus the table's 256 (CSPAN, whose features are as wide as its words, projects them to its
  own): a few hundred thousand tokens barely show most words, which the table knows from far more text; the rule counts
  tokens, since 7,600 titles hold fewer than 1,000 reviews do. word2vec alone beyond them (HCAN keeps the
  table at every size, ``ModelSpec.beyond_small``: its 64-d vectors gained beside it there too), and for HPAN,
  HSAN and SANet under ``SMALL_DATA`` documents, where their pairs lost or came out even
  (``models.SMALL_WITHOUT_TABLE``).

The "paper" recipe keeps each model's registered settings: fixed epochs, no early stopping, 5 word2vec
passes, no class weights, no label smoothing, no refit, accuracy. The auto recipe also lays each family's own
settings (``ModelSpec.auto``, ``ModelSpec.cpu``) over its registered ones.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from docattn.errors import ConfigError
from docattn.models import get_spec
from docattn.training.config import TrainConfig

IMBALANCE = 3.0  # largest / smallest class above this: weight the classes (auto)
PATIENCE_EPOCHS = 3
WORD2VEC_PASSES = (5, 50)
LABEL_SMOOTHING = 0.1
AVERAGE_BEST = 5


def validations_per_epoch(cfg: TrainConfig, steps_per_epoch: int) -> int:
    if cfg.val_every_n_steps:
        return max(1, steps_per_epoch // min(cfg.val_every_n_steps, steps_per_epoch))
    return min(cfg.val_per_epoch, steps_per_epoch)


def steps_per_epoch(cfg: TrainConfig, n_documents: int) -> int:
    return max(1, math.ceil(n_documents / cfg.batch_size))


def planned_epochs(cfg: TrainConfig, n_documents: int) -> int:
    """Epochs a run of ``n_documents`` training documents is planned for (early stopping may end it sooner)."""
    if cfg.max_epochs is not None:
        return cfg.max_epochs
    if cfg.recipe == "paper":  # the model registered no epochs (its registered ones are max_epochs)
        return 10
    wanted = max(cfg.min_epochs, math.ceil(cfg.min_steps / steps_per_epoch(cfg, n_documents)))
    return min(wanted, max(cfg.epoch_limit, cfg.min_epochs))


def word2vec_passes(cfg: TrainConfig, n_tokens: int) -> int:
    if cfg.word2vec_epochs is not None:
        return cfg.word2vec_epochs
    if cfg.recipe == "paper":
        return WORD2VEC_PASSES[0]
    low, high = WORD2VEC_PASSES
    return int(min(high, max(low, math.ceil(cfg.word2vec_tokens / max(n_tokens, 1)))))


def data_sized_settings(
    model: str, recipe: str, n_documents: int, n_tokens: int, given: Mapping, optimizer: str, gpu: bool = False
) -> dict:
    """The hyper-parameters and training options ``recipe`` sizes to ``n_documents`` training documents of
    ``n_tokens`` tokens for ``model`` trained by ``optimizer`` (the configured one, before this sizing) on a GPU
    where ``gpu`` (``ModelSpec.sized_settings``), less
    those in ``given`` (the options the user set, which always win). A width the user set (``embedding_dim``)
    keeps the word vectors the user's too: the table would widen it; warm-up steps the user set (0 among them)
    keep the warm-up the user's; and an optimizer or a weight decay the user set keeps both the user's, as does a
    run whose ``optimizer`` is not Adam (SANet's paper SGD where its CPU configuration is not laid): the
    small-data decay is Adam's, decoupled."""
    sized = get_spec(model).sized_settings(recipe, n_documents, n_tokens, gpu)
    if "embedding_dim" in given:
        sized.pop("embeddings", None)
    if "warmup_steps" in given:
        sized.pop("warmup_fraction", None)
    if sized.get("optimizer") == "adamw" and ({"optimizer", "weight_decay"} & set(given) or optimizer != "adam"):
        sized.pop("optimizer")
        sized.pop("weight_decay", None)
    return {k: v for k, v in sized.items() if k not in given}


def class_weights(
    cfg: TrainConfig,
    labels: np.ndarray,
    classes: Sequence[Hashable],
    penalised_per_class: bool = False,
    neural: bool = True,
) -> np.ndarray | None:
    """Per-class loss weights for ``cfg.class_weight`` (None: unweighted); ``labels`` are class indices.
    "auto" on imbalanced single-label data: "sqrt_balanced" for a ``neural`` model, "balanced" for the others.

    Multi-label (a 0/1 matrix): the weights are binary cross-entropy's ``pos_weight``, "balanced" being each
    class's negatives over its positives. "auto" leaves them off for neural models, since each class's
    decision threshold is tuned on validation, which is what weights would otherwise make up for; on Reuters
    they cost han micro- and macro-F1. A model fitted as one penalised logistic regression per class
    (``penalised_per_class``) gets "balanced": its penalty, not its threshold, is what leaves a class with a
    handful of positives predicted nowhere (benchmarks/README.md, Reuters)."""
    if np.ndim(labels) == 2:
        return _positive_weights(cfg, np.asarray(labels), classes, penalised_per_class)
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=len(classes)).astype(np.float64)
    choice = cfg.class_weight
    if choice == "auto":
        present = counts[counts > 0]
        imbalanced = cfg.recipe == "auto" and len(present) > 1 and present.max() > IMBALANCE * present.min()
        choice = auto_weighting(neural) if imbalanced else None
    if choice is None:
        return None
    if choice in ("balanced", "sqrt_balanced"):  # scikit-learn's n / (k * count), or its square root
        balanced = np.where(counts > 0, counts.sum() / (len(classes) * np.maximum(counts, 1)), 1.0)
        return balanced if choice == "balanced" else np.sqrt(balanced)  # a class absent from training keeps 1
    return _named_weights(choice, classes)


def auto_weighting(neural: bool) -> str:
    """What class_weight="auto" weighs imbalanced single-label data by (see the module's "class weights")."""
    return "sqrt_balanced" if neural else "balanced"


def per_class_fit_weights(cfg: TrainConfig, labels: np.ndarray, classes: Sequence[Hashable]) -> np.ndarray | None:
    """Multi-label: the positive weights of a penalised logistic regression per class fitted beside a neural
    model (the guardrail's logreg, the output-layer refit). Those the user named ("balanced", a dict), else
    what "auto" gives such a fit: a resolved config's None is the neural loss's, and a resumed run reads it."""
    return class_weights(replace(cfg, class_weight=cfg.class_weight or "auto"), labels, classes, True)


def _positive_weights(
    cfg: TrainConfig, labels: np.ndarray, classes: Sequence[Hashable], penalised_per_class: bool
) -> np.ndarray | None:
    choice = cfg.class_weight
    if choice == "auto" and cfg.recipe == "auto" and penalised_per_class:
        choice = "balanced"
    if choice in ("auto", None):
        return None
    if choice in ("balanced", "sqrt_balanced"):  # negatives / positives, or its square root
        positives = labels.sum(0).astype(np.float64)
        negatives = len(labels) - positives
        # a class in every document would get 0 and never learn from its positives; one without either keeps 1
        ratio = np.where((positives > 0) & (negatives > 0), negatives / np.maximum(positives, 1), 1.0)
        return ratio if choice == "balanced" else np.sqrt(ratio)
    return _named_weights(choice, classes)


def _named_weights(choice: dict, classes: Sequence[Hashable]) -> np.ndarray:
    by_name = {str(k): float(v) for k, v in choice.items()}
    unknown = sorted(set(by_name) - {str(c) for c in classes})
    if unknown:
        raise ConfigError(
            f"class_weight names classes the data does not have: {', '.join(unknown)} "
            f"(classes: {', '.join(str(c) for c in classes)})"
        )
    return np.array([by_name.get(str(c), 1.0) for c in classes])


def resolve(
    cfg: TrainConfig,
    n_documents: int,
    n_tokens: int,
    labels: np.ndarray,
    classes: Sequence[Hashable],
    penalised_per_class: bool = False,
    neural: bool = True,
) -> tuple[TrainConfig, np.ndarray | None]:
    """(the config with every recipe-decided option made concrete, per-class loss weights or None);
    ``penalised_per_class``: the model is one (``OneShotModel.penalised_per_class``); ``neural``: trained by
    the engine, with an output layer to refit."""
    weights = class_weights(cfg, labels, classes, penalised_per_class, neural)
    epochs = planned_epochs(cfg, n_documents)
    patience = cfg.patience
    if patience is None and cfg.recipe == "auto" and cfg.max_epochs is None:  # epochs given: that many are trained
        patience = PATIENCE_EPOCHS * validations_per_epoch(cfg, steps_per_epoch(cfg, n_documents))
    if cfg.monitor:
        monitor = cfg.monitor
    elif np.ndim(labels) == 2:  # multi-label: micro-F1, the score such data is compared by
        monitor = "val_micro_f1"
    else:
        monitor = "val_macro_f1" if weights is not None else "val_acc"
    smoothing = cfg.label_smoothing
    if smoothing is None:
        smoothing = LABEL_SMOOTHING if cfg.recipe == "auto" and np.ndim(labels) == 1 else 0.0
    weight_option = cfg.class_weight
    if weight_option == "auto":
        weight_option = None if weights is None else "balanced" if np.ndim(labels) == 2 else auto_weighting(neural)
    multi_label = np.ndim(labels) == 2
    refit = cfg.refit_output
    if refit and not multi_label:
        raise ConfigError("refit_output refits a multi-label model's output layer; this data has one label a document")
    if refit is None:
        refit = cfg.recipe == "auto" and multi_label and neural
    # the epochs given: that length is the plan, and early stopping (--patience) may end it at any step
    min_steps = cfg.min_steps if cfg.max_epochs is None else 0
    average = cfg.average_best or (AVERAGE_BEST if cfg.recipe == "auto" and not cfg.ema_decay else 1)
    warmup = cfg.warmup_steps
    if not warmup and cfg.warmup_fraction:
        warmup = math.ceil(cfg.warmup_fraction * epochs * steps_per_epoch(cfg, n_documents))
    resolved = replace(
        cfg,
        max_epochs=epochs,
        patience=patience,
        monitor=monitor,
        class_weight=weight_option,
        word2vec_epochs=word2vec_passes(cfg, n_tokens),
        min_steps=min_steps,
        label_smoothing=smoothing,
        refit_output=bool(refit and neural),
        average_best=average,
        warmup_steps=warmup,
    )
    return resolved, weights
