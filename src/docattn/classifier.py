"""``DocumentClassifier``: the scikit-learn-style front door (fit / predict / explain / save / load)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, fields, replace
from difflib import get_close_matches
from pathlib import Path

import numpy as np

from docattn.data.corpus import Corpus, LabelMap, to_corpus
from docattn.data.encoding import EncodedCorpus, encode_corpus
from docattn.data.prepare import DataSettings, PreparedData, prepare
from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary
from docattn.errors import ConfigError, DataError, DocattnError, checked_values
from docattn.training.config import TrainConfig, wants_gpu

_DATA_FIELDS = {f.name for f in fields(DataSettings)} - {"text"}
_TEXT_FIELDS = {f.name for f in fields(TextConfig)}


def _no_empty_documents(corpus: Corpus) -> Corpus:
    """Training and validation documents need text (file readers skip empty ones; fit does not guess)."""
    empty = next(
        (i for i, t in enumerate(corpus.texts) if not t.replace("\x00", "").strip()), None
    )  # NUL reads as a space
    if empty is not None:
        raise DataError(f"{corpus.source}: document {empty} is empty or whitespace only; remove it or give it text")
    return corpus


def _no_documents(texts) -> bool:
    """An empty sequence of documents (a list, tuple, array or Series); tables and strings are ``to_corpus``'s."""
    if isinstance(texts, (str, bytes, Corpus)) or hasattr(texts, "columns") or not hasattr(texts, "__len__"):
        return False
    return len(texts) == 0


def _check_model_options(model: str, options: dict) -> dict:
    """Options left over from training/data/text options must be the model's hyper-parameters (returned typed)."""
    import torch

    from docattn.models import create_model

    with torch.random.fork_rng(devices=[]):  # a throwaway model tells its config's fields; RNG untouched
        config = create_model(model, vocab_size=2, num_classes=2).config
    known = set(asdict(config))
    known |= TrainConfig.field_names() | _DATA_FIELDS | _TEXT_FIELDS | {"device"}
    problems = []
    for name in sorted(set(options) - known):
        guess = get_close_matches(name, known, 1)
        problems.append(f"unknown option {name!r} for {model}" + (f" (did you mean {guess[0]!r}?)" if guess else ""))
    if problems:
        raise ConfigError("; ".join(problems))
    # typed before training starts: d_model="abc" is named here, not as a TypeError inside the model
    return checked_values(type(config), options)


def _has_sparse_attention(model: str, hparams: dict) -> bool:
    """Whether ``model`` with ``hparams`` pools with a sparse normaliser: what ``sparse_warmup_fraction`` acts on."""
    import torch

    from docattn.models import create_model
    from docattn.models.layers import AttentionPooling

    with torch.random.fork_rng(devices=[]):
        net = create_model(model, vocab_size=2, num_classes=2, **hparams)
    return any(isinstance(m, AttentionPooling) and m.normalizer != "softmax" for m in net.modules())


class DocumentClassifier:
    """Train any registered model on raw text; predict, explain, save and load it.

    Keyword arguments are routed by name: training options (``max_epochs``, ``batch_size``,
    ``lr``, ``optimizer``, ``seed``, ``accelerator``, ...), data options (``min_count``,
    ``valid_fraction``, ``max_sentences``, ``max_words``, ``max_tokens``, ``max_batch_words``, ``lowercase``,
    ``hcan_clean``), and the rest are the model's hyper-parameters (any other name is a
    ``ConfigError`` here, with the closest valid name). Unset training options take
    the paper's values for the model (e.g. HPAN: Adam, lr 1e-3, batch 64).
    """

    _estimator_type = "classifier"  # scikit-learn < 1.6 tells classifiers by this (stratified folds)

    def __init__(self, model: str = "han", **options):
        from docattn.models import get_spec

        self.model_name = model
        self._options = dict(options)  # as given, for get_params: scikit-learn's clone checks identity
        spec = get_spec(model)
        train_opts = {k: options.pop(k) for k in list(options) if k in TrainConfig.field_names()}
        if "device" in options:
            train_opts["accelerator"] = options.pop("device")
        data_opts = {k: options.pop(k) for k in list(options) if k in _DATA_FIELDS}
        text_opts = {k: options.pop(k) for k in list(options) if k in _TEXT_FIELDS}
        recipe = train_opts.get("recipe", "auto")
        # the auto recipe's own settings for the family; on a CPU also the size it was measured at there
        laid = spec.recipe_settings(recipe, gpu=bool(spec.cpu) and wants_gpu(train_opts.get("accelerator", "auto")))
        self.hparams = _check_model_options(
            model, {**{k: v for k, v in laid.items() if k not in TrainConfig.field_names()}, **options}
        )
        # a variant's registered defaults may set training options and data options alike
        paper_train = {k: v for k, v in {**spec.training, **laid}.items() if k in TrainConfig.field_names()}
        if recipe == "auto" and "max_epochs" in paper_train:
            # the registered length becomes the shortest run; training/recipe.py sizes the rest to the data
            paper_train["min_epochs"] = paper_train.pop("max_epochs")
        paper_data = {k: v for k, v in spec.training.items() if k in _DATA_FIELDS}
        paper_text = {k: v for k, v in spec.training.items() if k in _TEXT_FIELDS}
        try:  # TrainConfig types its fields; anything its checks still trip over is named here
            self.train_config = TrainConfig(**{**paper_train, **train_opts})
        except ConfigError:
            raise
        except (TypeError, ValueError) as err:
            given = ", ".join(f"{k}={v!r}" for k, v in train_opts.items())
            raise ConfigError(f"invalid training options ({given}): {err}") from None
        if self.train_config.sparse_warmup_fraction and not _has_sparse_attention(model, self.hparams):
            raise ConfigError(
                f"sparse_warmup_fraction eases in sparse attention (hpan's, hsan's); {model} has none, so it would "
                "change nothing: leave it at 0 for this model"
            )
        self.data_settings = DataSettings(text=TextConfig(**{**paper_text, **text_opts}), **{**paper_data, **data_opts})
        self._requested = self.train_config  # what each fit starts from; fit's resolved copy replaces train_config
        self.model = None
        self.vocab: Vocabulary | None = None
        self.labels: LabelMap | None = None
        self.results: dict = {}
        self._run_dir: Path | None = None  # the folder this model's run lives in (fit's run_dir, or load's)

    # ------------------------------------------------------------------ scikit-learn protocol
    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments, so scikit-learn can ``clone`` this classifier (``cross_val_score``,
        ``GridSearchCV``); a loaded one gives its run's model, hyper-parameters and settings."""
        return {"model": self.model_name, **self._options}

    def set_params(self, **params) -> DocumentClassifier:
        """Change constructor arguments; the classifier starts again unfitted, as the new options require."""
        options = {**self._options, **params}
        fresh = type(self)(options.pop("model", self.model_name), **options)  # refused options change nothing
        self.__dict__.update(fresh.__dict__)
        return self

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(
            estimator_type="classifier",
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(),
            input_tags=InputTags(two_d_array=False, string=True),
        )

    # ------------------------------------------------------------------ training
    def fit(
        self, texts, labels, validation: tuple | None = None, run_dir: str | Path | None = None
    ) -> DocumentClassifier:
        """Train on ``texts``/``labels``; ``validation=(texts, labels)``, else a stratified split of train."""
        train = _no_empty_documents(to_corpus(texts, labels, "training data"))
        valid = (
            _no_empty_documents(to_corpus(*validation, source="validation data")) if validation is not None else None
        )
        self.fit_prepared(prepare(train, valid, None, self.data_settings), run_dir)
        verdict = self.results.get("guardrail")
        if verdict and verdict["behind"]:  # the CLI prints the same beside both scores
            import warnings

            from docattn.training.trainer import GUARDRAIL_ADVICE

            score = "micro_f1" if self.labels.multi_label else "accuracy"
            warnings.warn(
                f"validation {score.replace('_', '-')} {verdict['model'][score]:.4f} against the tf-idf "
                f"baseline's {verdict['baseline'][score]:.4f}: {verdict.get('advice') or GUARDRAIL_ADVICE}",
                UserWarning,
                stacklevel=2,
            )
        return self

    def fit_prepared(self, data: PreparedData, run_dir=None, resume: bool = False) -> DocumentClassifier:
        """Train on already encoded splits (what ``docattn train`` does after its cached preparation)."""
        import torch

        from docattn.models import create_model, get_spec
        from docattn.training.recipe import data_sized_settings
        from docattn.training.trainer import train_model

        train_labels = data.splits["train"].labels
        if data.labels.multi_label:
            if not np.asarray(train_labels).any():
                raise DataError("training data: no document has a label; a multi-label classifier needs some")
        elif len(present := np.unique(train_labels)) < 2:
            raise DataError(
                f"training data: every document has the label {data.labels.classes[present[0]]!r}; "
                "a classifier needs at least 2 classes"
            )
        if len(data.vocab) <= len(SPECIAL_TOKENS):  # every word would read as <unk>: a model at chance, silently
            raise DataError(
                f"no word occurs at least min_count={data.vocab.min_count} times in the "
                f"{len(data.splits['train'])} training documents, so the vocabulary is empty; "
                "lower min_count (--min-count)"
            )
        # a fit that fails or is interrupted leaves the classifier as it was (fitted or loaded before, or not)
        before = (
            self.model,
            self.vocab,
            self.labels,
            self.data_settings.text,
            self.results,
            self._run_dir,
            self.train_config,
        )
        try:
            self.train_config = self._requested  # a refit on other data sizes its recipe again
            self.vocab, self.labels = data.vocab, data.labels
            # the vocabulary carries the text settings it was built with; they are what new text gets
            self.data_settings.text = data.vocab.text_config
            # the seed covers the initial weights too: the engine seeds again only after the model exists
            torch.manual_seed(self.train_config.seed)
            train = data.splits["train"]
            sized = data_sized_settings(
                self.model_name,
                self.train_config.recipe,
                len(train),
                len(train.tokens),
                self._options,
                self.train_config.optimizer,
                gpu=bool(get_spec(self.model_name).cpu) and wants_gpu(self.train_config.accelerator),
            )
            training = {k: v for k, v in sized.items() if k in TrainConfig.field_names()}
            self.train_config = replace(self.train_config, **training)
            self.model = create_model(
                self.model_name,
                vocab_size=len(data.vocab),
                num_classes=len(data.labels),
                **self._sized_hparams({k: v for k, v in sized.items() if k not in training}),
            )
            self.results = train_model(
                self, data, run_dir=Path(run_dir) if run_dir else None, resume=resume, sized=sized
            )
        except BaseException:
            (
                self.model,
                self.vocab,
                self.labels,
                self.data_settings.text,
                self.results,
                self._run_dir,
                self.train_config,
            ) = before
            raise
        self._run_dir = Path(run_dir).resolve() if run_dir else None
        return self

    def tune(
        self,
        texts,
        labels,
        rates: Sequence[float] | None = None,
        validation: tuple | None = None,
        out: str | Path | None = None,
        resume: bool = False,
        log=print,
    ):
        """Search the learning rate as ``docattn tune`` does: one classifier per rate, with this one's options,
        trained on ``texts`` and compared on ``validation`` (else a stratified split of them).

        ``rates`` default to the optimizer's grid (the HAN paper's under SGD; this rate x 1/4, 1/2, 1, 2 under
        Adam). With ``out``, each trial is a run folder ``out/lr=RATE`` and ``out/tune.json`` records the search;
        ``resume`` keeps its finished trials. Returns a ``TuneResult`` (``trials``, ``best``, ``best_lr``);
        this classifier is left as it was: ``DocumentClassifier(model, lr=result.best_lr, ...)`` trains the choice.
        """
        from docattn.training.tune import tune_learning_rate

        train = _no_empty_documents(to_corpus(texts, labels, "training data"))
        valid = (
            _no_empty_documents(to_corpus(*validation, source="validation data")) if validation is not None else None
        )
        data = prepare(train, valid, None, self.data_settings)

        def build(rate: float | None) -> DocumentClassifier:
            return type(self)(self.model_name, **{**self._options, **({} if rate is None else {"lr": rate})})

        return tune_learning_rate(
            build, data, rates, out=Path(out) if out is not None else None, resume=resume, log=log
        )

    @property
    def classes_(self) -> list[Hashable]:
        self._check_fitted()
        return list(self.labels.classes)

    def _sized_hparams(self, sized: dict) -> dict:
        """The hyper-parameters with those the recipe ``sized`` to the training split (``data_sized_settings``),
        and the word vectors' width where pre-trained vectors start the embedding and no ``embedding_dim`` was
        asked for: a 256-d table or a 300-d GloVe file then just works, and a table beside word2vec widens the
        model's own width (its registered one, or the CPU configuration's) by the table's; a model whose features
        are as wide as its words (CSPAN) then keeps its own width behind a projection."""
        hparams = {**self.hparams, **sized}
        source = self.train_config.embeddings
        if "embedding_dim" in self._options or source in ("word2vec", "random"):
            return hparams
        import torch

        from docattn.data.embeddings import PACKAGED_DIMS, packaged_beside, vector_dim
        from docattn.models import create_model

        with torch.random.fork_rng(devices=[]):  # a throwaway model tells its embedding width, if it has one
            built = create_model(self.model_name, vocab_size=2, num_classes=2, **hparams).hparams()
        own = built.get("embedding_dim")
        if own is None:
            return hparams
        table = packaged_beside(source)
        if not table:
            dim = vector_dim(source)
            return {**hparams, "embedding_dim": dim} if dim else hparams
        widened = {**hparams, "embedding_dim": own + PACKAGED_DIMS[table]}
        return {**widened, "d_model": own} if "d_model" in built and built["d_model"] is None else widened

    def _check_fitted(self) -> None:
        if self.model is None:
            raise DocattnError("this DocumentClassifier is not fitted yet: call fit() or DocumentClassifier.load()")

    @property
    def limits(self) -> dict:
        s = self.data_settings
        return {
            "max_sentences": s.max_sentences,
            "max_words": s.max_words,
            "max_tokens": s.max_tokens,
            "max_batch_words": s.max_batch_words,
            "max_batch_pairs": s.max_batch_pairs,
        }

    # ------------------------------------------------------------------ inference
    def encode(self, texts, labels=None) -> EncodedCorpus:
        self._check_fitted()
        corpus = texts if isinstance(texts, Corpus) else to_corpus(texts, labels)
        return encode_corpus(corpus, self.vocab, self.labels if corpus.labels is not None else None)

    def predict_proba(self, texts, batch_size: int = 256) -> np.ndarray:
        """(n_documents, n_classes) probabilities, columns in ``classes_`` order.

        No documents give a (0, n_classes) array. An empty or whitespace-only document is classified
        like any other, from no words (the model's answer for a blank text), so each input keeps its row;
        ``docattn predict`` reads files, whose readers drop empty records, and says how many it skipped.
        """
        from docattn.training.inference import probabilities

        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        self._check_fitted()
        if _no_documents(texts):
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        enc = self.encode(texts)
        probs = probabilities(self.model, enc, batch_size, self.limits, self.labels.multi_label)
        if not np.isfinite(probs).all():  # argmax of NaN is class 0: a silent, wrong answer
            bad = int((~np.isfinite(probs).all(1)).sum())
            raise DocattnError(
                f"the model gives NaN or infinite probabilities for {bad} of {len(probs)} document(s): "
                "its weights are not finite (saved from a diverged run?); train it again with a lower learning rate"
            )
        return probs

    def predict(self, texts, batch_size: int = 256) -> list:
        """The most probable class of each document (an empty list for no documents; see ``predict_proba``);
        a multi-label model gives each document the list of classes at or over their decision thresholds."""
        self._check_fitted()
        probs = self.predict_proba(texts, batch_size)
        if self.labels.multi_label:
            return self.labels.decode_sets(self.labels.decide(probs))
        return self.labels.decode(probs.argmax(1))

    def score(self, texts, labels) -> float:
        """Accuracy on ``texts`` (multi-label: subset accuracy, every label of a document right, as
        scikit-learn's ``score``); labels unseen in training are an error, for multi-label they are dropped."""
        self._check_fitted()
        corpus = to_corpus(texts, labels)
        probs = self.predict_proba(corpus)
        if self.labels.multi_label:
            if not corpus.multi_label:
                corpus = Corpus(corpus.texts, corpus.labels, corpus.sentences, multi_label=True)
            gold, _ = self.labels.encode_sets(corpus.labels)
            return float((gold == self.labels.decide(probs)).all(1).mean())
        gold = np.asarray(self.labels.encode(corpus.labels, "evaluation data"))
        return float((probs.argmax(1) == gold).mean())

    def explain(self, texts, method: str | None = None, target=None) -> list[dict]:
        """Per document: prediction, probabilities and weights per sentence and word (docs/explanations.md).

        ``method``: "attention", "linear", "gradient_x_input" or "integrated_gradients"; None takes the model's
        own (its attention, or linear for the linear models). ``target``: the class index to explain, or one
        per document; None explains each document's predicted class (attention takes none).
        """
        from docattn.explain.attention import explain_documents

        self._check_fitted()
        corpus = texts if isinstance(texts, Corpus) else to_corpus(texts)
        return explain_documents(self, corpus, method=method, target=target)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> Path:
        """Write the run directory ``docattn train`` writes (config.json, vocab.json, weights).

        Saved into a folder that holds another run (its config.json), that run's metrics.csv and resume
        checkpoint go: they would describe, or resume, a model that is no longer there. Nothing else in
        the folder is touched.
        """
        from docattn.training.run import CONFIG, METRICS, resume_checkpoint, save_run

        self._check_fitted()
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{path} is a file; save() writes a run folder, give a folder's path")
        if (path / CONFIG).is_file() and path.resolve() != self._run_dir:
            (path / METRICS).unlink(missing_ok=True)
            last = resume_checkpoint(path)
            last.unlink(missing_ok=True)
            if last.parent.is_dir() and not any(last.parent.iterdir()):
                last.parent.rmdir()
        from docattn.training.run_folder import claim

        had_metrics = (path / METRICS).exists()
        saved = save_run(
            path,
            self.model_name,
            self.model,
            self.vocab,
            self.labels,
            self.data_settings,
            self.train_config,
            self.results,
        )
        claim(path, [CONFIG, "vocab.json", "model.safetensors"] + ([] if had_metrics else [METRICS]))
        return saved

    @classmethod
    def load(cls, path, device: str = "cpu") -> DocumentClassifier:
        """A saved run on ``device`` ("cpu", "cuda", "cuda:1"; "gpu" means "cuda")."""
        import torch

        from docattn.training.run import load_run, settings_as_options

        device = "cuda" + device[3:] if str(device).startswith("gpu") else device
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device={device!r}, but PyTorch sees no CUDA GPU here (use 'cpu')")

        run = load_run(path, device)
        clf = cls.__new__(cls)
        clf.model_name, clf.model, clf.vocab, clf.labels = run.model_name, run.model, run.vocab, run.labels
        clf.data_settings, clf.train_config = run.data, run.training
        clf._requested = run.training
        clf.hparams = run.config.get("hparams", {})
        clf._options = settings_as_options(run.data, run.training, clf.hparams)
        clf.results = run.config.get("results", {})
        clf._run_dir = Path(path).resolve()
        return clf

    @classmethod
    def from_config(cls, path, model: str | None = None, **options) -> DocumentClassifier:
        """An unfitted classifier with the options of a ``docattn train --config`` file: a TOML file
        (docs/configuration.md) or a run's config.json (or its folder), to repeat or vary that run.
        ``model`` and ``options`` override the file's; the file's data keys (``train``, ``out``, ...) are
        the command line's and are ignored here. An unknown key is a ConfigError naming the closest one."""
        from docattn.config_file import TRAIN_KEYS, classifier_options

        name, given, _ = classifier_options(path, model)
        given = {k: v for k, v in given.items() if k not in TRAIN_KEYS}
        try:
            return cls(name, **{**given, **options})
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None

    def __repr__(self) -> str:
        state = "fitted" if self.model is not None else "not fitted"
        return f"DocumentClassifier(model={self.model_name!r}, {state})"
