"""The transfer suite: every model at its defaults over data of different sizes and kinds, one table.

    python benchmarks/transfer.py [--sets bbc,ag,imdb1k,...] [--models nb,logreg,han,...] [--jobs 2]

Each data set runs `docattn benchmark` with the same options for every model and every set (no
per-data-set flags), so the table shows how the defaults transfer:

- bbc: BBC News, 2,225 articles, 5 topics, stratified 5-fold cross-validation;
- ag: AG News' test split (7,600 titles and descriptions, 4 topics) as a corpus, 5-fold cross-validation;
- agtitles: the same 7,600 articles by their titles alone (about 7 words each), 5-fold cross-validation: the
  short-text set;
- imdb1k, imdb2k, imdb5k: 1,000 / 2,000 / 5,000 IMDB training reviews (a seeded draw), tested on all
  25,000 test reviews;
- ratings2k: 2,000 IMDB training reviews (a seeded draw) labelled by their star rating (1-4 and 7-10: IMDB
  holds no 5 or 6, so 8 classes), tested on all 25,000 test reviews by theirs: fine-grained sentiment, as the
  papers' Yelp and Amazon ratings;
- news2k: 2,000 20 Newsgroups training posts (a seeded, stratified draw), tested on its 7,532 test posts;
- r8: Reuters-21578 ModApte's single-topic documents of its ten most frequent topics, the topics with documents
  in both splits kept (R8: 8 classes, earn 2,840 training documents against grain's 41), tested on its test
  split: the imbalanced set;
- r52: the same from all of ModApte's topics (52 classes, earn 2,840 training documents against platinum's 1),
  tested on its test split: many classes, extremely imbalanced;
- imdb, news: the full training splits, tested on the full test splits.

Probes outside the table (`--sets NAME` runs one; their results are not tabled): imdbskew, 2,000 IMDB training
reviews of which 10% positive, tested on 13,889 test reviews of which 10% positive; imdbshort, 6,000 IMDB
training reviews (a seeded draw) cut to their first two sentences, tested on all 25,000 test reviews cut the
same way: short sentiment texts, many documents but few tokens; imdblong, 1,900 IMDB training reviews of over
400 words (a seeded draw), tested on every test review of over 400 words: few documents but many tokens.

Validation takes 10% of the training documents everywhere, as `docattn train` does by default.
Results: benchmarks/results/transfer/<set>/ (results.json, results.md, run.json with the command) and
the combined table in benchmarks/results/transfer/table.md, also written between the transfer
markers of benchmarks/README.md. Set subsets are written under $DOCATTN_CACHE (or ~/.cache/docattn).
A set that has run already keeps its folder: running some of its models again writes them into a
subfolder named by them (e.g. imdb1k/han+hpan), and the table shows each model's newest run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, SHARED_DATA, machine  # noqa: E402

MODELS = "nb,logreg,han,hpan,hsan,kim-cnn,fasttext,hcan,sanet,cspan"
SETS = ["bbc", "ag", "agtitles", "imdb1k", "imdb2k", "imdb5k", "ratings2k", "news2k", "r8", "r52", "imdb", "news"]
README = Path(__file__).resolve().parent / "README.md"
START, END = "<!-- transfer:start -->", "<!-- transfer:end -->"


def _work_dir() -> Path:
    root = Path(os.environ.get("DOCATTN_CACHE", Path.home() / ".cache" / "docattn")) / "transfer-suite"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _write_jsonl(path: Path, docs: list[tuple[str, str]]) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for text, label in docs:
            f.write(json.dumps({"text": text, "label": label}) + "\n")
    os.replace(tmp, path)
    return path


def _archive_split(archive: Path, split: str) -> list[tuple[str, str]]:
    from docattn.data.readers import read_splits

    corpus = read_splits(archive)[split]
    return list(zip(corpus.texts, corpus.labels))


def _imdb_ratings(archive: Path, split: str) -> dict[str, tuple[str, str]]:
    """{review file name: (text, star rating as "r01".."r10")} of one IMDB split; the rating is in the name."""
    import re
    import tarfile

    named = re.compile(rf"aclImdb/{split}/(pos|neg)/(\d+_(\d+))\.txt$")
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            m = named.match(member.name)
            if m:
                text = tar.extractfile(member).read().decode("utf-8", errors="replace")
                out[f"{m[1]}/{m[2]}"] = (text, f"r{int(m[3]):02d}")
    return out


def _draw(docs: list, n: int, seed: int = 0, stratified: bool = False) -> list:
    rng = random.Random(seed)
    if not stratified:
        return rng.sample(docs, n)
    by_label: dict = {}
    for d in docs:
        by_label.setdefault(d[1], []).append(d)
    out = []
    for _, members in sorted(by_label.items()):
        out += rng.sample(members, round(n * len(members) / len(docs)))
    rng.shuffle(out)
    return out


def _skewed(docs: list, positive: int, negative: int, seed: int = 0) -> list:
    """``positive`` IMDB reviews labelled pos and ``negative`` labelled neg, a seeded draw in shuffled order."""
    rng = random.Random(seed)
    pos, neg = sorted(d for d in docs if d[1] == "pos"), sorted(d for d in docs if d[1] == "neg")
    out = rng.sample(pos, positive) + rng.sample(neg, negative)
    rng.shuffle(out)
    return out


def _first_sentences(docs: list[tuple[str, str]], n: int = 2) -> list[tuple[str, str]]:
    """Each document cut to its first ``n`` sentences, as docattn splits them."""
    from docattn.data.text import split_sentences

    return [(" ".join(split_sentences(text, caseless=False)[:n]), label) for text, label in docs]


def _reuters_single(work: Path, name: str, topics: int | None) -> tuple[Path, Path]:
    """ModApte's single-topic documents of its ``topics`` most frequent topics (None: all), the topics with
    documents in both splits kept: R8 (Cardoso-Cachopo 2007) from the ten most frequent, R52 from all."""
    from collections import Counter

    from docattn.data.readers import read_splits

    train, test = work / f"{name}_train.jsonl", work / f"{name}_test.jsonl"
    if not (train.exists() and test.exists()):
        splits = read_splits(SHARED_DATA / "reuters21578" / "reuters21578.tar.gz")
        top = [k for k, _ in Counter(t for ts in splits["train"].labels for t in ts).most_common(topics)]
        single = {
            split: [(text, ts[0]) for text, ts in zip(c.texts, c.labels) if len(ts) == 1 and ts[0] in top]
            for split, c in splits.items()
        }
        both = {d[1] for d in single["train"]} & {d[1] for d in single["test"]}
        _write_jsonl(train, [d for d in single["train"] if d[1] in both])
        _write_jsonl(test, [d for d in single["test"] if d[1] in both])
    return train, test


def data_args(name: str) -> list[str]:
    """The `docattn benchmark` data options for set ``name`` (subsets are written once and reused)."""
    imdb, news = SHARED_DATA / "imdb" / "aclImdb.tar.gz", SHARED_DATA / "20news" / "20news-bydate.tar.gz"
    work = _work_dir()
    if name == "bbc":
        return ["--data", str(SHARED_DATA / "bbc" / "bbc.tar.gz"), "--cv", "5"]
    if name in ("ag", "agtitles"):
        path = work / ("ag_test_as_corpus.jsonl" if name == "ag" else "ag_titles_as_corpus.jsonl")
        if not path.exists():
            from docattn.data.readers import read_splits

            corpus = next(iter(read_splits(SHARED_DATA / "ag_news").values()))
            docs = list(zip(corpus.texts, corpus.labels))
            if name == "agtitles":  # the CSV reader joins a title and its description with a blank line
                docs = [(text.split("\n\n", 1)[0], label) for text, label in docs]
            _write_jsonl(path, docs)
        return ["--data", str(path), "--cv", "5"]
    if name == "ratings2k":
        train, test = work / "imdb_ratings_train_2000.jsonl", work / "imdb_ratings_test.jsonl"
        if not (train.exists() and test.exists()):
            reviews = _imdb_ratings(imdb, "train")
            _write_jsonl(train, _draw([reviews[k] for k in sorted(reviews)], 2000))
            reviews = _imdb_ratings(imdb, "test")
            _write_jsonl(test, [reviews[k] for k in sorted(reviews)])
        return ["--data", str(train), "--test", str(test)]
    if name.startswith("imdb") and name[4:-1].isdigit():
        n = int(name[4:-1]) * 1000
        path = work / f"imdb_train_{n}.jsonl"
        if not path.exists():
            _write_jsonl(path, _draw(_archive_split(imdb, "train"), n))
        return ["--data", str(path), "--test", str(imdb)]
    if name == "imdbskew":  # a probe, not in SETS: 10% positive in training and test
        train, test = work / "imdb_skew_train.jsonl", work / "imdb_skew_test.jsonl"
        if not (train.exists() and test.exists()):
            _write_jsonl(train, _skewed(_archive_split(imdb, "train"), 200, 1800))
            _write_jsonl(test, _skewed(_archive_split(imdb, "test"), 1389, 12500))
        return ["--data", str(train), "--test", str(test)]
    if name == "imdbshort":  # a probe, not in SETS: two sentences a review
        train, test = work / "imdb_short_train_6000.jsonl", work / "imdb_short_test.jsonl"
        if not (train.exists() and test.exists()):
            _write_jsonl(train, _first_sentences(_draw(_archive_split(imdb, "train"), 6000)))
            _write_jsonl(test, _first_sentences(_archive_split(imdb, "test")))
        return ["--data", str(train), "--test", str(test)]
    if name == "imdblong":  # a probe, not in SETS: over 400 words a review
        train, test = work / "imdb_long_train_1900.jsonl", work / "imdb_long_test.jsonl"
        if not (train.exists() and test.exists()):
            _write_jsonl(train, _draw([d for d in _archive_split(imdb, "train") if len(d[0].split()) > 400], 1900))
            _write_jsonl(test, [d for d in _archive_split(imdb, "test") if len(d[0].split()) > 400])
        return ["--data", str(train), "--test", str(test)]
    if name == "news2k":
        path = work / "20news_train_2000.jsonl"
        if not path.exists():
            _write_jsonl(path, _draw(_archive_split(news, "train"), 2000, stratified=True))
        return ["--data", str(path), "--test", str(news)]
    if name in ("r8", "r52"):
        train, test = _reuters_single(work, name, 10 if name == "r8" else None)
        return ["--data", str(train), "--test", str(test)]
    if name == "imdb":
        return ["--data", str(imdb)]
    if name == "news":
        return ["--data", str(news)]
    raise SystemExit(f"unknown set {name!r}; sets: {', '.join(SETS)}")


def run_set(name: str, models: str, jobs: int, extra: list[str]) -> dict:
    out = RESULTS / "transfer" / name
    if newest_runs(out):  # the set has run (here or in a subfolder): keep its other models' rows
        out = out / models.replace(",", "+")
    command = [
        "docattn",
        "benchmark",
        *data_args(name),
        "--models",
        models,
        "--valid-fraction",
        "0.1",
        "--jobs",
        str(jobs),
        "--out",
        str(out),
        *extra,
    ]
    print(" ".join(command), flush=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "docattn", *command[1:]], check=True)
    return {"set": name, "command": " ".join(command), "seconds": round(time.perf_counter() - t0, 1)}


def _cell(d: dict) -> str:
    return "-" if not d or d.get("mean") is None else f"{100 * d['mean']:.2f} ± {100 * d['std']:.2f}"


def newest_runs(folder: Path) -> dict[str, tuple[dict, Path, str]]:
    """Each model's row from the newest benchmark of a set (its folder's and its reruns' subfolders'), with the
    folder it came from and that run's date."""
    runs = [p.parent for p in [folder / "results.json", *sorted(folder.glob("*/results.json"))] if p.exists()]
    dated = sorted((json.loads((run / "run.json").read_text())["date"], run) for run in runs)  # "YYYY-MM-DD ..."
    return {r["model"]: (r, run, date) for date, run in dated for r in json.loads((run / "results.json").read_text())}


def _accuracy(cell: tuple[dict, Path, str] | None) -> float | None:
    return None if cell is None else cell[0]["test_accuracy"]["mean"]


BASELINES = ("nb", "logreg")  # issue 34's targets: at least nb everywhere, within 1 point of logreg
NOT_ATTENTION = (*BASELINES, "kim-cnn", "fasttext")  # the targets are the attention models'


def table(sets: list[str]) -> str:
    """Three tables from the results folders: accuracy and macro-F1 (mean ± std over folds or seeds) per model
    and set; each attention model's points above or under nb and logreg, against issue 34's targets; and the
    folder and date of every cell, so that a reader sees which ran at today's defaults."""
    cells: dict[str, dict[str, tuple[dict, Path, str]]] = {}
    found = []
    for name in sets:
        runs = newest_runs(RESULTS / "transfer" / name)  # none: the set has not run
        if not runs:
            continue
        found.append(name)
        for model, cell in runs.items():
            cells.setdefault(model, {})[name] = cell
    head = "| model | " + " | ".join(found)
    rule = "|---|" + "---|" * len(found)
    scores = [head + " | mean accuracy |", rule + "---|"]
    for model, by_set in cells.items():
        row = []
        for name in found:
            r = by_set[name][0] if name in by_set else None
            row.append("-" if r is None else f"{_cell(r['test_accuracy'])} (F1 {_cell(r['test_macro_f1'])})")
        accs = [a for a in (_accuracy(by_set.get(n)) for n in found) if a is not None]
        mean = f"{100 * sum(accs) / len(accs):.2f}" if len(accs) == len(found) else "-"
        scores.append(f"| {model} | " + " | ".join(row) + f" | {mean} |")
    against = [head + " | at least nb | within 1 of logreg |", rule + "---|---|"]
    for model in [m for m in cells if m not in NOT_ATTENTION]:
        row, above, near, ran = [], 0, 0, 0
        for name in found:
            acc, nb, lr = (_accuracy(cells.get(m, {}).get(name)) for m in (model, *BASELINES))
            if acc is None or nb is None or lr is None:
                row.append("-")
                continue
            over_nb, over_lr = round(100 * (acc - nb), 2), round(100 * (acc - lr), 2)  # judged as shown
            ran += 1
            above += over_nb >= 0
            near += over_lr >= -1
            mark = "" if over_nb >= 0 else "**"  # under nb stands out
            row.append(f"{mark}{over_nb:+.2f}{mark} / {over_lr:+.2f}")
        against.append(f"| {model} | " + " | ".join(row) + f" | {above} of {ran} | {near} of {ran} |")
    sources = [head + " |", rule]
    for model, by_set in cells.items():
        row = []
        for name in found:
            if name not in by_set:
                row.append("-")
                continue
            _, run, date = by_set[name]
            where = run.relative_to(RESULTS / "transfer").as_posix()
            row.append(f"`{where}` {date[:10]}")
        sources.append(f"| {model} | " + " | ".join(row) + " |")
    return "\n".join(
        [
            *scores,
            "",
            "Points above or under nb / logreg, test accuracy (under nb in bold):",
            "",
            *against,
            "",
            "Where each cell comes from (`results/transfer/<folder>`; its `run.json` has the command) and when:",
            "",
            *sources,
        ]
    )


def write_readme(text: str) -> None:
    readme = README.read_text(encoding="utf-8")
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        readme = head + START + "\n" + text + "\n" + END + rest.split(END, 1)[1]
    else:
        readme = readme.rstrip("\n") + f"\n\n{START}\n{text}\n{END}\n"
    README.write_text(readme, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--table-only", action="store_true", help="rebuild the table from the results folders")
    ap.add_argument("extra", nargs="*", help="more `docattn benchmark` options after --, e.g. -- --set guardrail=false")
    args = ap.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    runs = [] if args.table_only else [run_set(s, args.models, args.jobs, args.extra) for s in sets]
    text = table(SETS)  # every set that has run
    record = {
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "runs": runs,
        "table": text,
    }
    (RESULTS / "transfer").mkdir(parents=True, exist_ok=True)
    if runs:  # a rebuilt table ran nothing: the runs' own records stay the suite's history
        previous = RESULTS / "transfer" / "suite.json"
        history = json.loads(previous.read_text()) if previous.exists() else []
        previous.write_text(json.dumps(history + [record], indent=1, default=str))
    (RESULTS / "transfer" / "table.md").write_text(text + "\n", encoding="utf-8")
    write_readme(text)
    print(text)


if __name__ == "__main__":
    main()
