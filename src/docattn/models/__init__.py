"""Every model by name: ``create_model("han-max", vocab_size=..., num_classes=...)``, ``list_models("han*")``.

Each model file registers its paper's variants; a variant is a name plus default
hyper-parameters, so a run's config.json (name + hyper-parameters) rebuilds its model.
What every model promises is declared in ``contract.py``; ``catalogue.py`` lists the names without torch.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field

from docattn.errors import ConfigError
from docattn.models.contract import LAYOUTS, Layout

# every module of this package registers its models on import, except these helpers; they are
# imported on first use so that `docattn --help` stays fast
NOT_MODELS = {"catalogue", "contract", "grouping", "gru", "layers", "output"}
# training documents from which the auto recipe lays a family's ``ModelSpec.large`` settings: HAN's wider
# GRU was worse on 900-5,500 documents and better on 10,000-22,500, CSPAN's wider words better on 10,000-22,500
# (benchmarks/README.md, "Current defaults")
LARGE_DATA = 10_000
# training documents under which the auto recipe lays a family's ``ModelSpec.small`` settings: there the
# recipe's 1,000-step minimum shows the model each document about 30 times or more (batch 64), so it can
# learn a few words of each by heart; word dropout gained there on average in every attention family, not on
# every set, and cost HAN from 4,500 documents (benchmarks/LOG.md)
SMALL_DATA = 2_000
# what every attention family lays under SMALL_DATA: 30% of its words shown as <unk> in training
# (``layers.hide_words``), so that no few words of a document it has seen 30 times carry it
SMALL_WORD_DROPOUT = {"word_dropout": 0.3}
# what HCAN also lays under SMALL_DATA, and HAN, CSPAN, HPAN, HSAN and SANet under FEW_TOKENS: their word vectors
# are word2vec's, trained on the user's text, beside the packaged general-English table
# (``data.embeddings.PACKAGED``), which knows words a few hundred thousand tokens barely show; paired runs gained
# there in every family (benchmarks/LOG.md). HCAN keeps it at every size (``ModelSpec.beyond_small``): its CPU
# configuration's 64-d word2vec vectors gained beside it on 4,500-22,500 documents too (R8 the one loss)
PACKAGED_BESIDE = {"embeddings": "word2vec+wordllama"}
SMALL_WITH_TABLE = {**SMALL_WORD_DROPOUT, **PACKAGED_BESIDE}  # every hcan/can variant
# HPAN, HSAN and SANet under SMALL_DATA: their pairs with the table there lost or came out even (sentiment
# losing, topics gaining), so they read word2vec alone, however few the tokens
SMALL_WITHOUT_TABLE = {**SMALL_WORD_DROPOUT, "embeddings": "word2vec"}
# SANet under SMALL_DATA: its rate also rises over the first tenth of the planned steps, since Adam's first
# updates, before its moment estimates settle, are its largest; paired runs gained there, HCAN's, CSPAN's,
# HPAN's and HSAN's did not. And its weights decay, decoupled from Adam's step (AdamW; an SGD run keeps its own,
# ``recipe.data_sized_settings``): a weight no gradient keeps up loses a third to a half over a small run,
# so what a block learned of a few documents seen 30 times fades; SANet's pairs gained on sentiment and topics
# alike (with the warm-up, -0.22 on BBC's five folds), HPAN's and HSAN's lost on topics, CSPAN's split, HAN's
# came out even (benchmarks/LOG.md)
SMALL_DECAY = {"optimizer": "adamw", "weight_decay": 0.5}
SANET_SMALL = {**SMALL_WITHOUT_TABLE, "warmup_fraction": 0.1, **SMALL_DECAY}
# training tokens under which the auto recipe lays a family's ``ModelSpec.few_tokens`` settings: what word2vec
# learns of a word grows with the text it reads, not with the documents it comes in. Every family's words but
# HCAN's (which keeps the table at every size) gained beside the table on the mean of five sets of about 5,000
# short documents under this many tokens (HAN's and CSPAN's on the small sets too); HAN's lost on three of four
# sets above it, one of them 1,710 long reviews (benchmarks/LOG.md)
FEW_TOKENS = 1_000_000


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable  # build(vocab_size, num_classes, **hparams) -> nn.Module
    description: str
    paper: str
    layout: Layout  # "hierarchical", "flat" or "bag" (fitted in one call: contract.OneShotModel)
    defaults: dict = field(default_factory=dict)  # hyper-parameters of this variant
    training: dict = field(default_factory=dict)  # the paper's optimiser settings
    # on a CPU under the auto recipe: the configuration the family was measured at on two cores (training
    # options and hyper-parameters together); the paper's sizes stay a recipe="paper" away
    cpu: dict = field(default_factory=dict)
    # under the auto recipe on any device: what the family needs on data it was not tuned on (regularisation
    # where the paper had none); recipe="paper" keeps the registered settings
    auto: dict = field(default_factory=dict)
    # under the auto recipe, on a training split of at least LARGE_DATA documents: the hyper-parameters the
    # family gains from that much data (HAN: a wider GRU), laid over ``auto`` and ``beyond_small`` once the data
    # is known; a size the ``cpu`` configuration also sets widens that configuration, so it lays on a CPU only
    # (CSPAN: 128-d word vectors for the CPU's 64, while a GPU keeps the paper's 300)
    large: dict = field(default_factory=dict)
    # under the auto recipe, on a training split of fewer than SMALL_DATA documents: what the family needs
    # when it sees each document many times (HAN: word dropout, and the packaged table beside word2vec), laid
    # over ``auto`` once the data is known; training options and hyper-parameters alike
    small: dict = field(default_factory=dict)
    # under the auto recipe, on a training split of at least SMALL_DATA documents, ``large`` laid over it from
    # LARGE_DATA (HCAN: the packaged table beside word2vec, as under SMALL_DATA)
    beyond_small: dict = field(default_factory=dict)
    # under the auto recipe, on a training split of fewer than FEW_TOKENS tokens (HAN: the packaged table beside
    # word2vec); the settings sized by documents win where both name an option (HPAN's, HSAN's, SANet's ``small``)
    few_tokens: dict = field(default_factory=dict)

    def recipe_settings(self, recipe: str, gpu: bool) -> dict:
        """The settings ``recipe`` lays over the registered ones (training options and hyper-parameters)."""
        if recipe != "auto":
            return {}
        return {**self.auto, **({} if gpu else self.cpu)}

    def sized_settings(self, recipe: str, n_documents: int, n_tokens: int, gpu: bool = False) -> dict:
        """The settings (hyper-parameters and training options) ``recipe`` sizes to a training split of
        ``n_documents`` documents and ``n_tokens`` tokens, on a GPU where ``gpu`` (the ``cpu`` configuration not
        laid)."""
        if recipe != "auto":
            return {}
        if n_documents >= LARGE_DATA:
            large = {k: v for k, v in self.large.items() if not (gpu and k in self.cpu)}
            sized = {**self.beyond_small, **large}
        else:
            sized = dict(self.small if n_documents < SMALL_DATA else self.beyond_small)
        return {**self.few_tokens, **sized} if n_tokens < FEW_TOKENS else sized


_REGISTRY: dict[str, ModelSpec] = {}
_loaded = False


def register_model(
    name: str,
    *,
    description: str,
    paper: str,
    layout: Layout,
    training: dict | None = None,
    cpu: dict | None = None,
    auto: dict | None = None,
    large: dict | None = None,
    small: dict | None = None,
    beyond_small: dict | None = None,
    few_tokens: dict | None = None,
    **defaults,
):
    """Decorator: register ``cls_or_fn`` under ``name`` with these default hyper-parameters."""

    def wrap(builder):
        if name in _REGISTRY or name != name.lower() or layout not in LAYOUTS:
            raise ValueError(f"model {name!r}: registered twice, not lowercase, or layout {layout!r} not in {LAYOUTS}")
        _REGISTRY[name] = ModelSpec(
            name,
            builder,
            description,
            paper,
            layout,
            dict(defaults),
            dict(training or {}),
            dict(cpu or {}),
            dict(auto or {}),
            dict(large or {}),
            dict(small or {}),
            dict(beyond_small or {}),
            dict(few_tokens or {}),
        )
        return builder

    return wrap


def _load_all() -> None:
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if info.name not in NOT_MODELS and not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True


def get_spec(name: str) -> ModelSpec:
    """The registered variant ``name``, typed in any case; an unknown name is an error naming the closest."""
    from docattn.models.catalogue import closest_models

    _load_all()
    if name.lower() not in _REGISTRY:
        close = closest_models(name, names=_REGISTRY)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"unknown model {name!r}{hint} (docattn models lists them all)")
    return _REGISTRY[name.lower()]


def list_models(pattern: str = "*") -> list[str]:
    _load_all()
    return sorted(n for n in _REGISTRY if fnmatch.fnmatch(n, pattern))


def create_model(name: str, vocab_size: int, num_classes: int, **hparams):
    """Build model ``name``; ``hparams`` override the variant's defaults (unknown ones are an error)."""
    spec = get_spec(name)
    merged = {**spec.defaults, **hparams}
    try:
        return spec.build(vocab_size=vocab_size, num_classes=num_classes, **merged)
    except (TypeError, ValueError, RuntimeError) as err:  # unknown names, bad sizes (e.g. hidden_size=-1)
        raise ConfigError(f"model {name!r}: {err}") from None
