#!/usr/bin/env bash
# The device check (benchmarks/device.py, docs/device.md): a 1B-class policy's sampler, RL update and long decode on
# one CUDA GPU, side by side with transformers' generate on the same chip; each part in its own time box, 8 minutes
# in all; a table, then one JSON line.
#   bash benchmarks/device.sh            on a CUDA machine (JAX_PLATFORMS=cuda)
#   bash benchmarks/device.sh --dry-run  tiny shapes, xla attention, on the CPU: the same code in about a minute
# The interpreter: $PYTHON; else, on the GPU, .venv-gpu's (`make device`) or else python3 (a CUDA image's own: jax
# with its CUDA plugin, torch, transformers); in the dry run .venv's or else python3.
# What the interpreter lacks of the wheelhouse (.device-wheels, `make device-wheels`: the wheels that a bare image
# lacks) is installed from it alone (pip --no-index --no-deps) into a temporary folder put on PYTHONPATH: nothing
# is downloaded. With $OUT set (the device machine's folder that comes back), device.json and device.log go there.
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
elif [ "$dry" = 1 ] && [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=python3
fi

wheels=${DEVICE_WHEELS:-.device-wheels}
if compgen -G "$wheels/*.whl" > /dev/null; then
  # The wheels whose distribution the interpreter does not have (a name is the wheel file's first field).
  mapfile -t missing < <("$py" - "$wheels"/*.whl <<'EOF'
import importlib.metadata
import os
import sys

for wheel in sys.argv[1:]:
  try:
    importlib.metadata.version(os.path.basename(wheel).split("-")[0])
  except importlib.metadata.PackageNotFoundError:
    print(wheel)
EOF
  )
  if [ "${#missing[@]}" -gt 0 ]; then
    site=$(mktemp -d "${TMPDIR:-/tmp}/arena-device-site.XXXXXX")
    echo "device.sh: installing ${missing[*]##*/} into $site (--no-index: nothing is downloaded)" >&2
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${missing[@]}"
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi

if [ "$dry" = 1 ]; then export JAX_PLATFORMS=cpu; else export JAX_PLATFORMS=cuda; fi
export PYTHONUNBUFFERED=1
# device.py time-boxes each part (470 s in all); this is the backstop, inside the device machine's 10 minutes.
status=0
if [ -n "${OUT:-}" ]; then
  timeout --kill-after=15 560 "$py" -m benchmarks.device "$@" --out "$OUT" 2>&1 | tee "$OUT/device.log" || status=$?
else
  timeout --kill-after=15 560 "$py" -m benchmarks.device "$@" || status=$?
fi
if [ -n "${site:-}" ]; then rm -rf "$site"; fi
exit "$status"
