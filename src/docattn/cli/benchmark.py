"""``docattn benchmark``: several models, several seeds, the same splits; a table and curves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from docattn.cli.app import app
from docattn.cli.options import Reader, check_out, model_name, option, parse_sets, reads_documents
from docattn.data.sources import resolve_source
from docattn.errors import DocattnError

# options the benchmark sets itself, and by what
_OWNED = {
    "seed": "--first-seed and --seeds",
    "progress": "the benchmark (one line per validation)",
    "progress_lines": "the benchmark (one line per validation)",
}


Data = Annotated[
    str, typer.Option("--data", help="Registered data set name or any supported path (e.g. aclImdb.tar.gz).")
]
Models = Annotated[str, typer.Option("--models", help="Comma-separated model names, any case.")]
Seeds = option(
    "--seeds",
    "Seeds per model: --first-seed up to --first-seed + N - 1.",
    "3, or 1 with --cv (each fold is a trial)",
    int | None,
)
FirstSeed = Annotated[int, typer.Option("--first-seed", help="The first seed.")]
Out = Annotated[Path, typer.Option("--out", help="Folder for results.json, results.md, run.json and curves.png.")]
Runs = option("--runs", "Keep every trial's run directory here, as MODEL-seedN.", "not kept", Path | None)
ValidFraction = Annotated[float, typer.Option("--valid-fraction", help="Validation share of train (the HPAN paper's).")]
MaxEpochs = option("--max-epochs", "Epoch budget per model.", "each model's own", int | None)
MaxTime = option("--max-time", "Training time budget per trial, seconds.", "none", float | None)
Test = option(
    "--test", "Test data, when --data has no test split of its own.", "--data's test split, else a held-out 20%"
)
TestFraction = option(
    "--test-fraction",
    "For data without a test split: test on this share of it, stratified.",
    "0.2 there",
    float | None,
)
CrossValidation = option(
    "--cv",
    "Stratified K-fold cross-validation: each model trains K times, tested on each fold in turn.",
    "none",
    int | None,
)
Sets = Annotated[
    list[str], typer.Option("--set", help="Options for every model, KEY=VALUE; MODEL:KEY=VALUE for one model.")
]
Jobs = Annotated[
    int,
    typer.Option(
        "--jobs",
        help="Trials at a time, in worker processes sharing the CPU cores (2 on a 2-core CPU: more done per hour).",
    ),
]


@app.command()
@reads_documents(split=False)
def benchmark(
    data: Data,
    models: Models = "han,hpan,hsan,nb,logreg",
    seeds: Seeds = None,
    first_seed: FirstSeed = 0,
    out: Out = Path("benchmark"),
    runs: Runs = None,
    valid_fraction: ValidFraction = 0.3,
    max_epochs: MaxEpochs = None,
    max_time: MaxTime = None,
    test: Test = None,
    test_fraction: TestFraction = None,
    cv: CrossValidation = None,
    sets: Sets = [],  # noqa: B006  (Typer reads the default; it is never mutated)
    jobs: Jobs = 1,
    reader: Reader = Reader(),
):
    """Train and test several models on the same splits; accuracy, cost, a table and a curve plot."""
    from rich.console import Console

    from docattn.benchmark import PathData, run_benchmark
    from docattn.classifier import DocumentClassifier

    console = Console()
    check_out(out)
    names = [model_name(m) for m in models.split(",") if m.strip()]
    if not names:
        raise DocattnError(f"--models names no model ({models!r})")
    if cv is not None and (cv < 2 or test_fraction is not None or test):
        raise DocattnError(
            "--cv K needs K >= 2, and chooses the test documents itself: drop --test and --test-fraction"
            if cv >= 2
            else f"--cv must be at least 2, got {cv}"
        )
    common, per_model = _split_sets(parse_sets(sets), names)
    common.update({k: v for k, v in (("max_epochs", max_epochs), ("max_time", max_time)) if v})
    common["valid_fraction"] = valid_fraction
    if test_fraction is not None:
        common["test_fraction"] = test_fraction
    seed_list = _seed_list(first_seed, seeds if seeds is not None else (1 if cv else 3))

    def build(name: str, **extra):  # unknown models or options fail before anything trains
        return DocumentClassifier(name, **{**common, **per_model.get(name, {}), **extra})

    built = [build(name) for name in names]
    if jobs < 1:
        raise DocattnError(f"--jobs must be >= 1, got {jobs}")
    # each model's own data settings (e.g. HCAN's text cleaning), one cached preparation per distinct one
    prepare_for = PathData(resolve_source(data), test and resolve_source(test), reader.options, name=data)
    held_out = cv is None and test_fraction is None and not test and not prepare_for.has_test_split()
    if held_out:
        common["test_fraction"] = 0.2
        built = [build(name) for name in names]
        console.print(
            f"note: {data} has no test split: 20% of it, stratified, is held out for testing "
            "(--test-fraction F or --cv K to choose)"
        )
    prepare_for(
        build(names[0], cv_folds=cv).data_settings if cv is not None else built[0].data_settings
    )  # data errors first
    title = _title(data, names, len(seed_list), cv, test, common.get("test_fraction"))
    rows = run_benchmark(
        names, prepare_for, seed_list, out, common, title, per_model, log=console.print, runs=runs, jobs=jobs, folds=cv
    )
    console.print((out / "results.md").read_text())
    console.print(f"wrote {out}/results.json, results.md, curves.png ({len(rows)} models)")


def _split_sets(sets: dict, names: list[str]) -> tuple[dict, dict]:
    """--set options for every model, and MODEL:KEY=VALUE ones per model; what the benchmark owns is refused."""
    common, per_model = {}, {}
    for key, value in sets.items():
        if ":" in key:
            model, option = key.split(":", 1)
            per_model.setdefault(model.replace("_", "-").lower(), {})[option] = value
        else:
            common[key] = value
    unused = sorted(set(per_model) - set(names))
    if unused:
        raise DocattnError(f"--set names {', '.join(unused)}, not in --models ({', '.join(names)})")
    for opts in (common, *per_model.values()):
        for key in sorted(set(opts) & set(_OWNED)):
            raise DocattnError(f"--set {key} is set by {_OWNED[key]}, not by --set")
    return common, per_model


def _seed_list(first_seed: int, seeds: int) -> list[int]:
    from docattn.training.config import MAX_SEED  # light: no torch

    if seeds < 1:
        raise DocattnError(f"--seeds must be >= 1, got {seeds}")
    if not 0 <= first_seed <= first_seed + seeds - 1 <= MAX_SEED:  # TrainConfig's range, before the first trial
        raise DocattnError(
            f"--first-seed and --seeds give seeds {first_seed} to {first_seed + seeds - 1}; "
            f"seeds must be from 0 to {MAX_SEED}"
        )
    return list(range(first_seed, first_seed + seeds))


def _title(data: str, names: list[str], seeds: int, cv: int | None, test: str | None, test_fraction) -> str:
    """What the table shows: the data set (its registered title if any), the models and how they were tested."""
    name = Path(data).name
    if not Path(data).exists():
        from docattn.data.registry import DATASETS

        name = DATASETS[data].title if data in DATASETS else data
    if cv:
        tested = f"{cv}-fold cross-validation"
    elif test:
        tested = f"tested on {Path(test).name}"
    elif test_fraction:
        tested = f"tested on a held-out {test_fraction:.0%}"
    else:
        tested = "tested on its test split"
    return f"{', '.join(names)} on {name}: {tested}, {seeds} seed{'s' if seeds > 1 else ''} each"
