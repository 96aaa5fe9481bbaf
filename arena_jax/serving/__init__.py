"""Serving a policy: an OpenAI-compatible server for any policy this project can load (`python -m launch.serve`).

load_served_policy(source, step=None)   an RL run directory (latest or a given step), a policy or exported/HF
                        directory, a `.gguf` file or `pretrained:<name>` → `ServedPolicy`
Engine                  concurrent requests batched into one sampler call (windowed batching), streaming,
                        stop strings, seeds, log-probs (engine.py)
PolicyServer            the aiohttp app on a thread of its own (tests, notebooks, benchmarks); `make_app`,
                        `serve_forever` (the command line's)
RequestError, Limits    the OpenAI-shaped refusals and what one request may ask for (protocol.py)
"""

from arena_jax.serving.engine import Engine, Job, SamplingSettings, row_bucket, token_bucket
from arena_jax.serving.policy import ServedPolicy, load_served_policy
from arena_jax.serving.protocol import Limits, RequestError
from arena_jax.serving.server import READY_LINE, PolicyServer, make_app, serve_forever
