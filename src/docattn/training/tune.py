"""Learning-rate search on the validation split, as the HAN paper tunes: one run per rate, recorded in tune.json.

The caller builds each trial's classifier (``build(lr)``), so this layer never imports the API above it;
``DocumentClassifier.tune`` and ``docattn tune`` both end here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from docattn.data.files import write_json
from docattn.data.prepare import PreparedData
from docattn.errors import ConfigError, Diverged, DocattnError, Interrupted
from docattn.training.config import TrainConfig
from docattn.training.run import RUN_ONLY

TUNE_FILE = "tune.json"


class Trial(Protocol):
    """What a trial trains: a classifier with its options set, fitted on prepared splits (``DocumentClassifier``)."""

    model_name: str
    train_config: TrainConfig
    results: dict

    def get_params(self) -> dict: ...

    def fit_prepared(self, data: PreparedData, run_dir=None, resume: bool = False): ...


@dataclass
class TuneResult:
    """Every rate tried, in order, and the one with the best validation accuracy."""

    # per rate: "lr", "run" (its run folder, or None), then the best validation's metrics ("val_acc",
    # "val_macro_f1", "epoch": 0-based) or "diverged" (the error's message)
    trials: list[dict]
    best: dict

    @property
    def best_lr(self) -> float:
        return self.best["lr"]


def check_tunable(model: str) -> None:
    """Only models trained by gradient descent have a learning rate to search."""
    from docattn.models import get_spec
    from docattn.models.contract import is_bag

    if is_bag(get_spec(model)):
        raise ConfigError(
            f"{model} is not trained by gradient descent: there is no learning rate to tune "
            "(compare its settings with docattn benchmark --set KEY=VALUE)"
        )


def check_rates(rates) -> list[float]:
    """Learning rates as floats: each above 0 and finite, none twice as its run folder names it (``lr=0.001``)."""
    rates = [float(r) for r in rates]
    if not rates or any(not 0 < r < float("inf") for r in rates):  # nan fails both
        raise ConfigError(f"give at least one learning rate, each a number above 0; got {rates}")
    if len({f"{r:g}" for r in rates}) < len(rates):  # the same rate twice would train into one folder twice
        raise ConfigError(
            f"a learning rate is listed more than once (as its run folder names it): "
            f"{', '.join(f'{r:g}' for r in rates)}"
        )
    return rates


def tune_learning_rate(
    build: Callable[[float | None], Trial],
    data: PreparedData,
    rates=None,
    out: Path | None = None,
    resume: bool = False,
    log: Callable[[str], None] = print,
) -> TuneResult:
    """Train one classifier per learning rate on ``data``'s training split, compared on its validation split.

    ``build(lr)`` returns an unfitted classifier with that rate (``None``: its own); ``rates`` default to
    its optimizer's grid (``TrainConfig.lr_grid``). With ``out``, each trial trains into ``out/lr=RATE`` and
    ``out/tune.json`` is rewritten after every trial, so an interrupted search keeps what it found;
    ``resume`` keeps the trials tune.json records and continues the cut one from its last finished epoch.
    A rate that diverges is a finding (its trial says so), unless every rate does.
    """
    base = build(None)
    check_tunable(base.model_name)
    rates = check_rates(rates if rates is not None else base.train_config.lr_grid())
    data.splits.pop("test", None)  # tuning on test documents would leak them into the choice
    record = _Record(out, _search_key(base, data), resume)
    record.write(complete=False)
    for rate in rates:
        kept = record.kept.get(f"{rate:g}")
        if kept is not None:
            record.trials.append(kept)
            log(f"lr {rate:g}: kept from {TUNE_FILE}")
            continue
        record.trials.append(_run_trial(build(rate), data, rate, out, resume, record, log))
        record.write(complete=False)
    if not any("val_acc" in t for t in record.trials):
        raise DocattnError(
            f"every learning rate tried diverged or kept no validation ({', '.join(f'{r:g}' for r in rates)}); "
            "try lower ones"
        )
    best = max(record.trials, key=lambda t: t.get("val_acc", -1))
    record.write(complete=True, best=best)
    return TuneResult(list(record.trials), best)


def _run_trial(
    clf: Trial, data: PreparedData, rate: float, out: Path | None, resume: bool, record: _Record, log
) -> dict:
    """One rate's training; its tune.json entry."""
    run = out / f"lr={rate:g}" if out is not None else None
    try:
        clf.fit_prepared(data, run_dir=run, resume=resume and run is not None and _unfinished(run, clf, data))
    except Diverged as err:  # too high a rate is a finding of the search, not the end of it
        log(f"lr {rate:g}: diverged before its first validation")
        return {"lr": rate, "diverged": str(err), "run": str(run) if run else None}
    except Interrupted as err:
        record.write(complete=False)
        raise Interrupted(
            f"lr {rate:g}: {err.where}; {TUNE_FILE} keeps the {len(record.trials)} trial(s) finished "
            "before it. Go on with the same command and --resume",
            err.signal,
            err.where,
        ) from None
    best = clf.results.get("best", {})
    log(f"lr {rate:g}: validation accuracy {best.get('val_acc', float('nan')):.4f}")
    return {"lr": rate, **best, "run": str(run) if run else None}


def _search_key(base: Trial, data: PreparedData) -> dict:
    """What makes trials comparable: the model, the data's content and the options that change training."""
    options = base.get_params()
    model = options.pop("model")
    kept = {k: v for k, v in options.items() if k not in RUN_ONLY}
    return {"model": model, "data": data.info.get("inputs"), "options": json.loads(json.dumps(kept, default=str))}


class _Record:
    """tune.json: the search's key and trials, rewritten before and after every trial."""

    def __init__(self, out: Path | None, search: dict, resume: bool):
        self.out, self.search, self.trials = out, search, []
        self.kept = _trials_kept(out / TUNE_FILE, search) if resume and out is not None else {}

    def write(self, **extra) -> None:
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        listed = {f"{t['lr']:g}" for t in self.trials}  # kept trials not reached yet stay recorded too
        trials = self.trials + [t for rate, t in self.kept.items() if rate not in listed]
        write_json(self.out / TUNE_FILE, {**self.search, "trials": trials, **extra})


def _unfinished(run_dir: Path, clf: Trial, data: PreparedData) -> bool:
    """Whether a trial's resume checkpoint has epochs left; one that trained them all was cut
    short while it was tested or saved, and trains again rather than keep half-written results."""
    from docattn.training.recipe import planned_epochs
    from docattn.training.run import check_resumable, resume_checkpoint

    checkpoint = resume_checkpoint(run_dir)
    if not checkpoint.exists():
        return False
    try:  # a checkpoint that cannot be read safely is refused (CheckpointError), never trained over
        check_resumable(checkpoint, planned_epochs(clf.train_config, len(data.splits["train"])))
    except ConfigError:
        return False
    return True


def _trials_kept(path: Path, search: dict) -> dict:
    """The finished trials of an earlier search by rate ("0.001"), for a resumed search; refused when it
    searched another model, data or options, whose trials would not compare."""
    if not path.exists():
        return {}
    try:
        prior = json.loads(path.read_text(encoding="utf-8"))
        trials = {f"{float(t['lr']):g}": t for t in prior["trials"]}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DocattnError(f"--resume: {path} is unreadable ({err}); remove it to search again") from None
    differs = [k for k in search if prior.get(k) != search[k]]
    if differs:
        raise DocattnError(
            f"--resume: {path} searched with other settings ({', '.join(differs)}: "
            f"{', '.join(repr(prior.get(k)) for k in differs)}); give the same ones, or another --out"
        )
    return trials
