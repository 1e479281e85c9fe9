"""Validation splits: stratified, seeded, taken from the training split only."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from docattn.errors import ConfigError, DataError


def label_set_strata(labels) -> list[str]:
    """One stratum per document of multi-label data (tuples of labels, or a 0/1 matrix): its rarest label.
    Stratifying on whole label sets would make most sets a class of one; the rarest label keeps each
    label's share in both parts, which matters most for the rare ones."""
    if isinstance(labels, np.ndarray) and labels.ndim == 2:
        counts = labels.sum(0)
        rarity = np.where(labels > 0, counts[None, :], np.iinfo(np.int64).max)
        return [str(int(j)) if labels[i, j] else "" for i, j in enumerate(rarity.argmin(1))]
    counts: dict = {}
    for row in labels:
        for label in row:
            counts[label] = counts.get(label, 0) + 1
    return [str(min(row, key=lambda y: (counts[y], str(y)))) if row else "" for row in labels]


def stratified_split(labels: Sequence[Hashable], fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, validation indices): ``fraction`` of each class goes to validation.

    HAN holds out 10% of the training data; the HPAN paper 30%. Classes too small to split
    keep all their documents in training.
    """
    return stratified_split_codes(label_codes(labels), fraction, seed)


def label_codes(labels: Sequence[Hashable]) -> np.ndarray:
    """One integer per document, numbering its label's text in sorted order: what the splits stratify on."""
    return np.unique(np.asarray([str(x) for x in labels]), return_inverse=True)[1].reshape(-1)


def capped_sample(labels, cap: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of about ``cap`` documents, stratified as ``stratified_split`` (label sets on their rarest
    label), every class keeping at least one document: what a fit over a large training split reads (the
    guardrail's logistic regression, the multi-label refit). Every document when there are no more than ``cap``."""
    n = len(labels)
    if n <= cap:
        return np.arange(n)
    kept, _ = stratified_split(labels, 1.0 - cap / n, seed)  # a class too small to split stays on the kept side
    return kept


def stratified_split_codes(codes: np.ndarray, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``stratified_split`` of labels given as ``label_codes``; a subset's codes may skip numbers (chunked
    preparation codes labels once for the whole input), so they are renumbered densely first."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"validation fraction must be between 0 and 1, got {fraction}")
    n = len(codes)
    if n < 2:
        raise DataError(f"cannot split {n} document(s) into training and validation")
    rng = np.random.default_rng(seed)
    codes = np.unique(codes, return_inverse=True)[1].reshape(-1)
    sizes = np.bincount(codes)
    take = _quotas(sizes, fraction)
    valid = []
    for c in range(codes.max() + 1):
        members = np.flatnonzero(codes == c)
        rng.shuffle(members)
        if take[c]:
            valid.append(members[: take[c]])
    valid_idx = np.sort(np.concatenate(valid)) if valid else np.zeros(0, dtype=np.int64)
    if len(valid_idx) == 0 or len(valid_idx) == n:
        raise DataError(f"validation split of {fraction:.0%} leaves no documents on one side ({n} documents)")
    train_mask = np.ones(n, dtype=bool)
    train_mask[valid_idx] = False
    return np.flatnonzero(train_mask), valid_idx


def _quotas(sizes: np.ndarray, fraction: float) -> np.ndarray:
    """Validation documents per class: each class's rounded share, and never more in all than the fraction
    asks (10,000 classes of 2 would otherwise give 50%): classes whose share rounds up give theirs back, the
    smallest remainders first. A class keeps at least one document in training."""
    share = sizes * fraction
    take = np.where(sizes >= 2, np.maximum(np.round(share), 1), 0).astype(np.int64)
    take = np.minimum(take, np.maximum(sizes - 1, 0))
    excess = int(take.sum() - max(round(float(sizes.sum()) * fraction), 1))
    if excess > 0:
        over = np.argsort(share - take, kind="stable")  # most rounded up first
        for c in over[:excess]:
            if take[c] > 0 and take[c] > share[c] - 1:
                take[c] -= 1
    return take


def held_out_split(
    labels: Sequence[Hashable], fraction: float | None, folds: int | None, fold: int = 0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices) for data without a test split: a stratified ``fraction``, or fold
    ``fold`` of a stratified, seeded ``folds``-fold split, whose test folds are disjoint and cover every document."""
    return held_out_split_codes(label_codes(labels), fraction, folds, fold, seed)


def held_out_split_codes(
    codes: np.ndarray, fraction: float | None, folds: int | None, fold: int = 0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``held_out_split`` of labels given as ``label_codes``."""
    if folds is None:
        return stratified_split_codes(codes, fraction, seed + 1)  # another draw than the validation split's
    from sklearn.model_selection import StratifiedKFold

    codes = np.unique(codes, return_inverse=True)[1].reshape(-1)
    smallest = np.bincount(codes).min()
    if smallest < folds:
        raise DataError(
            f"{folds}-fold cross-validation needs at least {folds} documents of every class; the "
            f"smallest class has {smallest} (use fewer folds)"
        )
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    train_idx, test_idx = list(splitter.split(np.zeros(len(codes)), codes))[fold]
    return np.sort(train_idx), np.sort(test_idx)
