"""``docattn train`` and ``docattn tune``: a run folder from data, and a learning-rate search over runs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from docattn.cli.app import app, console
from docattn.cli.options import SETS_HELP, Reader, check_out, model_name, option, parse_sets, reads_documents
from docattn.cli.report import (
    data_line,
    human_epoch,
    note_unused_options,
    print_skipped,
    print_training,
    print_worker_hint,
)
from docattn.config_file import ALIASES, TRAIN_KEYS, FileConfig
from docattn.data.sources import parse_value
from docattn.data.sources import resolve_source as _resolve
from docattn.errors import DocattnError

_OWN = "the model's own"

# each option's type, flag, help and default as a name, so a command's signature stays one line per option
TrainData = Annotated[
    str, typer.Option("--train", help="Training data: a file, folder, archive or registered data set name.")
]
Model = option("--model", "Model name, any case (docattn models lists them).", "han; with --resume, the run's")
Valid = option("--valid", "Validation data.", "a stratified split of --train")
Test = option("--test", "Test data.", "the source's own test split, if any")
Epochs = option("--epochs", "Epochs to train.", "recipe auto: sized to the data; paper: the model's", int | None)
BatchSize = option("--batch-size", "Documents per batch.", f"64, or {_OWN}", int | None)
Lr = option("--lr", "Learning rate.", _OWN, float | None)
Optimizer = option("--optimizer", "sgd, adam or adamw.", f"adam, or {_OWN}")
Seed = option("--seed", "Random seed of weights, batch order and word2vec.", "0; with --resume, the run's", int | None)
ValidFraction = option(
    "--valid-fraction",
    "Share of --train validated on when there is no --valid (stratified).",
    f"0.1, or {_OWN}",
    float | None,
)
TestFraction = option(
    "--test-fraction",
    "For data without a test split: test on this share of the training documents (stratified, seeded).",
    "none",
    float | None,
)
Recipe = option(
    "--recipe",
    "auto: epochs, early stopping, word2vec passes, class weights and HAN's width sized to the data; "
    "paper: each model's registered settings.",
    "auto",
)
MinCount = option("--min-count", "Words seen fewer times in training read as unknown.", f"5, or {_OWN}", int | None)
MaxSentences = option(
    "--max-sentences", "Sentences of a document hierarchical models read (0: all).", f"1,000, or {_OWN}", int | None
)
MaxWords = option(
    "--max-words", "Words of a sentence hierarchical models read (0: all).", f"1,000, or {_OWN}", int | None
)
MaxTokens = option("--max-tokens", "Tokens of a document flat models read (0: all).", f"all, or {_OWN}", int | None)
Embeddings = option(
    "--embeddings",
    "word2vec, wordllama (packaged), word2vec+wordllama (side by side), random, or a vector file: GloVe .txt, "
    "word2vec/fastText .vec, word2vec .bin, each optionally .gz.",
    "word2vec; han and cspan under 1M training tokens, hpan, hsan and sanet there from 2,000 training documents "
    "on, hcan at every size: word2vec+wordllama",
)
Accelerator = option("--accelerator", "auto, cpu or gpu.", "auto")
Devices = option("--devices", "Devices per node: a count, auto, or a list such as [0,1].", "1")
NumNodes = option("--num-nodes", "Machines of a multi-node (DDP) run.", "1", int | None)
Strategy = option("--strategy", "Lightning strategy, e.g. ddp.", "auto")
Precision = option("--precision", "e.g. bf16-mixed, 32-true.", "bf16-mixed on CUDA, 32-true elsewhere")
ValEvery = option("--val-every", "Validate every N optimizer steps.", "each epoch", int | None)
Patience = option(
    "--patience",
    "Stop after this many validations without improvement (0: never).",
    "recipe auto without --epochs: 3 epochs' worth; else never",
    int | None,
)
MaxTime = option("--max-time", "Training time budget in seconds.", "none", float | None)
Logger = option(
    "--logger",
    "Also log the curves, learning rate, docs/s and test scores with Lightning: csv, tensorboard, mlflow or wandb "
    "(into RUN/logs/; tensorboard, mlflow and wandb need their package).",
    "none: metrics.csv only",
)
ConfigFile = option(
    "--config",
    "Options from a TOML file (docs/configuration.md), or a run's config.json (or its folder) to repeat or vary "
    "that run; options given on the command line override the file's.",
    "none",
    Path | None,
)
TrainOrFile = option(
    "--train", "Training data: a file, folder, archive or registered data set name.", "the --config file's train"
)
OutOrFile = option(
    "--out",
    "Run directory to write (a folder that is not empty needs --resume or --overwrite).",
    "the --config file's out",
    Path | None,
)
Resume = Annotated[
    bool, typer.Option("--resume", help="Continue an interrupted run in --out from its last finished epoch.")
]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="Replace the run in --out: the files docattn wrote there are removed, no other file."
    ),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not cache the encoded corpus.")]
Sets = Annotated[list[str], typer.Option("--set", help=SETS_HELP)]
# the DocumentClassifier options train takes by name, and what each is called there
_AS_OPTION = {
    "epochs": "max_epochs",
    "batch_size": "batch_size",
    "lr": "lr",
    "optimizer": "optimizer",
    "seed": "seed",
    "valid_fraction": "valid_fraction",
    "test_fraction": "test_fraction",
    "recipe": "recipe",
    "min_count": "min_count",
    "max_sentences": "max_sentences",
    "max_words": "max_words",
    "max_tokens": "max_tokens",
    "embeddings": "embeddings",
    "accelerator": "accelerator",
    "devices": "devices",
    "num_nodes": "num_nodes",
    "strategy": "strategy",
    "precision": "precision",
    "val_every": "val_every_n_steps",
    "patience": "patience",
    "max_time": "max_time",
    "logger": "logger",
}
FILE_KEYS = TRAIN_KEYS  # train's own keys in a --config file, as the command line names them
_READER_FIELDS = {
    "format": "fmt",
    "text_col": "text_col",
    "label_col": "label_col",
    "label_sep": "label_sep",
    "multi_label": "multi_label",
}


@dataclass(frozen=True)
class Given:
    """What to train: the command line over the --config file."""

    train: str | None
    out: Path | None
    model: str | None
    valid: str | None
    test: str | None
    resume: bool
    overwrite: bool
    no_cache: bool
    reader: Reader
    options: dict  # DocumentClassifier's keywords
    file: FileConfig | None
    from_file: dict  # the options the file gives and the command line leaves as they are


@app.command()
@reads_documents(split=False)
def train(
    train: TrainOrFile = None,
    out: OutOrFile = None,
    model: Model = None,
    valid: Valid = None,
    test: Test = None,
    epochs: Epochs = None,
    batch_size: BatchSize = None,
    lr: Lr = None,
    optimizer: Optimizer = None,
    seed: Seed = None,
    valid_fraction: ValidFraction = None,
    test_fraction: TestFraction = None,
    recipe: Recipe = None,
    min_count: MinCount = None,
    max_sentences: MaxSentences = None,
    max_words: MaxWords = None,
    max_tokens: MaxTokens = None,
    embeddings: Embeddings = None,
    accelerator: Accelerator = None,
    devices: Devices = None,
    num_nodes: NumNodes = None,
    strategy: Strategy = None,
    precision: Precision = None,
    val_every: ValEvery = None,
    patience: Patience = None,
    max_time: MaxTime = None,
    logger: Logger = None,
    config: ConfigFile = None,
    resume: Resume = False,
    overwrite: Overwrite = False,
    no_cache: NoCache = False,
    sets: Sets = [],  # noqa: B006  (Typer reads the default; it is never mutated)
    reader: Reader = Reader(),
):
    """Train a model and write its run directory (config, vocabulary, best weights, metrics)."""
    from docattn.classifier import DocumentClassifier
    from docattn.training.run import resume_options
    from docattn.training.run_folder import check_out as check_run_folder

    options = {_AS_OPTION[k]: v for k, v in locals().items() if k in _AS_OPTION and v is not None}
    if devices:
        options["devices"] = parse_value(devices)
    options.update(parse_sets(sets))
    command = dict(train=train, out=out, model=model, valid=valid, test=test)
    command.update(resume=resume, overwrite=overwrite, no_cache=no_cache)
    given = given_options(config, command, reader, options)
    _require_data_and_out(given)
    out, resume = given.out, given.resume
    log = console()
    # DDP's other processes run this command again once rank 0 has started training into --out: only
    # rank 0 checks, locks and replaces the folder
    primary = all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "NODE_RANK"))
    if primary:
        check_run_folder(out, resume=resume, overwrite=given.overwrite)  # before anything is read or written
    model = model_name(given.model) if given.model is not None else None
    resuming = resume and (out / "config.json").exists()
    if given.file is not None:  # its keys and values are named with the file, before a resume compares them
        check_file_options(given.file.path, given.from_file, model or (_run_model(out) if resuming else None) or "han")
    options = given.options
    if resuming:
        model, options = resume_options(out, model, options)
    elif resume:  # a job script may always pass --resume; a mistyped --out must not pass unnoticed
        log.print(f"note: {out} holds no run to resume (no config.json): starting a new run there")
    clf = DocumentClassifier(model or "han", **options)
    note_unused_options(log, clf, options)
    sources = (given.train, given.valid, given.test, given.reader, given.no_cache, resume)
    if not primary:
        return _train_into(log, clf, out, *sources)
    if resuming:
        _say_resume_point(log, out, clf)
    _train_locked(log, clf, out, sources, given.overwrite and not resume)


def given_options(config: Path | None, command: dict, reader: Reader, options: dict) -> Given:
    """The command line's values (``options``: its options and --set) over the --config file's: a value the
    command line leaves unset (None, a flag not given) is the file's."""
    from docattn.config_file import read_config_file

    file = read_config_file(config, FILE_KEYS, ALIASES) if config is not None else None
    own = {**(file.command if file else {}), **{k: v for k, v in command.items() if v not in (None, False)}}
    typed = {name: getattr(reader, field) for name, field in _READER_FIELDS.items()}
    fields = {field: own.get(name) for name, field in _READER_FIELDS.items() if own.get(name) is not None}
    fields.update({field: typed[name] for name, field in _READER_FIELDS.items() if typed[name] not in (None, False)})
    saved = file.options if file else {}
    if file is not None and file.run and str(own["model"]).strip().lower() != file.command["model"]:
        # another model than the run's: the run's training and data settings, not its hyper-parameters
        saved = {k: v for k, v in saved.items() if k not in file.hparams}
    merged = {**saved, **options}
    return Given(
        train=own.get("train"),
        out=Path(own["out"]) if own.get("out") else None,
        model=own.get("model"),
        valid=own.get("valid"),
        test=own.get("test"),
        resume=bool(own.get("resume")),
        overwrite=bool(own.get("overwrite")),
        no_cache=bool(own.get("no_cache")),
        reader=Reader(**fields),
        options=merged,
        file=file,
        from_file={k: v for k, v in saved.items() if k not in options},  # what the command line overrides is unused
    )


def _require_data_and_out(given: Given) -> None:
    """--train and --out, from the command line or the file, before anything else is checked or read."""
    missing = [f"--{k}" for k in ("train", "out") if not getattr(given, k)]
    if not missing:
        return
    if given.file is not None:  # a misspelt key of the file ("trian") is the likelier mistake: named first
        check_file_options(given.file.path, given.from_file, model_name(given.model or "han"))
    raise DocattnError(
        f"train needs {' and '.join(missing)}: give {'them' if len(missing) > 1 else 'it'} on the command line "
        "or in a --config file (train = ..., out = ...)"
    )


def check_file_options(path: Path, options: dict, model: str) -> None:
    """A --config file's options, by themselves: an unknown key names the closest valid one, and a value of the
    wrong type or range is named with the file (one line, before anything is read or written)."""
    from docattn.classifier import DocumentClassifier
    from docattn.config_file import check_keys, option_names

    check_keys(path, options, model, option_names(model) | set(FILE_KEYS))
    try:
        DocumentClassifier(model, **options)
    except DocattnError as err:
        raise DocattnError(f"{path}: {err}") from None


def _run_model(out: Path) -> str | None:
    """The model of the run in ``out`` (what --resume continues when no --model is given)."""
    from docattn.training.run import read_config

    name = read_config(out).get("model")
    return name if isinstance(name, str) else None


def _train_locked(log, clf, out: Path, sources: tuple, overwrite: bool) -> None:
    """Train under the run folder's lock: a second training into it is refused while this one lives."""
    from docattn.card import CARD_FILE, write_card
    from docattn.training.loggers import LOGS
    from docattn.training.run_folder import RUN_FILES, RunLock, claim, clear, others

    with RunLock(out):
        if overwrite:
            removed = clear(out)
            if removed:
                log.print(
                    f"--overwrite: removed {len(removed)} file(s) docattn wrote in {out} ({', '.join(removed[:4])}"
                    + (", ..." if len(removed) > 4 else "")
                    + ")"
                )
        foreign = set(others(out))
        claim(out, [n for n in RUN_FILES if n not in foreign])
        try:
            _train_into(log, clf, out, *sources)
        finally:  # the logger's files (--logger) are the run's too, an interrupted run's included: --overwrite
            logs = [n for n in others(out) if n.startswith(f"{LOGS}/") and n not in foreign]  # removes them with it
            if logs:
                claim(out, logs)
        if CARD_FILE not in foreign:  # a README.md of the user's own stays as it is
            write_card(out)
            log.print(f"model card: {out / CARD_FILE}")


def _say_resume_point(log, out: Path, clf) -> None:
    """--resume on a run with nothing to resume from is an error, never a silent new start; else say where it
    goes on."""
    from docattn.models import get_spec
    from docattn.models.contract import is_bag
    from docattn.training.run import resume_checkpoint, trained_epochs

    if is_bag(get_spec(clf.model_name)):
        return
    checkpoint = resume_checkpoint(out)
    if not checkpoint.exists():
        raise DocattnError(
            f"--resume: {out} has no checkpoint to continue from ({checkpoint} is missing: the "
            "run stopped before its first epoch ended); train it again with --overwrite"
        )
    done = trained_epochs(checkpoint)
    log.print(f"resumed from epoch {done}, the last one finished: training goes on with epoch {done + 1}")


def _train_into(log, clf, out: Path, train: str, valid, test, reader: Reader, no_cache: bool, resume: bool) -> None:
    """Prepare the data, train ``clf`` into ``out`` and report."""
    from docattn.data.prepare import prepare_paths

    data = prepare_paths(
        _resolve(train),
        valid and _resolve(valid),
        test and _resolve(test),
        clf.data_settings,
        reader.options,
        use_cache=not no_cache,
    )
    log.print(data_line(data))
    print_skipped(log, data.info)
    print_worker_hint(log, data.info, clf.data_settings.prepare_workers)
    if data.info.get("cache_error"):
        log.print(
            f"note: the encoded corpus is not cached ({data.info['cache_error']}; $DOCATTN_CACHE picks another folder)"
        )
    clf.fit_prepared(data, run_dir=out, resume=resume)
    if not clf.results.get("is_global_zero", True):
        return
    print_training(log, clf, data)
    log.print(f"run directory: {out}")


@app.command()
@reads_documents(split=False)
def tune(
    train: TrainData,
    out: Annotated[Path, typer.Option("--out", help="Folder for one run per trial (lr=RATE) and tune.json.")],
    model: Annotated[str, typer.Option("--model", help="Model name, any case (trained by gradient descent).")] = "han",
    lr: option(
        "--lr",
        "Comma-separated learning rates to try.",
        "the HAN paper's 0.5,0.1,0.05,0.01 under SGD; the model's rate x 1/4, 1/2, 1, 2 under Adam",
    ) = None,
    valid: Valid = None,
    epochs: Epochs = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of every trial.")] = 0,
    sets: Sets = [],  # noqa: B006  (Typer reads the default; it is never mutated)
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Go on with an interrupted search: keep the trials tune.json "
            "records and continue the interrupted one from its last finished epoch.",
        ),
    ] = False,
    reader: Reader = Reader(),
):
    """Learning-rate grid search on the validation split (as the HAN paper does); reports each trial."""
    from rich.console import Console

    from docattn.classifier import DocumentClassifier
    from docattn.data.prepare import prepare_paths
    from docattn.training.tune import check_rates, check_tunable, tune_learning_rate

    log = Console()
    check_out(out)
    try:
        rates = [float(x) for x in (lr or "").split(",") if x.strip()]
    except ValueError:
        raise DocattnError(f"--lr expects comma-separated numbers, got {lr!r}") from None
    if (lr is not None and not rates) or any(not 0 < r < float("inf") for r in rates):  # nan fails both
        raise DocattnError(f"--lr needs at least one learning rate, each a number above 0, got {lr!r}")
    if rates and len({f"{r:g}" for r in rates}) < len(rates):
        raise DocattnError(f"--lr lists a learning rate more than once (as its run folder names it): {lr}")
    model = model_name(model)
    check_tunable(model)
    options = {"seed": seed, **({"max_epochs": epochs} if epochs else {}), **parse_sets(sets)}

    def build(rate: float | None):
        return DocumentClassifier(model, **{**options, **({} if rate is None else {"lr": rate})})

    base = build(None)
    rates = check_rates(rates or base.train_config.lr_grid())  # the grid that suits the optimizer that will run
    log.print(f"{model}, {base.train_config.optimizer}: learning rates {', '.join(f'{r:g}' for r in rates)}")
    data = prepare_paths(_resolve(train), valid and _resolve(valid), None, base.data_settings, reader.options)
    result = tune_learning_rate(build, data, rates, out=out, resume=resume, log=log.print)
    _print_trials(log, result)


def _print_trials(log, result) -> None:
    from rich.table import Table

    table = Table("lr", "val_acc", "val_macro_f1", "best epoch")
    for t in result.trials:
        if t.get("diverged"):
            table.add_row(f"{t['lr']:g}", "-", "-", "diverged")
            continue
        table.add_row(
            f"{t['lr']:g}",
            f"{t.get('val_acc', float('nan')):.4f}",
            f"{t.get('val_macro_f1', float('nan')):.4f}",
            human_epoch(t.get("epoch")),
        )
    log.print(table)
    log.print(f"best lr: {result.best_lr:g} (run {result.best['run']})")
