"""Figures (PNG, SVG, PDF by the file suffix), drawn with Matplotlib's Agg canvas and no pyplot state.

- ``plot_attention_matrix``: a self-attention matrix as a heatmap, words on both axes (rows are
  the attending words, columns the words attended to), as in SANet's and HCAN's figures.
- ``plot_attention_distribution``: histograms of the attention one word receives, overall and
  per gold label (HAN's Figs. 3-4).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# fonts tried, glyph by glyph, after DejaVu Sans (Matplotlib's, Latin/Greek/Cyrillic) when installed
_FALLBACK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
    "Noto Sans Devanagari",
    "Noto Sans Thai",
)


@functools.lru_cache(maxsize=1)
def _font_families() -> tuple[str, ...]:
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return ("DejaVu Sans", *(f for f in _FALLBACK_FONTS if f in installed))


def _with_fonts(draw):
    """Draw with every installed fallback font, and turn Matplotlib's warning per missing glyph into
    one that says what to install: words in scripts no font covers (CJK, say) draw as empty boxes."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        import matplotlib

        # the user's own families first (Matplotlib's default: sans-serif, i.e. DejaVu Sans), then the fallbacks
        families = [*matplotlib.rcParams["font.family"], *_font_families()[1:]]
        caught: list = []
        try:
            with matplotlib.rc_context({"font.family": families}), warnings.catch_warnings(record=True) as caught:
                warnings.filterwarnings("always", message=".*missing from font")  # the caller's filters for the rest
                path = draw(*args, **kwargs)
        finally:
            missing = 0
            for w in caught:  # already filtered: show the others as they would have been shown
                if "missing from font" in str(w.message):
                    missing += 1
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        if missing:
            warnings.warn(
                f"{path}: some characters of these words have no glyph in the fonts found "
                f"({', '.join(families)}) and draw as empty boxes; install a font that covers them "
                "(for Chinese, Japanese and Korean: Noto Sans CJK, the fonts-noto-cjk package)",
                stacklevel=2,
            )
        return path

    return wrapper


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path, tight: bool = False) -> Path:
    """Write atomically; the format follows the suffix (.png by default)."""
    path = Path(path)
    if not path.suffix:
        path = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=100, bbox_inches="tight" if tight else None)
    os.replace(tmp, path)
    return path


@_with_fonts
def plot_attention_matrix(
    matrix, tokens: Sequence[str], path, title: str | None = None, max_tokens: int | None = 200
) -> Path:
    """Heatmap of a (n, n) attention matrix with ``tokens`` on both axes; returns the written path.

    Row i is what token i attends to. Documents longer than ``max_tokens`` show their first
    ``max_tokens`` words (said in the title) so the labels stay legible.
    """
    m = np.asarray(matrix, dtype=np.float64)
    tokens = [str(t) for t in tokens]
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {m.shape}")
    if len(tokens) != m.shape[0]:
        raise ValueError(f"{len(tokens)} tokens for a {m.shape[0]} x {m.shape[1]} matrix")
    title = title or "attention"
    if max_tokens and len(tokens) > max_tokens:
        title += f" (first {max_tokens} of {len(tokens)} words)"
        m, tokens = m[:max_tokens, :max_tokens], tokens[:max_tokens]
    n = len(tokens)
    font = 9.0 if n <= 40 else max(4.0, 9.0 - (n - 40) / 16)
    cell = max(0.12, font * 1.6 / 72)  # inches per word: a label's height plus spacing
    label = max((len(t) for t in tokens), default=1) * font * 0.62 / 72 + 0.5  # room for the longest label
    grid = max(n * cell, 2.5)
    width, height = label + grid + 1.2, label + grid + 0.6  # + colour bar, + title
    fig = _figure(width, height)
    # fixed margins instead of bbox_inches="tight": one rendering pass instead of two
    ax = fig.add_axes((label / width, label / height, grid / width, grid / height))
    top = float(np.nanmax(m)) if m.size else 1.0
    image = ax.imshow(m, cmap="viridis", vmin=0.0, vmax=max(top, 1e-12), interpolation="nearest", aspect="auto")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(tokens, rotation=90, fontsize=font)
    ax.set_yticklabels(tokens, fontsize=font)
    ax.set_xlabel("attended word (key)")
    ax.set_ylabel("attending word (query)")
    ax.set_title(title, fontsize=10)
    bar = fig.add_axes(((label + grid + 0.15) / width, label / height, 0.2 / width, grid / height))
    fig.colorbar(image, cax=bar)
    return _save(fig, path)


@_with_fonts
def plot_attention_distribution(result: dict, path, density: bool = True) -> Path:
    """Histograms of ``word_attention_distribution``'s result: all documents, then one panel per gold label."""
    edges = np.asarray(result["bin_edges"])
    panels = [("all documents", result["overall"])] + [(f"label {k}", v) for k, v in result["by_label"].items()]
    cols = min(len(panels), 3)
    rows = (len(panels) + cols - 1) // cols
    fig = _figure(4.0 * cols, 3.0 * rows)
    widths = np.diff(edges)
    for i, (name, summary) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        counts = np.asarray(summary.get("histogram", np.zeros(len(widths))), dtype=np.float64)
        heights = counts / (counts.sum() * widths) if density and counts.sum() > 0 else counts
        ax.bar(
            edges[:-1],
            heights,
            width=widths,
            align="edge",
            color="#1f77b4" if i == 0 else "#ff7f0e",
            edgecolor="white",
            linewidth=0.3,
        )
        if not counts.sum():
            ax.text(0.5, 0.5, "no occurrences", ha="center", va="center", transform=ax.transAxes, color="#777")
        mean = summary.get("mean")
        ax.set_title(
            f"({chr(97 + i)}) {name}: n={summary['count']}" + (f", mean {mean:.3f}" if mean is not None else ""),
            fontsize=9,
        )
        ax.set_xlim(edges[0], edges[-1])
        ax.set_xlabel("attention weight", fontsize=8)
        ax.set_ylabel("density" if density else "count", fontsize=8)
        ax.tick_params(labelsize=7)
    level = "sqrt(p_sentence) * p_word" if result.get("level") == "combined" else "word attention"
    fig.suptitle(f'{result.get("model", "")}: {level} of "{result["word"]}"', fontsize=11)
    fig.tight_layout()
    return _save(fig, path, tight=True)
