"""The embedded default corpus: synthetic reviews whose label hides in one or two sentences.

docattn must train and explain offline, so it generates its own data. Each document is 4 to 12
short review sentences (product and movie flavoured); one of them, sometimes two, decides the
label and the rest are distractors built from the same templates and vocabulary. The deciding
words are stored with every document (``Corpus.rationales``), so explanations can be checked
against ground truth.

Classes come in opposite pairs, taken in this order: ``positive``/``negative``,
``exciting``/``boring``, ``reliable``/``faulty``; ``n_classes`` takes the first n (2 to 6).
With an odd n the last class has no partner among the classes used.

The rule, exactly:

* A *cue* is a word of ``CLASS_CUES[c]`` (six per class); the cue lists of the six classes are
  disjoint and share no word with any other word list of this module.
* A deciding sentence holds exactly one cue, in the adjective slot of a predicate
  (``[opener] the battery was [intensifier] [not] CUE [tail] .``). Un-negated, it means the
  cue's class c. Negated (the negator "not" directly before the cue) it means ``OPPOSITE[c]``,
  so "not good" means negative and "not boring" means exciting. Only cues of paired classes
  are ever negated.
* A document's deciding sentences (one, or two with probability 0.25, at random positions)
  all mean its label. 40% of the deciding sentences of a paired class are negated, so
  counting cue words alone gets those wrong: a model must read the word pair.
* Distractor sentences contain no cue word of any class at all, negated or not. They do
  contain "not" (before neutral adjectives and verbs), intensifiers and weak decoy words
  ("okay", "decent", "bored", "broke", ...) in the same slots, so neither "not" nor the shape
  of a sentence gives the answer away.

Sentences are lists of lowercase tokens (words and the punctuation "," and "." as separate
tokens); each has 5 to 20 tokens and at least 5 words. ``Corpus.sentences[i]`` joins them with
single spaces, so ``docattn.data.text``'s word pattern gives the tokens back exactly, and
``rationales[i] = {"sentences": [...], "words": [[sentence, token], ...]}`` indexes those tokens
(the negator and the cue of each deciding sentence; never the intensifier).
"""

from __future__ import annotations

import json
import os
import random
from bisect import bisect
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.lexicon import (
    BASE_VERBS,
    COMPANIONS,
    COPULAS,
    DECOY_ADJECTIVES,
    DETERMINERS,
    FEELINGS,
    MARKS,
    MISHAPS,
    NEUTRAL_ADJECTIVES,
    NUMBERS,
    OBJECTS,
    OPENERS,
    PAST_VERBS,
    PERSONS,
    PLACES,
    SUBJECTS,
    TAILS,
    TIME_POINTS,
    TIMES,
    UNITS,
)
from docattn.errors import ConfigError

__all__ = [
    "CLASS_CUES",
    "DEFAULT_N_TEST",
    "DEFAULT_N_TRAIN",
    "INTENSIFIERS",
    "NEGATORS",
    "OPPOSITE",
    "class_names",
    "make_corpus",
    "make_splits",
    "write_jsonl",
]

# Sizes for the demo: enough for a small hierarchical GRU with attention to pass 95% in a minute.
DEFAULT_N_TRAIN = 4000
DEFAULT_N_TEST = 1000

NEGATION_RATE = 0.4  # share of a paired class's deciding sentences that use a negated opposite cue
TWO_DECIDING_RATE = 0.25  # share of documents with a second, agreeing deciding sentence
INTENSIFIER_RATE = 0.3  # same in deciding and distractor predicates
OPENER_RATE, ATTRIBUTE_RATE, TAIL_RATE = 0.3, 0.25, 0.4  # optional parts of a predicate
PREDICATE_DISTRACTOR_RATE = 0.5  # distractors shaped like deciding sentences, neutral adjective
DECOY_RATE = 0.3  # predicate distractors whose adjective is a decoy rather than a neutral word
DISTRACTOR_NEGATION_RATE = 0.4  # negated neutral adjectives, so "not" alone says nothing
# Distractor phrases are drawn with Zipf-like frequencies (rank r has weight 1 / r**1.5), as in
# real text: ~450 distinct words, yet few enough distinct bigrams that 4,000 documents teach a
# bag of bigrams the negation rule. Cues are drawn uniformly so every "not CUE" pair is common.
ZIPF_EXPONENT = 1.5

CLASS_CUES: dict[str, tuple[str, ...]] = {
    "positive": ("excellent", "wonderful", "superb", "fantastic", "great", "good"),
    "negative": ("terrible", "awful", "horrible", "dreadful", "bad", "poor"),
    "exciting": ("thrilling", "gripping", "exciting", "captivating", "riveting", "engaging"),
    "boring": ("boring", "dull", "tedious", "bland", "monotonous", "tiresome"),
    "reliable": ("reliable", "sturdy", "durable", "dependable", "robust", "solid"),
    "faulty": ("faulty", "broken", "defective", "flimsy", "fragile", "glitchy"),
}
CLASS_ORDER: tuple[str, ...] = tuple(CLASS_CUES)
OPPOSITE: dict[str, str] = {
    "positive": "negative",
    "negative": "positive",
    "exciting": "boring",
    "boring": "exciting",
    "reliable": "faulty",
    "faulty": "reliable",
}
# One negator: a second one ("never") halves the examples of each negated pair, and a
# bag of bigrams then needs twice the data to learn the rule.
NEGATORS: tuple[str, ...] = ("not",)
# before a negator or a bare cue ("really not good", "truly good")
INTENSIFIERS: tuple[str, ...] = (
    "really",
    "truly",
    "simply",
    "genuinely",
    "definitely",
    "certainly",
    "clearly",
    "honestly",
    "absolutely",
)
# only before an un-negated adjective ("very good"; "very not good" is not English)
PLAIN_INTENSIFIERS: tuple[str, ...] = ("very", "extremely", "rather", "pretty", "quite", "so")


class _Pool:
    """Phrases drawn with Zipf-like frequencies: the first most often, as words are in real text."""

    __slots__ = ("phrases", "_cumulative", "_total")

    def __init__(self, phrases: Sequence[str], exponent: float = ZIPF_EXPONENT):
        self.phrases = [tuple(phrase.split()) for phrase in phrases]  # each phrase as its tokens
        self._cumulative = list(accumulate(1.0 / (rank + 1) ** exponent for rank in range(len(phrases))))
        self._total = self._cumulative[-1]
        self._cumulative[-1] = float("inf")  # so rounding can never index past the end

    def pick(self, rng: random.Random) -> tuple[str, ...]:
        return self.phrases[bisect(self._cumulative, rng.random() * self._total)]


# uppercase slot of a narrative template -> its pool
_SLOTS: dict[str, _Pool] = {
    name: _Pool(options)
    for name, options in {
        "PERSON": PERSONS,
        "COMPANION": COMPANIONS,
        "PAST": PAST_VERBS,
        "BASE": BASE_VERBS,
        "DET": DETERMINERS,
        "SUBJECT": SUBJECTS,
        "TIME": TIMES,
        "POINT": TIME_POINTS,
        "PLACE": PLACES,
        "OBJECT": OBJECTS,
        "MARK": MARKS,
        "NUMBER": NUMBERS,
        "UNIT": UNITS,
        "FEELING": FEELINGS,
        "MISHAP": MISHAPS,
        "NEUTRAL": NEUTRAL_ADJECTIVES,
        "DECOY": DECOY_ADJECTIVES,
    }.items()
}
_NARRATIVE_TEMPLATES = [
    "PERSON PAST DET SUBJECT TIME .",
    "PERSON PAST it PLACE TIME .",
    "DET SUBJECT came with OBJECT and OBJECT .",
    "PERSON did not BASE DET SUBJECT until POINT .",
    "PERSON never PAST DET SUBJECT before .",
    "it took NUMBER UNIT to BASE DET SUBJECT .",
    "there was MARK on DET SUBJECT when it arrived .",
    "PERSON said DET SUBJECT was DECOY .",
    "PERSON thought DET SUBJECT looked NEUTRAL PLACE .",
    "PERSON felt FEELING PLACE TIME .",
    "DET SUBJECT arrived in a box with OBJECT TIME .",
    "PERSON PAST DET SUBJECT because the old one MISHAP .",
    "we PAST DET SUBJECT with COMPANION PLACE .",
    "it cost NUMBER dollars at the store TIME .",
    "PERSON asked whether DET SUBJECT was NEUTRAL or NEUTRAL .",
    "i will update this review after NUMBER more UNIT .",
    "PERSON could not BASE DET SUBJECT PLACE .",
    "the NEUTRAL version of DET SUBJECT was sold out TIME .",
]
_TEMPLATE = _Pool(_NARRATIVE_TEMPLATES, exponent=0.5)  # flatter: every template stays common
_OPENER, _TAIL, _COPULA = _Pool(OPENERS), _Pool(TAILS), _Pool(COPULAS)
_DETERMINER, _SUBJECT, _NEUTRAL, _DECOY = _SLOTS["DET"], _SLOTS["SUBJECT"], _SLOTS["NEUTRAL"], _SLOTS["DECOY"]
_INTENSIFIER, _PLAIN_INTENSIFIER = _Pool(INTENSIFIERS), _Pool(PLAIN_INTENSIFIERS)

MIN_WORDS = 5  # every sentence has at least this many words (and at most 20 tokens, by construction)


def class_names(n_classes: int = 4) -> list[str]:
    """The first ``n_classes`` class names, in the fixed order models index them."""
    if not 2 <= n_classes <= len(CLASS_ORDER):
        raise ConfigError(f"n_classes must be between 2 and {len(CLASS_ORDER)}, got {n_classes}")
    return list(CLASS_ORDER[:n_classes])


def _predicate(rng: random.Random, adjective: str, negator: str | None) -> tuple[list[str], int | None, int]:
    """``[opener] det [adj] subject copula [intensifier] [negator] ADJECTIVE [tail] .``

    Deciding and distractor predicates come from this one function, so only the adjective
    (and its negator) tells them apart. Returns the tokens and the negator and adjective positions.
    """
    tokens: list[str] = []
    if rng.random() < OPENER_RATE:
        tokens += _OPENER.pick(rng)
    tokens += _DETERMINER.pick(rng)
    if rng.random() < ATTRIBUTE_RATE:
        tokens += _NEUTRAL.pick(rng)
    tokens += _SUBJECT.pick(rng)
    tokens += _COPULA.pick(rng)
    if rng.random() < INTENSIFIER_RATE:
        tokens += (_INTENSIFIER if negator or rng.random() < 0.5 else _PLAIN_INTENSIFIER).pick(rng)
    negator_at = None
    if negator is not None:
        negator_at = len(tokens)
        tokens.append(negator)
    adjective_at = len(tokens)
    tokens.append(adjective)
    # a tail is optional, unless the sentence would be shorter than MIN_WORDS words
    if rng.random() < TAIL_RATE or len(tokens) - tokens.count(",") < MIN_WORDS:
        tokens += _TAIL.pick(rng)
    tokens.append(".")
    return tokens, negator_at, adjective_at


def _narrative(rng: random.Random) -> list[str]:
    """A distractor that tells what happened around the purchase or viewing; no cue words."""
    tokens: list[str] = []
    for part in _TEMPLATE.pick(rng):
        if part.isupper():
            tokens += _SLOTS[part].pick(rng)
        else:
            tokens.append(part)
    return tokens


def _distractor(rng: random.Random) -> list[str]:
    if rng.random() < PREDICATE_DISTRACTOR_RATE:
        (adjective,) = (_DECOY if rng.random() < DECOY_RATE else _NEUTRAL).pick(rng)
        negator = rng.choice(NEGATORS) if rng.random() < DISTRACTOR_NEGATION_RATE else None
        return _predicate(rng, adjective, negator)[0]
    return _narrative(rng)


def _deciding(rng: random.Random, label: str, classes: list[str]) -> tuple[list[str], list[int]]:
    """A sentence meaning ``label``: its own cue, or a negated cue of its opposite class."""
    opposite = OPPOSITE[label]
    if opposite in classes and rng.random() < NEGATION_RATE:
        tokens, negator_at, cue_at = _predicate(rng, rng.choice(CLASS_CUES[opposite]), rng.choice(NEGATORS))
        return tokens, [negator_at, cue_at]
    tokens, _, cue_at = _predicate(rng, rng.choice(CLASS_CUES[label]), None)
    return tokens, [cue_at]


def _document(
    rng: random.Random, label: str, classes: list[str], min_sentences: int, max_sentences: int
) -> tuple[list[str], dict[str, list]]:
    n_sentences = rng.randint(min_sentences, max_sentences)
    n_deciding = 2 if n_sentences >= 2 and rng.random() < TWO_DECIDING_RATE else 1
    deciding_at = sorted(rng.sample(range(n_sentences), n_deciding))
    sentences: list[str] = []
    words: list[list[int]] = []
    for s in range(n_sentences):
        if s in deciding_at:
            tokens, positions = _deciding(rng, label, classes)
            words += [[s, t] for t in positions]
        else:
            tokens = _distractor(rng)
        sentences.append(" ".join(tokens))
    return sentences, {"sentences": deciding_at, "words": words}


def _generate(
    labels: list[str], classes: list[str], rng: random.Random, min_sentences: int, max_sentences: int
) -> tuple[list[list[str]], list[dict]]:
    """Sentences and rationales for ``labels``; every document's text is new (retry on a repeat)."""
    seen: set[str] = set()
    all_sentences: list[list[str]] = []
    rationales: list[dict] = []
    for label in labels:
        for _ in range(1000):
            sentences, rationale = _document(rng, label, classes, min_sentences, max_sentences)
            text = " ".join(sentences)
            if text not in seen:
                break
        else:
            raise ConfigError(
                f"cannot make {len(labels)} distinct documents of {min_sentences} to {max_sentences} sentences;"
                " allow more sentences per document or ask for fewer documents"
            )
        seen.add(text)
        all_sentences.append(sentences)
        rationales.append(rationale)
    return all_sentences, rationales


def _stats(rationales: list[dict]) -> dict[str, int]:
    return {
        "two_deciding_documents": sum(len(r["sentences"]) == 2 for r in rationales),
        "negated_deciding_sentences": sum(len(r["words"]) - len(r["sentences"]) for r in rationales),
    }


def _balanced_labels(n_docs: int, classes: list[str], rng: random.Random) -> list[str]:
    """Every class n_docs // n_classes times (the remainder spread over the first classes), shuffled."""
    labels = [classes[i % len(classes)] for i in range(n_docs)]
    rng.shuffle(labels)
    return labels


def _check_sizes(min_sentences: int, max_sentences: int, **counts: int) -> None:
    for name, value in counts.items():
        if value < 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")
    if not 1 <= min_sentences <= max_sentences:
        raise ConfigError(
            f"need 1 <= min_sentences <= max_sentences, "
            f"got min_sentences={min_sentences}, max_sentences={max_sentences}"
        )


def _corpus(
    sentences: list[list[str]],
    labels: list[str],
    rationales: list[dict],
    classes: list[str],
    first_id: int,
    source: str,
) -> Corpus:
    return Corpus(
        texts=[" ".join(doc) for doc in sentences],
        labels=list(labels),
        sentences=sentences,
        ids=[f"synthetic-{first_id + i:06d}" for i in range(len(labels))],
        source=source,
        classes=list(classes),
        stats=_stats(rationales),
        rationales=rationales,
    )


def make_corpus(
    n_docs: int = 2000, n_classes: int = 4, seed: int = 0, min_sentences: int = 4, max_sentences: int = 12
) -> Corpus:
    """``n_docs`` distinct synthetic documents, classes balanced; same arguments, same corpus."""
    classes = class_names(n_classes)
    _check_sizes(min_sentences, max_sentences, n_docs=n_docs)
    rng = random.Random(seed)
    labels = _balanced_labels(n_docs, classes, rng)
    sentences, rationales = _generate(labels, classes, rng, min_sentences, max_sentences)
    return _corpus(sentences, labels, rationales, classes, 0, f"synthetic(seed={seed})")


def make_splits(
    n_train: int = DEFAULT_N_TRAIN, n_test: int = DEFAULT_N_TEST, n_classes: int = 4, seed: int = 0, **kw: Any
) -> dict[str, Corpus]:
    """``{"train": ..., "test": ...}``: balanced splits with no document in common.

    ``kw`` takes ``min_sentences`` and ``max_sentences`` as in :func:`make_corpus`. Both
    splits come from one stream, so no text repeats across them and ids do not collide.
    """
    classes = class_names(n_classes)
    min_sentences, max_sentences = kw.pop("min_sentences", 4), kw.pop("max_sentences", 12)
    if kw:
        raise ConfigError(f"unknown options for make_splits: {sorted(kw)} (expected min_sentences, max_sentences)")
    _check_sizes(min_sentences, max_sentences, n_train=n_train, n_test=n_test)
    rng = random.Random(seed)
    labels = _balanced_labels(n_train, classes, rng) + _balanced_labels(n_test, classes, rng)
    sentences, rationales = _generate(labels, classes, rng, min_sentences, max_sentences)
    return {
        name: _corpus(sentences[lo:hi], labels[lo:hi], rationales[lo:hi], classes, lo, f"synthetic(seed={seed})/{name}")
        for name, lo, hi in (("train", 0, n_train), ("test", n_train, n_train + n_test))
    }


def write_jsonl(corpus: Corpus, path: str | os.PathLike) -> Path:
    """One JSON object per document (id, text, label, sentences, rationale), replaced atomically.

    Written to ``path.tmp`` first and renamed, so a reader never sees half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = len(corpus)
    labels = corpus.labels if corpus.labels is not None else [None] * n
    sentences = corpus.sentences if corpus.sentences is not None else [None] * n
    rationales = corpus.rationales if corpus.rationales is not None else [None] * n
    ids = corpus.ids if corpus.ids is not None else [None] * n
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for doc_id, text, label, sents, rationale in zip(ids, corpus.texts, labels, sentences, rationales):
                record = {"text": text, "label": label, "sentences": sents, "rationale": rationale}
                if doc_id is not None:  # the reader takes it as the document's id: explain and predict show it
                    record = {"id": doc_id, **record}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
