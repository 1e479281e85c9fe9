#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the default test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# two test workers on two cores: one torch thread each, so they never oversubscribe the machine
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python -m pytest -q -n 2 "$@"
