"""The worker process of `MathVerifyPool`: `python -m arena_jax.tasks.verify_worker module:function`.

Protocol: after warming up it writes the JSON line "ready"; then for each stdin line
`[index, gold, pred]` it writes `[index, equal, error]`. It exits at the end of its input.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

READY = "ready"


def _resolve(path: str):
  module, _, name = path.partition(":")
  return getattr(importlib.import_module(module), name)


def worker_main(fn_path: str):
  """The worker loop: one JSON request per stdin line, one JSON reply per stdout line."""
  # Keep the real stdout for the protocol; anything a library prints goes to stderr instead.
  proto = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  fn = _resolve(fn_path)
  fn("1/2", "0.5")  # warm up (imports, sympy caches) before the first timed item
  proto.write(json.dumps(READY) + "\n")
  for line in sys.stdin:
    index, gold, pred = json.loads(line)
    try:
      reply = [index, bool(fn(gold, pred)), None]
    except Exception as e:  # pylint: disable=broad-except  (a bad answer must not kill the worker)
      reply = [index, False, repr(e)[:200]]
    proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
  worker_main(sys.argv[1])
