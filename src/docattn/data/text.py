"""Text processing and vocabulary: sentence splitting, word tokenization, PAD/UNK ids.

Sentences are split by blingfire (C++, offline); words are tokenized, counted and mapped to ids
by a Hugging Face ``tokenizers`` WordLevel model (Rust, batched), so no Python code loops over
words. A document travels through the tokenizer as one string whose sentences are joined by
the control character ``SEP`` (``\\x1e``), which the tokenizer keeps as its own token (id 2).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from docattn.data.files import write_json
from docattn.errors import CheckpointError, ConfigError, checked_fields

PAD, UNK, SEP = 0, 1, 2
PAD_TOKEN, UNK_TOKEN, SEP_TOKEN = "<pad>", "<unk>", "\x1e"
SPECIAL_TOKENS = [PAD_TOKEN, UNK_TOKEN, SEP_TOKEN]

# a word is letters/digits with inner apostrophes ("don't"); any other non-space char stands alone
WORD_PATTERN = r"\w+(?:'\w+)*|[^\w\s]"
# the same, with each Han character a token of its own (as BERT's tokenizer does): Chinese and
# Japanese put no spaces between words, so a clause of Chinese would be one token, seen once, then <unk>
HAN_WORD_PATTERN = r"\p{Han}|(?:(?!\p{Han})\w)+(?:'(?:(?!\p{Han})\w)+)*|[^\w\s]"
# HCAN's rule: lowercase, keep alphanumerics and . ! ? (which end sentences), drop the rest
HCAN_DROP_PATTERN = "[^\\p{L}\\p{N}.!?\\s\x1e]"


@dataclass(frozen=True)
class TextConfig:
    """How raw text becomes tokens; part of every cache key and saved with every model."""

    lowercase: bool = True  # one id for "Good" and "good"
    hcan_clean: bool = False  # HCAN preprocessing: keep alphanumerics and . ! ? only
    split_sentences: bool = True  # False: each document is a single "sentence"
    unicode_normalize: bool = True  # NFKC, so full-width and composed forms share ids
    # a blank line ends a sentence (blingfire joins paragraphs: on 20 Newsgroups a post's header
    # block ran into its first paragraph, and the median document's longest "sentence" was 95 words)
    paragraphs: bool = True
    # text with no capital letter at all (a lowercased corpus) is split as if each word after . ! ?
    # were capitalised: blingfire only ends a sentence before a capital, so "it was bad . i left ."
    # stayed one sentence, and HAN read each lowercased document as one long sentence
    caseless_sentences: bool = True
    han_characters: bool = True  # each Han character a token (HAN_WORD_PATTERN)
    # an HTML line break (<br>, <br/>, <br />) is a line break, so two of them end a paragraph: IMDB's
    # reviews break their paragraphs so, and read as text each became the four words "< br / >" inside
    # a sentence that ran on into the next paragraph
    html_breaks: bool = True

    def __post_init__(self):
        checked_fields(self)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> TextConfig:
        # settings saved before a field existed keep the behaviour they were saved with
        return cls(**{**LEGACY_TEXT, **data})


# what a saved TextConfig without these fields meant (runs and caches written before they existed)
LEGACY_TEXT = {"paragraphs": False, "caseless_sentences": False, "han_characters": False, "html_breaks": False}
PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")  # a blank (or whitespace-only) line
HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _clean_control(text: str) -> str:
    return text.replace(SEP_TOKEN, " ").replace("\x00", " ")


def _sentences(text: str, paragraphs: bool, caseless: bool = False) -> list[str]:
    """blingfire's sentences (it handles abbreviations such as Dr., U.S., e.g.), per paragraph."""
    chunks = PARAGRAPH_BREAK.split(text) if paragraphs else [text]
    return [s for chunk in chunks if chunk.strip() for s in _blingfire(chunk, caseless) if s.strip()]


# a word right after sentence-final punctuation (and any closing quote or bracket) and a space
_AFTER_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+[\"'(\[]*(\w)")


def _blingfire(chunk: str, caseless: bool) -> list[str]:
    """blingfire's sentences of ``chunk``; with ``caseless``, a chunk without capitals is split on a
    copy whose words after . ! ? are capitalised (same length), and cut from the original text."""
    import blingfire

    if not (caseless and chunk == chunk.lower() and chunk != chunk.upper()):
        return blingfire.text_to_sentences(chunk).split("\n")
    chars = list(chunk)
    for m in _AFTER_SENTENCE_END.finditer(chunk):
        upper = m.group(1).upper()
        if len(upper) == 1:  # "ß".upper() is "SS": leave such a word as it is
            chars[m.start(1)] = upper
    offsets = _sentence_offsets("".join(chars))
    return [chunk[a:b].replace("\n", " ") for a, b in offsets]  # a line break inside a sentence, as blingfire gives it


def _sentence_offsets(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of blingfire's sentences of ``text``, as its
    ``text_to_sentences_and_offsets`` gives them; that wrapper maps the library's UTF-8 byte offsets to
    characters in a Python loop over every byte, which took a third of ``predict``'s time on lowercase text."""
    import ctypes

    import blingfire
    import numpy as np

    raw = text.encode("utf-8")
    if not raw:
        return []
    size = 2 * len(raw)  # the buffers blingfire's own wrapper gives the library
    out = ctypes.create_string_buffer(size)
    starts, ends = (ctypes.c_int32 * size)(), (ctypes.c_int32 * size)()
    found = blingfire.blingfire.TextToSentencesWithOffsets(
        ctypes.c_char_p(raw),
        ctypes.c_int(len(raw)),
        ctypes.byref(out),
        ctypes.byref(starts),
        ctypes.byref(ends),
        ctypes.c_int(size),
    )
    if found == -1 or found > size:
        return []
    n = min(out.value.count(b"\n") + 1, size)
    byte_starts = np.frombuffer(starts, dtype=np.int32, count=n)
    byte_ends = np.frombuffer(ends, dtype=np.int32, count=n)
    if n and (min(byte_starts.min(), byte_ends.min()) < 0 or max(byte_starts.max(), byte_ends.max()) >= len(raw)):
        return [tuple(o) for o in blingfire.text_to_sentences_and_offsets(text)[1]]  # never seen: its own answer
    # characters begun up to each byte (a UTF-8 character begins at every byte that is not 10xxxxxx);
    # a sentence starts at its first byte's character and ends after its last byte's (end offsets are inclusive)
    begun = np.cumsum((np.frombuffer(raw, dtype=np.uint8) & 0xC0) != 0x80)
    return list(zip((begun[byte_starts] - 1).tolist(), begun[byte_ends].tolist()))


def split_sentences(text: str, paragraphs: bool = True, caseless: bool = True) -> list[str]:
    """Sentences of ``text``; with ``paragraphs`` a blank line also ends one; with ``caseless`` text
    without capitals is split at . ! ? as cased text would be."""
    return _sentences(_clean_control(text), paragraphs, caseless)


def _clean(text: str, config: TextConfig, line_break: str) -> str:
    text = _clean_control(text)
    return HTML_BREAK.sub(line_break, text) if config.html_breaks and "<" in text else text


def join_document(text: str, sentences: Sequence[str] | None, config: TextConfig) -> str:
    """One tokenizer input per document: sentences joined by SEP (pre-split input respected)."""
    if sentences is not None:
        parts = [_clean(s, config, " ") for s in sentences]
        return f" {SEP_TOKEN} ".join(parts) if config.split_sentences else " ".join(parts)
    if not config.split_sentences:
        return _clean(text, config, " ")
    text = _clean(text, config, "\n")
    if config.paragraphs:
        return f" {SEP_TOKEN} ".join(_sentences(text, paragraphs=True, caseless=config.caseless_sentences))
    import blingfire

    if not text.strip():
        return ""
    return blingfire.text_to_sentences(text).replace("\n", f" {SEP_TOKEN} ")  # as before ``paragraphs``


def documents_to_strings(
    texts: Sequence[str], sentences: Sequence[Sequence[str] | None] | None, config: TextConfig
) -> list[str]:
    """The tokenizer inputs for a list of documents."""
    if sentences is None:
        return [join_document(t, None, config) for t in texts]
    return [join_document(t, s, config) for t, s in zip(texts, sentences)]


def _base_tokenizer(config: TextConfig, vocab: dict[str, int] | None):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(
        models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN) if vocab else models.WordLevel(unk_token=UNK_TOKEN)
    )
    steps = []
    if config.unicode_normalize:
        steps.append(normalizers.NFKC())
    if config.lowercase or config.hcan_clean:
        steps.append(normalizers.Lowercase())
    if config.hcan_clean:
        steps.append(normalizers.Replace(Regex(HCAN_DROP_PATTERN), " "))
    if steps:
        tok.normalizer = normalizers.Sequence(steps)
    pattern = HAN_WORD_PATTERN if config.han_characters else WORD_PATTERN
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="removed", invert=True)
    return tok


class Vocabulary:
    """Words seen at least ``min_count`` times in the training split, ids 0=PAD, 1=UNK, 2=SEP.

    Built from training data only; saved as plain JSON (the token list in id order plus the
    text settings), so a run directory rebuilds the exact tokenizer without pickles.
    """

    def __init__(self, tokens: list[str], text_config: TextConfig, min_count: int = 5, max_size: int | None = None):
        if tokens[:3] != SPECIAL_TOKENS:
            raise CheckpointError("vocabulary must start with the special tokens <pad>, <unk>, \\x1e")
        self.tokens = tokens
        self.text_config = text_config
        self.min_count = min_count
        self.max_size = max_size
        self.index = {t: i for i, t in enumerate(tokens)}
        self._tokenizer = _base_tokenizer(text_config, self.index)

    @classmethod
    def build(
        cls,
        documents: Iterable[str],
        text_config: TextConfig = TextConfig(),
        min_count: int = 5,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Count words of tokenizer-ready ``documents`` (see ``documents_to_strings``) in Rust."""
        if min_count < 1:
            raise ConfigError(f"min_count must be >= 1, got {min_count}")
        size = (max_size + len(SPECIAL_TOKENS)) if max_size else None  # the special tokens take places too
        words = _trained_words(documents, text_config, min_count, size, SPECIAL_TOKENS)
        return cls(SPECIAL_TOKENS + words, text_config, min_count, max_size)

    @classmethod
    def from_counts(
        cls,
        words: Sequence[str],
        counts: Sequence[int],
        text_config: TextConfig = TextConfig(),
        min_count: int = 5,
        max_size: int | None = None,
    ) -> Vocabulary:
        """The vocabulary ``build`` gives from these word counts (counted in chunks, ``distinct_words``): the
        trainer's order, most frequent first and ties by word; the SEP character, which the tokenizer counts
        as a word, takes a place among ``max_size`` as it does there."""
        if min_count < 1:
            raise ConfigError(f"min_count must be >= 1, got {min_count}")
        import numpy as np

        n = np.asarray(counts)
        kept = sorted(np.flatnonzero(n >= min_count).tolist(), key=lambda i: (-int(n[i]), words[i]))
        if max_size:
            kept = kept[:max_size]
        tokens = SPECIAL_TOKENS + [words[i] for i in kept if words[i] not in SPECIAL_TOKENS]
        return cls(tokens, text_config, min_count, max_size)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode_strings(self, strings: Sequence[str]) -> list[list[int]]:
        """Token ids of each tokenizer-ready string (batched, multi-threaded in Rust)."""
        fast = getattr(self._tokenizer, "encode_batch_fast", None) or self._tokenizer.encode_batch
        return [e.ids for e in fast(list(strings), add_special_tokens=False)]

    def tokenize(self, string: str) -> list[str]:
        """Surface tokens of one tokenizer-ready string (for explanations; SEP included)."""
        normalizer = self._tokenizer.normalizer
        text = normalizer.normalize_str(string) if normalizer is not None else string
        return [token for token, _ in self._tokenizer.pre_tokenizer.pre_tokenize_str(text)]

    def to_json(self) -> dict:
        return {
            "tokens": self.tokens,
            "text_config": self.text_config.to_json(),
            "min_count": self.min_count,
            "max_size": self.max_size,
        }

    @classmethod
    def from_json(cls, data: dict) -> Vocabulary:
        try:
            tokens = data["tokens"]
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise TypeError("'tokens' is not a list of strings")
            if tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
                raise TypeError(f"'tokens' does not start with {SPECIAL_TOKENS}")
            if len(set(tokens)) < len(tokens):  # two ids for one word: which would its text get?
                twice = next(t for t, n in Counter(tokens).items() if n > 1)
                raise TypeError(f"'tokens' holds {twice!r} more than once")
            return cls(tokens, TextConfig.from_json(data["text_config"]), data["min_count"], data["max_size"])
        except (KeyError, TypeError) as err:
            raise CheckpointError(f"vocabulary JSON is missing or has a malformed field: {err}") from None

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CheckpointError(f"{path}: vocabulary file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{path}: vocabulary is not valid JSON ({err})") from None
        except RecursionError:  # json recurses per nesting level: a hostile file exhausts the stack
            raise CheckpointError(
                f"{path}: vocabulary JSON is nested too deeply to be a vocabulary; "
                "restore the run's vocab.json or retrain"
            ) from None
        try:
            return cls.from_json(data)
        except (CheckpointError, ConfigError) as err:  # ConfigError: a text setting of the wrong type
            raise CheckpointError(f"{path}: {err}") from None


def distinct_words(strings: Sequence[str], text_config: TextConfig) -> list[str]:
    """Every word of tokenizer-ready ``strings`` once, special tokens left out (the trainer, in Rust)."""
    return _trained_words(strings, text_config, 1, None, [])


def _trained_words(
    documents: Iterable[str], config: TextConfig, min_count: int, size: int | None, special_tokens: list[str]
) -> list[str]:
    """The words the tokenizer's WordLevel trainer keeps, in its order, the special tokens left out."""
    from tokenizers import trainers

    tok = _base_tokenizer(config, None)
    trainer = trainers.WordLevelTrainer(
        vocab_size=size or 2**31 - 1, min_frequency=min_count, special_tokens=special_tokens, show_progress=False
    )
    tok.train_from_iterator(_batched(documents), trainer)
    by_id = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    return [t for t, _ in by_id if t not in SPECIAL_TOKENS]


def _batched(items: Iterable[str], size: int = 1000) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
