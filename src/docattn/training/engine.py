"""Training on Lightning: optimisers and schedules, validation, best model, resume, DDP, bf16.

Lightning runs the loop, devices, precision and data parallelism; docattn supplies the model,
its bucketed batches (``training.loaders``, rank-aware under DDP), and its callbacks
(``training.callbacks``): the best-so-far weights by a validation metric, a metrics CSV and
documents/s, a resume checkpoint and, when asked, an exponential moving average of the weights.
``fit`` composes them in named steps and returns a ``FitResult``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

from docattn.data.encoding import EncodedCorpus
from docattn.errors import CheckpointError, ConfigError, Diverged, Interrupted
from docattn.training.callbacks import (
    SCORES,
    BestValidation,
    BestWeights,
    Divergence,
    DivergenceGuard,
    EarlyStoppingAfter,
    EMAWeights,
    ExtendPlan,
    MetricsLog,
    ResumePoint,
    SparseWarmup,
    ValidateLastStep,
    fitting,
)
from docattn.training.config import TrainConfig, wants_gpu
from docattn.training.loaders import DocumentData
from docattn.training.loggers import build_loggers
from docattn.training.run import METRICS, WEIGHTS, read_checkpoint, resume_checkpoint


def weighted_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None, smoothing: float
) -> torch.Tensor:
    """Cross-entropy against label-smoothed targets, each document weighed by its own class's weight.

    PyTorch's ``cross_entropy(weight=..., label_smoothing=...)`` also weighs each class of the smoothing term by
    that class's weight while it divides by the documents' own weights. Under heavy imbalance (Reuters' R8: 0.24
    for its largest class, 17 for its smallest) a batch of the common class then scores a confident right answer
    worse than probability spread onto the rare classes, and the model stops learning. Without smoothing, or
    without weights, this is PyTorch's loss."""
    logp = F.log_softmax(logits, dim=-1)
    loss = -logp.gather(1, labels[:, None]).squeeze(1)
    if smoothing:
        loss = (1 - smoothing) * loss - smoothing * logp.mean(-1)
    if weights is None:
        return loss.mean()
    w = weights[labels]
    return (w * loss).sum() / w.sum()


class ClassifierModule(L.LightningModule):
    """Cross-entropy training of any docattn model (binary cross-entropy per class for multi-label data);
    validation accuracy, micro- and macro-F1 and loss."""

    def __init__(
        self,
        model: torch.nn.Module,
        cfg: TrainConfig,
        class_weights=None,
        per_step_schedule: bool = False,
        multi_label: bool = False,
    ):
        super().__init__()
        self.model, self.cfg, self.multi_label = model, cfg, multi_label
        self._val = []
        # the cosine (and warm-up) as one per-step factor over the steps Lightning plans for this run;
        # without it (the paper recipe) the cosine steps once an epoch over max_epochs
        self.per_step_schedule = per_step_schedule
        self.plan: RatePlan | None = None  # that per-step factor, once configure_optimizers has built it
        weights = None if class_weights is None else torch.as_tensor(np.asarray(class_weights), dtype=torch.float32)
        self.register_buffer("class_weights", weights, persistent=False)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch.to(device)

    def training_step(self, batch, batch_idx):
        out = self.model(batch)
        smooth = self.cfg.label_smoothing or 0.0  # None: a config the recipe has not resolved
        if batch.labels.dim() == 2:  # multi-label: one sigmoid per class; class weights weigh the positives
            target = batch.labels * (1 - smooth) + smooth / 2
            loss = F.binary_cross_entropy_with_logits(out.logits.float(), target, pos_weight=self.class_weights)
        else:
            loss = weighted_cross_entropy(out.logits.float(), batch.labels, self.class_weights, smooth)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=len(batch))
        for name, value in out.stats.items():
            self.log(name, value, on_step=False, on_epoch=True, batch_size=len(batch))
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self.model(batch).logits.float()
        if batch.labels.dim() == 2:  # per class: true positives, predicted, gold (at probability 0.5)
            gold, pred = batch.labels, (logits >= 0).float()
            loss = F.binary_cross_entropy_with_logits(logits, gold, reduction="sum")
            exact = (gold == pred).all(1).sum().float()
            counts = torch.stack([(gold * pred).sum(0), pred.sum(0), gold.sum(0)])
            self._val.append((counts, exact, loss, len(gold)))
            return
        loss = F.cross_entropy(logits, batch.labels, reduction="sum")
        self._val.append((batch.labels, logits.argmax(-1), loss))

    def on_validation_epoch_end(self):
        if self.multi_label:
            return self._multi_label_validation_end()
        k = self.model.num_classes
        if self._val:
            gold = torch.cat([g for g, _, _ in self._val])
            pred = torch.cat([p for _, p, _ in self._val])
            cm = torch.bincount(gold * k + pred, minlength=k * k).reshape(k, k).double()
            loss_sum = torch.stack([loss for _, _, loss in self._val]).sum().double()
        else:
            cm, loss_sum = (
                torch.zeros(k, k, dtype=torch.double, device=self.device),
                torch.zeros((), dtype=torch.double, device=self.device),
            )
        self._val = []
        if self.trainer.world_size > 1:  # every rank saw different documents: add their counts up
            cm = self.trainer.strategy.reduce(cm, reduce_op="sum")
            loss_sum = self.trainer.strategy.reduce(loss_sum, reduce_op="sum")
        total = cm.sum().clamp_min(1)
        tp = cm.diag()
        prec = tp / cm.sum(0).clamp_min(1)
        rec = tp / cm.sum(1).clamp_min(1)
        f1 = 2 * prec * rec / (prec + rec).clamp_min(1e-12)
        present = (cm.sum(1) + cm.sum(0)) > 0  # true or predicted, as classification_report
        self._log_validation("val_acc", (tp.sum() / total).float(), prog_bar=True)
        self._log_validation("val_macro_f1", f1[present].mean().float())
        self._log_validation("val_micro_f1", (tp.sum() / total).float())  # one class per document: micro-F1 is accuracy
        self._log_validation("val_loss", (loss_sum / total).float())

    def _log_validation(self, name: str, value: torch.Tensor, **kwargs) -> None:
        # the averaged weights' validation after the fit (engine._average_best) is not a point on the curves
        self.log(name, value, logger=None if fitting(self.trainer) else False, **kwargs)  # None: Lightning's own

    def _multi_label_validation_end(self):
        """Micro- and macro-F1 over classes, subset accuracy (every class right) and the loss per document."""
        k = self.model.num_classes
        counts = torch.zeros(3, k, dtype=torch.double, device=self.device)  # tp, predicted, gold per class
        sums = torch.zeros(3, dtype=torch.double, device=self.device)  # exact, loss, documents
        for c, exact, loss, n in self._val:
            counts += c.double()
            sums += torch.stack([exact.double(), loss.double(), torch.tensor(float(n), device=self.device)])
        self._val = []
        if self.trainer.world_size > 1:
            counts = self.trainer.strategy.reduce(counts, reduce_op="sum")
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        tp, predicted, gold = counts
        f1 = 2 * tp / (predicted + gold).clamp_min(1)
        present = (predicted + gold) > 0
        micro = 2 * tp.sum() / (predicted.sum() + gold.sum()).clamp_min(1)
        docs = sums[2].clamp_min(1)
        self._log_validation("val_acc", (sums[0] / docs).float(), prog_bar=True)
        self._log_validation("val_macro_f1", (f1[present].mean() if present.any() else f1.sum() * 0).float())
        self._log_validation("val_micro_f1", micro.float(), prog_bar=True)
        self._log_validation("val_loss", (sums[1] / docs).float())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # dropout draws from torch's generator: a resumed run repeats the straight run only from its state
        checkpoint["docattn_rng"] = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            checkpoint["docattn_rng"]["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        rng = checkpoint.get("docattn_rng", {})
        if "cpu" in rng:
            torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and torch.cuda.is_available() and len(rng["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(rng["cuda"])

    def configure_optimizers(self):
        cfg = self.cfg
        emb = [p for n, p in self.model.named_parameters() if n.startswith("embedding.") and p.requires_grad]
        rest = [p for n, p in self.model.named_parameters() if not n.startswith("embedding.") and p.requires_grad]
        groups = [{"params": rest}]
        if cfg.vector_weight_decay is not None:
            groups = [
                {"params": [p for p in rest if p.ndim > 1]},
                {"params": [p for p in rest if p.ndim <= 1], "weight_decay": cfg.vector_weight_decay},
            ]
            groups = [g for g in groups if g["params"]]
        if emb:
            g = {"params": emb}
            if cfg.embedding_lr is not None:
                g["lr"] = cfg.embedding_lr
            if cfg.embedding_momentum is not None and cfg.optimizer == "sgd":
                g["momentum"] = cfg.embedding_momentum
            if cfg.embedding_weight_decay is not None:
                g["weight_decay"] = cfg.embedding_weight_decay
            groups.append(g)
        # one fused kernel per step instead of a dozen passes over every parameter: the dense
        # embedding gradient made the optimizer a fifth of HAN's CPU step time. Not under mixed
        # precision with clipping: Lightning refuses to clip for an optimizer that unscales itself,
        # so the (multi-tensor) foreach path runs there.
        fused = all(p.device.type in ("cpu", "cuda") for p in emb + rest) and not (
            cfg.grad_clip and "mixed" in resolve_precision(cfg)
        )
        if cfg.optimizer == "sgd":
            opt = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, fused=fused)
        elif cfg.optimizer == "adam":
            opt = torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=fused)
        else:
            opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=fused)
        if self.per_step_schedule and cfg.schedule in ("cosine", "none"):
            self.plan = RatePlan(cfg.schedule, cfg.warmup_steps, max(1, int(self.trainer.estimated_stepping_batches)))
            return [opt], [{"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, self.plan), "interval": "step"}]
        schedulers = []
        if cfg.schedule == "step":
            schedulers.append(torch.optim.lr_scheduler.StepLR(opt, cfg.step_size, cfg.gamma))
        elif cfg.schedule == "multistep":
            schedulers.append(torch.optim.lr_scheduler.MultiStepLR(opt, cfg.milestones, cfg.gamma))
        elif cfg.schedule == "cosine":
            schedulers.append(torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.max_epochs))
        configs = [{"scheduler": sched, "interval": "epoch"} for sched in schedulers]
        if cfg.warmup_steps:  # created last, stepped per batch: both scale the rate multiplicatively, so they compose
            warmup = torch.optim.lr_scheduler.LinearLR(
                opt, 1.0 / cfg.warmup_steps, 1.0, total_iters=cfg.warmup_steps - 1
            )
            configs.append({"scheduler": warmup, "interval": "step"})
        return ([opt], configs) if configs else opt


class RatePlan:
    """The rate's multiplier at each optimizer step: a linear warm-up, then a cosine from 1 to 0 over the
    ``total`` steps planned (or 1 throughout). A function of the step and these attributes alone: the
    scheduler's state keeps them with its step, so a resume continues the same curve, an early stop simply
    ends it sooner, and a plan lengthened in training (``callbacks.ExtendPlan``) stretches it."""

    def __init__(self, schedule: str, warmup: int, total: int):
        self.schedule, self.warmup, self.total = schedule, warmup, total

    def __call__(self, step: int) -> float:
        rise = min(1.0, (step + 1) / self.warmup) if self.warmup else 1.0
        if self.schedule != "cosine":
            return rise
        return rise * 0.5 * (1.0 + math.cos(math.pi * min(step, self.total) / self.total))


def _interrupted(err: BaseException, trainer, run_dir: Path | None) -> Interrupted | None:
    """What a signal that stopped ``trainer.fit`` means for the run; None for any other exit."""
    import signal

    if isinstance(err, SIGTERMException) or trainer.received_sigterm:
        sig = signal.SIGTERM
    elif isinstance(err, KeyboardInterrupt) or trainer.interrupted:
        sig = signal.SIGINT
    else:
        return None
    where = (
        f"training stopped by {sig.name} in epoch {trainer.current_epoch + 1} of {trainer.max_epochs} "
        f"(step {trainer.global_step})"
    )
    if run_dir is not None and resume_checkpoint(run_dir).exists():
        best = (
            "; the best weights so far are in its model.safetensors" if (run_dir / "model.safetensors").exists() else ""
        )
        return Interrupted(
            f"{where}{best}. Continue {run_dir} with the same command and --resume (from its last finished epoch)",
            int(sig),
            where,
        )
    return Interrupted(f"{where}, before a checkpoint was written: nothing to resume", int(sig), where)


@dataclass(frozen=True)
class FitResult:
    """What one fit produced; ``trainer.train_model`` turns it into the run's ``results`` record."""

    best: BestValidation | None  # the validation whose weights the model holds; None if none was kept
    history: list[dict]  # one row per validation, the columns of MetricsLog (what metrics.csv holds)
    train_docs_per_s: float
    train_seconds: float
    epoch_seconds: list[float]  # wall time of each full training epoch, validation excluded
    stopped_on_budget: bool  # the time budget (max_time) ended it
    stopped_early: bool  # --patience validations passed without improvement
    diverged_at: Divergence | None  # where the loss and weights became NaN or infinite
    is_global_zero: bool  # rank 0 under DDP: the process that writes the run folder
    device: str  # where it trained, e.g. "cuda:0" (Lightning hands the model back on the CPU)
    extended_to: int | None = None  # the epochs of a plan ExtendPlan lengthened; None: trained as planned
    averaged: Averaged | None = None  # the mean of the best validations' weights (average_best), kept or not


@dataclass(frozen=True)
class Averaged:
    """The mean of the weights of a fit's best validations (``average_best``), scored on validation: ``kept``
    where it scored within ``tolerance`` of the best weights alone, which the model holds otherwise."""

    validation: BestValidation  # its scores; epoch and step those of the newest validation averaged
    best_alone: float  # the monitored score of the best weights alone
    kept: bool
    tolerance: float  # how far under best_alone the mean may score and be kept (averaging_tolerance)


def averaging_tolerance(monitor: str, best: float, documents: int) -> float:
    """How far under the best weights' validation score their mean may score and still be kept: one standard
    error of a proportion at that score, sqrt(p (1 - p) / n) over the n validation documents. The best score
    is the highest of many noisy validations and the mean's is a single one, so a strict comparison on a
    small validation set refuses means that test better (benchmarks/LOG.md). A loss has no such scale: 0."""
    if monitor == "val_loss" or documents < 1:
        return 0.0
    p = min(max(best, 0.0), 1.0)
    return math.sqrt(p * (1.0 - p) / documents)


def resolve_precision(cfg: TrainConfig) -> str:
    if cfg.precision:
        return cfg.precision
    bf16 = wants_gpu(cfg.accelerator) and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return "bf16-mixed" if bf16 else "32-true"


def _trainer(cfg: TrainConfig, callbacks: list, val_interval, bar: bool, run_dir: Path | None, loggers) -> L.Trainer:
    return L.Trainer(
        max_epochs=cfg.max_epochs,
        max_steps=cfg.max_steps or -1,  # -1: Lightning's "no limit"
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=cfg.strategy,
        precision=resolve_precision(cfg),
        gradient_clip_val=cfg.grad_clip,
        val_check_interval=val_interval,
        max_time=timedelta(seconds=cfg.max_time) if cfg.max_time else None,
        logger=loggers,  # False unless --logger asked for one (training/loggers.py)
        callbacks=callbacks,
        enable_checkpointing=False,  # ResumePoint writes the one checkpoint a run needs
        enable_progress_bar=bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        default_root_dir=str(run_dir) if run_dir is not None else None,
    )


def checked_trainer(
    cfg: TrainConfig,
    callbacks: list | None = None,
    val_interval=None,
    bar: bool = False,
    run_dir: Path | None = None,
    loggers: list | bool = False,
) -> L.Trainer:
    """The Lightning trainer for ``cfg``; devices, strategy or precision it refuses are one ConfigError. Called
    alone before a run folder is written, so a bad option changes nothing there."""
    if cfg.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"accelerator={cfg.accelerator!r} but PyTorch sees no CUDA GPU here (use auto or cpu)")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # its start-up banners are noise for users
    try:
        return _trainer(cfg, callbacks or [], val_interval, bar, run_dir, loggers)
    except (MisconfigurationException, ValueError, TypeError, ImportError) as err:
        # devices, strategy or precision Lightning refuses; an accelerator whose package is missing (tpu: torch_xla)
        raise ConfigError(f"training options: {str(err).strip().splitlines()[0]}") from None


def fit(
    model: torch.nn.Module,
    train: EncodedCorpus,
    valid: EncodedCorpus,
    cfg: TrainConfig,
    limits: dict,
    run_dir: Path | None = None,
    resume: bool = False,
    on_best=None,
    class_weights=None,
) -> FitResult:
    """Train ``model`` in place; on return it holds the best validation weights. ``class_weights``: one
    loss weight per class, or None. ``cfg`` is concrete (``training.recipe.resolve`` made it so)."""
    if cfg.max_epochs is None or cfg.monitor is None:
        raise ConfigError("fit needs a resolved config (training.recipe.resolve): max_epochs and monitor are unset")
    _quiet_lightning()
    L.seed_everything(cfg.seed, verbose=False)
    module = ClassifierModule(
        model, cfg, class_weights, per_step_schedule=cfg.recipe == "auto", multi_label=train.multi_label
    )
    data = DocumentData(train, valid, model.layout, limits, cfg)
    ckpt_path = _resume_from(run_dir, resume)
    # a live bar needs a terminal: redirected to a file it would print nothing until the end
    bar = cfg.progress and sys.stderr.isatty()
    callbacks = _fit_callbacks(cfg, run_dir, on_best, bar, resumed=ckpt_path is not None)
    loggers = build_loggers(cfg, run_dir)
    trainer = checked_trainer(cfg, callbacks.all, _validation_interval(cfg, len(train)), bar, run_dir, loggers)
    t0 = time.perf_counter()
    _run_lightning(trainer, module, data, ckpt_path, run_dir)
    seconds = time.perf_counter() - t0
    _keep_best_weights(model, callbacks, cfg, ckpt_path, run_dir)
    averaged = _average_best(trainer, module, data, callbacks)
    return FitResult(
        best=averaged.validation if averaged is not None and averaged.kept else callbacks.best.best_validation,
        averaged=averaged,
        history=callbacks.log.rows,
        train_docs_per_s=callbacks.log.docs / max(callbacks.log.busy, 1e-9),
        train_seconds=seconds,
        epoch_seconds=callbacks.log.epoch_seconds,
        stopped_on_budget=bool(cfg.max_time) and seconds >= cfg.max_time,
        stopped_early=callbacks.early is not None and callbacks.early.wait_count >= callbacks.early.patience,
        diverged_at=callbacks.guard.at,
        is_global_zero=trainer.is_global_zero,
        device=str(trainer.strategy.root_device),
        extended_to=callbacks.extend.max_epochs if callbacks.extend is not None else None,
    )


def _quiet_lightning() -> None:
    # Lightning's start-up banners and a warning about our own batch transfer are noise for users
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*transfer_batch_to_device.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    # under DDP the validation counts are summed over ranks before logging (on_validation_epoch_end);
    # the progress figures (train_loss) are rank 0's own
    warnings.filterwarnings("ignore", message=".*when logging on epoch level in distributed setting.*")


def _resume_from(run_dir: Path | None, resume: bool) -> str | None:
    """The checkpoint this fit continues from, or None; a fresh run deletes an earlier run's checkpoint."""
    if run_dir is None:
        return None
    last = resume_checkpoint(run_dir)
    if resume and last.exists():
        return str(last)
    if not resume and last.exists():
        last.unlink()  # an earlier run's: a later --resume must not continue it as this one
    return None


@dataclass
class _FitCallbacks:
    """One fit's callbacks; ``all`` in the order Lightning runs them (the guard checks before ResumePoint writes)."""

    best: BestWeights
    log: MetricsLog
    guard: DivergenceGuard
    early: EarlyStoppingAfter | None
    extend: ExtendPlan | None
    all: list[Callback]


def _fit_callbacks(cfg: TrainConfig, run_dir: Path | None, on_best, bar: bool, resumed: bool) -> _FitCallbacks:
    ema = EMAWeights(cfg.ema_decay) if cfg.ema_decay else None
    best = BestWeights(cfg.monitor, on_best, ema.validated_model if ema else None, keep=cfg.average_best or 1)
    log = MetricsLog(
        run_dir / METRICS if run_dir is not None else None, echo=cfg.progress_lines or (cfg.progress and not bar)
    )
    log.resumed = resumed  # continuing from a checkpoint keeps the metrics rows up to it
    guard = DivergenceGuard()
    early = None
    if cfg.patience:
        after = cfg.min_steps if cfg.recipe == "auto" else 0
        early = EarlyStoppingAfter(cfg.monitor, patience=cfg.patience, mode=best.mode, min_steps=after)
    # after early stopping (it may decide at an epoch's end too), before ResumePoint writes the lengthened plan
    extend = ExtendPlan(best, early, guard, cfg.epoch_limit, log.echo) if cfg.extend_plan else None
    sparse = SparseWarmup(cfg.sparse_warmup_fraction) if cfg.sparse_warmup_fraction else None
    callbacks = [c for c in (ema, best, log, ValidateLastStep(), guard, early, extend, sparse) if c is not None]
    if run_dir is not None:
        callbacks.append(ResumePoint(resume_checkpoint(run_dir), guard))
    if bar:
        callbacks.append(_progress_bar())
    return _FitCallbacks(best, log, guard, early, extend, callbacks)


def _progress_bar():
    """Lightning's Rich bar, with epochs counted from 1 as every other line docattn prints ("Epoch 1/3")."""
    from lightning.pytorch.callbacks import RichProgressBar

    class Bar(RichProgressBar):
        def _get_train_description(self, current_epoch: int) -> str:
            text = f"Epoch {current_epoch + 1}" + (f"/{self.trainer.max_epochs}" if self.trainer.max_epochs else "")
            return f"{text:{len(self.validation_description)}}"

    return Bar(leave=True)


def _validation_interval(cfg: TrainConfig, n_documents: int) -> int | None:
    """Training batches between validations; None validates once an epoch, at its end."""
    n_train_batches = max(1, -(-n_documents // cfg.batch_size))
    if cfg.val_every_n_steps:
        return min(cfg.val_every_n_steps, n_train_batches)
    if cfg.val_per_epoch <= 1:
        return None
    # every n // k batches: k validations, the last near the epoch's end; fewer when an epoch
    # has too few batches for k (Lightning skips the end-of-epoch check once an interval is set)
    interval = max(1, n_train_batches // cfg.val_per_epoch)
    if n_train_batches // interval > cfg.val_per_epoch:
        interval = -(-n_train_batches // cfg.val_per_epoch)
    return interval


def _run_lightning(
    trainer: L.Trainer, module: ClassifierModule, data: DocumentData, ckpt_path: str | None, run_dir: Path | None
) -> None:
    """``trainer.fit``, with what stops it turned into docattn's errors (a bad checkpoint, options, a signal)."""
    try:
        if ckpt_path is not None:
            read_checkpoint(Path(ckpt_path))  # a refused file is named before Lightning opens it
        # weights_only: Lightning's own load of the checkpoint may not unpickle either
        trainer.fit(module, datamodule=data, ckpt_path=ckpt_path, weights_only=True)
    except (RuntimeError, OSError, EOFError) as err:
        if ckpt_path is None or trainer.global_step > 0:
            raise
        raise CheckpointError(
            f"{ckpt_path}: cannot resume from this checkpoint ({str(err).strip().splitlines()[0][:200]}); "
            "delete it to start the run again"
        ) from None
    except MisconfigurationException as err:  # (a resume with no epoch left is refused before, by check_resumable)
        raise ConfigError(f"training options: {str(err).strip().splitlines()[0]}") from None
    except (SIGTERMException, SystemExit, KeyboardInterrupt) as err:
        # Lightning turns SIGTERM into a SystemExit without a code (exit status 0: "success") and
        # Ctrl-C into exit(1); both become one error that says where the run stands
        stopped = _interrupted(err, trainer, run_dir)
        if stopped is None:
            raise
        raise stopped from None


def _keep_best_weights(
    model: torch.nn.Module, callbacks: _FitCallbacks, cfg: TrainConfig, ckpt_path: str | None, run_dir: Path | None
) -> None:
    """Load the best validation's weights into ``model``; Diverged if the run diverged before any was kept."""
    # resumed, and no validation since beat the best before the interruption: that one is on disk
    on_disk = ckpt_path is not None and run_dir is not None and (run_dir / WEIGHTS).exists()
    at = callbacks.guard.at
    if at is not None and callbacks.best.best_state is None and not on_disk:
        vectors = f", or check the vectors of {cfg.embeddings}" if cfg.embeddings not in ("word2vec", "random") else ""
        raise Diverged(
            f"training diverged: the loss was {at.loss} and the weights NaN or infinite by step "
            f"{at.step} (epoch {at.epoch + 1}), before any validation; lower the learning "
            f"rate (now {cfg.lr:g}){vectors}"
        )
    if callbacks.best.best_state is not None:
        model.load_state_dict(callbacks.best.best_state)
    elif on_disk:
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(run_dir / WEIGHTS)))


def _average_best(trainer: L.Trainer, module: ClassifierModule, data: DocumentData, callbacks: _FitCallbacks):
    """``average_best``: load the mean of the best validations' weights and score it on validation; keep it
    where it scores within ``averaging_tolerance`` of the best weights alone, else load those back. None:
    fewer than two validations to average."""
    best = callbacks.best
    if len(best.top) < 2:
        return None
    module.model.load_state_dict(best.mean_state())
    trainer.validate(module, datamodule=data, verbose=False)  # fit's callbacks ignore it (callbacks.fitting)
    scores = {k: float(trainer.callback_metrics[k]) for k in SCORES}
    tolerance = averaging_tolerance(best.monitor, best.best_score, len(data.valid))
    if best.mode == "max":
        within = scores[best.monitor] >= best.best_score - tolerance
    else:
        within = not best.better(best.best_score, scores[best.monitor])
    kept = math.isfinite(scores["val_loss"]) and within
    newest = max((t["metrics"] for t in best.top), key=lambda metrics: metrics["step"])
    steps = tuple(sorted(t["metrics"]["step"] for t in best.top))
    validation = BestValidation(**scores, epoch=newest["epoch"], step=newest["step"], averaged_steps=steps)
    if not kept:
        module.model.load_state_dict(best.best_state)
    if callbacks.log.echo and trainer.is_global_zero:
        print(
            f"  the mean of the {len(steps)} best validations' weights: {best.monitor} {scores[best.monitor]:.4f} "
            f"against {best.best_score:.4f} alone (kept within {tolerance:.4f}), {'kept' if kept else 'not kept'}",
            file=sys.stderr,
            flush=True,
        )
    return Averaged(validation, best.best_score, kept, tolerance)
