"""Shared by the benchmark scripts: machine description and JSON results with their command."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def machine() -> dict:
    import torch

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        info["load_average_at_start"] = os.getloadavg()
    except OSError:
        pass
    return info


def write_result(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    doc = {"benchmark": name, "command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "machine": machine(), **payload}
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc, indent=1, default=str))
    return out
