"""A run's options from a file: a TOML file of ``docattn train``'s options, or a run's own config.json.

A TOML file holds, at its top level, the command's own options as the command line names them
(``train``, ``out``, ``model``, ``epochs``, ``batch-size``, ``format``, ...) and any training option, data
option or model hyper-parameter (``lr``, ``min_count``, ``hidden_size``: what ``--set`` takes), optionally
gathered in a ``[set]`` table; keys take ``_`` or ``-``. A JSON file reads the same way, unless it is a
run's config.json, whose model and saved settings then repeat that run. docs/configuration.md shows both.

Reading checks what needs no model (the file's syntax, duplicated keys, the command's own keys and their
types); ``check_keys`` names an unknown key, and the closest valid one, once the model is known.
Only the standard library loads here; ``option_names`` builds a throwaway model, so it imports torch.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from difflib import get_close_matches
from pathlib import Path

from docattn.errors import ConfigError

SET_TABLE = "set"  # the table that gathers options, as --set KEY=VALUE does on the command line
RUN_CONFIG = "config.json"
COLUMNS = "columns"  # a command key's kind: one column (name or index) or a list of them
_KINDS = {str: "a string", bool: "true or false"}
# ``docattn train``'s own keys, as the command line names them, and their kinds (what --config reads besides the
# classifier's options); the reader options as ``docattn train --help`` names them
TRAIN_KEYS = {
    **dict.fromkeys(("train", "out", "model", "valid", "test", "format", "label_sep"), str),
    **dict.fromkeys(("resume", "overwrite", "no_cache", "multi_label"), bool),
    "text_col": COLUMNS,
    "label_col": COLUMNS,
}
# command-line names of options that DocumentClassifier knows by another name
ALIASES = {"epochs": "max_epochs", "val_every": "val_every_n_steps"}


@dataclass(frozen=True)
class FileConfig:
    """What one --config file says: the command's own options and the options the classifier takes."""

    path: Path
    command: dict = field(default_factory=dict)  # command-line names: train, out, model, format, resume, ...
    options: dict = field(default_factory=dict)  # DocumentClassifier's keywords: lr, max_epochs, hidden_size, ...
    run: bool = False  # read from a run's config.json (every saved setting, so every option is the file's)
    hparams: frozenset = frozenset()  # a run's: which options are its model's hyper-parameters


def read_config_file(path, command: Mapping[str, type | str], aliases: Mapping[str, str] | None = None) -> FileConfig:
    """Read ``path``: ``command`` names the command's own keys and their kinds (str, bool, COLUMNS);
    ``aliases`` maps a command-line name to the option it sets (``epochs``: ``max_epochs``). A folder
    stands for its run's config.json."""
    path = Path(path)
    if path.is_dir() and (path / RUN_CONFIG).is_file():
        path = path / RUN_CONFIG
    data = _load(path)
    if path.suffix.lower() == ".json" and _is_run_config(data):
        return _from_run(path, data)
    return _from_table(path, data, command, aliases or {})


def _load(path: Path) -> dict:
    """The file's top-level table; any reason it cannot be one is a ConfigError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"--config {path}: a folder without a run's {RUN_CONFIG}; give a .toml file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"--config {path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as err:
            raise ConfigError(f"{path}: not valid JSON ({err}); fix the file or write it as TOML") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: a JSON --config must be an object of options, got {type(data).__name__}")
        return data
    toml = _toml()
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err}); fix that line (docs/configuration.md)") from None


def _toml():
    """Python's TOML reader (3.11 on), or the tomli package it grew from on 3.10."""
    try:
        import tomllib

        return tomllib
    except ModuleNotFoundError:
        try:
            import tomli

            return tomli
        except ModuleNotFoundError:
            raise ConfigError("a TOML --config on Python 3.10 needs the tomli package: pip install tomli") from None


def _is_run_config(data: dict) -> bool:
    return "docattn_version" in data and isinstance(data.get("training"), dict) and "model" in data


def _from_run(path: Path, data: dict) -> FileConfig:
    """A run's config.json: its model and every saved training, data, text and model setting."""
    from docattn.data.prepare import DataSettings
    from docattn.errors import DocattnError
    from docattn.training.config import TrainConfig
    from docattn.training.run import settings_as_options

    try:
        model = data["model"]
        options = settings_as_options(
            DataSettings.from_json(data["data"]), TrainConfig.from_json(data["training"]), dict(data["hparams"])
        )
    except KeyError as err:
        raise ConfigError(f"{path}: a run's config without {err}; give the whole config.json train wrote") from None
    except (TypeError, AttributeError, ValueError, DocattnError) as err:
        raise ConfigError(f"{path}: a run's config, malformed ({err})") from None
    if not isinstance(model, str):
        raise ConfigError(f"{path}: 'model' must be a model's name, got {model!r}")
    return FileConfig(path, {"model": model}, options, run=True, hparams=frozenset(data["hparams"]))


def _from_table(path: Path, data: dict, command: Mapping[str, type | str], aliases: Mapping[str, str]) -> FileConfig:
    """Top-level keys and the [set] table, keys normalised to ``_``; a key given twice is an error."""
    sets = data.get(SET_TABLE, {})
    if not isinstance(sets, dict):
        raise ConfigError(f"{path}: '{SET_TABLE}' must be a table of options ([{SET_TABLE}] then KEY = VALUE lines)")
    entries = [(k, v, "") for k, v in data.items() if k != SET_TABLE]
    entries += [(k, v, f"[{SET_TABLE}] ") for k, v in sets.items()]
    own, options, seen = {}, {}, {}
    for key, value, where in entries:
        name = key.strip().replace("-", "_")
        canonical = aliases.get(name, name)
        if canonical in seen:
            raise ConfigError(
                f"{path}: {where}{key!r} sets {canonical!r}, which {seen[canonical]!r} sets already; keep one of them"
            )
        seen[canonical] = f"{where}{key}"
        if name in command:
            own[name] = _typed(path, key, value, command[name])
        else:
            options[canonical] = value
    return FileConfig(path, own, options)


def _typed(path: Path, key: str, value, kind):
    """A command key's value as the command line would give it: paths and names as strings, flags as bools,
    columns as the comma-separated list the flag takes (``text_col = ["title", "body"]`` or ``label_col = 0``)."""
    if kind == COLUMNS:
        parts = value if isinstance(value, list) else [value]
        if parts and all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in parts):
            return ",".join(str(p) for p in parts)
        raise ConfigError(f"{path}: {key!r} must be a column's name or index, or a list of them, got {value!r}")
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise ConfigError(f"{path}: {key!r} must be {_KINDS.get(kind, kind.__name__)}, got {value!r}")


def option_names(model: str) -> set[str]:
    """Every option ``DocumentClassifier(model, ...)`` takes by name: training, data and text options, and
    the model's own hyper-parameters (its config's fields, read off a throwaway model)."""
    from dataclasses import asdict

    import torch

    from docattn.data.prepare import DataSettings
    from docattn.data.text import TextConfig
    from docattn.models import create_model
    from docattn.training.config import TrainConfig

    with torch.random.fork_rng(devices=[]):  # the caller's random state stays as it was
        hparams = asdict(create_model(model, vocab_size=2, num_classes=2).config)
    data = {f.name for f in fields(DataSettings)} - {"text"}
    return TrainConfig.field_names() | data | {f.name for f in fields(TextConfig)} | set(hparams) | {"device"}


def check_keys(path: Path, options: Mapping, model: str, known: Collection[str]) -> None:
    """An option of the file ``path`` that ``model`` does not take is an error naming the closest of ``known``
    (the command's own keys and the model's options)."""
    for key in options:
        if key not in known:
            guess = get_close_matches(key, sorted(known), 1)
            raise ConfigError(
                f"{path}: unknown key {key!r} for {model}"
                + (f"; did you mean {guess[0]!r}?" if guess else "")
                + " (keys are docattn train's options and those of docs/options.md)"
            )


def classifier_options(path, model: str | None = None) -> tuple[str, dict, FileConfig]:
    """The model and ``DocumentClassifier`` options that the --config file ``path`` gives (what
    ``DocumentClassifier.from_config`` builds): ``model`` replaces the file's, and then a run's config.json
    gives its training and data settings, not its model's hyper-parameters. Unknown keys are a ConfigError
    naming the closest valid one."""
    file = read_config_file(path, TRAIN_KEYS, ALIASES)
    name = str(model or file.command.get("model") or "han").strip().lower()
    options = dict(file.options)
    if file.run and name != file.command["model"].strip().lower():
        options = {k: v for k, v in options.items() if k not in file.hparams}
    check_keys(file.path, options, name, option_names(name) | set(TRAIN_KEYS))
    return name, options, file
