"""One training run end to end: embeddings, fitting, best weights on disk, test evaluation."""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from docattn.data.prepare import PreparedData
from docattn.errors import CheckpointError, ConfigError, DataError, DocattnError
from docattn.models.contract import is_one_shot

if TYPE_CHECKING:  # the engine (Lightning) is imported only when a neural model trains
    from docattn.training.engine import FitResult


VECTOR_SPREAD = 0.3  # packaged vectors are scaled to this entry spread, about word2vec's on these corpora


def init_embeddings(model, data: PreparedData, cfg) -> dict:
    """Fill ``model.embedding`` per ``cfg.embeddings``: word2vec on the training split, a packaged table, both
    side by side ("word2vec+wordllama"), a file, or random."""
    from docattn.data.embeddings import PACKAGED, PACKAGED_DIMS, load_vectors, packaged_beside, packaged_vectors

    info: dict = {"embeddings": cfg.embeddings}
    emb = model.embedding  # only a model the engine trains gets here
    if cfg.embeddings == "random":  # the model's own random start; frozen, if asked, as any other vectors
        emb.weight.requires_grad_(not cfg.freeze_embeddings)
        return info
    dim = emb.weight.shape[1]
    t0 = time.perf_counter()
    if cfg.embeddings == "word2vec":
        matrix = _cached_word2vec(data, dim, cfg)
    elif table := packaged_beside(cfg.embeddings):
        own = dim - PACKAGED_DIMS[table]
        if own < 1:
            raise ConfigError(
                f"embeddings {cfg.embeddings}: the table alone is {PACKAGED_DIMS[table]}-d, so embedding_dim "
                f"{dim} leaves word2vec nothing (set embedding_dim above {PACKAGED_DIMS[table]})"
            )
        packaged, _ = packaged_vectors(table, data.vocab, spread=VECTOR_SPREAD)  # every word has its pieces
        matrix = np.concatenate([_cached_word2vec(data, own, cfg), packaged], axis=1)
    else:
        if cfg.embeddings in PACKAGED:
            matrix, coverage = packaged_vectors(cfg.embeddings, data.vocab, data.splits["train"], spread=VECTOR_SPREAD)
        else:
            matrix, coverage = load_vectors(cfg.embeddings, data.vocab, data.splits["train"], seed=cfg.seed)
        if matrix.shape[1] != dim:
            raise ConfigError(
                f"{cfg.embeddings}: vectors are {matrix.shape[1]}-d but the model's embedding is {dim}-d "
                f"(set embedding_dim={matrix.shape[1]})"
            )
        if coverage.words_found == 0:  # every word would start random: surely the wrong file (or cased vs lowercased)
            raise DataError(
                f"{cfg.embeddings}: none of the vocabulary's {coverage.vocab_size:,} words has a vector there "
                f"(the vocabulary is {'lowercased' if data.vocab.text_config.lowercase else 'cased'}; "
                "is it the right file?)"
            )
        info["coverage"] = {
            "words": coverage.words_found,
            "vocab_share": coverage.vocab_share,
            "token_share": coverage.token_share,
        }
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(matrix))
    emb.weight.requires_grad_(not cfg.freeze_embeddings)
    info["embedding_seconds"] = round(time.perf_counter() - t0, 2)
    return info


def _cached_word2vec(data: PreparedData, dim: int, cfg) -> np.ndarray:
    """word2vec vectors, kept beside a cached corpus so repeated runs (seeds, models) train them once."""
    import os

    from docattn.data.embeddings import start_vectors, train_word2vec

    folder = data.info.get("cache")
    kind = ("-sg" if cfg.word2vec_skipgram else "") + ("-w1" if cfg.word2vec_workers == 1 else "")
    if cfg.word2vec_text:
        from docattn.data.encoding import fingerprint_path

        kind += f"-x{fingerprint_path(cfg.word2vec_text)[:16]}"
    if cfg.word2vec_start != "random":
        kind += f"-i{cfg.word2vec_start}"
    path = Path(folder) / f"word2vec{kind}-d{dim}-e{cfg.word2vec_epochs}-s{cfg.seed}.npy" if folder else None
    if path is not None and path.exists():
        try:
            matrix = np.load(path)
            if matrix.shape == (len(data.vocab), dim):
                return matrix
        except (ValueError, OSError, EOFError):
            pass  # a damaged file: train the vectors again and replace it
    start = None
    if cfg.word2vec_start != "random":
        start, _ = start_vectors(cfg.word2vec_start, data.vocab, dim, VECTOR_SPREAD, seed=cfg.seed)
    matrix = train_word2vec(
        data.splits["train"],
        data.vocab,
        dim=dim,
        epochs=cfg.word2vec_epochs,
        seed=cfg.seed,
        skipgram=cfg.word2vec_skipgram,
        extra=_word2vec_text(data, cfg.word2vec_text),
        workers=cfg.word2vec_workers or None,
        start=start,
    )
    if path is not None:
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
        try:
            np.save(tmp, matrix)
            os.replace(tmp, path)
        except OSError:  # a read-only cache: the vectors are used, only not kept
            tmp.unlink(missing_ok=True)
    return matrix


def _word2vec_text(data: PreparedData, path: str | None):
    """``path``'s unlabelled training text, encoded with the run's vocabulary (None without a path)."""
    if not path:
        return None
    from docattn.data.encoding import encode_corpus
    from docattn.data.readers import read_texts

    return encode_corpus(read_texts(path), data.vocab, None)


def evaluate_encoded(clf, enc) -> dict:
    """Classification report of a fitted classifier on an encoded, labelled split."""
    from docattn.training.inference import probabilities

    t0 = time.perf_counter()
    probs = probabilities(clf.model, enc, 256, clf.limits, clf.labels.multi_label)
    seconds = time.perf_counter() - t0
    report = score_probabilities(clf.labels, enc.labels, probs)
    report["inference_docs_per_s"] = len(enc) / max(seconds, 1e-9)
    return report


def score_probabilities(labels, gold, probs: np.ndarray) -> dict:
    """The report of ``probs`` against ``gold``: the most probable class, or for a multi-label ``labels``
    map every class at or over its decision threshold."""
    from docattn.training.metrics import classification_report, multilabel_report

    if labels.multi_label:
        return multilabel_report(np.asarray(gold), labels.decide(probs), labels.classes)
    return classification_report(np.asarray(gold), probs.argmax(1), labels.classes)


def every_document_labelled(train) -> bool:
    """Whether every training document of a multi-label split has a label: then no prediction may be empty."""
    return bool(len(train)) and bool(np.asarray(train.labels).any(1).all())


def set_thresholds(clf, valid) -> dict:
    """Tune a multi-label model's decision thresholds on the validation split (kept in ``clf.labels``)."""
    from docattn.training.inference import probabilities
    from docattn.training.metrics import MIN_POSITIVES, tune_thresholds

    probs = probabilities(clf.model, valid, 256, clf.limits, True)
    thresholds, global_t = tune_thresholds(valid.labels, probs)
    clf.labels.thresholds = thresholds
    own = int((np.asarray(valid.labels).sum(0) >= MIN_POSITIVES).sum())
    return {"global": global_t, "classes_with_own_threshold": own, "classes": len(thresholds)}


def train_model(
    clf, data: PreparedData, run_dir: Path | None = None, resume: bool = False, sized: dict | None = None
) -> dict:
    """Train ``clf.model`` on ``data``; with ``run_dir``, keep the best weights there as training goes.
    ``sized``: the hyper-parameters the recipe sized to this data when the model was built (recorded)."""
    from docattn.training.recipe import resolve
    from docattn.training.run import WEIGHTS, save_run, save_weights

    train = data.splits["train"]
    model = clf.model
    penalised = is_one_shot(model) and model.penalised_per_class
    neural = not is_one_shot(model)
    cfg, weights = resolve(
        clf.train_config, len(train), len(train.tokens), train.labels, clf.labels.classes, penalised, neural
    )
    clf.train_config = cfg  # the numbers this run trains with: config.json records them, --resume repeats them
    results: dict = {"data": data.info, "recipe": _recipe_record(cfg, weights, clf.labels.classes)}
    if sized:
        results["recipe"]["hparams"] = dict(sized)
    from docattn.data.batching import truncated_documents

    truncated = {name: truncated_documents(enc, model.layout, clf.limits) for name, enc in data.splits.items()}
    if any(truncated.values()):  # read only in part: said, never silent
        results["truncated"] = {"limits": {k: v for k, v in clf.limits.items() if v}, **truncated}
    if is_one_shot(model):  # non-neural baselines train in one call
        t0 = time.perf_counter()
        model.fit_encoded(
            train, data.vocab, seed=cfg.seed, class_weights=_one_shot_weights(model, clf._requested, weights)
        )
        results["train_seconds"] = time.perf_counter() - t0
        results["valid"] = _brief(evaluate_encoded(clf, data.splits["valid"]))
    else:
        from docattn.training.engine import checked_trainer, fit
        from docattn.training.run import check_resumable, resume_checkpoint

        checked_trainer(cfg)  # options Lightning refuses are named before the run folder is written
        resuming = resume and run_dir is not None and resume_checkpoint(run_dir).exists()
        if resuming:  # the checkpoint holds the trained embeddings; keep what the run said about them
            from docattn.training.run import read_config

            _check_same_data(run_dir, clf)  # before anything in the run directory is rewritten
            check_resumable(resume_checkpoint(run_dir), cfg.max_epochs)
            prior = read_config(run_dir).get("results", {})
            results.update({k: v for k, v in prior.items() if k in ("embeddings", "coverage", "embedding_seconds")})
            # --resume builds the model from the run's whole config, leaving the recipe nothing to size: keep its word
            if prior_sized := prior.get("recipe", {}).get("hparams"):
                results["recipe"].setdefault("hparams", prior_sized)
        else:
            results.update(init_embeddings(model, data, cfg))
            if clf.labels.multi_label:
                _start_at_priors(model, train.labels)
        if run_dir is not None:
            if not resuming:  # an earlier run's weights beside this run's config would load as this model
                (run_dir / WEIGHTS).unlink(missing_ok=True)
            save_run(
                run_dir, clf.model_name, model, clf.vocab, clf.labels, clf.data_settings, cfg, results, weights=False
            )

        def on_best(m, metrics):
            if run_dir is not None:
                save_weights(m, run_dir / WEIGHTS, clf.model_name)

        res = fit(model, train, data.splits["valid"], cfg, clf.limits, run_dir, resume, on_best, class_weights=weights)
        results.update(fit_record(res))
        if cfg.refit_output and results.get("is_global_zero", True):  # only rank 0's model is saved
            from docattn.training.recipe import per_class_fit_weights
            from docattn.training.refit import refit_output_layer

            positives = per_class_fit_weights(cfg, train.labels, clf.labels.classes)
            if str(results.get("device", "cpu")).startswith("cuda"):
                model.to(results["device"])  # Lightning hands the model back on the CPU: the vectors where it trained
            results["refit_output"] = refit_output_layer(
                clf, train, data.splits["valid"], positives, cfg.seed, every_document_labelled(train)
            )
    if clf.labels.multi_label:  # thresholds from validation, then validation scored with them (optimistic)
        results["thresholds"] = set_thresholds(clf, data.splits["valid"])
        clf.labels.at_least_one = every_document_labelled(data.splits["train"])
        results["valid"] = _brief(evaluate_encoded(clf, data.splits["valid"]))
    if "test" in data.splits and data.splits["test"].labelled:
        if str(results.get("device", "cpu")).startswith("cuda"):
            model.to(results["device"])  # Lightning hands the model back on the CPU: test where it trained
        results["test"] = _brief(evaluate_encoded(clf, data.splits["test"]))  # on the training device
    if not is_one_shot(model):
        model.to("cpu")  # a fitted classifier predicts on the CPU unless moved
        if cfg.guardrail and results.get("is_global_zero", True):
            baseline = fit_guardrail(data, cfg, weights)
            results["baseline"] = baseline.record
            results["guardrail"] = guardrail_verdict(results)
            if results["guardrail"] is not None:
                results["guardrail"]["advice"] = guardrail_advice(cfg, results)
            if run_dir is not None:
                baseline.save(run_dir)
    if run_dir is not None and results.get("is_global_zero", True):
        from docattn.training.loggers import log_test_table
        from docattn.training.membership import save_membership

        save_run(run_dir, clf.model_name, model, clf.vocab, clf.labels, clf.data_settings, cfg, results)
        save_membership(run_dir, data.splits)
        log_test_table(cfg, run_dir, results)  # --logger: the test scores beside the baseline's; closes it
    return results


def _start_at_priors(model, labels: np.ndarray) -> None:
    """Multi-label: the output layer's biases start at each class's log-odds in training, so the first
    epochs are not spent learning that most classes are absent from most documents (with 90 classes and
    about one label per document, a sigmoid at 0.5 is wrong for nearly every output)."""
    head = model.classifier  # every neural model's last layer: nn.Linear(features, num_classes)
    if not isinstance(head, torch.nn.Linear) or head.bias is None:
        return
    share = np.clip(np.asarray(labels, dtype=np.float64).mean(0), 1e-4, 1 - 1e-4)
    with torch.no_grad():
        head.bias.copy_(torch.from_numpy(np.log(share / (1 - share))).to(head.bias))


def fit_record(res: FitResult) -> dict:
    """``res`` as the keys of a run's ``results`` (config.json, ``DocumentClassifier.results``, the CLI's summary)."""
    return {
        "best": asdict(res.best) if res.best is not None else {},
        "train_seconds": res.train_seconds,
        "train_docs_per_s": res.train_docs_per_s,
        "epoch_seconds": res.epoch_seconds,
        "stopped_on_budget": res.stopped_on_budget,
        "stopped_early": res.stopped_early,
        "diverged_at": asdict(res.diverged_at) if res.diverged_at is not None else None,
        "history": res.history,  # one row per validation: what the benchmark's curves plot
        "is_global_zero": res.is_global_zero,
        "device": res.device,  # where it trained, e.g. "cuda:0"
        "extended_to_epochs": res.extended_to,  # the epochs of a plan lengthened in training (ExtendPlan)
        # the mean of the best validations' weights (average_best): its validation and whether it was kept
        "averaged": asdict(res.averaged) if res.averaged is not None else None,
    }


def _recipe_record(cfg, weights, classes) -> dict:
    """What the recipe decided, for config.json's results and the CLI's summary."""
    record = {
        "recipe": cfg.recipe,
        "max_epochs": cfg.max_epochs,
        "patience": cfg.patience,
        "monitor": cfg.monitor,
        "word2vec_epochs": cfg.word2vec_epochs,
        "word2vec_start": cfg.word2vec_start,
        "embeddings": cfg.embeddings,
        "label_smoothing": cfg.label_smoothing,
    }
    if weights is not None:
        record["class_weights"] = {str(c): round(float(w), 4) for c, w in zip(classes, weights)}
    return record


def _one_shot_weights(model, requested, weights):
    """Class weights for a model fitted in one call. One whose library cannot weigh classes trains
    unweighted when the recipe chose the weights, and refuses weights the user asked for."""
    if weights is None or model.weighs_classes:
        return weights
    if requested.class_weight == "auto":
        return None
    raise ConfigError(
        f"class_weight={requested.class_weight!r}: this model's library cannot weigh classes; leave it unset"
    )


class Guardrail:
    """The tf-idf logistic regression fitted beside a neural model on the same training split: a
    neural model well under it is undertrained or mis-set, and the user is told (``record["behind"]``)."""

    MAX_DOCUMENTS = 50_000  # past this a stratified sample of the training split: seconds, not minutes
    MARGIN = 0.01  # more than 1 point under the baseline's validation accuracy is "behind"
    FOLDER = "baseline"

    def __init__(self, model, record: dict):
        self.model, self.record = model, record

    def save(self, run_dir: Path) -> None:
        folder = Path(run_dir) / self.FOLDER
        folder.mkdir(exist_ok=True)
        self.model.save_artifacts(folder)


def fit_guardrail(data: PreparedData, cfg, weights) -> Guardrail:
    """Fit ``logreg`` on the training split (a sample past ``MAX_DOCUMENTS``) and score it like the model,
    with the model's class ``weights`` unless those are the neural models' square roots."""
    from docattn.models import create_model
    from docattn.training.recipe import auto_weighting, class_weights

    t0 = time.perf_counter()
    train = data.splits["train"]
    if cfg.class_weight == auto_weighting(neural=True) and not data.labels.multi_label:  # logreg's own, not those
        weights = class_weights(
            replace(cfg, class_weight=auto_weighting(neural=False)), train.labels, data.labels.classes
        )
    sampled = len(train) > Guardrail.MAX_DOCUMENTS
    if sampled:
        from docattn.data.splits import capped_sample

        train = train.subset(capped_sample(train.labels, Guardrail.MAX_DOCUMENTS, cfg.seed))
    model = create_model("logreg", vocab_size=len(data.vocab), num_classes=len(data.labels))
    if data.labels.multi_label:  # the weights logreg takes on such data
        from docattn.training.recipe import per_class_fit_weights

        weights = per_class_fit_weights(cfg, train.labels, data.labels.classes)
    model.fit_encoded(train, data.vocab, seed=cfg.seed, class_weights=weights)
    record: dict = {"model": "logreg", "documents": len(train), "sampled": sampled}
    labels = data.labels
    if labels.multi_label:  # its own thresholds, tuned on validation as the model's are
        from docattn.data.corpus import LabelMap
        from docattn.training.metrics import tune_thresholds

        valid = data.splits["valid"]
        thresholds, _ = tune_thresholds(valid.labels, model.predict_proba_encoded(valid))
        labels = LabelMap(labels.classes, True, thresholds, every_document_labelled(data.splits["train"]))
        record["thresholds"] = [round(float(t), 6) for t in thresholds]  # evaluate scores it with them again
    for split in ("valid", "test"):
        enc = data.splits.get(split)
        if enc is not None and len(enc) and enc.labelled:
            report = score_probabilities(labels, enc.labels, model.predict_proba_encoded(enc))
            record[split] = _brief(report)
    record["seconds"] = round(time.perf_counter() - t0, 2)
    return Guardrail(model, record)


def guardrail_verdict(results: dict) -> dict | None:
    """The model's and the baseline's validation scores side by side, and whether the model is behind."""
    baseline, best = results.get("baseline"), results.get("best") or {}
    if not baseline or "valid" not in baseline:
        return None
    if baseline["valid"].get("multi_label") and "valid" in results:  # both at their tuned thresholds: micro-F1
        model, base = results["valid"], baseline["valid"]
        return {"model": model, "baseline": base, "behind": model["micro_f1"] < base["micro_f1"] - Guardrail.MARGIN}
    if "val_acc" not in best:
        return None
    model_acc, base_acc = float(best["val_acc"]), float(baseline["valid"]["accuracy"])
    return {
        "model": {"accuracy": model_acc, "macro_f1": float(best.get("val_macro_f1", float("nan")))},
        "baseline": {k: baseline["valid"][k] for k in ("documents", "accuracy", "macro_f1") if k in baseline["valid"]},
        "behind": model_acc < base_acc - Guardrail.MARGIN,
    }


def guardrail_advice(cfg, results: dict) -> str:
    """What to try when the model trails the baseline, from what this run did: only the steps it has not taken."""
    from docattn.data.embeddings import trains_word2vec

    steps = []
    if results.get("stopped_on_budget"):
        steps.append("give it more time (--max-time)")
    elif not results.get("stopped_early") and (results.get("best") or {}).get("epoch") == cfg.max_epochs - 1:
        steps.append(f"train longer (--epochs {2 * cfg.max_epochs}): it was still improving in its last epoch")
    if cfg.embeddings == "random":
        steps.append("start from word2vec (--embeddings word2vec) or pre-trained vectors (--embeddings FILE)")
    elif trains_word2vec(cfg.embeddings):
        if (cfg.word2vec_epochs or 0) < 50:
            steps.append("train word2vec longer (--set word2vec_epochs=50)")
        if not cfg.word2vec_text:
            steps.append("train word2vec on more text (--set word2vec_text=PATH)")
        steps.append("start from pre-trained vectors (--embeddings FILE)")
    steps.append("use the baseline itself (--model logreg)")
    return "the neural model is under the tf-idf baseline: " + ", ".join(steps[:-1]) + ", or " + steps[-1]


GUARDRAIL_ADVICE = (
    "the neural model is under the tf-idf baseline: on small data, train word2vec longer "
    "(--set word2vec_epochs=50) or on more text (--set word2vec_text=PATH), start from pre-trained "
    "vectors (--embeddings FILE), or use the baseline itself (--model logreg)"
)


def _check_same_data(run_dir: Path, clf) -> None:
    """--resume must see the run's own vocabulary and classes: other data would not fit its checkpoint,
    and saving the new ones over the run's would leave its trained weights unloadable."""
    from docattn.data.corpus import LabelMap
    from docattn.data.text import Vocabulary
    from docattn.training.run import VOCAB, read_config

    try:
        classes = LabelMap.from_json(read_config(run_dir)["labels"]).classes
        vocab = Vocabulary.load(run_dir / VOCAB)
    except (KeyError, TypeError, DocattnError) as err:
        raise CheckpointError(
            f"{run_dir}: cannot resume, the run's classes or vocabulary are unreadable ({err})"
        ) from None
    differs = []
    if classes != clf.labels.classes:
        differs.append(f"classes {clf.labels.classes} (run: {classes})")
    if vocab.tokens != clf.vocab.tokens:
        differs.append(
            f"a vocabulary of {len(clf.vocab)} words (run: {len(vocab)}"
            + (", the same size but other words)" if len(vocab) == len(clf.vocab) else ")")
        )
    if differs:
        raise CheckpointError(
            f"--resume: this training data gives {' and '.join(differs)}, so it is not the data "
            f"{run_dir} was trained on; nothing was changed. Resume with the run's own --train "
            "(and --valid) data, or start a new run with another --out"
        )


_MULTI_LABEL_SCORES = ("multi_label", "micro_f1", "micro_precision", "micro_recall", "hamming_loss")


def _brief(report: dict) -> dict:
    keys = ("documents", "accuracy", "macro_f1", "inference_docs_per_s", *_MULTI_LABEL_SCORES)
    return {k: report[k] for k in keys if k in report}
