"""A run directory: config.json, vocab.json, model.safetensors, metrics.csv. Loading never unpickles."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from docattn.data.corpus import LabelMap
from docattn.data.files import write_json
from docattn.data.prepare import DataSettings
from docattn.data.text import Vocabulary
from docattn.errors import CheckpointError, ConfigError, DocattnError
from docattn.models.contract import is_one_shot
from docattn.training.config import TrainConfig
from docattn.version import __version__

CONFIG, VOCAB, WEIGHTS, METRICS = "config.json", "vocab.json", "model.safetensors", "metrics.csv"


def resume_checkpoint(run_dir: Path) -> Path:
    """Where a run's ``--resume`` checkpoint lives (written by the engine's ``ResumePoint``)."""
    return run_dir / "checkpoints" / "last.ckpt"


def read_checkpoint(checkpoint: Path) -> dict:
    """A resume checkpoint's contents, read with ``weights_only=True``: tensors, numbers, strings and
    containers only, so a file holding a pickled object (code that would run on load) is refused."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except FileNotFoundError:
        raise CheckpointError(
            f"{checkpoint}: no resume checkpoint (the run has not finished an epoch); train it again without --resume"
        ) from None
    except Exception as err:  # noqa: BLE001 - a refused global (UnpicklingError), a torn or foreign file: all refused
        why = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise CheckpointError(
            f"{checkpoint}: cannot resume, refused: not a checkpoint docattn wrote, or it holds more "
            f"than tensors and numbers ({why}); nothing was changed. Delete it to train the run again"
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("epoch"), int):
        raise CheckpointError(
            f"{checkpoint}: cannot resume, refused: not a checkpoint docattn wrote (no epoch); "
            "nothing was changed. Delete it to train the run again"
        )
    return state


def trained_epochs(checkpoint: Path) -> int:
    """Epochs a resume checkpoint has finished (``ResumePoint`` writes one at each epoch's end, with
    Lightning's 0-based ``epoch``); a file that cannot be read safely is a ``CheckpointError``."""
    return read_checkpoint(checkpoint)["epoch"] + 1


def check_resumable(checkpoint: Path, max_epochs: int | None) -> None:
    """Refuse, before anything is written, a checkpoint that cannot be read safely and a resume with no
    epoch left to train: it would train nothing and rewrite the run's config.json without its history. A plan
    lengthened in training (``callbacks.ExtendPlan``) counts as planned."""
    state = read_checkpoint(checkpoint)
    done = state["epoch"] + 1
    lengthened = (state.get("callbacks") or {}).get("ExtendPlan", {}).get("max_epochs")
    if max_epochs is not None and lengthened:
        max_epochs = max(max_epochs, lengthened)
    if max_epochs is not None and max_epochs <= done:
        raise ConfigError(
            f"--resume: {checkpoint} has already trained {done} epoch(s), nothing is left to resume; "
            f"give --epochs {done + 1} or more to train more (now: {max_epochs})"
        )


def settings_as_options(data: DataSettings, training: TrainConfig, hparams: dict) -> dict:
    """A run's saved settings as the keyword options ``DocumentClassifier`` takes: training, data, text
    and model hyper-parameters in one flat dict (what ``--resume`` and ``load().get_params()`` start from)."""
    flat = data.to_json()
    text = flat.pop("text")
    return {**asdict(training), **flat, **text, **hparams}


@dataclass
class Run:
    model_name: str
    model: torch.nn.Module
    vocab: Vocabulary
    labels: LabelMap
    data: DataSettings
    training: TrainConfig
    config: dict  # the whole config.json (metrics and results included)


def save_weights(model: torch.nn.Module, path: Path, model_name: str) -> None:
    """Weights as safetensors, written to a temporary file and renamed (a crash never truncates);
    the metadata names the model, so another model's weights of the same shapes are not taken for them."""
    from safetensors.torch import save

    from docattn.data.files import atomic_write

    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    # Python writes the bytes so the file's mode follows the umask like its neighbours (save_file makes it 0600)
    atomic_write(path, save(state, metadata={"docattn_version": __version__, "model": model_name}))


def save_run(
    run_dir,
    model_name: str,
    model,
    vocab: Vocabulary,
    labels: LabelMap,
    data: DataSettings,
    training: TrainConfig,
    results: dict | None = None,
    weights: bool = True,
) -> Path:
    """Write (or update) a run directory that ``load_run`` and every CLI command can use."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    vocab.save(run_dir / VOCAB)
    hparams = model.hparams()
    config = {
        "docattn_version": __version__,
        "model": model_name,
        "hparams": hparams,
        "num_classes": len(labels),
        "vocab_size": len(vocab),
        "labels": labels.to_json(),
        "data": data.to_json(),
        "training": training.to_json(),
        "results": results or {},
    }
    write_json(run_dir / CONFIG, config)
    history = config["results"].get("history")
    if history and not (run_dir / METRICS).exists():  # trained without a run directory, saved afterwards
        _write_metrics(run_dir / METRICS, history)
    if weights and is_one_shot(model):  # non-neural baselines: their own arrays
        model.save_artifacts(run_dir)
    elif weights:
        save_weights(model, run_dir / WEIGHTS, model_name)
    return run_dir


def _write_metrics(path: Path, history: list[dict]) -> None:
    """The per-validation rows ``docattn train`` logs as it goes, from a finished run's history."""
    import csv

    from docattn.data.files import replacing

    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(history[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(history)


def read_config(run_dir) -> dict:
    path = Path(run_dir) / CONFIG
    if Path(run_dir).is_file():
        raise CheckpointError(f"{run_dir}: a file, not a run directory (the folder train --out wrote, with {CONFIG})")
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"{run_dir}: not a run directory (no such folder)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{run_dir}: not a run directory ({CONFIG} missing)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt config ({err})") from None
    except RecursionError:  # json recurses per nesting level: a hostile file exhausts the stack
        raise CheckpointError(f"{path}: corrupt config (nested too deeply to be a run's config)") from None


def load_run(run_dir, device: str | torch.device = "cpu") -> Run:
    """Rebuild the model from config.json and load its safetensors weights, checking they match."""
    from safetensors import SafetensorError, safe_open

    from docattn.models import create_model

    run_dir = Path(run_dir)
    config = read_config(run_dir)
    try:
        name, hparams = config["model"], config["hparams"]
        if not isinstance(hparams, dict):
            raise TypeError(f"'hparams' is {type(hparams).__name__}, not an object")
        labels = LabelMap.from_json(config["labels"])
        data = DataSettings.from_json(config["data"])
        training = TrainConfig.from_json(config["training"])
    except KeyError as err:
        raise CheckpointError(f"{run_dir / CONFIG}: missing field {err}") from None
    except (TypeError, AttributeError, ValueError, DocattnError) as err:  # a field of another shape, or a value
        raise CheckpointError(f"{run_dir / CONFIG}: malformed ({err})") from None  # its checks refuse (lr "fast")
    vocab = Vocabulary.load(run_dir / VOCAB)
    if len(vocab) != config.get("vocab_size", len(vocab)):
        raise CheckpointError(
            f"{run_dir}: vocabulary has {len(vocab)} words but config.json says {config['vocab_size']}"
        )
    try:
        model = create_model(name, vocab_size=len(vocab), num_classes=len(labels), **hparams)
    except (TypeError, ValueError, DocattnError) as err:  # hyper-parameters of the wrong type or range, another model's
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{run_dir / CONFIG}: cannot build model {name!r} from its hparams ({first})") from None
    if is_one_shot(model):  # non-neural baselines keep their own arrays
        model.load_artifacts(run_dir)
    else:
        weights = run_dir / WEIGHTS
        if not weights.exists():
            raise CheckpointError(
                f"{run_dir}: {WEIGHTS} missing (a run stopped before its first validation has "
                "no weights yet: continue it with train --resume)"
            )
        try:
            with safe_open(str(weights), "pt") as f:
                saved_as = (f.metadata() or {}).get("model")  # None: written before the name was kept
                if saved_as is not None and saved_as != name:
                    raise CheckpointError(
                        f"{weights}: weights of model {saved_as!r}, but {CONFIG} says {name!r}; "
                        "copy the weights and config.json of one run together"
                    )
                state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118  (safe_open is not a mapping)
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{weights}: unreadable or truncated weights ({err})") from None
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            first = str(err).strip().splitlines()
            raise CheckpointError(
                f"{weights}: weights do not match model {name!r} ({' '.join(first[:3])[:300]})"
            ) from None
        # load_state_dict casts integers into float parameters and copies NaN as it is: such a model
        # evaluates quietly as chance, so refuse it (a model's own integer buffers are compared, not refused)
        own_state = model.state_dict()
        for key, saved in state.items():
            own = own_state.get(key, saved)
            if saved.is_floating_point() != own.is_floating_point():
                raise CheckpointError(
                    f"{weights}: tensor {key!r} is {saved.dtype} where model {name!r} has {own.dtype}; "
                    "the file is damaged: retrain the model or restore the file from a copy"
                )
            if saved.is_floating_point() and not bool(torch.isfinite(saved).all()):
                raise CheckpointError(
                    f"{weights}: tensor {key!r} holds NaN or infinite values; the file is damaged: "
                    "retrain the model or restore the file from a copy"
                )
        model.to(device)
    model.eval()
    return Run(name, model, vocab, labels, data, training, config)


# options that change where and how a run is shown or spread, never what it learns
RUN_ONLY = frozenset(
    {"accelerator", "devices", "num_nodes", "strategy", "loader_workers", "progress", "progress_lines"}
)
# options a resumed run may change besides: how long and how fast it goes on
RESUME_FREE = RUN_ONLY | {"max_epochs", "max_time", "patience", "precision", "val_every_n_steps", "val_per_epoch"}


def resume_options(run_dir, model: str | None, options: dict) -> tuple[str, dict]:
    """The interrupted run's model and settings, with ``options`` on top; an option that would change the
    model or its data (the checkpoint could not be loaded into it) is an error. ``model`` None: the run's."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    try:
        saved_model = config["model"]
        # from_json fills what older runs did not record
        saved = settings_as_options(
            DataSettings.from_json(config["data"]), TrainConfig.from_json(config["training"]), dict(config["hparams"])
        )
    except (KeyError, TypeError, AttributeError, ValueError, DocattnError) as err:
        raise DocattnError(f"{run_dir / CONFIG}: cannot resume, malformed field {err}") from None
    if model is not None and model != saved_model:
        raise DocattnError(f"{run_dir} is a {saved_model!r} run: --resume cannot continue it as {model!r}")
    changed = sorted(k for k, v in options.items() if k not in RESUME_FREE and k in saved and _differs(saved[k], v))
    unknown = sorted(k for k in options if k not in saved and k not in RESUME_FREE)
    if changed or unknown:
        what = ", ".join(
            [f"{k} (run: {saved[k]!r}, now: {options[k]!r})" for k in changed]
            + [f"{k} (not set in the run)" for k in unknown]
        )
        raise DocattnError(
            f"--resume continues {run_dir} with its own settings; these differ: {what}. "
            "Start a new run (another --out) to change them"
        )
    return saved_model, {**saved, **options}


def _differs(a, b) -> bool:
    return (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b)
