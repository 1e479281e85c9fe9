"""What ``train`` and ``data stats`` say about the data and the training, as plain sentences."""

from __future__ import annotations

WORKER_HINT_SECONDS = 30.0  # a preparation this long in one process: worker processes (about a second to start) pay


def print_worker_hint(console, info: dict, workers: int) -> None:
    """Where a long preparation ran in this process on a machine with more cores than its tokenizer fills
    (about 1.6 of them), say how to use them all next time; the cache it wrote serves either way."""
    from docattn.threads import usable_cores

    cores = usable_cores()
    took = float(info.get("seconds") or 0.0)
    if workers or info.get("reused") or cores <= 2 or took < WORKER_HINT_SECONDS:
        return
    console.print(
        f"note: preparing took {took:.0f} s in one process; --set prepare_workers={cores} prepares with one process "
        "per core (the same arrays)"
    )


def data_line(data) -> str:
    """``data: 400 documents (train 252, valid 28, test 120), vocabulary 1,203 words, 2 classes (cache: ...)``."""
    info = data.info
    counts = info.get("documents") or {}
    splits = ", ".join(f"{name} {n:,}" for name, n in counts.items())
    return (
        f"data: {sum(counts.values()):,} documents ({splits}), vocabulary {len(data.vocab):,} words, "
        f"{len(data.labels)} classes (cache: {info.get('cache', 'off')})"
    )


def print_skipped(console, info: dict) -> None:
    """Say what the readers dropped or re-decoded, so it is never silent."""
    skipped = info.get("skipped") or {}
    empty = sum(int(v.get("skipped_empty", 0)) for v in skipped.values())
    decoded = sum(int(v.get("decode_errors", 0)) for v in skipped.values())
    if empty:
        console.print(f"skipped empty documents: {empty}")
    if decoded:
        console.print(
            f"documents that were not UTF-8, read as Latin-1 (or with U+FFFD in place of the bytes that are "
            f"not, where the reader was told to replace them): {decoded}"
        )
    cut = [v for v in skipped.values() if v.get("cut_documents")]
    if cut:
        console.print(
            f"documents cut at the length limit: {sum(int(v['cut_documents']) for v in cut)} "
            f"(first: {cut[0]['first_cut_document']}); set DOCATTN_MAX_DOCUMENT_CHARS to keep more of them"
        )
    spans = [v for v in skipped.values() if v.get("quoted_tab_breaks")]
    if spans:
        console.print(
            f"TSV records whose quoted text holds a line break and a tab: "
            f"{sum(int(v['quoted_tab_breaks']) for v in spans)} (first: {spans[0]['first_quoted_tab_break']}); "
            "each was read as one field, as CSV quoting says. If a quote there was meant as a plain "
            'character, the records up to its partner were merged: double it ("") or quote the field'
        )
    links = max((int(v.get("skipped_links", 0)) for v in skipped.values()), default=0)
    if links:
        console.print(
            f"links in the archive not read: {links}, each pointing outside it or to a folder it sits in "
            "(archive the files themselves, e.g. tar --dereference)"
        )


def note_unused_options(console, clf, options: dict) -> None:
    """Options the model never reads are said, not dropped: truncation its layout does not have (words per
    sentence for a flat model...), and the training engine's options for models fitted in one call (nb, logreg)."""
    from docattn.models import get_spec
    from docattn.models.contract import is_bag

    unused, reads = {
        "hierarchical": (("max_tokens",), "sentences of words"),
        "flat": (("max_sentences", "max_words"), "one sequence of tokens"),
        "bag": (("max_sentences", "max_words", "max_tokens"), "bags of words"),
    }[get_spec(clf.model_name).layout]
    for key in unused:
        if options.get(key):
            console.print(
                f"note: --{key.replace('_', '-')} has no effect on {clf.model_name!r}, which reads documents as {reads}"
            )
    if not is_bag(get_spec(clf.model_name)):
        return
    from docattn.models import create_model
    from docattn.models.contract import is_one_shot
    from docattn.training.config import TrainConfig

    model = create_model(clf.model_name, vocab_size=4, num_classes=2, **clf.hparams)  # a bag model is tiny to build
    if is_one_shot(model):  # fitted in one call (scikit-learn, the fastText library), not by the training engine
        engine = TrainConfig.field_names() - {"seed", "progress", "progress_lines"}
        ignored = sorted(k for k in options if k in engine)
        if ignored:
            own = ", ".join(f"{k}={v}" for k, v in model.hparams().items()) or "none"
            console.print(
                f"note: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect on "
                f"{clf.model_name!r}, which is fitted in one call, not by the training engine; its own options "
                f"(--set KEY=VALUE): {own}"
            )


def print_training(console, clf, data) -> None:
    """How training went: the recipe, truncation, vectors, why it stopped, the best validation and the test."""
    results, config = clf.results, clf.train_config
    _print_recipe(console, results)
    truncated = results.get("truncated")
    if truncated:
        limits = ", ".join(f"{k} {v:,}" for k, v in truncated["limits"].items())
        counts = ", ".join(f"{k} {truncated[k]:,}" for k in ("train", "valid", "test") if truncated.get(k))
        console.print(
            f"documents read only in part ({limits}): {counts}; --set max_sentences=0 (or the limit named) reads "
            "them whole, at the cost of memory"
        )
    coverage = results.get("coverage")
    if coverage:  # vectors from a file: how much of the vocabulary they cover (cased vectors, lowercased text...)
        console.print(
            f"embeddings: {coverage['words']:,} words of the vocabulary found in {config.embeddings} "
            f"({coverage['vocab_share']:.1%} of it, {coverage['token_share']:.1%} of training tokens); "
            "the rest start random"
        )
    _print_stop(console, results, config)
    best = results.get("best", {})
    if best:
        speed = results.get("train_docs_per_s", 0)
        from docattn.card import averaged_weights

        console.print(
            f"best validation: accuracy {best.get('val_acc', float('nan')):.4f}, "
            + (averaged_weights(best) or f"epoch {human_epoch(best.get('epoch'))}")
            + "; "
            + (
                f"training {speed:.0f} documents/s"
                if speed
                else f"no epoch left to train (the run had reached --epochs {config.max_epochs})"
            )
        )
    elif "valid" in results:  # one-shot baselines (nb, logreg, fasttext-lib): no epochs to choose from
        console.print(
            f"validation: accuracy {results['valid']['accuracy']:.4f}; "
            f"trained in {results.get('train_seconds', 0):.1f} s"
        )
    if "test" in data.splits and "test" not in results:
        console.print(
            "note: the test documents have no labels (all or some), so they were not evaluated; "
            "docattn predict labels them"
        )
    if results.get("refit_output"):
        refit = results["refit_output"]
        before, after = refit["valid"]["trained"], refit["valid"]["refit"]
        console.print(
            f"multi-label: output layer refit per class on {refit['documents']:,} training documents' vectors; "
            f"validation micro-F1 {before['micro_f1']:.4f} -> {after['micro_f1']:.4f}, "
            f"macro-F1 {before['macro_f1']:.4f} -> {after['macro_f1']:.4f} (trained rows -> refit)"
        )
    if results.get("thresholds"):
        th = results["thresholds"]
        v = results["valid"]
        console.print(
            f"multi-label: decision thresholds tuned on validation ({th['classes_with_own_threshold']} of "
            f"{th['classes']} classes their own, the rest {th['global']:g}); validation micro-F1 "
            f"{v['micro_f1']:.4f}, macro-F1 {v['macro_f1']:.4f}"
        )
    if "test" in results:
        console.print(f"test: {scores(results['test'])} ({results['test']['documents']} documents)")
    _print_guardrail(console, results)


def scores(report: dict) -> str:
    """A report's headline scores: micro- and macro-F1 and subset accuracy for multi-label, else accuracy and
    macro-F1."""
    if report.get("multi_label"):
        return (
            f"micro-F1 {report['micro_f1']:.4f}, macro-F1 {report['macro_f1']:.4f}, "
            f"subset accuracy {report['accuracy']:.4f}"
        )
    return f"accuracy {report['accuracy']:.4f}, macro-F1 {report['macro_f1']:.4f}"


def human_epoch(epoch) -> str:
    """Epochs as people count them, from 1 (runs record Lightning's 0-based epoch)."""
    return "?" if epoch is None else str(int(epoch) + 1)


def _print_stop(console, results: dict, config) -> None:
    diverged = results.get("diverged_at")
    if diverged:
        console.print(
            f"[bold red]training diverged[/]: loss {diverged['loss']} and NaN/infinite weights by step "
            f"{diverged['step']} (epoch {human_epoch(diverged['epoch'])}); stopped there and kept the best "
            f"weights from before it. A lower learning rate (now {config.lr:g}) should train further"
        )
    elif results.get("stopped_early"):
        console.print(
            f"stopped early, after {config.patience} validation(s) without improvement (--patience), "
            f"keeping the best weights"
        )
    elif results.get("stopped_on_budget"):
        console.print(f"stopped on the time budget (--max-time {config.max_time:g} s)")
    if results.get("extended_to_epochs"):
        console.print(
            f"still improving at the end of its {config.max_epochs} planned epochs: lengthened to "
            f"{results['extended_to_epochs']} (--set extend_plan=false keeps the plan)"
        )


def _print_recipe(console, results: dict) -> None:
    from docattn.data.embeddings import trains_word2vec

    recipe = results.get("recipe") or {}
    if recipe.get("recipe") != "auto":
        return
    weights = recipe.get("class_weights")
    sized = recipe.get("hparams") or {}  # what models.ModelSpec.sized_settings laid for this many documents
    console.print(
        f"recipe auto: up to {recipe['max_epochs']} epoch(s)"
        + (
            f", early stopping after {recipe['patience']} validations without improvement"
            if recipe.get("patience")
            else ""
        )
        + f", best by {recipe['monitor']}"
        + (
            f", word2vec {recipe['word2vec_epochs']} passes"
            + (f" from {recipe['word2vec_start']}" if recipe.get("word2vec_start", "random") != "random" else "")
            if trains_word2vec(recipe.get("embeddings", "word2vec"))
            else ""
        )
        + (f", label smoothing {recipe['label_smoothing']:g}" if recipe.get("label_smoothing") else "")
        + (f", class weights {', '.join(f'{c} {w:g}' for c, w in weights.items())}" if weights else "")
        + (f", sized to the training split: {', '.join(f'{k} {v}' for k, v in sized.items())}" if sized else "")
    )


def _print_guardrail(console, results: dict) -> None:
    """The model's validation scores beside the tf-idf baseline's, and a warning when it is behind."""
    from docattn.training.trainer import GUARDRAIL_ADVICE, guardrail_verdict

    verdict = guardrail_verdict(results)
    if verdict is None:
        return
    m, b = verdict["model"], verdict["baseline"]
    sample = (
        f", on a sample of {results['baseline']['documents']:,} training documents"
        if results["baseline"].get("sampled")
        else ""
    )
    console.print(f"validation: this model {scores(m)}; tf-idf logreg baseline {scores(b)}{sample}")
    if verdict["behind"]:
        console.print(f"[bold yellow]warning[/]: {(results.get('guardrail') or {}).get('advice') or GUARDRAIL_ADVICE}")
    test = results["baseline"].get("test")
    if test and "test" in results:
        console.print(f"test: baseline {scores(test)}")
