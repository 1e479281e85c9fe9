"""Every attention key a docattn model returns, declared once: its level, its kind, its shape, its meaning.

Explanations read a model's ``ModelOutput.attentions`` through this table (``attention_kind``), never by
matching substrings of the keys. A key a model returns must have a row here; one that has none is not
summarised or drawn. Shapes: B documents, L sentences, W words a sentence, S sentences of the batch
(hierarchical word level), T tokens (flat), h heads, m learned queries, N self-attention blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

# what a key's weights are
POOLING = "pooling"  # one distribution over the positions of a sequence, pooling it into one vector
PER_HEAD = "per-head"  # pooling distributions, one per head or learned query (the axis before the positions)
MATRIX = "matrix"  # self-attention: one row per query position, a distribution over the key positions

# which sequence the positions are
WORD, SENTENCE, TOKEN = "word", "sentence", "token"  # a sentence's words, a document's sentences, a flat document


@dataclass(frozen=True)
class AttentionKind:
    key: str
    level: str  # WORD, SENTENCE or TOKEN
    kind: str  # POOLING, PER_HEAD or MATRIX
    shape: str  # the tensor's axes
    axis: str | None  # what the axis before the positions counts: "head", "query", "block", or None
    meaning: str

    @property
    def is_matrix(self) -> bool:
        return self.kind == MATRIX

    @property
    def per_sentence_rows(self) -> bool:
        """Its first axis is the batch's sentences (S), not its documents (B): hierarchical word-level matrices."""
        return self.shape.startswith("(S,")


# fmt: off
_ROWS = [
    # key              level     kind      shape           axis     meaning
    ("word",           WORD,     POOLING,  "(B, L, W)",    None,    "p_word within each sentence (HAN, HCAN)"),
    ("sentence",       SENTENCE, POOLING,  "(B, L)",       None,    "p_sentence within the document (HAN, HCAN)"),
    ("token",          TOKEN,    POOLING,  "(B, T)",       None,    "a flat model's weight of each token"),
    ("word_heads",     WORD,     PER_HEAD, "(B, L, h, W)", "head",  "HCAN's target attention over words, per head"),
    ("sentence_heads", SENTENCE, PER_HEAD, "(B, h, L)",    "head",  "HCAN's target attention over sentences, per head"),
    ("token_heads",    TOKEN,    PER_HEAD, "(B, h, T)",    "head",  "flat CAN's target attention, per head"),
    ("queries",        TOKEN,    PER_HEAD, "(B, m, T)",    "query", "CSPAN's weights a_it of each learned query"),
    ("self",           TOKEN,    MATRIX,   "(B, N, T, T)", "block", "SANet's self-attention, one matrix per block"),
    ("self_a",         TOKEN,    MATRIX,   "(B, h, T, T)", "head",  "flat CAN's self-attention A(x) (HCAN eq. 2-3)"),
    ("self_b",         TOKEN,    MATRIX,   "(B, h, T, T)", "head",  "flat CAN's self-attention B(x) (HCAN eq. 4)"),
    ("word_self_a",    WORD,     MATRIX,   "(S, h, W, W)", "head",  "HCAN's A(x) over each sentence's words"),
    ("word_self_b",    WORD,     MATRIX,   "(S, h, W, W)", "head",  "HCAN's B(x) over each sentence's words"),
    ("sentence_self_a", SENTENCE, MATRIX,  "(B, h, L, L)", "head",  "HCAN's A(x) over a document's sentences"),
    ("sentence_self_b", SENTENCE, MATRIX,  "(B, h, L, L)", "head",  "HCAN's B(x) over a document's sentences"),
    ("semantic_self",  TOKEN,    MATRIX,   "(B, T, T)",    None,    "CSPAN's semantic self-attention (eq. 4)"),
    ("positional_self", TOKEN,   MATRIX,   "(B, T, T)",    None,    "CSPAN's positional self-attention (eq. 8)"),
]
# fmt: on

ATTENTION_KEYS: dict[str, AttentionKind] = {row[0]: AttentionKind(*row) for row in _ROWS}


def attention_kind(key: str) -> AttentionKind | None:
    """The declared kind of attention ``key``; None for a key no model declares."""
    return ATTENTION_KEYS.get(key)
