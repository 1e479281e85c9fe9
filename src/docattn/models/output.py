"""The one output type every model returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ModelOutput:
    """``logits`` always; ``attentions`` only when asked for (``return_attention=True``).

    Attention keys by model family: "word" (B, L, W) and "sentence" (B, L) for hierarchical
    models, "token" (B, T) for flat pooling, "self" lists of (B, heads, T, T) matrices.
    Each model lists its keys as typed records, ``model.attention_kinds()`` (``contract.AttentionKind``:
    level, shape, meaning). ``stats`` carries cheap diagnostics such as the share of pruned weights.
    """

    logits: torch.Tensor  # (B, num_classes)
    attentions: dict[str, torch.Tensor] | None = None
    stats: dict[str, torch.Tensor] = field(default_factory=dict)
