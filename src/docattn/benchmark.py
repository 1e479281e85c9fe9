"""``docattn benchmark``: every model on the same splits, over seeds, with accuracy and cost.

Writes ``results.json`` (one row per model), ``results.md`` (HCAN Table 2 shape: accuracy and
training ms per document) and ``curves.png`` (validation accuracy against training time, the
HCAN paper's Figure 3). Each model gets the same documents in the same splits, so differences
are the models' (encoded with each model's own data settings, e.g. HCAN's text cleaning).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from docattn.data.files import write_json
from docattn.data.prepare import DataSettings, PreparedData
from docattn.errors import Diverged, Interrupted
from docattn.models.contract import is_one_shot


def _rss_mb() -> float | None:
    """The process's resident memory now (Linux /proc), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


class RssPeak:
    """Peak resident memory of this process while a block runs, sampled every 20 ms.

    ``ru_maxrss`` is a high-water mark for the whole process, so every model after the first
    showed no increase; sampling the current RSS gives each trial its own peak. Where /proc is
    missing it falls back to ``ru_maxrss``.
    """

    def __enter__(self):
        import threading

        self.peak = _rss_mb() or 0.0
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, _rss_mb() or 0.0)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        now = _rss_mb()
        self.peak = (
            max(self.peak, now) if now is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        )
        return False


def _param_count(model) -> int | None:
    if not is_one_shot(model):
        return int(sum(p.numel() for p in model.parameters()))
    count = model.n_parameters()
    return None if count is None else int(count)


# what an interrupted benchmark keeps, and how to go on without losing it
KEPT = (
    "results.json keeps the models whose seeds had all finished; run the others with --models into "
    "another --out (a run into this one replaces its results.json)"
)


def run_one(
    model: str,
    data: PreparedData | Callable[[DataSettings], PreparedData],
    seed: int,
    options: dict,
    run_dir: Path | None,
    fold: int | None = None,
) -> dict:
    """Train and test one model with one seed; the figures of one benchmark trial.

    ``data``: the prepared splits, or a function from the model's data settings to them (a model
    whose paper cleans or counts words its own way gets its own encoding of the same documents).
    """
    import torch

    from docattn.classifier import DocumentClassifier

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    # a line per validation on stderr, so a long benchmark shows where it is even in a log file
    clf = DocumentClassifier(model, seed=seed, progress=False, progress_lines=True, **options)
    if callable(data):
        data = data(clf.data_settings)
    t0 = time.perf_counter()
    diverged = None
    with RssPeak() as rss:
        try:
            clf.fit_prepared(data, run_dir=run_dir)
        except Diverged as err:  # a trial that diverged is a result (no accuracy), not the end of the benchmark
            diverged = str(err)
            from docattn.models import create_model  # fit left no model: the row still says how big it is

            size = create_model(model, vocab_size=len(data.vocab), num_classes=len(data.labels), **clf.hparams)
        except Interrupted as err:  # the benchmark has no --resume: say what is kept and how to go on
            raise Interrupted(f"{model} seed {seed}: {err.where}. {KEPT}", err.signal, err.where) from None
    wall = time.perf_counter() - t0
    res = clf.results if diverged is None else {}
    test = res.get("test", {})
    n_train = len(data.splits["train"])
    train_s = res.get("train_seconds", wall) if diverged is None else None  # a diverged trial's time is no speed
    return {
        "seed": seed,
        "fold": fold,
        "test_accuracy": test.get("accuracy"),
        "test_macro_f1": test.get("macro_f1"),
        "test_micro_f1": test.get("micro_f1"),  # multi-label data only: the score it is compared by
        "valid_accuracy": res.get("best", {}).get("val_acc", res.get("valid", {}).get("accuracy")),
        "best_epoch": res.get("best", {}).get("epoch"),
        "extended_to_epochs": res.get("extended_to_epochs"),  # extend_plan lengthened the plan to this many
        "averaged_steps": res.get("best", {}).get("averaged_steps"),  # the kept weights: a mean (average_best)
        "train_seconds": train_s,
        # neural models: training time per document per epoch; one-shot baselines: fit time per document
        "train_ms_per_document": (
            1000.0 / res["train_docs_per_s"]
            if res.get("train_docs_per_s")
            else 1000.0 * train_s / n_train
            if train_s is not None
            else None
        ),
        "train_docs_per_s": res.get("train_docs_per_s"),
        "inference_docs_per_s": test.get("inference_docs_per_s"),
        "parameters": _param_count(clf.model if diverged is None else size),
        # GPU: the most tensor memory allocated; CPU: the process's peak RSS during the trial
        # (data, libraries and model together: compare models by differences)
        "peak_memory_mb": (torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available() else rss.peak,
        "peak_memory_kind": "cuda_allocated" if torch.cuda.is_available() else "process_rss_peak",
        "stopped_on_budget": bool(res.get("stopped_on_budget", False)),
        "history": res.get("history", []),
        "device": "cuda:" + torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "diverged": diverged,
    }


class PathData:
    """The prepared splits of files, per model data settings: one cached encoding per distinct setting.

    Picklable (paths and options only), so a worker process of ``run_benchmark(jobs=N)`` rebuilds
    it and reloads the encodings from the disk cache the main process wrote.
    """

    def __init__(self, train, test=None, reader: dict | None = None, name: str = ""):
        self.train, self.test, self.reader, self.name = train, test, reader or {}, name or str(train)
        self._prepared: dict[str, PreparedData] = {}

    def __getstate__(self):
        return {**self.__dict__, "_prepared": {}}  # arrays reload from the cache, not through a pipe

    def __call__(self, settings: DataSettings) -> PreparedData:
        from docattn.data.prepare import prepare_paths
        from docattn.errors import DocattnError

        key = json.dumps(settings.encoding_key(), sort_keys=True, default=str)
        if key not in self._prepared:
            data = prepare_paths(self.train, None, self.test, settings, self.reader)
            if "test" not in data.splits:
                raise DocattnError(f"{self.name}: no test split to benchmark on (give --test, --test-fraction or --cv)")
            self._prepared[key] = data
        return self._prepared[key]

    def has_test_split(self) -> bool:
        """Whether the source (or --test) holds test documents, read without encoding them."""
        from docattn.data.readers import read_splits

        return self.test is not None or "test" in read_splits(self.train, **self.reader)


class _PrefixedLines:
    """A text stream that starts every line with a tag: which trial a worker's progress line is from."""

    def __init__(self, stream, tag: str):
        self.stream, self.tag, self.fresh = stream, tag, True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            out.append((self.tag if self.fresh else "") + piece)
            self.fresh = piece.endswith("\n")
        self.stream.write("".join(out))
        return len(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _worker_start(threads: int) -> None:
    """A benchmark worker process: this many CPU threads for torch, so N workers share the cores."""
    import torch

    torch.set_num_threads(threads)


def _run_in_worker(model: str, data, seed: int, options: dict, run_dir: Path | None, fold: int | None = None) -> dict:
    import sys

    sys.stderr = _PrefixedLines(sys.stderr, f"[{model} {_trial_name(seed, fold)}] ")
    try:
        return run_one(model, data, seed, options, run_dir, fold)
    finally:
        sys.stderr = sys.stderr.stream


def _trial_name(seed: int, fold: int | None) -> str:
    return f"seed {seed}" + (f" fold {fold}" if fold is not None else "")


def _mean_std(values) -> dict:
    """Mean and standard deviation over seeds; the deviation is the population one (NumPy's ddof=0)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None}
    return {"mean": float(np.mean(vals)), "std": float(np.std(vals))}


def summarize(model: str, trials: list[dict]) -> dict:
    """One results.json row: means and standard deviations over seeds."""
    return {
        "model": model,
        "seeds": sorted({t["seed"] for t in trials}),
        "folds": sorted({t["fold"] for t in trials if t.get("fold") is not None}) or None,
        "test_accuracy": _mean_std(t["test_accuracy"] for t in trials),
        "test_macro_f1": _mean_std(t["test_macro_f1"] for t in trials),
        "test_micro_f1": _mean_std(t.get("test_micro_f1") for t in trials),
        "valid_accuracy": _mean_std(t["valid_accuracy"] for t in trials),
        "train_seconds": _mean_std(t["train_seconds"] for t in trials),
        "train_ms_per_document": _mean_std(t["train_ms_per_document"] for t in trials),
        "train_docs_per_s": _mean_std(t["train_docs_per_s"] for t in trials),
        "inference_docs_per_s": _mean_std(t["inference_docs_per_s"] for t in trials),
        "parameters": trials[0]["parameters"],
        "peak_memory_mb": max((t["peak_memory_mb"] or 0) for t in trials),
        "peak_memory_kind": trials[0]["peak_memory_kind"],
        "device": trials[0]["device"],
        "stopped_on_budget": any(t["stopped_on_budget"] for t in trials),
        "diverged_seeds": [t["seed"] for t in trials if t.get("diverged")],
        "trials": trials,
    }


def markdown_table(rows: list[dict], title: str) -> str:
    """HCAN Table 2 shape: test accuracy (mean ± std over seeds) and training cost per document."""
    over = "folds and seeds" if any(r.get("folds") for r in rows) else "seeds"
    multi = any((r.get("test_micro_f1") or {}).get("mean") is not None for r in rows)
    lines = [
        f"### {title}",
        "",
        f"Mean ± standard deviation over {over} (the population deviation, NumPy's ddof=0)."
        + (" Multi-label: accuracy is subset accuracy (every label of a document right)." if multi else ""),
        "",
        "| model | " + ("micro-F1 % | " if multi else "") + "test accuracy % | macro-F1 % | train ms/doc | "
        "train docs/s | inference docs/s | parameters | peak memory MB | note |",
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if multi else ""),
    ]
    for r in rows:
        acc, f1 = r["test_accuracy"], r["test_macro_f1"]
        fmt = lambda d, s=100: "-" if d["mean"] is None else f"{s * d['mean']:.2f} ± {s * d['std']:.2f}"  # noqa: E731
        num = lambda d: "-" if d["mean"] is None else f"{d['mean']:.1f}"  # noqa: E731
        note = "; ".join(
            n
            for n in (
                "stopped on time budget" if r["stopped_on_budget"] else "",
                f"diverged: seed {', '.join(map(str, r.get('diverged_seeds', [])))}" if r.get("diverged_seeds") else "",
            )
            if n
        )
        parameters = format(r["parameters"], ",") if r["parameters"] else "-"
        micro = f"{fmt(r['test_micro_f1'])} | " if multi else ""
        lines.append(
            f"| {r['model']} | {micro}{fmt(acc)} | {fmt(f1)} | {num(r['train_ms_per_document'])} | "
            f"{num(r['train_docs_per_s'])} | {num(r['inference_docs_per_s'])} | {parameters} | "
            f"{r['peak_memory_mb'] or 0:,.0f} | {note} |"
        )
    return "\n".join(lines) + "\n"


def plot_curves(rows: list[dict], path: Path, title: str) -> Path | None:
    """Validation accuracy against cumulative training time, one line per model (first seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for i, r in enumerate(rows):
        hist = r["trials"][0]["history"]
        color = f"C{i % 10}"  # lines and scatter points have separate colour cycles: one colour per model
        if hist:
            ax.plot(
                [h["elapsed_s"] for h in hist],
                [100 * h["val_acc"] for h in hist],
                marker="o",
                label=r["model"],
                color=color,
            )
            drawn += 1
        elif r["valid_accuracy"]["mean"] is not None:
            ax.scatter(
                [r["train_seconds"]["mean"]],
                [100 * r["valid_accuracy"]["mean"]],
                marker="s",
                label=r["model"],
                color=color,
            )
            drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("validation accuracy (%)")
    seed = rows[0]["trials"][0].get("seed") if rows and rows[0]["trials"] else None
    ax.set_title(title + (f" (validation curves of seed {seed})" if seed is not None else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return path


# the libraries whose release moves a result: word2vec's vectors, the packaged table, splits, the loop; the
# setup installs the newest within pyproject's ranges, so runs a few days apart can differ in them
RESULT_PACKAGES = ("docattn", "numpy", "gensim", "wordllama", "scikit-learn", "tokenizers", "lightning")


def machine_info() -> dict:
    """The machine a result came from: platform, CPU, cores, torch and its threads, the GPU if any, load,
    and the versions of ``RESULT_PACKAGES``."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if hasattr(os, "getloadavg"):
        info["load_average_at_start"] = os.getloadavg()
    info["packages"] = {}
    for name in RESULT_PACKAGES:
        try:
            info["packages"][name] = version(name)
        except PackageNotFoundError:
            info["packages"][name] = None
    return info


def run_record(models: list[str], seeds: list[int], options: dict, per_model: dict | None, jobs: int = 1) -> dict:
    """What a results folder needs to be rerun and compared: the command, the date, the machine."""
    import shlex
    import sys

    return {
        "command": shlex.join(["docattn", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_info(),
        "models": models,
        "seeds": seeds,
        "options": options,
        "per_model": per_model or {},
        "jobs": jobs,
        "threads_per_job": _threads_per_job(jobs) if jobs > 1 else None,
    }


def _note_replaced(out: Path, models: list[str], seeds: list[int], runs: Path | None, log) -> None:
    """Say what an earlier benchmark in ``out`` loses: its results files are rewritten, its run folders of the
    same names replaced."""
    try:
        before = [r["model"] for r in json.loads((out / "results.json").read_text(encoding="utf-8"))]
    except (OSError, ValueError, KeyError, TypeError):
        before = []
    if before:
        lost = [m for m in before if m not in models]
        log(
            f"note: {out}/results.json held an earlier benchmark ({', '.join(before)}); it is replaced"
            + (f", and the rows of {', '.join(lost)} will not be in it" if lost else "")
        )
    if runs is not None:
        again = [f"{m}-seed{seed}" for m in models for seed in seeds if (runs / f"{m}-seed{seed}").exists()]
        if again:
            log(
                f"note: {len(again)} run folder(s) under {runs} are trained again and replaced ({', '.join(again[:3])}"
                + (", ..." if len(again) > 3 else "")
                + ")"
            )


def _threads_per_job(jobs: int) -> int:
    return max(1, (os.cpu_count() or 1) // jobs)


_PARENT_SIGTERM = "benchmark stopped by SIGTERM"


@contextlib.contextmanager
def _stopped_by_sigterm():
    """While the main process waits on its workers, a SIGTERM raises ``Interrupted`` there (exit 143) instead of
    ending it at once and leaving them to train on; a second SIGTERM ends it as before."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, previous)
        raise Interrupted(f"{_PARENT_SIGTERM}. {KEPT}", int(signal.SIGTERM), _PARENT_SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_in_workers(models, data, trials_of, jobs: int, options_for, run_dir, finish, done, log) -> None:
    """``run_benchmark``'s trials, ``jobs`` at a time in spawned worker processes; rows in the order asked for."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if callable(data):  # encode each model's data once here, so workers only reload the cache
        from docattn.classifier import DocumentClassifier

        for model in models:
            for fold in sorted({f for _, f in trials_of}, key=lambda f: -1 if f is None else f):
                data(DocumentClassifier(model, **options_for(model, fold)).data_settings)
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_start,
        initargs=(_threads_per_job(jobs),),
    )
    with pool, _stopped_by_sigterm():
        log(f"{len(models) * len(trials_of)} trials, {jobs} at a time, {_threads_per_job(jobs)} thread(s) each")
        futures = {
            (m, seed, fold): pool.submit(
                _run_in_worker, m, data, seed, options_for(m, fold), run_dir(m, seed, fold), fold
            )
            for m in models
            for seed, fold in trials_of
        }
        try:
            for model in models:  # rows in the order asked for, each written once its trials are done
                finish(model, [done(model, futures[(model, seed, fold)].result()) for seed, fold in trials_of])
        except BaseException as err:
            for f in futures.values():
                f.cancel()
            if isinstance(err, Interrupted) and err.where == _PARENT_SIGTERM:
                # a SIGTERM to this process alone (kill PID, a scheduler's timeout) leaves its workers
                # training; each then stops its fit as a SIGTERM'd `train` does, and the pool's exit waits for it
                for worker in multiprocessing.active_children():
                    worker.terminate()
            if isinstance(err, KeyboardInterrupt):  # Ctrl-C reaches this process while it waits on the workers
                import signal

                raise Interrupted(f"benchmark stopped by SIGINT. {KEPT}", int(signal.SIGINT)) from None
            raise


def run_benchmark(
    models: list[str],
    data: PreparedData | Callable[[DataSettings], PreparedData],
    seeds: list[int],
    out: Path,
    options: dict,
    title: str,
    per_model: dict | None = None,
    log=print,
    runs: Path | None = None,
    jobs: int = 1,
    folds: int | None = None,
) -> list[dict]:
    """Train every model with every seed; rows are written after each model, so a crash keeps them.

    With ``runs``, each trial's run directory is kept as ``runs/MODEL-seedN`` (for `explain`,
    `faithfulness` or `evaluate` afterwards). With ``jobs`` > 1, trials run that many at a time in
    worker processes with cores/jobs torch threads each: on a small CPU, two one-thread trials get
    more done than one two-thread trial, whose small matrix products do not split well. Each
    trial's documents/s are then those of a process sharing the machine. ``data`` must then be
    picklable (``PathData``, or prepared splits, which are copied to each worker). With ``folds``, every
    seed trains once per fold of a stratified k-fold split, tested on that fold (``data`` must then be a function).
    """
    out.mkdir(parents=True, exist_ok=True)
    _note_replaced(out, models, seeds, runs, log)
    rows: list[dict] = []
    started, about = time.perf_counter(), run_record(models, seeds, options, per_model, jobs)
    options_of = {m: {**options, **(per_model or {}).get(m, {})} for m in models}
    trials_of = [(seed, fold) for seed in seeds for fold in (range(folds) if folds else [None])]

    def options_for(m: str, fold: int | None) -> dict:
        return options_of[m] if fold is None else {**options_of[m], "cv_folds": folds, "cv_fold": fold}

    def run_dir(m: str, seed: int, fold: int | None) -> Path | None:
        return runs / (f"{m}-seed{seed}" + (f"-fold{fold}" if fold is not None else "")) if runs else None

    def finish(model: str, trials: list[dict]) -> None:
        rows.append(summarize(model, trials))
        write_json(out / "results.json", rows)
        (out / "results.md").write_text(markdown_table(rows, title), encoding="utf-8")
        write_json(
            out / "run.json",
            {**about, "wall_seconds": time.perf_counter() - started, "finished_models": [r["model"] for r in rows]},
        )

    def done(model: str, trial: dict) -> dict:
        name = _trial_name(trial["seed"], trial.get("fold"))
        if trial.get("diverged"):
            log(f"{model} {name}: diverged ({trial['diverged']})")
            return trial
        acc = trial["test_accuracy"]
        micro = trial.get("test_micro_f1")
        log(
            f"{model} {name}: "
            + (f"test micro-F1 {micro:.4f}, " if micro is not None else "")
            + f"test accuracy {'-' if acc is None else f'{acc:.4f}'}, {trial['train_seconds']:.1f} s"
        )
        return trial

    if jobs <= 1:
        for model in models:
            trials = []
            for seed, fold in trials_of:
                log(f"{model} {_trial_name(seed, fold)}: training")
                trials.append(
                    done(model, run_one(model, data, seed, options_for(model, fold), run_dir(model, seed, fold), fold))
                )
            finish(model, trials)
    else:
        _run_in_workers(models, data, trials_of, jobs, options_for, run_dir, finish, done, log)
    plot_curves(rows, out / "curves.png", title)
    return rows
