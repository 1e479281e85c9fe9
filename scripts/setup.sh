#!/usr/bin/env bash
# Create .venv (if needed) and install docattn with its test tools. torch: the CPU 2.13.0 build is
# installed first where no torch is present, so the package's range (torch>=2.2) pulls nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
python -m pip install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
python -c "import docattn, torch, lightning, gensim, entmax, tokenizers, blingfire" 
