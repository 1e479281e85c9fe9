"""Reuters-21578 (Distribution 1.0): the ``reut2-*.sgm`` SGML files, read as the standard ModApte split.

Each file holds ``<REUTERS TOPICS=.. LEWISSPLIT=.. NEWID=..>`` ... ``</REUTERS>`` records, each tag alone on its
line (the collection's README.txt, section VI). ModApte (README section VIII.B): train is LEWISSPLIT="TRAIN",
test LEWISSPLIT="TEST", both with TOPICS="YES"; the other records are not used. The categories are the TOPICS
categories with at least one training and one test document (90); a document with none of them is dropped
and counted in ``stats["no_category"]``. Documents are multi-label: a tuple of their categories.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from docattn.data.corpus import Corpus
from docattn.data.readers.base import _Documents, _label_set, _opened, _select_splits, _Source
from docattn.data.readers.decoding import _decoded_lines, _line_limit
from docattn.data.readers.trees import _Tree
from docattn.errors import DataError

_SGML_FILE = re.compile(r"reut2-[0-9]+\.sgm", re.IGNORECASE)
_SPLITS = {"TRAIN": "train", "TEST": "test"}  # LEWISSPLIT values of ModApte; NOT-USED is left out
_ATTRIBUTE = re.compile(r'([A-Za-z]+)="([^"]*)"')
_REQUIRED = ("TOPICS", "LEWISSPLIT", "NEWID")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|lt|gt|amp|quot|apos);")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tabs and line breaks stay
_TAG = re.compile(r"<[^>]*>")


def is_reuters_file(member: str) -> bool:
    """Whether ``member`` is one of the collection's ``reut2-NNN.sgm`` files."""
    return bool(_SGML_FILE.fullmatch(posixpath.basename(member)))


@dataclass
class _Record:
    """One ModApte document as read: where it starts, its NEWID, text and TOPICS categories."""

    where: str
    newid: str
    text: str
    topics: tuple[str, ...]


def read_reuters(tree: _Tree, split: str | None, single: bool, on_empty: str, errors: str) -> dict[str, Corpus]:
    """The ModApte train and test corpora of the ``reut2-*.sgm`` files in ``tree``, else of its ``.sgm`` files
    (one file given alone, whatever its name)."""
    members = sorted(m for m in tree.paths if is_reuters_file(m))
    members = members or sorted(m for m in tree.paths if m.lower().endswith(".sgm"))
    if not members:
        raise DataError(f"{tree.name}: no reut2-*.sgm files (expected the Reuters-21578 distribution)")
    records: dict[str, list[_Record]] = {"train": [], "test": []}
    stats = {"decode_errors": 0}
    for member in members:
        source = _Source(tree.where(member), tree.opener(member), {"errors": errors})
        for split_name, record in _file_records(source, stats):
            records[split_name].append(record)
    in_train = {t for r in records["train"] for t in r.topics}
    categories = in_train & {t for r in records["test"] for t in r.topics}
    if not categories:
        raise DataError(
            f"{tree.name}: no TOPICS category has both a training and a test document "
            '(ModApte: LEWISSPLIT="TRAIN"/"TEST" with TOPICS="YES"); is the collection complete?'
        )
    classes = sorted(categories)
    result = {}
    for name in _select_splits(["train", "test"], split, single, tree.name):
        docs = _Documents(tree.name, on_empty)
        docs.stats["decode_errors"] = stats["decode_errors"]
        docs.stats["no_category"] = 0
        for record in records[name]:
            labels = tuple(t for t in record.topics if t in categories)
            if labels:
                docs.add(record.where, record.newid, record.text, labels)
            else:
                docs.stats["no_category"] += 1
        result[name] = docs.corpus(labeled=True, classes=list(classes), multi_label=True)
    return result


def _file_records(source: _Source, stats: dict[str, int]) -> Iterator[tuple[str, _Record]]:
    """(split, record) of each ModApte record of one file."""
    for start, attributes, content in _raw_records(source, stats):
        where = f"{source.name}:{start}"
        split = _SPLITS.get(attributes["LEWISSPLIT"])
        if split is None or attributes["TOPICS"] != "YES":
            continue
        topics_field = _element(content, "TOPICS") or ""
        topics = _label_set(_text(t) for t in re.findall(r"<D>(.*?)</D>", topics_field, re.DOTALL))
        yield split, _Record(where, attributes["NEWID"], _document_text(content), topics)  # type: ignore[arg-type]


def _raw_records(source: _Source, stats: dict[str, int]) -> Iterator[tuple[int, dict[str, str], str]]:
    """(line of the opening tag, its attributes, the SGML up to the closing tag) of each record, held one at a
    time: a record longer than a line may be (8 x DOCATTN_MAX_DOCUMENT_CHARS) is an error, not a memory hog."""
    limit = _line_limit()
    start, attributes, parts, size, found = 0, {}, [], 0, False
    with _opened(source) as stream:
        for number, line in enumerate(_decoded_lines(stream, source.name, source.options["errors"], stats), 1):
            opening = line.startswith("<REUTERS")
            if not start:
                if opening:
                    start, attributes, parts, size = number, _attributes(line, f"{source.name}:{number}"), [], 0
                continue
            if line.startswith("</REUTERS>"):
                yield start, attributes, "".join(parts)
                start, found = 0, True
                continue
            if opening:
                raise DataError(
                    f"{source.name}:{start}: <REUTERS> record not closed before the next one (line {number}); "
                    "expected </REUTERS> alone on a line"
                )
            size += len(line)
            if size > limit:
                raise DataError(
                    f"{source.name}:{start}: <REUTERS> record over {limit:,} characters; a missing </REUTERS>?"
                )
            parts.append(line)
    if start:
        raise DataError(f"{source.name}:{start}: <REUTERS> record never closed (no </REUTERS> before the end)")
    if not found:
        raise DataError(f"{source.name}: no <REUTERS> records (expected a Reuters-21578 reut2-*.sgm file)")


def _attributes(line: str, where: str) -> dict[str, str]:
    attributes = dict(_ATTRIBUTE.findall(line))
    missing = [name for name in _REQUIRED if name not in attributes]
    if missing or not line.rstrip().endswith(">"):
        raise DataError(
            f"{where}: malformed <REUTERS> tag {line.strip()[:80]!r}"
            + (f" (no {', '.join(missing)})" if missing else "")
            + '; expected <REUTERS TOPICS="YES" LEWISSPLIT="TRAIN" ... NEWID="1">'
        )
    return attributes


def _element(content: str, tag: str) -> str | None:
    """The SGML inside the first ``<tag ...>...</tag>``, None when there is none."""
    match = re.search(rf"<{tag}(?:\s[^>]*)?>(.*?)</{tag}>", content, re.DOTALL)
    return match.group(1) if match else None


def _document_text(content: str) -> str:
    """Title, a line break, body; a story with neither (TEXT TYPE="UNPROC") is its whole TEXT, tags removed."""
    title, body = _element(content, "TITLE"), _element(content, "BODY")
    if title is None and body is None:
        return _text(_TAG.sub("", _element(content, "TEXT") or ""))
    return "\n".join(part for part in (_text(title or ""), _text(body or "")) if part)


def _text(sgml: str) -> str:
    """Plain text of SGML character data: entities resolved, control characters dropped (the wire codes
    &#2; &#3; &#127; ...)."""
    # this distribution starts a paragraph with "&\t", a literal backslash and t: the indent it was
    sgml = sgml.replace("&\\t", "    ")
    return _CONTROL.sub("", _ENTITY.sub(_entity, sgml)).strip()


def _entity(match: re.Match) -> str:
    name = match.group(1)
    if name[0] != "#":
        return _NAMED[name]
    code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
    return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
