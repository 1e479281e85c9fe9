"""Reading a tree (a folder or an archive): folder-per-label documents, and the Zhang and Tang files in it."""

from __future__ import annotations

import posixpath
from collections.abc import Hashable
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.readers.base import (
    _INTEGER,
    _SPLIT_ALIASES,
    _Documents,
    _ordered_splits,
    _select_splits,
    _Source,
    _split_name,
)
from docattn.data.readers.decoding import _clean, _decode_document, _shown
from docattn.data.readers.line_formats import _CLASSES_BYTES, _read_classes
from docattn.data.readers.trees import _Tree
from docattn.errors import DataError

_IGNORED_FOLDERS = {"unsup"}  # aclImdb's unlabelled reviews
_ZHANG_FILES = {"train.csv": "train", "test.csv": "test", "valid.csv": "valid", "dev.csv": "valid"}


def _count_skipped_links(tree: _Tree, splits: dict[str, Corpus]) -> dict[str, Corpus]:
    """Links whose target the archive lacks are not read; ``stats["skipped_links"]`` says how many, so it is
    not silent."""
    if tree.skipped_links:
        for corpus in splits.values():
            corpus.stats["skipped_links"] = len(tree.skipped_links)
    return splits


def _folder_documents(tree: _Tree, unlabelled: bool = False) -> list[tuple[str, str, str, tuple[str, str]]]:
    """(member, label, split, name) of every document: a file in a label folder, at any depth below it; its
    name is the member path without the label folder (the same post under two newsgroups has one name).

    The label folder is the one right under the split folder, or under the folder that the leaf
    folders (those without subfolders) of split-less documents share (so deeper trees keep their top
    label folders); the split is the nearest ancestor named train/test/dev/valid or ending in
    -train/-test, else "all". Files outside label folders (README, imdb.vocab, urls_*.txt,
    labeledBow.feat beside them) and in folders named like a split are not documents; nor are those
    of ``unsup`` unless ``unlabelled`` asks for them.
    """
    folders = set()  # folders holding files: an empty subfolder makes no label folder's files look like a README
    for path in tree.paths:
        parent = posixpath.dirname(path)
        while parent and parent not in folders:
            folders.add(parent)
            parent = posixpath.dirname(parent)
    has_subfolders = {posixpath.dirname(folder) for folder in folders}
    found = []
    for path in sorted(tree.paths):
        parent = posixpath.dirname(path)
        if not parent:
            continue
        parts = parent.split("/")
        if (parts[-1] in _IGNORED_FOLDERS and not unlabelled) or parts[-1].lower() in _SPLIT_ALIASES:
            continue
        at = next((i for i in range(len(parts) - 2, -1, -1) if _split_name(parts[i])), None)
        found.append((path, parts, at, parent in has_subfolders))
    # the label is the folder right under the split folder (or under the folder all split-less leaf
    # folders share), so pos/batch1/*.txt and neg/batch1/*.txt are labelled pos and neg, not batch1
    loose = [parts for _, parts, at, beside in found if at is None and not beside]
    shared = posixpath.commonpath(["/".join(p) for p in loose]) if loose else ""
    common = len(shared.split("/")) if shared else 0
    label_folders = {"/".join(p[: common + 1]) for p in loose}
    documents = []
    for path, parts, at, beside in found:
        if at is not None:
            depth, split = at + 2, _split_name(parts[at])
        else:
            depth, split = min(common + 1, len(parts)), "all"
            # a file beside subfolders is a document only inside a label folder (pos/1.txt beside pos/extra/),
            # not beside the label folders themselves (a README)
            if beside and "/".join(parts[:depth]) not in label_folders:
                continue
        label = _shown(parts[depth - 1])  # a folder on disk: its raw name (an archive's is shown already)
        if label in _IGNORED_FOLDERS and not unlabelled:
            continue
        name = ("/".join(parts[: depth - 1]), path[len("/".join(parts[:depth])) + 1 :])
        documents.append((path, label, split, name))
    return documents


def _read_folder(
    tree: _Tree, split: str | None, single: bool, on_empty: str, errors: str, multi_label: bool = False
) -> dict[str, Corpus]:
    """Each split's documents; ``multi_label``: a file whose name is under several label folders, with the same
    text, is one document with all their labels (``stats["merged_documents"]`` counts the copies)."""
    documents = _folder_documents(tree)
    if not documents:
        raise DataError(
            f"no documents in {tree.name} (expected files in label folders, e.g. train/pos/1.txt or <topic>/001.txt)"
        )
    classes = sorted({label for _, label, _, _ in documents})
    if all(_INTEGER.fullmatch(c) for c in classes):  # folders 1..10 in numeric order (names kept as written)
        classes.sort(key=int)
    selected = _select_splits(_ordered_splits(s for _, _, s, _ in documents), split, single, tree.name)
    result = {}
    for name in selected:
        docs = _Documents(tree.name, on_empty)
        copies: dict[tuple[str, str], list[int]] = {}  # a file name -> its documents so far (multi_label)
        for member, label, doc_split, file_name in documents:
            if doc_split != name:
                continue
            if multi_label:
                _add_copy(docs, tree, member, errors, label, copies.setdefault(file_name, []))
            else:
                _add_file(docs, tree, member, errors, label)
        result[name] = docs.corpus(labeled=True, classes=list(classes), multi_label=multi_label)
    return result


def _add_file(docs: _Documents, tree: _Tree, member: str, errors: str, label: Hashable = None) -> None:
    """One file of a folder tree as a document, decoded on its own."""
    text, cut = _file_text(docs, tree, member, errors)
    docs.add(tree.where(member), _shown(member), text, label, cut=cut)


def _add_copy(docs: _Documents, tree: _Tree, member: str, errors: str, label: str, copies: list[int]) -> None:
    """A multi-label file: one more label of the document among ``copies`` with the same text, else a document
    of its own (different texts under one name are different documents)."""
    text, cut = _file_text(docs, tree, member, errors)
    kept = text[: docs.max_chars]  # as docs.add keeps it
    for i in copies:
        if docs.texts[i] == kept:
            if label not in docs.labels[i]:  # type: ignore[operator]
                docs.labels[i] = (*docs.labels[i], label)  # type: ignore[misc]
            docs.stats["merged_documents"] = docs.stats.get("merged_documents", 0) + 1
            return
    before = len(docs.texts)
    docs.add(tree.where(member), _shown(member), text, (label,), cut=cut)
    if len(docs.texts) > before:  # not dropped as empty
        copies.append(before)


def _file_text(docs: _Documents, tree: _Tree, member: str, errors: str) -> tuple[str, bool]:
    """A file's text, decoded on its own, and whether it was cut at the document limit."""
    # each file has its own encoding: 20 Newsgroups has Latin-1 posts among UTF-8 ones
    most = 4 * docs.max_chars  # bytes enough for the characters kept, in any encoding read
    raw = tree.read(member, most + 1)
    cut = len(raw) > most
    text = _clean(_decode_document(raw[:most] if cut else raw, tree.where(member), errors, docs.stats, cut))
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text, cut


def _read_folder_texts(tree: _Tree, on_empty: str, errors: str) -> Corpus:
    """Every document of a folder tree's training split (or of all of it), unlabelled folders included."""
    documents = _folder_documents(tree, unlabelled=True)
    splits = {s for _, _, s, _ in documents}
    name = "train" if "train" in splits else "all"
    docs = _Documents(tree.name, on_empty)
    for member, _, doc_split, _ in documents:
        if doc_split == name:
            _add_file(docs, tree, member, errors)
    hint = "" if name in splits else f" (no training split; splits: {', '.join(_ordered_splits(splits))})"
    return docs.corpus(labeled=False, hint=hint)


def _group_sources(tree: _Tree, members: dict[str, str], options: dict[str, Any], what: str) -> dict[str, _Source]:
    """Split -> source from {member: split}; two files for one split is ambiguous."""
    by_split: dict[str, list[str]] = {}
    for member, split in members.items():
        by_split.setdefault(split, []).append(member)
    sources = {}
    for split in _ordered_splits(by_split):
        found = sorted(by_split[split])
        if len(found) > 1:
            raise DataError(
                f"{tree.name}: several {what} files for split {split!r} ({', '.join(found)}); read one file at a time"
            )
        sources[split] = _Source(tree.where(found[0]), tree.opener(found[0]), options)
    return sources


def _zhang_sources(tree: _Tree, options: dict[str, Any]) -> dict[str, _Source]:
    members = {p: _ZHANG_FILES[posixpath.basename(p)] for p in tree.paths if posixpath.basename(p) in _ZHANG_FILES}
    folders = {posixpath.dirname(p) for p in members}
    if not members:
        raise DataError(f"{tree.name}: no train.csv or test.csv (expected the Zhang et al. 2015 layout)")
    if len(folders) > 1:
        raise DataError(
            f"{tree.name}: Zhang et al. CSVs in several folders ({', '.join(sorted(folders))}); point at one of them"
        )
    sources = _group_sources(tree, members, options, "Zhang CSV")
    classes_member = posixpath.join(folders.pop(), "classes.txt")
    if classes_member in tree.paths:
        classes = _read_classes(tree.read(classes_member, _CLASSES_BYTES + 1), tree.where(classes_member))
        for source in sources.values():
            source.classes, source.classes_name = classes, tree.where(classes_member)
    return sources


def _tang_sources(tree: _Tree, options: dict[str, Any]) -> dict[str, _Source]:
    members = {}
    for path in tree.paths:
        if path.endswith(".ss"):
            stem = posixpath.basename(path)[: -len(".ss")]
            members[path] = _split_name(stem.rsplit(".", 1)[-1]) or "all"
    if not members:
        raise DataError(f"{tree.name}: no .ss files (expected *.train.ss, *.dev.ss, *.test.ss)")
    return _group_sources(tree, members, options, ".ss")
