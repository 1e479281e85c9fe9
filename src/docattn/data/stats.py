"""Corpus statistics in the shape of the papers' Table 1."""

from __future__ import annotations

from collections import Counter

from docattn.data.corpus import Corpus
from docattn.data.encoding import encode_ids
from docattn.data.text import TextConfig, Vocabulary, documents_to_strings


def corpus_stats(corpus: Corpus, text_config: TextConfig = TextConfig()) -> dict:
    """Classes, documents, average/max sentences and words per document, vocabulary, class counts."""
    strings = documents_to_strings(corpus.texts, corpus.sentences, text_config)
    vocab = Vocabulary.build(strings, text_config, min_count=1)
    _, sent_off, doc_off = encode_ids(vocab.encode_strings(strings))
    sentences = doc_off[1:] - doc_off[:-1]
    words = sent_off[doc_off[1:]] - sent_off[doc_off[:-1]]
    # multi-label: documents per class (a document counts once for each of its labels)
    labels = [y for row in corpus.labels for y in row] if corpus.multi_label and corpus.labels else corpus.labels
    counts = Counter(labels or [])
    order = corpus.classes or sorted(counts, key=str)
    extra = {}
    if corpus.multi_label and corpus.labels:
        per_document = [len(row) for row in corpus.labels]
        extra = {"multi_label": True, "labels_per_document": sum(per_document) / max(len(per_document), 1)}
    return {
        "classes": len(counts),
        **extra,
        "documents": len(corpus),
        "avg_sentences": float(sentences.mean()),
        "max_sentences": int(sentences.max()),
        "avg_words": float(words.mean()),
        "max_words": int(words.max()),
        "vocabulary": len(vocab) - 3,
        "class_counts": {str(c): counts[c] for c in order if c in counts},
        **({"skipped": corpus.stats} if corpus.stats else {}),
    }
