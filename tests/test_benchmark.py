"""``docattn benchmark``: results.json rows, the Markdown table and the curve plot."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from docattn.benchmark import RESULT_PACKAGES
from docattn.cli import app
from docattn.data import synthetic


def test_benchmark_two_models_two_seeds(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    sp = synthetic.make_splits(n_train=300, n_test=100, seed=7)
    folder = tmp_path / "data"
    folder.mkdir()
    for split in ("train", "test"):
        with open(folder / f"{split}.jsonl", "w") as f:
            for t, y in zip(sp[split].texts, sp[split].labels):
                f.write(json.dumps({"text": t, "label": y}) + "\n")
    res = CliRunner().invoke(
        app,
        [
            "benchmark",
            "--data",
            str(folder / "train.jsonl"),
            "--models",
            "han,han-max",
            "--seeds",
            "2",
            "--first-seed",
            "3",
            "--runs",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "bench"),
            "--max-epochs",
            "1",
            "--set",
            "embedding_dim=16",
            "--set",
            "hidden_size=8",
            "--set",
            "context_dim=8",
            "--set",
            "embeddings=random",
            "--set",
            "min_count=2",
            "--test",
            str(folder / "test.jsonl"),
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert [r["model"] for r in rows] == ["han", "han-max"]
    for r in rows:
        assert 0 <= r["test_accuracy"]["mean"] <= 1 and r["test_accuracy"]["std"] >= 0
        assert r["seeds"] == [3, 4] and r["parameters"] > 0 and r["train_docs_per_s"]["mean"] > 0
        assert r["inference_docs_per_s"]["mean"] > 0 and "macro_f1" not in r
        kind = "cuda_allocated" if torch.cuda.is_available() else "process_rss_peak"  # trials run on the GPU there
        assert r["peak_memory_mb"] > (0 if torch.cuda.is_available() else 50) and r["peak_memory_kind"] == kind
        epochs = [h["epoch"] for h in r["trials"][0]["history"]]
        assert epochs and set(epochs) == {0}  # the curve has its validation points
    kept = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert kept == ["han-max-seed3", "han-max-seed4", "han-seed3", "han-seed4"]
    from docattn.classifier import DocumentClassifier

    clf = DocumentClassifier.load(tmp_path / "runs" / "han-seed4")
    assert len(clf.predict(sp["test"].texts[:3])) == 3
    md = (tmp_path / "bench" / "results.md").read_text()
    assert "| han |" in md and "| han-max |" in md
    assert (tmp_path / "bench" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    about = json.loads((tmp_path / "bench" / "run.json").read_text())  # enough to rerun and compare
    assert about["models"] == ["han", "han-max"] and about["seeds"] == [3, 4]
    assert about["finished_models"] == ["han", "han-max"] and about["wall_seconds"] > 0
    assert about["machine"]["cpu_count"] >= 1 and about["machine"]["torch_threads"] >= 1
    import numpy

    assert about["machine"]["packages"]["numpy"] == numpy.__version__  # a rerun can tell what it ran on
    assert set(about["machine"]["packages"]) == set(RESULT_PACKAGES) and about["machine"]["packages"]["gensim"]
    assert (
        about["command"].split()[0] == "docattn" and about["options"]["embedding_dim"] == 16
    )  # argv: the runner's here


def test_merge_seeds_of_a_cross_validated_set(tmp_path):
    """Another seed of the same folds joins a cross-validated cell; the same seed and fold twice is refused."""
    import runpy
    from pathlib import Path

    import pytest

    from docattn.benchmark import summarize

    merge = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "merge_seeds.py"))["merge"]
    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        trials = [{**_trial(seed, 0.9 + seed / 100 + fold / 1000), "fold": fold} for fold in range(3)]
        (folder / "results.json").write_text(json.dumps([summarize("han", trials)]))
        (folder / "results.md").write_text("### bbc\n")
        (folder / "run.json").write_text(json.dumps({"command": f"docattn benchmark --cv 3 --first-seed {seed}"}))
        folders.append(folder)
    row = merge(tmp_path / "merged", folders)[0]
    assert row["seeds"] == [0, 1] and row["folds"] == [0, 1, 2] and len(row["trials"]) == 6
    assert abs(row["test_accuracy"]["mean"] - 0.906) < 1e-12
    with pytest.raises(SystemExit):
        merge(tmp_path / "again", [folders[0], folders[0]])


def _trial(seed: int, acc: float) -> dict:
    return {
        "seed": seed,
        "test_accuracy": acc,
        "test_macro_f1": acc,
        "valid_accuracy": acc,
        "train_seconds": 10.0,
        "train_ms_per_document": 1.0,
        "train_docs_per_s": 1000.0,
        "inference_docs_per_s": 2000.0,
        "parameters": 7,
        "peak_memory_mb": 100.0,
        "peak_memory_kind": "process_rss_peak",
        "device": "cpu",
        "stopped_on_budget": False,
        "history": [{"epoch": 0, "step": 1, "val_acc": acc, "elapsed_s": 10.0}],
    }


def test_merge_seeds_run_in_parallel(tmp_path):
    """Seeds run as separate processes merge into the summary one `--seeds 3` run would write."""
    import runpy
    from pathlib import Path

    from docattn.benchmark import summarize

    merge = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "merge_seeds.py"))["merge"]
    folders = []
    for seeds in ([0], [2, 1]):
        folder = tmp_path / f"part{seeds[0]}"
        folder.mkdir()
        trials = [_trial(s, 0.8 + s / 100) for s in seeds]
        (folder / "results.json").write_text(json.dumps([summarize("han", trials)]))
        (folder / "results.md").write_text("### imdb\n")
        date = f"2026-11-2{seeds[0]} 10:00:00 UTC"
        (folder / "run.json").write_text(
            json.dumps({"command": f"docattn benchmark --first-seed {seeds[0]}", "date": date})
        )
        folders.append(folder)
    rows = merge(tmp_path / "merged", folders)
    assert rows[0]["seeds"] == [0, 1, 2]
    assert (
        abs(rows[0]["test_accuracy"]["mean"] - 0.81) < 1e-12
        and abs(rows[0]["test_accuracy"]["std"] - (2 / 3) ** 0.5 / 100) < 1e-12
    )  # population std, as benchmark
    about = json.loads((tmp_path / "merged" / "run.json").read_text())
    assert about["commands"] == ["docattn benchmark --first-seed 0", "docattn benchmark --first-seed 2"]
    assert about["date"] == "2026-11-22 10:00:00 UTC"  # the newest run's
    assert "| han |" in (tmp_path / "merged" / "results.md").read_text()
    import pytest

    with pytest.raises(SystemExit):  # the same seed twice is a mistake, not more evidence
        merge(tmp_path / "again", [folders[0], folders[0]])
    # a seed run later joins the merged folder: its commands are listed beside the merged ones, not nested
    later = tmp_path / "part3"
    later.mkdir()
    (later / "results.json").write_text(json.dumps([summarize("han", [_trial(3, 0.83)])]))
    (later / "results.md").write_text("### imdb\n")
    (later / "run.json").write_text(json.dumps({"command": "docattn benchmark --first-seed 3", "date": "2026-11-23"}))
    assert merge(tmp_path / "merged4", [tmp_path / "merged", later])[0]["seeds"] == [0, 1, 2, 3]
    about = json.loads((tmp_path / "merged4" / "run.json").read_text())
    assert about["commands"] == [f"docattn benchmark --first-seed {s}" for s in (0, 2, 3)]


def test_the_transfer_table_keeps_each_models_newest_run_of_a_set(tmp_path):
    """Rerunning some models of a set (a subfolder) replaces their rows and keeps the others'."""
    import runpy
    from pathlib import Path

    from docattn.benchmark import summarize

    newest_runs = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "transfer.py"))["newest_runs"]
    runs = {
        tmp_path: ("2026-11-27 10:30:46 UTC", {"nb": 0.80, "han": 0.70}),
        tmp_path / "han": ("2026-11-29 09:00:00 UTC", {"han": 0.82}),
        tmp_path / "han+nb-old": ("2026-11-26 09:00:00 UTC", {"han": 0.60, "nb": 0.60}),  # older than the set
    }
    for folder, (date, accuracies) in runs.items():
        folder.mkdir(exist_ok=True)
        rows = [summarize(m, [_trial(0, a)]) for m, a in accuracies.items()]
        (folder / "results.json").write_text(json.dumps(rows))
        (folder / "run.json").write_text(json.dumps({"date": date}))
    rows = {model: row["test_accuracy"]["mean"] for model, (row, _, _) in newest_runs(tmp_path).items()}
    assert rows == {"nb": 0.80, "han": 0.82}


def test_the_transfer_table_says_where_each_model_stands_against_nb_and_logreg(tmp_path):
    """Points above or under both baselines per set (under nb in bold), the targets counted, and each cell's
    folder and date."""
    import runpy
    from pathlib import Path

    from docattn.benchmark import summarize

    table = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "transfer.py"))["table"]
    table.__globals__["RESULTS"] = tmp_path
    sets = {
        "a": {"": ("2026-11-27 10:00:00 UTC", {"nb": 0.80, "logreg": 0.85, "han": 0.845})},
        "b": {
            "": ("2026-11-27 10:00:00 UTC", {"nb": 0.70, "logreg": 0.72, "han": 0.60}),
            "han": ("2026-12-02 09:00:00 UTC", {"han": 0.69}),
        },
    }
    for name, runs in sets.items():
        for sub, (date, accuracies) in runs.items():
            folder = tmp_path / "transfer" / name / sub
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "results.json").write_text(
                json.dumps([summarize(m, [_trial(0, a)]) for m, a in accuracies.items()])
            )
            (folder / "run.json").write_text(json.dumps({"date": date}))
    text = table(["a", "b", "c"])  # c has not run: no column
    assert "| han | +4.50 / -0.50 | **-1.00** / -3.00 | 1 of 2 | 1 of 2 |" in text
    assert "| han | `a` 2026-11-27 | `b/han` 2026-12-02 |" in text
    assert "| nb | 80.00 ± 0.00 (F1 80.00 ± 0.00) | 70.00 ± 0.00 (F1 70.00 ± 0.00) | 75.00 |" in text


def test_a_set_run_only_model_by_model_still_gets_its_column(tmp_path):
    """A set whose cells all ran as reruns (subfolders, none in the set's own folder) is tabled like any other."""
    import runpy
    from pathlib import Path

    from docattn.benchmark import summarize

    table = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "transfer.py"))["table"]
    table.__globals__["RESULTS"] = tmp_path
    for sub, accuracies in {"nb+logreg_x": {"nb": 0.87, "logreg": 0.91}, "han_x": {"han": 0.92}}.items():
        folder = tmp_path / "transfer" / "imdb" / sub
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps([summarize(m, [_trial(0, a)]) for m, a in accuracies.items()]))
        (folder / "run.json").write_text(json.dumps({"date": "2026-12-06 02:00:00 UTC"}))
    text = table(["imdb"])
    assert "| han | +5.00 / +1.00 | 1 of 1 | 1 of 1 |" in text
    assert "| han | `imdb/han_x` 2026-12-06 |" in text


def test_the_transfer_suites_ratings_come_from_the_review_file_names(tmp_path):
    """ratings2k labels each IMDB review by the star rating in its name, for the split asked, nothing else."""
    import io
    import runpy
    import tarfile
    from pathlib import Path

    ratings = runpy.run_path(str(Path(__file__).parents[1] / "benchmarks" / "transfer.py"))["_imdb_ratings"]
    files = {
        "aclImdb/train/pos/3_10.txt": "Loved it.",
        "aclImdb/train/neg/12_2.txt": "Dull.",
        "aclImdb/test/pos/4_7.txt": "Fine.",
        "aclImdb/train/unsup/5_0.txt": "Unlabelled.",
        "aclImdb/imdb.vocab": "the\n",
    }
    with tarfile.open(tmp_path / "imdb.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "imdb.tar.gz"
    assert ratings(archive, "train") == {"pos/3_10": ("Loved it.", "r10"), "neg/12_2": ("Dull.", "r02")}
    assert ratings(archive, "test") == {"pos/4_7": ("Fine.", "r07")}


def test_benchmark_encodes_with_each_models_data_settings(tmp_path, monkeypatch):
    """HCAN's text cleaning and a user's --set min_count reach the benchmark's encoding, as in `train`."""
    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    sp = synthetic.make_splits(n_train=200, n_test=60, seed=8)
    for split in ("train", "test"):
        with open(tmp_path / f"{split}.csv", "w") as f:
            f.write("review,sentiment\n")
            for t, y in zip(sp[split].texts, sp[split].labels):
                f.write('"' + t.replace('"', '""') + f'",{y}\n')
    res = CliRunner().invoke(
        app,
        [
            "benchmark",
            "--data",
            str(tmp_path / "train.csv"),
            "--test",
            str(tmp_path / "test.csv"),
            "--text-col",
            "review",
            "--label-col",
            "sentiment",
            "--models",
            "han,can-one-max",
            "--seeds",
            "1",
            "--runs",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "bench"),
            "--max-epochs",
            "1",
            "--set",
            "embedding_dim=16",
            "--set",
            "embeddings=random",
            "--set",
            "han:hidden_size=8",
            "--set",
            "han:context_dim=8",
            "--set",
            "can-one-max:d_model=16",
            "--set",
            "can-one-max:heads=2",
            "--set",
            "can-one-max:min_count=1",
        ],
    )
    assert res.exit_code == 0, res.output
    han = json.loads((tmp_path / "runs" / "han-seed0" / "config.json").read_text())
    can = json.loads((tmp_path / "runs" / "can-one-max-seed0" / "config.json").read_text())
    assert han["data"]["valid_fraction"] == can["data"]["valid_fraction"] == 0.3  # what the benchmark used
    assert han["data"]["text"]["hcan_clean"] is False and can["data"]["text"]["hcan_clean"] is True
    assert han["data"]["min_count"] == 5 and can["data"]["min_count"] == 1
    assert can["vocab_size"] > han["vocab_size"]  # min_count 1 keeps the rare words
    assert han["results"]["data"]["documents"] == can["results"]["data"]["documents"]  # the same splits


def test_benchmark_argument_errors(tmp_path):
    runner = CliRunner()
    for args, message in (
        (["--seeds", "0"], "--seeds"),
        (["--models", " "], "no model"),
        (["--models", "han", "--set", "hsan:dropout=0.1"], "not in --models"),
        (["--models", "han", "--set", "hiden_size=3"], "hiden_size"),
        (["--models", "han", "--set", "progress=false"], "set by the benchmark"),
        (["--models", "han", "--set", "han:seed=3"], "--first-seed"),
    ):
        res = runner.invoke(
            app, ["benchmark", "--data", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "b"), *args]
        )
        assert res.exit_code != 0 and message in str(res.exception), (args, res.exception)


def test_benchmark_jobs_run_trials_in_workers_with_the_same_results(tmp_path, monkeypatch):
    """--jobs 2: trials in two worker processes give the rows a one-at-a-time run gives (same threads)."""
    from docattn.benchmark import PathData, run_benchmark

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))  # inherited by the spawned workers
    sp = synthetic.make_splits(n_train=200, n_test=60, seed=5)
    for split in ("train", "test"):
        with open(tmp_path / f"{split}.jsonl", "w") as f:
            for t, y in zip(sp[split].texts, sp[split].labels):
                f.write(json.dumps({"text": t, "label": y}) + "\n")
    data = PathData(tmp_path / "train.jsonl", tmp_path / "test.jsonl")
    opts = {"max_epochs": 1}
    per_model = {
        "han": {"embedding_dim": 16, "hidden_size": 8, "context_dim": 8, "embeddings": "random", "min_count": 2},
        "logreg": {"min_df": 1},
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what each of 2 workers gets on a 2-core machine
    try:
        one = run_benchmark(
            ["han", "logreg"], data, [0, 1], tmp_path / "seq", opts, "t", per_model, log=lambda *a: None
        )
    finally:
        torch.set_num_threads(threads)
    lines = []
    two = run_benchmark(
        ["han", "logreg"], data, [0, 1], tmp_path / "par", opts, "t", per_model, log=lines.append, jobs=2
    )
    assert [r["model"] for r in two] == ["han", "logreg"] and [r["seeds"] for r in two] == [[0, 1], [0, 1]]
    for a, b in zip(one, two):
        assert [t["test_accuracy"] for t in a["trials"]] == [t["test_accuracy"] for t in b["trials"]]
    about = json.loads((tmp_path / "par" / "run.json").read_text())
    assert about["jobs"] == 2 and about["threads_per_job"] >= 1 and about["finished_models"] == ["han", "logreg"]
    assert any("2 at a time" in line for line in lines)


def _children(pid: int) -> list[int]:
    from pathlib import Path

    return [int(c) for task in Path(f"/proc/{pid}/task").glob("*") for c in (task / "children").read_text().split()]


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:  # a zombie has ended: only its parent has yet to reap it
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_sigterm_to_a_benchmark_with_jobs_stops_its_workers(tmp_path):
    """`kill PID` or a scheduler's time limit signals the main process alone: its workers must not train on."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    if not Path("/proc/self/task").exists():
        pytest.skip("reads a process's children from /proc (Linux)")
    sp = synthetic.make_splits(n_train=200, n_test=60, seed=5)
    for split in ("train", "test"):
        with open(tmp_path / f"{split}.jsonl", "w") as f:
            for t, y in zip(sp[split].texts, sp[split].labels):
                f.write(json.dumps({"text": t, "label": y}) + "\n")
    tiny = ["embedding_dim=16", "hidden_size=8", "context_dim=8", "embeddings=random", "min_count=2"]
    command = [sys.executable, "-m", "docattn.cli", "benchmark", "--data", str(tmp_path / "train.jsonl")]
    command += ["--test", str(tmp_path / "test.jsonl"), "--models", "han", "--seeds", "2", "--jobs", "2"]
    command += ["--max-epochs", "500", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "bench")]
    command += [a for option in tiny for a in ("--set", option)]
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    with open(tmp_path / "stderr", "w") as err:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
    workers: list[int] = []
    try:
        training = [tmp_path / "runs" / f"han-seed{s}" / "checkpoints" / "last.ckpt" for s in (0, 1)]
        deadline = time.time() + 180
        while not all(p.exists() for p in training) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        deadline = time.time() + 60
        while any(_alive(w) for w in workers) and time.time() < deadline:
            time.sleep(0.2)
        stderr = (tmp_path / "stderr").read_text()
        assert proc.returncode == 143, stderr[-2000:]
        assert not [w for w in workers if _alive(w)], "workers still running after the benchmark stopped"
        assert "benchmark stopped by SIGTERM" in stderr and "Traceback" not in stderr, stderr[-2000:]
    finally:
        for pid in [proc.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_benchmark_into_an_earlier_ones_folder_says_what_it_replaces(tmp_path):
    from docattn.benchmark import _note_replaced, markdown_table

    (tmp_path / "results.json").write_text(json.dumps([{"model": "han"}, {"model": "nb"}]))
    (tmp_path / "runs" / "han-seed0").mkdir(parents=True)
    said = []
    _note_replaced(tmp_path, ["han"], [0, 1], tmp_path / "runs", said.append)
    assert "held an earlier benchmark (han, nb); it is replaced, and the rows of nb will not be in it" in said[0]
    assert "1 run folder(s) under" in said[1] and "han-seed0" in said[1]
    said.clear()
    _note_replaced(tmp_path / "new", ["han"], [0], None, said.append)
    assert said == []
    assert "population deviation" in markdown_table([], "t")


def test_a_diverging_trial_is_a_result_and_tune_goes_on(tmp_path, monkeypatch):
    """Too high a learning rate diverges before its first validation: benchmark records it, tune tries the next rate."""
    from docattn.benchmark import markdown_table, run_one, summarize
    from docattn.data.prepare import DataSettings, prepare

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    sp = synthetic.make_splits(n_train=300, n_test=100, seed=5)
    data = prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))
    kim = dict(embeddings="random", embedding_dim=16, max_epochs=1, optimizer="adam", min_count=2)
    trial = run_one("kim-cnn", data, 0, {**kim, "lr": 1e12}, None)
    assert (
        trial["diverged"].startswith("training diverged") and trial["test_accuracy"] is None and trial["parameters"] > 0
    )
    row = summarize("kim-cnn", [trial])
    assert row["diverged_seeds"] == [0] and "diverged: seed 0" in markdown_table([row], "t")
    path = tmp_path / "train.jsonl"
    synthetic.write_jsonl(sp["train"], path)
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "--model",
            "kim-cnn",
            "--train",
            str(path),
            "--out",
            str(tmp_path / "tune"),
            "--lr",
            "1e12,0.001",
            "--epochs",
            "1",
            "--set",
            "embeddings=random",
            "--set",
            "embedding_dim=16",
            "--set",
            "optimizer=adam",
            "--set",
            "min_count=2",
        ],
    )
    assert res.exit_code == 0, res.output
    tuned = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert "diverged" in tuned["trials"][0] and tuned["best"]["lr"] == 0.001


def _interrupt_in_epoch(monkeypatch, epoch: int, lr: float | None = None) -> None:
    """Ctrl-C at the start of ``epoch`` (of the trial training at ``lr``), after the checkpoint of the one before."""
    from docattn.training import engine

    real = engine.MetricsLog.on_train_epoch_start

    def interrupt(self, trainer, pl_module):
        if trainer.current_epoch == epoch and (lr is None or pl_module.cfg.lr == lr):
            raise KeyboardInterrupt
        real(self, trainer, pl_module)

    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", interrupt)


def test_an_interrupted_tune_keeps_its_finished_trials_and_resumes(tmp_path, monkeypatch):
    from docattn.errors import Interrupted

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "train.jsonl"
    synthetic.write_jsonl(synthetic.make_splits(n_train=200, n_test=10, seed=5)["train"], path)
    args = [
        "tune",
        "--model",
        "kim-cnn",
        "--train",
        str(path),
        "--out",
        str(tmp_path / "tune"),
        "--lr",
        "0.001,0.002",
        "--epochs",
        "2",
        "--set",
        "embeddings=random",
        "--set",
        "embedding_dim=16",
        "--set",
        "min_count=2",
    ]
    _interrupt_in_epoch(monkeypatch, epoch=1, lr=0.002)
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, Interrupted), res.output
    assert "tune.json keeps the 1 trial(s) finished before it. Go on with the same command and --resume" in str(
        res.exception
    )
    tuned = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert tuned["complete"] is False and [t["lr"] for t in tuned["trials"]] == [0.001]
    monkeypatch.undo()
    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(app, args + ["--resume"])
    assert res.exit_code == 0, res.output
    assert "lr 0.001: kept from tune.json" in res.output
    tuned = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert tuned["complete"] is True and [t["lr"] for t in tuned["trials"]] == [0.001, 0.002]
    epochs = [
        line.split(",")[0] for line in (tmp_path / "tune" / "lr=0.002" / "metrics.csv").read_text().splitlines()[1:]
    ]
    assert epochs == ["0", "1"]  # its first epoch was not trained again
    res = CliRunner().invoke(app, args[:-1] + ["min_count=3", "--resume"])
    assert res.exit_code != 0 and "searched with other settings (options" in str(res.exception)
    moved = tmp_path / "elsewhere.jsonl"  # the same data by another path; a setting that changes no result
    moved.write_bytes(path.read_bytes())
    again = [moved if a == str(path) else a for a in args] + ["--set", "loader_workers=0", "--resume"]
    res = CliRunner().invoke(app, [str(a) for a in again])
    assert res.exit_code == 0 and res.output.count("kept from tune.json") == 2, res.output
    moved.write_text(moved.read_text().replace("the", "a"))  # other data under that path: not comparable
    res = CliRunner().invoke(app, [str(a) for a in again])
    assert res.exit_code != 0 and "searched with other settings (data" in str(res.exception)


def test_an_interrupted_benchmark_says_what_it_keeps(tmp_path, monkeypatch):
    from docattn.benchmark import run_one
    from docattn.data.prepare import DataSettings, prepare
    from docattn.errors import Interrupted

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    sp = synthetic.make_splits(n_train=200, n_test=50, seed=5)
    data = prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))
    _interrupt_in_epoch(monkeypatch, epoch=1)
    try:
        run_one(
            "kim-cnn", data, 3, dict(embeddings="random", embedding_dim=16, max_epochs=2, min_count=2), tmp_path / "run"
        )
    except Interrupted as err:
        message, caught = str(err), err
    import pickle  # from a --jobs worker to the main process

    again = pickle.loads(pickle.dumps(caught))
    assert (str(again), again.signal, again.where) == (message, caught.signal, caught.where) and caught.signal == 2
    assert message.startswith("kim-cnn seed 3: training stopped by SIGINT in epoch 2 of 2")
    assert message.endswith(
        "results.json keeps the models whose seeds had all finished; run the others with --models "
        "into another --out (a run into this one replaces its results.json)"
    )
    assert "--resume" not in message


def test_benchmark_results_never_replace_another_runs_file(tmp_path, monkeypatch):
    """A rerun under a used name lands beside the first file; a study's own later writes replace its own."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "common.py"
    spec = importlib.util.spec_from_file_location("bench_common", path)
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "machine", lambda: {"cpu_count": 2})
    (tmp_path / "load.json").write_text('{"first": true}')
    out = common.write_result("load", {"docs_per_s": 1.0}, quiet=True)
    assert out == tmp_path / "load.2.json" and json.loads((tmp_path / "load.json").read_text()) == {"first": True}
    assert common.write_result("load", {"docs_per_s": 2.0}, quiet=True) == out  # the same study, a later seed
    assert json.loads(out.read_text())["docs_per_s"] == 2.0
    assert common.write_result("derived", {"n": 1}, quiet=True, replace=True) == tmp_path / "derived.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["derived.json", "load.2.json", "load.json"]  # no temp left
