"""Shared by the benchmark scripts: machine description and JSON results with their command."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def machine() -> dict:
    from docattn.benchmark import machine_info

    return machine_info()


def write_result(name: str, payload: dict, quiet: bool = False) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    doc = {
        "benchmark": name,
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        **payload,
    }
    out.write_text(json.dumps(doc, indent=1, default=str))
    if not quiet:
        print(json.dumps(doc, indent=1, default=str))
    return out
