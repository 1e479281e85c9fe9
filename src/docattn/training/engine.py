"""Training on Lightning: optimisers and schedules, validation, best model, resume, DDP, bf16.

Lightning runs the loop, devices, precision and data parallelism; docattn supplies the model,
its bucketed batches (one sampler that is also rank-aware under DDP), and its callbacks: the
best-so-far weights by a validation metric, a metrics CSV and documents/s, a resume checkpoint
and, when asked, an exponential moving average of the weights.
"""

from __future__ import annotations

import csv
import logging
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import lightning as L
from lightning.pytorch.callbacks import Callback, EarlyStopping, WeightAveraging
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

from docattn.data.batching import batch_sampler
from docattn.data.encoding import EncodedCorpus
from docattn.errors import CheckpointError, ConfigError, Diverged, Interrupted, WriteError
from docattn.training.config import TrainConfig
from docattn.training.inference import make_batch
from docattn.training.metrics import confusion_matrix
from docattn.training.run import resume_checkpoint


class _Indices(torch.utils.data.Dataset):
    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class _Collate:
    """Turns a list of document indices into the model's batch layout (picklable for workers)."""

    def __init__(self, corpus: EncodedCorpus, layout: str, limits: dict):
        self.corpus, self.layout, self.limits = corpus, layout, limits

    def __call__(self, documents: list[int]):
        return make_batch(self.corpus, documents, self.layout, self.limits)


def _loader(corpus: EncodedCorpus, layout: str, limits: dict, batch_size: int, shuffle: bool, seed: int, trainer, pad: bool,
            workers: int = 0):
    world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
    sampler = batch_sampler(corpus, layout, limits, batch_size, shuffle=shuffle, seed=seed,
                            num_replicas=world if pad else 1, rank=rank if pad else 0)
    if not pad and world > 1:  # evaluation: each rank takes every world-th batch, no document twice
        sampler = _Strided(sampler, world, rank)
    # on a GPU, worker processes build the next batches while kernels run, in page-locked memory so
    # that the copy to the device does not block (the batch types have pin_memory())
    cuda = trainer is not None and trainer.strategy.root_device.type == "cuda"
    return torch.utils.data.DataLoader(_Indices(len(corpus)), batch_sampler=sampler, collate_fn=_Collate(corpus, layout, limits),
                                       num_workers=workers, persistent_workers=workers > 0, pin_memory=cuda and workers > 0)


class _Strided(torch.utils.data.Sampler):
    def __init__(self, inner, world: int, rank: int):
        self.inner, self.world, self.rank = inner, world, rank

    def __iter__(self):
        for i, b in enumerate(self.inner):
            if i % self.world == self.rank:
                yield b

    def __len__(self) -> int:
        return len(range(self.rank, len(self.inner), self.world))


class DocumentData(L.LightningDataModule):
    def __init__(self, train: EncodedCorpus, valid: EncodedCorpus, layout: str, limits: dict, cfg: TrainConfig):
        super().__init__()
        self.train, self.valid, self.layout, self.limits, self.cfg = train, valid, layout, limits, cfg

    def train_dataloader(self):
        return _loader(self.train, self.layout, self.limits, self.cfg.batch_size, True, self.cfg.seed, self.trainer, pad=True,
                       workers=self.cfg.loader_workers)

    def val_dataloader(self):
        size, world = max(self.cfg.batch_size, 128), self.trainer.world_size if self.trainer is not None else 1
        if world > 1:  # every rank needs at least one batch of its own (ranks take every world-th one)
            if len(self.valid) < world:
                raise ConfigError(f"{world} processes need at least {world} validation documents, got {len(self.valid)}")
            size = min(size, len(self.valid) // world)
        return _loader(self.valid, self.layout, self.limits, size, False, 0, self.trainer, pad=False,
                       workers=self.cfg.loader_workers)


class ClassifierModule(L.LightningModule):
    """Cross-entropy training of any docattn model; validation accuracy, macro-F1 and loss."""

    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, class_weights=None, per_step_schedule: bool = False):
        super().__init__()
        self.model, self.cfg = model, cfg
        self._val = []
        # the cosine (and warm-up) as one per-step factor over the steps Lightning plans for this run;
        # without it (the paper recipe) the cosine steps once an epoch over max_epochs
        self.per_step_schedule = per_step_schedule
        weights = None if class_weights is None else torch.as_tensor(np.asarray(class_weights), dtype=torch.float32)
        self.register_buffer("class_weights", weights, persistent=False)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch.to(device)

    def training_step(self, batch, batch_idx):
        out = self.model(batch)
        loss = F.cross_entropy(out.logits.float(), batch.labels, weight=self.class_weights, label_smoothing=self.cfg.label_smoothing)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=len(batch))
        for name, value in out.stats.items():
            self.log(name, value, on_step=False, on_epoch=True, batch_size=len(batch))
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self.model(batch).logits.float()
        loss = F.cross_entropy(logits, batch.labels, reduction="sum")
        self._val.append((batch.labels, logits.argmax(-1), loss))

    def on_validation_epoch_end(self):
        k = self.model.num_classes
        if self._val:
            gold = torch.cat([g for g, _, _ in self._val])
            pred = torch.cat([p for _, p, _ in self._val])
            cm = torch.bincount(gold * k + pred, minlength=k * k).reshape(k, k).double()
            loss_sum = torch.stack([l for _, _, l in self._val]).sum().double()
        else:
            cm, loss_sum = torch.zeros(k, k, dtype=torch.double, device=self.device), torch.zeros((), dtype=torch.double, device=self.device)
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
        self.log("val_acc", (tp.sum() / total).float(), prog_bar=True)
        self.log("val_macro_f1", f1[present].mean().float())
        self.log("val_loss", (loss_sum / total).float())

    def configure_optimizers(self):
        cfg = self.cfg
        emb = [p for n, p in self.model.named_parameters() if n.startswith("embedding.") and p.requires_grad]
        rest = [p for n, p in self.model.named_parameters() if not n.startswith("embedding.") and p.requires_grad]
        groups = [{"params": rest}]
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
            cfg.grad_clip and "mixed" in resolve_precision(cfg))
        if cfg.optimizer == "sgd":
            opt = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, fused=fused)
        elif cfg.optimizer == "adam":
            opt = torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=fused)
        else:
            opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=fused)
        if self.per_step_schedule and cfg.schedule in ("cosine", "none"):
            total = max(1, int(self.trainer.estimated_stepping_batches))
            factor = _per_step_factor(cfg.schedule, cfg.warmup_steps, total)
            return [opt], [{"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, factor), "interval": "step"}]
        schedulers = []
        if cfg.schedule == "step":
            schedulers.append(torch.optim.lr_scheduler.StepLR(opt, cfg.step_size, cfg.gamma))
        elif cfg.schedule == "multistep":
            schedulers.append(torch.optim.lr_scheduler.MultiStepLR(opt, cfg.milestones, cfg.gamma))
        elif cfg.schedule == "cosine":
            schedulers.append(torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.max_epochs))
        configs = [{"scheduler": sched, "interval": "epoch"} for sched in schedulers]
        if cfg.warmup_steps:  # created last, stepped per batch: both scale the rate multiplicatively, so they compose
            warmup = torch.optim.lr_scheduler.LinearLR(opt, 1.0 / cfg.warmup_steps, 1.0, total_iters=cfg.warmup_steps - 1)
            configs.append({"scheduler": warmup, "interval": "step"})
        return ([opt], configs) if configs else opt


def _per_step_factor(schedule: str, warmup: int, total: int):
    """The rate's multiplier at each optimizer step: a linear warm-up, then a cosine from 1 to 0 over the
    ``total`` steps planned (or 1 throughout). A function of the step alone, so a resume, whose scheduler
    state keeps only the step, continues the same curve, and an early stop simply ends it sooner."""

    def factor(step: int) -> float:
        rise = min(1.0, (step + 1) / warmup) if warmup else 1.0
        if schedule != "cosine":
            return rise
        return rise * 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))

    return factor


class EMAWeights(WeightAveraging):
    """Polyak averaging on Lightning's ``WeightAveraging``: after every optimizer step the average
    moves towards the weights by (1 - decay), and validation, the best weights and the final model
    all use the average, which smooths out where the last few batches happened to push the model."""

    def __init__(self, decay: float):
        from torch.optim.swa_utils import get_ema_multi_avg_fn

        super().__init__(use_buffers=False, multi_avg_fn=get_ema_multi_avg_fn(decay))

    def on_fit_start(self, trainer, pl_module):
        # setup() built the average before Lightning moved the model to its device: follow it there,
        # or every step would copy all weights off the GPU and average them on the CPU
        if self._average_model is not None:
            self._average_model.to(pl_module.device)

    def validated_model(self, pl_module) -> torch.nn.Module:
        """The docattn model whose weights validation just scored: the running average."""
        average = self._average_model
        return average.module.model if average is not None else pl_module.model


class BestWeights(Callback):
    """Keeps the weights of the best validation so far (and calls ``on_best`` with them on rank 0).

    ``validated_model(pl_module)`` gives the model validation scored (an average under EMA)."""

    def __init__(self, monitor: str, on_best=None, validated_model=None):
        self.monitor, self.on_best = monitor, on_best
        self.validated_model = validated_model or (lambda pl_module: pl_module.model)
        self.mode = "min" if monitor == "val_loss" else "max"
        self.best_score: float | None = None
        self.best_state: dict | None = None
        self.best_metrics: dict = {}

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking or not math.isfinite(float(trainer.callback_metrics["val_loss"])):
            return  # NaN weights still give an accuracy (every argmax is class 0): never keep them
        score = float(trainer.callback_metrics[self.monitor])
        better = self.best_score is None or (score < self.best_score if self.mode == "min" else score > self.best_score)
        if better:
            model = self.validated_model(pl_module)
            self.best_score = score
            self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            self.best_metrics = {k: float(trainer.callback_metrics[k]) for k in ("val_acc", "val_macro_f1", "val_loss")}
            self.best_metrics.update(epoch=trainer.current_epoch, step=trainer.global_step)
            if self.on_best is not None and trainer.is_global_zero:
                self.on_best(model, self.best_metrics)

    def state_dict(self):
        return {"best_score": self.best_score, "best_metrics": self.best_metrics}

    def load_state_dict(self, state):
        self.best_score = state.get("best_score")
        self.best_metrics = state.get("best_metrics", {})


def _interrupted(err: BaseException, trainer, run_dir: Path | None) -> Interrupted | None:
    """What a signal that stopped ``trainer.fit`` means for the run; None for any other exit."""
    import signal

    if isinstance(err, SIGTERMException) or trainer.received_sigterm:
        sig = signal.SIGTERM
    elif isinstance(err, KeyboardInterrupt) or trainer.interrupted:
        sig = signal.SIGINT
    else:
        return None
    where = f"training stopped by {sig.name} in epoch {trainer.current_epoch + 1} of {trainer.max_epochs} (step {trainer.global_step})"
    if run_dir is not None and resume_checkpoint(run_dir).exists():
        best = "; the best weights so far are in its model.safetensors" if (run_dir / "model.safetensors").exists() else ""
        return Interrupted(f"{where}{best}. Continue {run_dir} with the same command and --resume "
                           "(from its last finished epoch)", int(sig), where)
    return Interrupted(f"{where}, before a checkpoint was written: nothing to resume", int(sig), where)


def read_checkpoint(checkpoint: Path) -> dict:
    """A resume checkpoint's contents, read with ``weights_only=True``: tensors, numbers, strings and
    containers only, so a file holding a pickled object (code that would run on load) is refused."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except FileNotFoundError:
        raise CheckpointError(f"{checkpoint}: no resume checkpoint (the run has not finished an epoch); "
                              "train it again without --resume") from None
    except Exception as err:  # noqa: BLE001 - a refused global (UnpicklingError), a torn or foreign file: all refused
        why = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise CheckpointError(f"{checkpoint}: cannot resume, refused: not a checkpoint docattn wrote, or it holds more "
                              f"than tensors and numbers ({why}); nothing was changed. Delete it to train the run again") from None
    if not isinstance(state, dict) or not isinstance(state.get("epoch"), int):
        raise CheckpointError(f"{checkpoint}: cannot resume, refused: not a checkpoint docattn wrote (no epoch); "
                              "nothing was changed. Delete it to train the run again")
    return state


def trained_epochs(checkpoint: Path) -> int:
    """Epochs a resume checkpoint has finished (``ResumePoint`` writes one at each epoch's end, with
    Lightning's 0-based ``epoch``); a file that cannot be read safely is a ``CheckpointError``."""
    return read_checkpoint(checkpoint)["epoch"] + 1


def check_resumable(checkpoint: Path, max_epochs: int | None) -> None:
    """Refuse, before anything is written, a checkpoint that cannot be read safely and a resume with no
    epoch left to train: it would train nothing and rewrite the run's config.json without its history."""
    done = trained_epochs(checkpoint)
    if max_epochs is not None and max_epochs <= done:
        raise ConfigError(f"--resume: {checkpoint} has already trained {done} epoch(s), nothing is left to resume; "
                          f"give --epochs {done + 1} or more to train more (now: {max_epochs})")


class EarlyStoppingAfter(EarlyStopping):
    """Early stopping that judges only from ``min_steps`` optimizer steps on: on a small validation set the
    score saturates within a few epochs, and stopping there ended training at a third of its steps, at
    the cosine's peak rate (the recipe's minimum training is a floor, not a plan to cut short)."""

    def __init__(self, *args, min_steps: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.min_steps = min_steps

    def _should_skip_check(self, trainer) -> bool:
        return super()._should_skip_check(trainer) or trainer.global_step < self.min_steps


class DivergenceGuard(Callback):
    """Stops training once its loss is NaN or infinite and the weights are too (a step a loss scaler
    skipped leaves them finite), so a diverged run ends at once, and says so, instead of training
    on NaN. The flag lives on the device and is read every ``every`` steps, not synchronising each."""

    def __init__(self, every: int = 25):
        self.every = every
        self.bad: torch.Tensor | None = None
        self.loss, self.epoch = float("nan"), 0
        self.at: dict | None = None  # step, epoch and loss where it was found

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is None:
            return
        finite = torch.isfinite(loss.detach())
        self.bad = ~finite if self.bad is None else self.bad | ~finite
        self.loss, self.epoch = loss, trainer.current_epoch
        if trainer.global_step % self.every == 0 or batch_idx + 1 == trainer.num_training_batches:
            self._check(trainer, pl_module)

    def on_train_epoch_end(self, trainer, pl_module):
        """Before ResumePoint writes (it comes later in the callbacks): a time budget or early stop
        may end an epoch between two checks, and the checkpoint must not keep NaN weights."""
        if self.at is None:
            self._check(trainer, pl_module)

    def on_train_end(self, trainer, pl_module):
        if self.at is None:
            self._check(trainer, pl_module)

    def _check(self, trainer, pl_module) -> None:
        diverged = self.bad is not None and bool(self.bad) and not all(bool(torch.isfinite(p).all()) for p in pl_module.parameters())
        self.bad = None
        # every rank decides at the same steps, so under DDP all stop together or none does
        if trainer.strategy.reduce_boolean_decision(diverged, all=False):
            self.at = {"step": trainer.global_step, "epoch": self.epoch, "loss": float(self.loss)}
            trainer.should_stop = True


class ValidateLastStep(Callback):
    """The final weights get a validation of their own, so they can be the best ones.

    With several validations per epoch (every n batches) the last batches of an epoch that n does
    not divide are never validated; at the last batch of the last epoch the run would end on
    weights no validation saw. Lightning validates whenever a run is asked to stop, so ask then.
    """

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        last_epoch = trainer.max_epochs is not None and 0 < trainer.max_epochs <= trainer.current_epoch + 1
        if last_epoch and batch_idx + 1 == trainer.num_training_batches:
            trainer.should_stop = True


class ResumePoint(Callback):
    """``checkpoints/last.ckpt`` after every training epoch, written to a temporary file and renamed,
    so ``--resume`` continues a killed run from its last finished epoch (never from a torn file)."""

    def __init__(self, path: Path, guard: "DivergenceGuard | None" = None):
        self.path, self.guard = path, guard

    def on_train_epoch_end(self, trainer, pl_module):
        if self.guard is not None and self.guard.at is not None:
            return  # NaN weights: --resume continues from the epoch before instead
        from docattn.data.files import replacing

        if not trainer.is_global_zero:
            trainer.save_checkpoint(self.path.with_name(f".{self.path.name}.tmp"))  # every rank takes part; rank 0 writes
            return
        try:
            with replacing(self.path) as tmp:  # a full disk: one line, and no half-written temporary left
                trainer.save_checkpoint(tmp)
        except RuntimeError as err:  # torch.save reports a failed write as "file write failed"
            raise WriteError(f"cannot write {self.path}: {str(err).strip().splitlines()[0][:200]}; the previous "
                             "checkpoint is kept (free some space or write elsewhere)") from None


class MetricsLog(Callback):
    """One CSV row per validation: epoch, step, losses, accuracy, macro-F1, documents/s, elapsed time."""

    COLUMNS = ["epoch", "step", "train_loss", "val_loss", "val_acc", "val_macro_f1", "train_docs_per_s", "elapsed_s", "lr"]

    def __init__(self, path: Path | None, echo: bool = False):
        self.path = path
        self.echo = echo  # also print each row as one line on stderr (where no progress bar can be seen)
        self.rows: list[dict] = []
        self.docs = 0
        self.busy = 0.0
        self.epoch_seconds: list[float] = []  # wall time of each full training epoch, validation excluded
        self._t0 = self._te = self._tv = time.perf_counter()
        self._val_in_epoch = 0.0
        self.resumed = False  # set by fit: continuing from a checkpoint keeps the rows up to it
        self._loss_sum, self._loss_docs = 0.0, 0  # training loss since the last validation
        self._lr = float("nan")

    def state_dict(self) -> dict:
        """The loss of the steps trained since the last validation: a resume's next row averages them too."""
        return {"loss_sum": float(self._loss_sum), "loss_docs": self._loss_docs}

    def load_state_dict(self, state: dict) -> None:
        self._loss_sum, self._loss_docs = float(state.get("loss_sum", 0.0)), int(state.get("loss_docs", 0))

    def on_train_start(self, trainer, pl_module):
        # a new run starts a new file; a resumed one drops the rows logged after its checkpoint
        # (the validations of the epoch the interruption cut short) and continues the rest
        if self.path is None or not trainer.is_global_zero or not self.path.exists():
            return
        kept = []
        if self.resumed:
            with open(self.path, newline="") as f:
                kept = [r for r in csv.DictReader(f) if r.get("step", "").isdigit() and int(r["step"]) <= trainer.global_step]
        from docattn.data.files import replacing

        with replacing(self.path) as tmp, open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(kept)
        self.rows = [{k: (int(v) if k in ("epoch", "step") else float(v)) for k, v in r.items() if k in self.COLUMNS and v != ""}
                     for r in kept]

    def on_train_epoch_start(self, trainer, pl_module):
        self._te = time.perf_counter()
        self._val_in_epoch = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._tb = time.perf_counter()
        if trainer.optimizers:  # the rate this step trains at (an epoch-end scheduler step changes it before validation)
            self._lr = trainer.optimizers[0].param_groups[0]["lr"]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        last = batch_idx + 1 == trainer.num_training_batches
        if last and pl_module.device.type == "cuda":
            torch.cuda.synchronize()  # kernels are asynchronous: the epoch ends when the GPU is done
        now = time.perf_counter()
        dt = now - self._tb
        if last:
            self.epoch_seconds.append(now - self._te - self._val_in_epoch)
        self.docs += len(batch) * trainer.world_size
        self.busy += dt
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if torch.is_tensor(loss):  # summed on the device: no host sync per step
            self._loss_sum = self._loss_sum + loss.detach().float() * len(batch)
            self._loss_docs += len(batch)
        pl_module.log("docs/s", len(batch) * trainer.world_size / max(dt, 1e-9), prog_bar=True, on_step=True, on_epoch=False)

    def on_validation_start(self, trainer, pl_module):
        self._tv = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        self._val_in_epoch += time.perf_counter() - self._tv
        m = trainer.callback_metrics
        row = {
            "epoch": trainer.current_epoch,
            "step": trainer.global_step,
            # mean loss of the documents trained on since the previous validation (Lightning's epoch mean
            # is only complete at the epoch's end, so mid-epoch rows showed the previous epoch's)
            "train_loss": float(self._loss_sum / self._loss_docs) if self._loss_docs else float("nan"),
            "val_loss": float(m["val_loss"]),
            "val_acc": float(m["val_acc"]),
            "val_macro_f1": float(m["val_macro_f1"]),
            "train_docs_per_s": self.docs / max(self.busy, 1e-9),
            "elapsed_s": time.perf_counter() - self._t0,
            "lr": self._lr,
        }
        self._loss_sum, self._loss_docs = 0.0, 0
        self.rows.append(row)
        if self.echo and trainer.is_global_zero:
            print(f"  epoch {row['epoch']} step {row['step']}: val_acc {row['val_acc']:.4f} val_loss {row['val_loss']:.4f} "
                  f"train_loss {row['train_loss']:.4f}, {row['train_docs_per_s']:.0f} docs/s, {row['elapsed_s']:.0f} s",
                  file=sys.stderr, flush=True)
        if self.path is not None and trainer.is_global_zero:
            new = not self.path.exists()
            try:
                with open(self.path, "a", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=self.COLUMNS)
                    if new:
                        w.writeheader()
                    w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
            except OSError as err:
                raise WriteError(f"cannot write {self.path}: {err.strerror or err} (free some space or write elsewhere)") from None


@dataclass
class FitResult:
    best_metrics: dict
    history: list[dict]
    train_docs_per_s: float
    train_seconds: float
    stopped_on_budget: bool
    stopped_early: bool = False  # --patience validations passed without improvement
    epoch_seconds: list[float] = field(default_factory=list)
    is_global_zero: bool = True
    device: str = "cpu"  # where it trained, e.g. "cuda:0" (Lightning hands the model back on the CPU)
    diverged_at: dict | None = None  # step, epoch and loss where the loss and weights became NaN/infinite
    extra: dict = field(default_factory=dict)


def resolve_precision(cfg: TrainConfig) -> str:
    if cfg.precision:
        return cfg.precision
    wants_gpu = cfg.accelerator in ("gpu", "cuda") or (cfg.accelerator == "auto" and torch.cuda.is_available())
    return "bf16-mixed" if wants_gpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "32-true"


def _trainer(cfg: TrainConfig, callbacks: list, val_interval, bar: bool, run_dir: Path | None) -> L.Trainer:
    return L.Trainer(
        max_epochs=cfg.max_epochs,
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=cfg.strategy,
        precision=resolve_precision(cfg),
        gradient_clip_val=cfg.grad_clip,
        val_check_interval=val_interval,
        max_time=timedelta(seconds=cfg.max_time) if cfg.max_time else None,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,  # ResumePoint writes the one checkpoint a run needs
        enable_progress_bar=bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        default_root_dir=str(run_dir) if run_dir is not None else None,
    )


def checked_trainer(cfg: TrainConfig, callbacks: list | None = None, val_interval=None, bar: bool = False,
                    run_dir: Path | None = None) -> L.Trainer:
    """The Lightning trainer for ``cfg``; devices, strategy or precision it refuses are one ConfigError. Called
    alone before a run folder is written, so a bad option changes nothing there."""
    if cfg.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"accelerator={cfg.accelerator!r} but PyTorch sees no CUDA GPU here (use auto or cpu)")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # its start-up banners are noise for users
    try:
        return _trainer(cfg, callbacks or [], val_interval, bar, run_dir)
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
    # Lightning's start-up banners and a warning about our own batch transfer are noise for users
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*transfer_batch_to_device.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    # under DDP the validation counts are summed over ranks before logging (on_validation_epoch_end);
    # the progress figures (train_loss) are rank 0's own
    warnings.filterwarnings("ignore", message=".*when logging on epoch level in distributed setting.*")
    L.seed_everything(cfg.seed, verbose=False)
    module = ClassifierModule(model, cfg, class_weights, per_step_schedule=cfg.recipe == "auto")
    data = DocumentData(train, valid, model.layout, limits, cfg)
    ema = EMAWeights(cfg.ema_decay) if cfg.ema_decay else None
    best = BestWeights(cfg.monitor, on_best, ema.validated_model if ema else None)
    # a live bar needs a terminal: redirected to a file it would print nothing until the end
    bar = cfg.progress and sys.stderr.isatty()
    log = MetricsLog(run_dir / "metrics.csv" if run_dir is not None else None, echo=cfg.progress_lines or (cfg.progress and not bar))
    guard = DivergenceGuard()
    callbacks: list[Callback] = ([ema] if ema else []) + [best, log, ValidateLastStep(), guard]
    early = None
    if cfg.patience:
        after = cfg.min_steps if cfg.recipe == "auto" else 0
        early = EarlyStoppingAfter(cfg.monitor, patience=cfg.patience, mode=best.mode, min_steps=after)
    if early is not None:
        callbacks.append(early)
    ckpt_path = None
    if run_dir is not None:
        last = resume_checkpoint(run_dir)
        ckpt_path = str(last) if resume and last.exists() else None
        if not resume and last.exists():
            last.unlink()  # an earlier run's: a later --resume must not continue it as this one
        callbacks.append(ResumePoint(last, guard))
    log.resumed = ckpt_path is not None
    if bar:
        from lightning.pytorch.callbacks import RichProgressBar

        callbacks.append(RichProgressBar(leave=True))
    n_train_batches = max(1, -(-len(train) // cfg.batch_size))
    val_interval = None
    if cfg.val_every_n_steps:
        val_interval = min(cfg.val_every_n_steps, n_train_batches)
    elif cfg.val_per_epoch > 1:
        # every n // k batches: k validations, the last near the epoch's end; fewer when an epoch
        # has too few batches for k (Lightning skips the end-of-epoch check once an interval is set)
        val_interval = max(1, n_train_batches // cfg.val_per_epoch)
        if n_train_batches // val_interval > cfg.val_per_epoch:
            val_interval = -(-n_train_batches // cfg.val_per_epoch)
    trainer = checked_trainer(cfg, callbacks, val_interval, bar, run_dir)
    t0 = time.perf_counter()
    try:
        if ckpt_path is not None:
            read_checkpoint(Path(ckpt_path))  # a refused file is named before Lightning opens it
        # weights_only: Lightning's own load of the checkpoint may not unpickle either
        trainer.fit(module, datamodule=data, ckpt_path=ckpt_path, weights_only=True)
    except (RuntimeError, OSError, EOFError) as err:
        if ckpt_path is None or trainer.global_step > 0:
            raise
        raise CheckpointError(f"{ckpt_path}: cannot resume from this checkpoint ({str(err).strip().splitlines()[0][:200]}); "
                              "delete it to start the run again") from None
    except MisconfigurationException as err:  # (a resume with no epoch left is refused before, by check_resumable)
        raise ConfigError(f"training options: {str(err).strip().splitlines()[0]}") from None
    except (SIGTERMException, SystemExit, KeyboardInterrupt) as err:
        # Lightning turns SIGTERM into a SystemExit without a code (exit status 0: "success") and
        # Ctrl-C into exit(1); both become one error that says where the run stands
        stopped = _interrupted(err, trainer, run_dir)
        if stopped is None:
            raise
        raise stopped from None
    seconds = time.perf_counter() - t0
    if guard.at is not None and best.best_state is None and not (ckpt_path is not None and run_dir is not None
                                                                and (run_dir / "model.safetensors").exists()):
        raise Diverged(f"training diverged: the loss was {guard.at['loss']} and the weights NaN or infinite by step "
                       f"{guard.at['step']} (epoch {guard.at['epoch'] + 1}), before any validation; lower the learning "
                       f"rate (now {cfg.lr:g}){', or check the vectors of ' + cfg.embeddings if cfg.embeddings not in ('word2vec', 'random') else ''}")
    if best.best_state is not None:
        model.load_state_dict(best.best_state)
    elif ckpt_path is not None and (run_dir / "model.safetensors").exists():
        # resumed, and no validation since beat the best before the interruption: that one is on disk
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(run_dir / "model.safetensors")))
    return FitResult(
        best_metrics=best.best_metrics,
        history=log.rows,
        train_docs_per_s=log.docs / max(log.busy, 1e-9),
        train_seconds=seconds,
        epoch_seconds=log.epoch_seconds,
        stopped_on_budget=bool(cfg.max_time) and seconds >= cfg.max_time,
        stopped_early=early is not None and early.wait_count >= early.patience,
        is_global_zero=trainer.is_global_zero,
        device=str(trainer.strategy.root_device),
        diverged_at=guard.at,
    )
