#!/usr/bin/env bash
# Create .venv (if needed) and install docattn with its test tools. torch: the CPU 2.13.0 build is
# installed first where no torch is present, so the package's range (torch>=2.2) pulls nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch 2.13.0 comes from this machine's disk as a CPU build. Elsewhere the default index may serve a CUDA build
# of several GB: TORCH_INDEX_URL chooses (e.g. https://download.pytorch.org/whl/cpu for the CPU one).
if ! python -c "import torch" 2>/dev/null; then
  echo "installing torch 2.13.0 from ${TORCH_INDEX_URL:-the default index: a CPU build where this machine has it on disk, else maybe CUDA}"
  python -m pip install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} 2>&1 | grep -v "^WARNING: Location" || true
fi
python -m pip install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
python -c "import docattn, torch, lightning, gensim, entmax, tokenizers, blingfire" 
# the browser test drives Debian's chromium (Playwright's own browser download is never used); root with apt only
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium not installed: the browser test will skip"
fi
