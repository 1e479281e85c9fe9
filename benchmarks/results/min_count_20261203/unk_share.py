"""Vocabulary size and the share of <unk> tokens in the training and test splits at several min_count values.

python benchmarks/results/min_count_20261203/unk_share.py TRAIN TEST 1,2,5,10
"""

import sys

import numpy as np

from docattn.data.prepare import DataSettings, prepare_paths
from docattn.data.text import UNK

train, test = sys.argv[1], sys.argv[2]
for min_count in (int(x) for x in sys.argv[3].split(",")):
    data = prepare_paths(train, None, test, DataSettings(min_count=min_count, valid_fraction=0.1))
    shares = {name: round(float((np.asarray(data.splits[name].tokens) == UNK).mean()), 4) for name in ("train", "test")}
    print({"min_count": min_count, "vocabulary": len(data.vocab), "unk_share": shares}, flush=True)
