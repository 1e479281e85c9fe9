"""Which documents a run trained and validated on, by a hash of each document's token ids, so that
``evaluate`` can say when it is scoring documents the model has already seen."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from docattn.data.encoding import EncodedCorpus

FILE = "documents.npz"  # sorted uint64 hashes per split; np.load reads it without pickle


def document_hashes(enc: EncodedCorpus) -> np.ndarray:
    """One 64-bit hash per document of its token ids (the same text encoded by the same vocabulary gives the same)."""
    tokens = np.ascontiguousarray(enc.tokens, dtype=np.int32)
    bounds = np.asarray(enc.sentence_offsets)[np.asarray(enc.document_offsets)]
    out = np.empty(len(enc), dtype=np.uint64)
    for d, (start, end) in enumerate(
        zip(bounds[:-1].tolist(), bounds[1:].tolist())
    ):  # a loop over documents, not words
        out[d] = int.from_bytes(hashlib.blake2b(tokens[start:end].tobytes(), digest_size=8).digest(), "little")
    return out


def save_membership(run_dir: Path, splits: dict[str, EncodedCorpus]) -> None:
    arrays = {name: np.unique(document_hashes(splits[name])) for name in ("train", "valid") if name in splits}
    from docattn.data.files import replacing

    with replacing(Path(run_dir) / FILE) as tmp, open(tmp, "wb") as f:  # a file object: savez adds no ".npz"
        np.savez(f, **arrays)


def seen_before(run_dir: Path, enc: EncodedCorpus) -> dict[str, int] | None:
    """How many of ``enc``'s documents the run trained and validated on; None for a run that did not record it."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            known = {name: saved[name] for name in saved.files}
    except (OSError, ValueError):
        return None
    hashes = document_hashes(enc)
    return {name: int(np.isin(hashes, values).sum()) for name, values in known.items()}
