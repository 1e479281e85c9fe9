"""The callbacks a fit runs: best weights, weight averaging, divergence, resume checkpoints, metrics.

Each is one Lightning ``Callback`` with one job; ``engine.fit`` composes them. ``Divergence`` and
``BestValidation`` are the typed records two of them leave behind for ``FitResult``.
"""

from __future__ import annotations

import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, WeightAveraging

from docattn.errors import WriteError


@dataclass(frozen=True)
class BestValidation:
    """The best validation of a fit: its scores and when it happened (0-based epoch, optimizer step)."""

    val_acc: float
    val_macro_f1: float
    val_loss: float
    epoch: int
    step: int
    val_micro_f1: float = float("nan")  # what multi-label runs choose by; checkpoints before it lack it
    # the steps of the validations whose weights were averaged into the kept ones (average_best), the newest
    # being ``step``; empty: one validation's weights
    averaged_steps: tuple[int, ...] = ()

    @classmethod
    def from_metrics(cls, metrics: dict) -> BestValidation | None:
        """From ``BestWeights.best_metrics`` (a dict, as resume checkpoints keep it); None before any validation."""
        if not metrics:
            return None
        optional = ("val_micro_f1", "averaged_steps")
        names = cls.__dataclass_fields__
        return cls(**{name: metrics[name] for name in names if name in metrics or name not in optional})


@dataclass(frozen=True)
class Divergence:
    """Where a fit's loss and weights became NaN or infinite (0-based epoch)."""

    step: int
    epoch: int
    loss: float


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


def fitting(trainer) -> bool:
    """Whether a validation is one of the fit's own: not the sanity check, nor ``trainer.validate`` scoring
    the averaged weights after it (``engine.fit``)."""
    from lightning.pytorch.trainer.states import TrainerFn

    return trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking


SCORES = ("val_acc", "val_macro_f1", "val_micro_f1", "val_loss")


class BestWeights(Callback):
    """Keeps the weights of the best validation so far (and calls ``on_best`` with them on rank 0), and with
    ``keep`` > 1 the weights of the ``keep`` best validations too, for their mean (``average_best``).

    ``validated_model(pl_module)`` gives the model validation scored (an average under EMA)."""

    def __init__(self, monitor: str, on_best=None, validated_model=None, keep: int = 1, loss_breaks_ties=False):
        self.monitor, self.on_best, self.keep = monitor, on_best, keep
        self.validated_model = validated_model or (lambda pl_module: pl_module.model)
        self.mode = "min" if monitor == "val_loss" else "max"
        # of equal scores, the lower validation loss ranks first (else the earlier): a count of documents ties
        # often on a small or saturated validation set, and the loss still tells the weights apart
        self.loss_breaks_ties = loss_breaks_ties and monitor != "val_loss"
        self.best_score: float | None = None
        self.best_state: dict | None = None
        self.best_metrics: dict = {}
        # the keep best validations, best first (ties: as rank): {"score", "metrics", "state"}
        self.top: list[dict] = []

    def better(self, score: float, than: float | None) -> bool:
        return than is None or (score < than if self.mode == "min" else score > than)

    def rank(self, score: float, metrics: dict) -> tuple:
        """Sorts validations best first (``metrics``: the validation's, with its step)."""
        sign = 1 if self.mode == "min" else -1
        return (sign * score, metrics["val_loss"] if self.loss_breaks_ties else 0.0, metrics["step"])

    def keeps(self, score: float, loss: float = math.inf) -> bool:
        """Whether a validation scoring ``score`` (validation loss ``loss``) replaces the kept weights."""
        if self.loss_breaks_ties and score == self.best_score:
            return loss < self.best_metrics["val_loss"]
        return self.better(score, self.best_score)

    def on_validation_end(self, trainer, pl_module):
        if not fitting(trainer) or not math.isfinite(float(trainer.callback_metrics["val_loss"])):
            return  # NaN weights still give an accuracy (every argmax is class 0): never keep them
        score = float(trainer.callback_metrics[self.monitor])
        loss = float(trainer.callback_metrics["val_loss"])
        best = self.keeps(score, loss)
        here = self.rank(score, {"val_loss": loss, "step": trainer.global_step})
        ranked = self.keep > 1 and (
            len(self.top) < self.keep or here < self.rank(self.top[-1]["score"], self.top[-1]["metrics"])
        )
        if not (best or ranked):
            return
        model = self.validated_model(pl_module)
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        metrics = {k: float(trainer.callback_metrics[k]) for k in SCORES}
        metrics.update(epoch=trainer.current_epoch, step=trainer.global_step)
        if ranked:
            self.top.append({"score": score, "metrics": metrics, "state": state})
            self.top.sort(key=lambda kept: self.rank(kept["score"], kept["metrics"]))
            del self.top[self.keep :]
        if best:
            self.best_score, self.best_state, self.best_metrics = score, state, metrics
            if self.on_best is not None and trainer.is_global_zero:
                self.on_best(model, self.best_metrics)

    def mean_state(self) -> dict:
        """The mean of the ``top`` weights; integer buffers and weights that did not move (frozen vectors) are
        the best's as they are, since a mean of equal floats can differ from them in the last bit."""
        states = [kept["state"] for kept in self.top]
        mean = {}
        for name, value in states[0].items():
            others = [s[name] for s in states[1:]]
            moved = value.is_floating_point() and not all(torch.equal(value, other) for other in others)
            mean[name] = torch.stack([value, *others]).mean(0) if moved else value
        return mean

    @property
    def best_validation(self) -> BestValidation | None:
        return BestValidation.from_metrics(self.best_metrics)

    def state_dict(self):
        # the weights of the best alone are in the run's model.safetensors; those averaged only here
        return {"best_score": self.best_score, "best_metrics": self.best_metrics, "top": self.top}

    def load_state_dict(self, state):
        self.best_score = state.get("best_score")
        self.best_metrics = state.get("best_metrics", {})
        self.top = state.get("top", [])
        if self.top:  # the best is the top's first: the same order, the same ties
            self.best_state = self.top[0]["state"]


class EarlyStoppingAfter(EarlyStopping):
    """Early stopping that judges only from ``min_steps`` optimizer steps on: on a small validation set the
    score saturates within a few epochs, and stopping there ended training at a third of its steps, at
    the cosine's peak rate (the recipe's minimum training is a floor, not a plan to cut short)."""

    def __init__(self, *args, min_steps: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.min_steps = min_steps

    def _should_skip_check(self, trainer) -> bool:
        return super()._should_skip_check(trainer) or trainer.global_step < self.min_steps


class ExtendPlan(Callback):
    """The auto recipe's plan, lengthened while the run still improves (``extend_plan``): when the last
    planned epoch ends with the kept weights from the plan's last tenth of steps, train half as many epochs
    again (at most ``limit``), the cosine stretched over the longer plan, so its rate rises back to a
    fraction of its peak and falls to 0 at the new end. An option, not a default: where it acted on the
    transfer suite it found no better weights (benchmarks/LOG.md)."""

    TAIL = 0.1  # the kept weights from this last share of the planned steps: still improving
    MORE = 0.5  # lengthen by this share of the epochs planned so far

    def __init__(self, best: BestWeights, early: EarlyStopping | None, guard: DivergenceGuard, limit: int, echo=False):
        self.best, self.early, self.guard, self.limit, self.echo = best, early, guard, limit, echo
        self.max_epochs: int | None = None  # the lengthened plan; None: as planned
        self.trainer = None

    def state_dict(self) -> dict:
        return {"max_epochs": self.max_epochs}

    def setup(self, trainer, pl_module, stage):
        self.trainer = trainer  # a resume restores the lengthened plan into it (load_state_dict)

    def load_state_dict(self, state: dict) -> None:
        self.max_epochs = state.get("max_epochs")
        if self.max_epochs is not None:  # before the fit loop asks whether any epoch is left
            self.trainer.fit_loop.max_epochs = self.max_epochs

    def on_train_epoch_end(self, trainer, pl_module):
        planned, plan = trainer.max_epochs, pl_module.plan
        if (
            plan is None
            or trainer.current_epoch + 1 < planned
            or planned >= self.limit
            or not self._still_improving(trainer, plan.total)
        ):
            return
        longer = min(self.limit, planned + math.ceil(planned * self.MORE))
        plan.total = round(plan.total * longer / planned)
        trainer.fit_loop.max_epochs = self.max_epochs = longer
        trainer.should_stop = False  # ValidateLastStep asked for the plan's last validation by stopping
        if self.echo and trainer.is_global_zero:
            print(f"  the best weights came in the plan's last tenth: training to epoch {longer}", file=sys.stderr)

    def _still_improving(self, trainer, total: int) -> bool:
        from lightning.pytorch.callbacks import Timer

        stopped = (
            self.guard.at is not None
            or (self.early is not None and self.early.wait_count >= self.early.patience)
            or 0 < trainer.max_steps <= trainer.global_step
            or any(isinstance(c, Timer) and _spent(c.time_remaining("train")) for c in trainer.callbacks)
        )
        step = self.best.best_metrics.get("step")
        return not stopped and step is not None and step >= trainer.global_step - self.TAIL * total


def _spent(remaining: float | None) -> bool:
    return remaining is not None and remaining <= 0  # None: no time budget


class DivergenceGuard(Callback):
    """Stops training once its loss is NaN or infinite and the weights are too (a step a loss scaler
    skipped leaves them finite), so a diverged run ends at once, and says so, instead of training
    on NaN. The flag lives on the device and is read every ``every`` steps, not synchronising each."""

    def __init__(self, every: int = 25):
        self.every = every
        self.bad: torch.Tensor | None = None
        self.loss, self.epoch = float("nan"), 0
        self.at: Divergence | None = None

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
        diverged = (
            self.bad is not None
            and bool(self.bad)
            and not all(bool(torch.isfinite(p).all()) for p in pl_module.parameters())
        )
        self.bad = None
        # every rank decides at the same steps, so under DDP all stop together or none does
        if trainer.strategy.reduce_boolean_decision(diverged, all=False):
            self.at = Divergence(step=trainer.global_step, epoch=self.epoch, loss=float(self.loss))
            trainer.should_stop = True


class SparseWarmup(Callback):
    """HPAN's and HSAN's sparse attention eased in (``sparse_warmup_fraction``): before each training step, the
    share of HAN's softmax that their attention layers mix into their own weights, falling linearly from 1 at
    the first step to 0 after ``fraction`` of the planned steps. A function of the step alone, so a resume
    continues it; the layers leave it out of eval, so every validation scores the paper's model. An option, not
    a default: on imdb1k its pairs went either way, -0.26 on their mean (benchmarks/LOG.md)."""

    def __init__(self, fraction: float):
        self.fraction = fraction

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        steps = max(1.0, self.fraction * trainer.estimated_stepping_batches)
        _set_softmax_share(pl_module, max(0.0, 1.0 - trainer.global_step / steps))

    def on_train_end(self, trainer, pl_module):
        _set_softmax_share(pl_module, 0.0)  # a run stopped early mid-warm-up leaves the model the paper's


def _set_softmax_share(module, share: float) -> None:
    from docattn.models.layers import AttentionPooling

    for layer in module.modules():
        if isinstance(layer, AttentionPooling):
            layer.softmax_share = share


class ValidateLastStep(Callback):
    """The final weights get a validation of their own, so they can be the best ones.

    With several validations per epoch (every n batches) the last batches of an epoch that n does
    not divide are never validated; at the last batch of the last epoch the run would end on
    weights no validation saw. Lightning validates whenever a run is asked to stop, so ask then.
    """

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        last_epoch = trainer.max_epochs is not None and 0 < trainer.max_epochs <= trainer.current_epoch + 1
        last_step = 0 < trainer.max_steps <= trainer.global_step  # max_steps ends the run mid-epoch
        if last_step or (last_epoch and batch_idx + 1 == trainer.num_training_batches):
            trainer.should_stop = True


class ResumePoint(Callback):
    """``checkpoints/last.ckpt`` after every training epoch, written to a temporary file and renamed,
    so ``--resume`` continues a killed run from its last finished epoch (never from a torn file)."""

    def __init__(self, path: Path, guard: DivergenceGuard | None = None):
        self.path, self.guard = path, guard

    def on_train_epoch_end(self, trainer, pl_module):
        if self.guard is not None and self.guard.at is not None:
            return  # NaN weights: --resume continues from the epoch before instead
        from docattn.data.files import replacing

        if not trainer.is_global_zero:
            trainer.save_checkpoint(
                self.path.with_name(f".{self.path.name}.tmp")
            )  # every rank takes part; rank 0 writes
            return
        try:
            with replacing(self.path) as tmp:  # a full disk: one line, and no half-written temporary left
                trainer.save_checkpoint(tmp)
        except RuntimeError as err:  # torch.save reports a failed write as "file write failed"
            raise WriteError(
                f"cannot write {self.path}: {str(err).strip().splitlines()[0][:200]}; the previous "
                "checkpoint is kept (free some space or write elsewhere)"
            ) from None


class MetricsLog(Callback):
    """One CSV row per validation: epoch, step, losses, accuracy, macro-F1, documents/s, elapsed time; the
    trainer's experiment loggers get each row too."""

    COLUMNS = [
        "epoch",
        "step",
        "train_loss",
        "val_loss",
        "val_acc",
        "val_macro_f1",
        "val_micro_f1",
        "train_docs_per_s",
        "elapsed_s",
        "lr",
    ]

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
                kept = [
                    r
                    for r in csv.DictReader(f)
                    if r.get("step", "").isdigit() and int(r["step"]) <= trainer.global_step
                ]
        from docattn.data.files import replacing

        with replacing(self.path) as tmp, open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(kept)
        self.rows = [
            {k: (int(v) if k in ("epoch", "step") else float(v)) for k, v in r.items() if k in self.COLUMNS and v != ""}
            for r in kept
        ]

    def on_train_epoch_start(self, trainer, pl_module):
        self._te = time.perf_counter()
        self._val_in_epoch = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._tb = time.perf_counter()
        if (
            trainer.optimizers
        ):  # the rate this step trains at (an epoch-end scheduler step changes it before validation)
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
        pl_module.log(
            "docs/s", len(batch) * trainer.world_size / max(dt, 1e-9), prog_bar=True, on_step=True, on_epoch=False
        )

    def on_validation_start(self, trainer, pl_module):
        self._tv = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if not fitting(trainer):
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
            "val_micro_f1": float(m["val_micro_f1"]),  # multi-label runs choose their best weights by it
            "train_docs_per_s": self.docs / max(self.busy, 1e-9),
            "elapsed_s": time.perf_counter() - self._t0,
            "lr": self._lr,
        }
        self._loss_sum, self._loss_docs = 0.0, 0
        self.rows.append(row)
        if trainer.loggers:
            self._forward(trainer, row)
        if self.echo and trainer.is_global_zero:
            print(
                f"  epoch {row['epoch'] + 1} step {row['step']}: val_acc {row['val_acc']:.4f} "
                f"val_loss {row['val_loss']:.4f} train_loss {row['train_loss']:.4f}, "
                f"{row['train_docs_per_s']:.0f} docs/s, {row['elapsed_s']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        if self.path is not None and trainer.is_global_zero:
            new = not self.path.exists()
            try:
                with open(self.path, "a", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=self.COLUMNS)
                    if new:
                        w.writeheader()
                    w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
            except OSError as err:
                raise WriteError(
                    f"cannot write {self.path}: {err.strerror or err} (free some space or write elsewhere)"
                ) from None

    @staticmethod
    def _forward(trainer, row: dict) -> None:
        """The row to the experiment loggers (training/loggers.py) at its step: the columns Lightning has not
        just sent them itself, as it has what the model logs (val_loss, val_acc, val_macro_f1)."""
        sent = trainer.logged_metrics
        own = {k: v for k, v in row.items() if k not in ("epoch", "step") and k not in sent}
        for logger in trainer.loggers:
            logger.log_metrics(own, step=row["step"])
