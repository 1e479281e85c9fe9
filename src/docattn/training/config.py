"""Training options shared by every neural model (saved in a run's config.json)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from docattn.errors import ConfigError, checked_fields
from docattn.training.loggers import checked_logger

MAX_SEED = 2**32 - 1  # what NumPy's and Lightning's seeding accept


RECIPES = ("auto", "paper")


def wants_gpu(accelerator: str) -> bool:
    """Whether ``accelerator`` asks for a GPU: "gpu"/"cuda", or "auto" where CUDA is present."""
    import torch

    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


@dataclass
class TrainConfig:
    # "auto": training length, early stopping, word2vec passes, class weights, HAN's width and word vectors follow
    # the data (training/recipe.py); "paper": each model's registered settings, fixed length, as the papers trained
    recipe: str = "auto"
    max_epochs: int | None = None  # None: sized to the data (auto) or the model's registered epochs (paper, else 10)
    # auto: at least this many optimizer steps (small data sets get more epochs), at least min_epochs
    # (the model's registered epochs) and at most epoch_limit epochs, ended sooner by early stopping;
    # CSPAN and SANet on a CPU: 2,000
    min_steps: int = 1000
    min_epochs: int = 1  # auto: the fewest epochs (set from the model's registered epochs)
    epoch_limit: int = 50  # auto: the most epochs, however small the data
    # when the planned epochs end with the best weights from their last tenth of steps, train half as many again
    # (at most epoch_limit), the cosine stretched over them (auto recipe); off by default: it did not gain
    extend_plan: bool = False
    # stop after this many optimizer steps whatever the epochs planned (a trial run, a speed measurement on a
    # large corpus); the schedule keeps the planned length, so its rate does not reach its end; None: no limit
    max_steps: int | None = None
    batch_size: int = 64  # documents per batch (HAN: 64)
    optimizer: str = "adam"  # "sgd" (momentum), "adam", "adamw"
    lr: float = 1e-3  # learning rate (the model's registered one where it has one)
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0  # L2 penalty (SGD, Adam) or decoupled decay (AdamW)
    betas: tuple[float, float] = (0.9, 0.999)  # Adam/AdamW
    embedding_lr: float | None = None  # separate learning rate for the embedding layer (SANet: 0.001)
    embedding_momentum: float | None = None  # SGD momentum for the embeddings (SANet: 0)
    embedding_weight_decay: float | None = None  # weight decay on the embeddings (None: weight_decay)
    # weight decay on the other one-dimensional weights: biases, norm gains, attention queries (None:
    # weight_decay); a query decayed toward 0 spreads its attention evenly, a gain toward 0 silences its layer
    vector_weight_decay: float | None = None
    schedule: str = "none"  # "none", "step", "multistep", "cosine"
    step_size: int = 10  # epochs between decays ("step")
    milestones: list[int] = field(default_factory=list)  # epochs ("multistep", CSPAN: 20, 25)
    gamma: float = 0.1  # factor of each decay ("step", "multistep")
    # the learning rate rises linearly from 1/warmup_steps of its value over this many optimizer steps, then
    # follows the schedule (Vaswani et al. 2017): large self-attention models diverge without it
    warmup_steps: int = 0
    # the warm-up as a share of the planned optimizer steps, for a warmup_steps of 0 (the recipe turns it into
    # steps once the data is known): Adam's first updates, before its moment estimates settle, are its largest
    warmup_fraction: float = 0.0
    # HPAN's and HSAN's sparse attention eased in over this share of the planned steps: in training their weights
    # start as HAN's softmax, whose share falls linearly to 0, since a fresh attention spreads weights under
    # HPAN's alpha_min and pruning then keeps about one word a sentence; validation always reads the paper's.
    # Not a default: paired on imdb1k it gained on two seeds and lost on two. A model without sparse attention
    # refuses it (DocumentClassifier), since it would change nothing there
    sparse_warmup_fraction: float = 0.0
    # the training loss's targets put this much probability evenly on all classes (Szegedy et al. 2016);
    # validation loss stays plain cross-entropy; None: 0.1 under auto for single-label data, else 0
    label_smoothing: float | None = None
    # gradient norm clipping for every model, a guard against a bad batch that none of the papers
    # mentions; None trains without it, as they did
    grad_clip: float | None = 5.0
    # validate, keep and return an exponential moving average of the weights, moved (1 - decay) of the way
    # after every step (Polyak averaging; 0.99 averages over about the last 100 steps); None: the weights
    ema_decay: float | None = None
    # keep the mean of the weights of this many best validations where it validates at most one standard
    # error, sqrt(p (1 - p) / n), under the best weights alone: weights from one stretch of training average to
    # a flatter point, from different stretches to a worse one, which the check refuses (a loss: no margin);
    # None: 5 under auto, 1 (the best weights) under paper.
    # Memory and the resume checkpoint hold that many copies of the weights
    average_best: int | None = None
    val_every_n_steps: int | None = None  # None: validate after each epoch (or val_per_epoch times)
    val_per_epoch: int = 1  # validations per epoch when val_every_n_steps is None: finer best-checkpoint choice
    # "val_acc", "val_macro_f1", "val_micro_f1" or "val_loss"; None: micro-F1 for multi-label data, macro-F1
    # where class_weight resolves to weights (imbalanced data), accuracy elsewhere
    monitor: str | None = None
    # early stopping after this many validations without improvement; 0: never; None: 3 epochs' worth under auto
    # when max_epochs is left to it, else never
    patience: int | None = None
    # loss weights per class: "balanced" (inverse frequency, as scikit-learn's), "sqrt_balanced" (its square
    # root), {label: weight}, None, or "auto": where the largest class has over 3x the training documents of
    # the smallest (auto recipe), sqrt_balanced for neural models and balanced for the linear ones; on
    # multi-label data, balanced positives for the logistic regressions, none for the others
    class_weight: str | dict | None = "auto"
    # multi-label: after training, refit a neural model's output layer on its own document vectors as one
    # penalised logistic regression per class with balanced positives (training/refit.py);
    # None: on under the auto recipe for multi-label data, off elsewhere
    refit_output: bool | None = None
    # fit the tf-idf logistic regression on the same split beside every neural model and report both
    guardrail: bool = True
    seed: int = 0  # weights, batch order, dropout and word2vec; the split has its own split_seed
    accelerator: str = "auto"  # "auto", "cpu", "gpu"
    devices: int | str = 1  # devices per node: a count, "auto" or a list as Lightning takes it
    num_nodes: int = 1  # machines of a multi-node (DDP) run
    strategy: str = "auto"  # "ddp" for data parallel over devices / nodes
    precision: str | None = None  # None: bf16-mixed on CUDA, 32 elsewhere
    # "word2vec" (trained on the training split), "wordllama" (the packaged table), "word2vec+wordllama" (both
    # side by side, embedding_dim their sum: HAN's and CSPAN's under 1M training tokens, HPAN's, HSAN's and
    # SANet's there from 2,000 training documents on, HCAN's at every size, auto), "random", or a vector file path
    embeddings: str = "word2vec"
    freeze_embeddings: bool = False  # keep the starting word vectors fixed during training
    # passes over the training text; None: enough passes for about word2vec_tokens tokens seen (5 to 50)
    # under auto, so a small corpus gets more of them; 5 (gensim's default) under paper
    word2vec_epochs: int | None = None
    # auto: the tokens word2vec should see in all, for its passes; enough that a corpus of a few million tokens
    # gets close to the 50-pass cap, which it still gains from (benchmarks/LOG.md)
    word2vec_tokens: int = 250_000_000
    # skip-gram instead of CBOW: slower to train; lifted HCAN by 0.53 on IMDB and 4.9 on 20 Newsgroups over 3 seeds,
    # CSPAN by 3.45 on 20 Newsgroups; IMDB HAN not (-0.14), nor SANet or CSPAN on IMDB (seed 0)
    word2vec_skipgram: bool = False
    # gensim threads: 0 uses the cores (at most 8), fast but the threads' update order varies, so the
    # vectors differ a little from run to run; 1 gives the same vectors for the same seed, every time
    word2vec_workers: int = 0
    # more text for word2vec, labels ignored: the training split of a file, folder or archive (aclImdb
    # gives its 50,000 unlabelled train/unsup reviews too); test text is never read
    word2vec_text: str | None = None
    # where word2vec starts: "random" (its own small random vectors) or "wordllama", the packaged pre-trained
    # table reduced to embedding_dim by PCA, so a word the corpus rarely shows keeps a general meaning; even with
    # random over 11 paired runs from 900 to 10,182 documents (benchmarks/LOG.md), so not the default
    word2vec_start: str = "random"
    max_time: float | None = None  # seconds; training stops at the budget and keeps the best model
    loader_workers: int = 0  # processes building batches beside training (0: the training process builds them)
    progress: bool = True  # a live progress bar on a terminal; a line per validation elsewhere (logs, nohup, CI)
    progress_lines: bool = False  # a line per validation on stderr even without the bar (benchmark trials)
    # also log the curves, learning rate, docs/s and test scores with Lightning's "csv", "tensorboard", "mlflow"
    # or "wandb" logger, into the run folder's logs/ (training/loggers.py); None: metrics.csv only
    logger: str | None = None

    def __post_init__(self):
        checked_fields(self)
        if self.recipe not in RECIPES:
            raise ConfigError(f"recipe must be {' or '.join(RECIPES)}, got {self.recipe!r}")
        if not (self.class_weight is None or isinstance(self.class_weight, (str, dict))) or (
            isinstance(self.class_weight, str) and self.class_weight not in ("auto", "balanced", "sqrt_balanced")
        ):
            raise ConfigError(
                "class_weight must be 'auto', 'balanced', 'sqrt_balanced', a {label: weight} dict or None, "
                f"got {self.class_weight!r}"
            )
        if isinstance(self.class_weight, dict) and not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and 0 < w < math.inf
            for w in self.class_weight.values()
        ):
            raise ConfigError(f"class_weight's weights must be numbers above 0, got {self.class_weight!r}")
        if self.optimizer not in ("sgd", "adam", "adamw"):
            raise ConfigError(f"optimizer must be sgd, adam or adamw, got {self.optimizer!r}")
        if self.schedule not in ("none", "step", "multistep", "cosine"):
            raise ConfigError(f"schedule must be none, step, multistep or cosine, got {self.schedule!r}")
        if self.extend_plan and (self.recipe != "auto" or self.schedule not in ("none", "cosine")):
            raise ConfigError(
                "extend_plan lengthens the auto recipe's per-step plan (schedule cosine or none); "
                f"this run has recipe={self.recipe!r}, schedule={self.schedule!r}"
            )
        if self.monitor not in (None, "val_acc", "val_macro_f1", "val_micro_f1", "val_loss"):
            raise ConfigError(f"monitor must be val_acc, val_macro_f1, val_micro_f1 or val_loss, got {self.monitor!r}")
        if self.val_per_epoch < 1:
            raise ConfigError(f"val_per_epoch must be >= 1, got {self.val_per_epoch}")
        if self.label_smoothing is not None and not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        from docattn.data.embeddings import PACKAGED, packaged_beside, trains_word2vec

        packaged_beside(self.embeddings)  # "word2vec+NAME" must name a packaged table
        word2vec = trains_word2vec(self.embeddings)
        if self.word2vec_text and not word2vec:
            raise ConfigError(f"word2vec_text feeds word2vec, but embeddings is {self.embeddings!r}")
        if self.word2vec_start not in ("random", *PACKAGED):
            raise ConfigError(f"word2vec_start must be random or {' or '.join(PACKAGED)}, got {self.word2vec_start!r}")
        if self.word2vec_start in PACKAGED and not word2vec:
            raise ConfigError(f"word2vec_start starts word2vec, but embeddings is {self.embeddings!r}")
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ConfigError(f"ema_decay must be in (0, 1), got {self.ema_decay}")
        if self.average_best is not None and self.average_best < 1:
            raise ConfigError(f"average_best must be at least 1 (1: the best weights alone), got {self.average_best}")
        if self.ema_decay and (self.average_best or 1) > 1:
            raise ConfigError(
                f"ema_decay and average_best={self.average_best} both average the weights: choose one "
                "(average_best=1 keeps the best weights alone)"
            )
        if self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ConfigError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if not 0.0 <= self.sparse_warmup_fraction <= 1.0:
            raise ConfigError(f"sparse_warmup_fraction must be in [0, 1], got {self.sparse_warmup_fraction}")
        if self.loader_workers < 0:
            raise ConfigError(f"loader_workers must be >= 0, got {self.loader_workers}")
        if self.min_steps < 0:
            raise ConfigError(f"min_steps must be >= 0, got {self.min_steps}")
        for name in ("batch_size", "max_epochs", "min_epochs", "epoch_limit", "word2vec_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be from 0 to {MAX_SEED}, got {self.seed}")
        if not 0 < self.lr < math.inf:
            raise ConfigError(f"lr must be a number above 0, got {self.lr}")
        for name in ("max_time", "max_steps", "val_every_n_steps", "embedding_lr", "num_nodes", "word2vec_epochs"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be above 0 (or left unset), got {value}")
        for name in (
            "weight_decay",
            "vector_weight_decay",
            "momentum",
            "patience",
            "grad_clip",
            "word2vec_workers",
        ):  # grad_clip 0: no clipping
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")
        self.betas = tuple(self.betas)
        self.logger = checked_logger(self.logger)  # a missing package is named now, before any work

    def lr_grid(self) -> list[float]:
        """Rates ``docattn tune`` tries by default: the HAN paper's SGD grid under SGD; under Adam the
        configured rate x 1/4, 1/2, 1, 2, since Adam's safe rates sit orders of magnitude lower."""
        if self.optimizer == "sgd":
            return [0.5, 0.1, 0.05, 0.01]
        return [self.lr * f for f in (0.25, 0.5, 1.0, 2.0)]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        if "recipe" not in data:  # saved before recipes: trained for fixed epochs, unweighted, by accuracy
            data = {"recipe": "paper", "class_weight": None, "monitor": "val_acc", "guardrail": False, **data}
        if "refit_output" not in data:  # saved before the refit existed: a resumed run goes on without it
            data = {**data, "refit_output": False}
        kept = {k: v for k, v in data.items() if k in names}
        # a run that logged to MLflow or W&B still loads (to predict, evaluate, explain) where neither is installed
        logger = checked_logger(kept.pop("logger", None), installed=False)
        config = cls(**kept)
        config.logger = logger
        return config

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}
