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


_CLAIMED: dict[str, Path] = {}  # each name's file in this process, so a study's later writes go to its own


def result_path(name: str, suffix: str = ".json", replace: bool = False) -> Path:
    """results/NAME.json, or NAME.2.json, NAME.3.json ... where another run's file holds the name.

    A rerun under a name already used once replaced that measurement; it now lands beside it and says where.
    """
    if name in _CLAIMED:
        return _CLAIMED[name]
    out, n = RESULTS / f"{name}{suffix}", 2
    while out.exists() and not replace:
        out, n = RESULTS / f"{name}.{n}{suffix}", n + 1
    if n > 2:
        print(f"results/{name}{suffix} holds another run; writing {out.relative_to(RESULTS)}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    _CLAIMED[name] = out
    return out


def write_result(name: str, payload: dict, quiet: bool = False, replace: bool = False) -> Path:
    from docattn.data.files import atomic_write  # a stopped study leaves its last complete file

    out = result_path(name, replace=replace)
    doc = {
        "benchmark": name,
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        **payload,
    }
    atomic_write(out, json.dumps(doc, indent=1, default=str))
    if not quiet:
        print(json.dumps(doc, indent=1, default=str))
    return out
