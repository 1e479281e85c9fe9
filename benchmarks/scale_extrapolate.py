"""The scale figures extrapolated to 3.6M (Amazon reviews) and 36M documents from the measured slopes.

    python benchmarks/scale_extrapolate.py [--sizes 3600000,36000000]

Reads the one-worker preparation runs (``results/scale/imdb_25k_250k.json``, ``imdb_1m.json``), the streamed
``predict`` runs (``results/predict_stream/``) and the batch sampler runs (``results/sampler_scale``), fits each
figure as ``a + b * documents`` by least squares over the measured sizes, and prints a Markdown table of the
fit at each size beside the largest measurement. IMDB reviews average about 285 tokens; other corpora scale by
their tokens per document. Writes benchmarks/results/scale/extrapolation.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, write_result  # noqa: E402


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through ``points``; a flat line through one point."""
    if len(points) == 1:
        return points[0][1], 0.0
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def _preparation() -> dict[str, list[tuple[float, float]]]:
    runs = []
    for name in ("imdb_25k_250k.json", "imdb_1m.json"):
        runs += json.loads((RESULTS / "scale" / name).read_text())["runs"]
    one = [r for r in runs if r["workers"] == 1]
    return {
        "preparation CPU seconds": [(r["documents"], r["cpu_seconds"]) for r in one],
        "preparation peak RSS (MB)": [(r["documents"], r["peak_rss_mb"]) for r in one],
        "cache on disk (MB)": [(r["documents"], r["cache_mb"]) for r in one],
        "cached reload (s)": [(r["documents"], r["reload_seconds"]) for r in one],
    }


def _predict() -> dict[str, list[tuple[float, float]]]:
    peaks = []
    for path in sorted((RESULTS / "predict_stream").glob("*.json")):
        for row in json.loads(path.read_text())["results"]:
            if "streamed" in row:
                peaks.append((row["documents"], row["streamed"]["peak_rss_mib"]))
    return {"streamed predict peak RSS (MiB)": peaks}


def _sampler() -> dict[str, list[tuple[float, float]]]:
    rows = json.loads((RESULTS / "sampler_scale" / "result.json").read_text())["rows"]
    grown = [(r["documents"], r["peak_mib_after_sampler"] - r["peak_mib_after_load"]) for r in rows]
    return {"training batch sampler memory (MiB)": grown}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="3600000,36000000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    figures = {**_preparation(), **_predict(), **_sampler()}
    rows = []
    head = "| figure | measured at | measured | " + " | ".join(f"{s / 1e6:g}M (fit)" for s in sizes) + " |"
    lines = [head, "|---" * (3 + len(sizes)) + "|"]
    for name, points in figures.items():
        a, b = _fit(points)
        largest = max(points)
        fitted = [a + b * s for s in sizes]
        rows.append({"figure": name, "points": points, "intercept": a, "slope": b, "fitted": dict(zip(sizes, fitted))})
        cells = " | ".join(f"{v:,.0f}" for v in fitted)
        lines.append(f"| {name} | {largest[0]:,} | {largest[1]:,.1f} | {cells} |")
    table = "\n".join(lines)
    print(table)
    out = write_result(
        "scale/extrapolation", {"sizes": sizes, "figures": rows, "table": table}, replace=True
    )  # derived from the scale runs, so redrawn in place
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
