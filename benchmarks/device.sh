#!/usr/bin/env bash
# The device benchmark (benchmarks/device.py): the sampler and the RL train step of a 1B-class policy on one CUDA
# GPU, with cudnn attention; tokens/s and the fraction of the chip's peak; within 10 minutes (`make device`).
#   bash benchmarks/device.sh            on a CUDA machine (JAX_PLATFORMS=cuda; .venv-gpu's python when there)
#   bash benchmarks/device.sh --dry-run  tiny shapes, xla attention, on the CPU: the same code path in seconds
# $PYTHON picks the interpreter. The last line printed is one JSON object with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
dry=0
for arg in "$@"; do
  if [ "$arg" = "--dry-run" ]; then dry=1; fi
done
if [ -n "${PYTHON:-}" ]; then
  py=$PYTHON
elif [ "$dry" = 0 ] && [ -x .venv-gpu/bin/python ]; then
  py=.venv-gpu/bin/python
elif [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=python3
fi
if [ "$dry" = 1 ]; then export JAX_PLATFORMS=cpu; else export JAX_PLATFORMS=cuda; fi
export PYTHONUNBUFFERED=1
# The script time-boxes its own parts (--budget-s); this is the backstop of the 10 minutes.
exec timeout --kill-after=15 600 "$py" -m benchmarks.device "$@"
