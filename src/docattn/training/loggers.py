"""Experiment loggers: Lightning's CSV, TensorBoard, MLflow and W&B loggers, asked for by ``logger=NAME``.

metrics.csv stays the run's own record (``MetricsLog`` writes it); a logger gets the same curves as
they happen, in the tool its user already reads. What each logger receives:

- what the model logs through Lightning: ``val_acc``, ``val_macro_f1``, ``val_loss`` at each validation,
  ``train_loss_step`` and ``docs/s`` every few steps, ``train_loss_epoch`` at each epoch's end;
- each metrics.csv row's other columns (``MetricsLog``): ``train_loss`` since the last validation,
  ``train_docs_per_s``, ``lr`` and ``elapsed_s``, at the row's step;
- the training options as hyper-parameters, and at the end the test scores beside the tf-idf baseline's,
  as scalars (``test_accuracy``, ``baseline_test_accuracy``, ...) and as a table.

Local files go under the run folder's ``logs/`` only (``RUN/logs/tensorboard/``, ``RUN/logs/csv/``,
``RUN/logs/mlflow/``, ``RUN/logs/wandb/``), never into the working directory; without a run folder
nothing is logged. MLflow follows ``$MLFLOW_TRACKING_URI`` where the user has set one, and W&B syncs
as its own login and ``$WANDB_MODE`` say.

Only the standard library loads here; Lightning and the logger's package load when a run starts.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from difflib import get_close_matches
from pathlib import Path

from docattn.errors import ConfigError

LOGS = "logs"  # the run folder's sub-folder every logger writes into
# each logger: the modules it can run on (any one) and what to pip install for it; csv needs nothing more
LOGGERS = {
    "csv": ((), ""),
    "tensorboard": (("tensorboard", "tensorboardX"), "'docattn[tensorboard]'"),
    "mlflow": (("mlflow",), "mlflow"),
    "wandb": (("wandb",), "wandb"),
}
# the loggers a fit opened, by run folder: the test table goes to the same ones (one MLflow or W&B run)
_OPEN: dict[Path, list] = {}


def checked_logger(name, installed: bool = True) -> str | None:
    """``name`` as TrainConfig keeps it: None for none, else a logger of ``LOGGERS`` (any case). With
    ``installed``, a logger whose package is missing is a one-line error naming what to pip install."""
    if name is None or (isinstance(name, str) and name.strip().lower() == "none"):
        return None
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in LOGGERS:
        close = get_close_matches(str(key), list(LOGGERS), 1)
        raise ConfigError(
            f"logger must be {', '.join(LOGGERS)} or none, got {name!r}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
        )
    modules, package = LOGGERS[key]
    if installed and modules and not any(importlib.util.find_spec(m) for m in modules):
        raise ConfigError(
            f"logger={key!r} needs the {modules[0]} package, which is not installed: pip install {package}"
        )
    return key


def build_loggers(cfg, run_dir: Path | None) -> list | bool:
    """What ``L.Trainer(logger=...)`` takes for ``cfg.logger``: a list of one logger writing under
    ``run_dir/logs``, or False (Lightning logs nothing) without a logger or without a run folder."""
    name = checked_logger(cfg.logger)
    if name is None or run_dir is None:
        return False
    for left in _OPEN.values():  # a fit in this process that failed (Lightning has finalized its loggers)
        _close(left, finalize=False)
    _OPEN.clear()
    run_dir = Path(run_dir).resolve()
    logger = _open_logger(name, run_dir, cfg)
    _OPEN[run_dir] = [logger]
    # Lightning's advice to log more often than an epoch of a small data set has batches is noise here;
    # so is its note that a resumed run's log folder already holds files (they are that run's)
    warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
    warnings.filterwarnings("ignore", message=".*Experiment logs directory .* exists and is not empty.*")
    return [logger]


def _open_logger(name: str, run_dir: Path, cfg):
    """Logger ``name`` writing under ``run_dir/logs``, the training options logged as its hyper-parameters."""
    from lightning.pytorch import loggers

    logs = run_dir / LOGS
    logs.mkdir(parents=True, exist_ok=True)
    if name == "csv":
        logger = loggers.CSVLogger(logs, name="csv", version="")
    elif name == "tensorboard":  # no placeholder hp_metric of -1 beside the real scores
        logger = loggers.TensorBoardLogger(logs, name="tensorboard", version="", default_hp_metric=False)
    elif name == "mlflow":
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (logs / "mlflow").as_uri()
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "docattn")
        logger = loggers.MLFlowLogger(experiment_name=experiment, run_name=run_dir.name, tracking_uri=uri)
    else:
        project = os.environ.get("WANDB_PROJECT", "docattn")
        logger = loggers.WandbLogger(name=run_dir.name, save_dir=str(logs), project=project)
    logger.log_hyperparams(cfg.to_json())
    return logger


def log_test_table(cfg, run_dir: Path, results: dict) -> None:
    """Log a finished run's test scores, and the tf-idf baseline's beside them, to the loggers its fit opened
    (opened now for a model fitted in one call, which has no fit loop), then close them."""
    run_dir = Path(run_dir).resolve()
    loggers = _OPEN.pop(run_dir, None)
    if loggers is None and checked_logger(cfg.logger) is not None:
        loggers = [_open_logger(checked_logger(cfg.logger), run_dir, cfg)]
    rows = _test_scores(results)
    history = results.get("history") or [{}]
    step = int(history[-1].get("step", 0))
    try:
        for logger in loggers or []:
            if rows:
                scalars = {f"{prefix}test_{k}": v for prefix, scores in rows.items() for k, v in scores.items()}
                logger.log_metrics(scalars, step=step)
                _log_table(logger, rows, step)
    finally:
        _close(loggers or [])


def _test_scores(results: dict) -> dict[str, dict]:
    """The test scores to log, by metric-name prefix: the model's ("") and the baseline's ("baseline_")."""
    rows = {}
    for prefix, report in (("", results.get("test")), ("baseline_", (results.get("baseline") or {}).get("test"))):
        numbers = {
            k: v
            for k, v in (report or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if numbers:
            rows[prefix] = numbers
    return rows


def _log_table(logger, rows: dict, step: int) -> None:
    """The test scores as one table (model and baseline rows), in the form the logger shows tables."""
    from lightning.pytorch import loggers

    columns = sorted({k for scores in rows.values() for k in scores})
    names = {"": "model", "baseline_": "baseline (tf-idf)"}
    data = [[names[p]] + [scores.get(c) for c in columns] for p, scores in rows.items()]
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    lines += ["| " + " | ".join([r[0], *(_cell(v) for v in r[1:])]) + " |" for r in data]
    markdown = "\n".join(lines)
    if isinstance(logger, loggers.TensorBoardLogger):
        logger.experiment.add_text("test", markdown, global_step=step)
    elif isinstance(logger, loggers.MLFlowLogger):
        logger.experiment.log_text(logger.run_id, markdown, "test.md")
    elif isinstance(logger, loggers.WandbLogger):
        logger.log_table("test", columns=["", *columns], data=data, step=step)
    # CSVLogger: the scalars above are its table (its metrics.csv gains the test_* columns)


def _cell(value) -> str:
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def _close(loggers: list, finalize: bool = True) -> None:
    """Write out and end each logger; a W&B run is finished, so the next fit in this process starts its own
    (W&B would otherwise log it into this one)."""
    for logger in loggers:
        if finalize:
            logger.finalize("success")
        if type(logger).__name__ == "WandbLogger" and getattr(logger, "_experiment", None) is not None:
            logger.experiment.finish()
