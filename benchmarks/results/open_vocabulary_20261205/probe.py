"""Score one trained run's weights on its test data with four readings of the words outside its vocabulary.

- closed: each reads as <unk>, as docattn does;
- open: each gets <unk>'s own (word2vec) part beside its packaged-table vector, scaled as training scaled them;
- open_table_zero: <unk>'s own part beside zeros (what the table vector itself adds to "open");
- train_rare_only: the table vector only for words the training file holds under min_count, what a vocabulary
  fixed at training time could give.

    python probe.py RUN_DIR TEST_DATA [SAMPLE or 0] [TRAINING_FILE]   # one JSON line
"""

import json
import sys

import numpy as np
import torch

from docattn.classifier import DocumentClassifier
from docattn.data.embeddings import PACKAGED_DIMS, _packaged_table
from docattn.data.readers import read_corpus
from docattn.data.text import SPECIAL_TOKENS, UNK_TOKEN, Vocabulary, distinct_words, documents_to_strings
from docattn.training.trainer import VECTOR_SPREAD

run, test_path = sys.argv[1:3]  # [sample size or 0] [training file]
clf = DocumentClassifier.load(run)
try:
    test = read_corpus(test_path, split="test")
except Exception:  # a single file is all test documents
    test = read_corpus(test_path)
if len(sys.argv) > 3 and int(sys.argv[3]):  # a seeded sample of the test documents, for a quick look
    from docattn.data.corpus import Corpus

    pick = np.random.default_rng(0).choice(len(test), int(sys.argv[3]), replace=False)
    test = Corpus([test.texts[i] for i in pick], [test.labels[i] for i in pick], source=test.source)
labels = test.labels


def table_rows(words):
    tokenizer, table = _packaged_table("wordllama")
    pieces = tokenizer.encode_batch(words, add_special_tokens=False)
    out = np.zeros((len(words), table.shape[1]), dtype=np.float32)
    for i, p in enumerate(pieces):
        if p.ids:
            out[i] = table[p.ids].mean(0)
    return out


vocab = clf.vocab
strings = documents_to_strings(test.texts, test.sentences, vocab.text_config)
known = set(vocab.tokens)
new = [w for w in distinct_words(strings, vocab.text_config) if w not in known]
raw_known = table_rows(vocab.tokens[len(SPECIAL_TOKENS) :])
scale = VECTOR_SPREAD / float(raw_known.std())
emb = clf.model.embedding
W = emb.weight.detach()
own = W.shape[1] - PACKAGED_DIMS["wordllama"]
unk = W[vocab.index[UNK_TOKEN]]


def score(v):
    clf.vocab = v
    pred = clf.predict(test)
    return float(np.mean(np.array(pred, dtype=object) == np.array(labels, dtype=object)))


acc_closed = score(vocab)
new_table = torch.from_numpy(table_rows(new) * scale)
rows = torch.cat([unk[:own].expand(len(new), own), new_table], 1)
with torch.no_grad():
    big = torch.nn.Embedding(len(vocab) + len(new), W.shape[1], padding_idx=0)
    big.weight.copy_(torch.cat([W, rows], 0))
clf.model.embedding = big
open_vocab = Vocabulary(vocab.tokens + new, vocab.text_config, vocab.min_count, None)
acc_open = score(open_vocab)
# table part zero for new words: only <unk>'s own part (how much the table vector itself carries)
with torch.no_grad():
    big.weight[len(vocab) :, own:] = 0
acc_zero = score(open_vocab)
# only the new words that training text holds (below min_count there): what a vocabulary fixed at training
# time could give them
train_words = (
    set(
        distinct_words(documents_to_strings(read_corpus(sys.argv[4]).texts, None, vocab.text_config), vocab.text_config)
    )
    if len(sys.argv) > 4
    else set()
)
with torch.no_grad():
    keep = torch.tensor([w in train_words for w in new])
    big.weight[len(vocab) :, own:] = torch.where(keep[:, None], new_table, torch.zeros_like(new_table))
    big.weight[len(vocab) :, :own] = unk[:own]
acc_train_rare = score(open_vocab) if train_words else None
print(
    json.dumps(
        {
            "run": run,
            "new_words": len(new),
            "vocab": len(vocab),
            "closed": acc_closed,
            "open": acc_open,
            "open_table_zero": acc_zero,
            "train_rare_only": acc_train_rare,
            "train_rare_words": int(keep.sum()),
            "scale": scale,
            "unk_table_norm": float(unk[own:].norm()),
            "mean_table_norm_known": float(W[3:, own:].norm(dim=1).mean()),
            "mean_table_norm_new": float(new_table.norm(dim=1).mean()),
        }
    )
)
