"""``docattn config show``: the options a training would start from, each with its value and where it comes from.

Sources, from the weakest: ``default`` (the option's own, docs/options.md), ``model`` (the model's
registered training settings and hyper-parameters, ``docattn models``), ``model (auto)`` (what the auto
recipe changes for the family, e.g. HAN's dropout), ``model (cpu)`` (the sizes the auto recipe trains a
self-attention family at on a CPU), ``file`` (``--config``) and ``cli``
(``--model``, ``--set``). Options left unset (null) are sized to the data when training starts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from docattn.cli.app import config_app
from docattn.cli.options import SETS_HELP, Reader, model_name, option, parse_sets


@dataclass(frozen=True)
class Setting:
    """One option as training would start from it."""

    group: str  # run, training, data, text or model
    name: str
    value: object
    source: str  # default, model, model (auto), model (cpu), file or cli


@config_app.command("show")
def show(
    model: option("--model", "Model name, any case (docattn models lists it).", "the --config file's, else han") = None,
    config: option(
        "--config", "A TOML file of options, or a run's config.json (or its folder).", "none", Path | None
    ) = None,
    sets: Annotated[list[str], typer.Option("--set", help=SETS_HELP)] = [],  # noqa: B006  (never mutated)
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: each option's value, group and source.")] = False,
):
    """The effective options of a training: each value, and whether it is the default, the model's, the
    --config file's or the command line's."""
    settings = effective_settings(model, config, parse_sets(sets))
    if as_json:
        out = {"config": str(config) if config is not None else None, "options": {}}
        for s in settings:
            out["options"][s.name] = {"value": s.value, "group": s.group, "source": s.source}
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    _print_table(settings, config)


def effective_settings(model: str | None, config: Path | None, cli: dict) -> list[Setting]:
    """Every option ``docattn train --config CONFIG --model MODEL --set ...`` would start training with."""
    import torch

    from docattn.classifier import DocumentClassifier
    from docattn.cli.train import FILE_KEYS, check_file_options, given_options
    from docattn.models import create_model, get_spec
    from docattn.training.config import wants_gpu

    given = given_options(config, {"model": model}, Reader(), cli)
    name = model_name(given.model or "han")
    if given.file is not None:
        check_file_options(given.file.path, given.from_file, name)
    clf = DocumentClassifier(name, **given.options)
    spec, cfg = get_spec(name), clf.train_config
    # the CPU sizes apply as DocumentClassifier applies them: auto recipe, no GPU asked for or found
    gpu = wants_gpu(cfg.accelerator)
    laid = spec.recipe_settings(cfg.recipe, gpu)
    registered = {**spec.training, **spec.defaults}
    if cfg.recipe == "auto" and "max_epochs" in registered:  # the registered length is the shortest run
        registered["min_epochs"] = registered.pop("max_epochs")
    file_keys = set(given.from_file)

    def source(key: str) -> str:
        if key in cli:
            return "cli"
        if key in file_keys:
            return "file"
        if key in laid:
            return "model (cpu)" if key in spec.cpu and not gpu else "model (auto)"
        return "model" if key in registered else "default"

    with torch.random.fork_rng(devices=[]):  # a throwaway model tells every hyper-parameter's value
        hparams = asdict(create_model(name, vocab_size=2, num_classes=2, **clf.hparams).config)
    data = clf.data_settings.to_json()
    text = data.pop("text")
    model_source = "cli" if model else "file" if given.file and "model" in given.file.command else "default"
    rows = [Setting("run", "model", name, model_source)]
    own = given.file.command if given.file else {}
    rows += [Setting("run", k, v, "file") for k, v in own.items() if k in FILE_KEYS and k != "model"]
    for group, values in (("training", cfg.to_json()), ("data", data), ("text", text), ("model", hparams)):
        rows += [Setting(group, k, v, source(k)) for k, v in values.items()]
    return rows


def _print_table(settings: list[Setting], config: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("group", "option", "value", "source", caption="null: left to the recipe or the data")
    styles = {
        "cli": "bold green",
        "file": "green",
        "model": "cyan",
        "model (cpu)": "cyan",
        "model (auto)": "cyan",
        "default": "dim",
    }
    last = None
    for s in settings:
        if last is not None and s.group != last:
            table.add_section()
        value = json.dumps(s.value, default=str)
        table.add_row(s.group if s.group != last else "", s.name, value, f"[{styles[s.source]}]{s.source}[/]")
        last = s.group
    Console().print(table)
