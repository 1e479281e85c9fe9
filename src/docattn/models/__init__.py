"""Every model by name: ``create_model("han-max", vocab_size=..., num_classes=...)``, ``list_models("han*")``.

Each model file registers its paper's variants; a variant is a name plus default
hyper-parameters, so a run's config.json (name + hyper-parameters) rebuilds its model.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

from docattn.errors import ConfigError

# every module of this package registers its models on import, except these helpers; they are
# imported on first use so that `docattn --help` stays fast
NOT_MODELS = {"layers", "output"}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable  # build(vocab_size, num_classes, **hparams) -> nn.Module
    description: str
    paper: str
    layout: str  # "hierarchical", "flat" or "bag" (non-neural baselines)
    defaults: dict = field(default_factory=dict)  # hyper-parameters of this variant
    training: dict = field(default_factory=dict)  # the paper's optimiser settings
    # on a CPU under the auto recipe: the configuration the family was measured at on two cores (training
    # options and hyper-parameters together); the paper's sizes stay a recipe="paper" away
    cpu: dict = field(default_factory=dict)


_REGISTRY: dict[str, ModelSpec] = {}
_loaded = False


def register_model(name: str, *, description: str, paper: str, layout: str, training: dict | None = None,
                   cpu: dict | None = None, **defaults):
    """Decorator: register ``cls_or_fn`` under ``name`` with these default hyper-parameters."""

    def wrap(builder):
        if name in _REGISTRY:
            raise ValueError(f"model {name!r} registered twice")
        _REGISTRY[name] = ModelSpec(name, builder, description, paper, layout, dict(defaults), dict(training or {}),
                                    dict(cpu or {}))
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
    _load_all()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown model {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


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
