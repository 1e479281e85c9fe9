"""How imdb1k's training reviews split into sentences with and without HTML line breaks read as breaks.

    python benchmarks/html_breaks_stats.py [SET]

Reads the transfer suite's training file of SET (default imdb1k) and prints, for `html_breaks` off and on, the
sentences per review (mean) and the longest sentence's length in whitespace-separated words (median, 90th
percentile), with the sentences split as docattn splits them (`documents_to_strings`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import transfer  # noqa: E402

from docattn.data.text import SEP_TOKEN, TextConfig, documents_to_strings  # noqa: E402


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "imdb1k"
    args = transfer.data_args(name)
    path = Path(args[args.index("--data") + 1])
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    print(f"{name}: {len(texts)} training documents, {sum('<br' in t.lower() for t in texts)} holding '<br'")
    for on in (False, True):
        strings = documents_to_strings(texts, None, TextConfig(html_breaks=on))
        sentences = [s.split(f" {SEP_TOKEN} ") for s in strings]
        counts = np.array([len(s) for s in sentences])
        longest = np.array([max(len(x.split()) for x in s) for s in sentences])
        print(
            f"html_breaks={on}: {counts.mean():.1f} sentences a document; longest sentence median "
            f"{np.median(longest):.0f} words, 90th percentile {np.percentile(longest, 90):.0f}"
        )


if __name__ == "__main__":
    main()
