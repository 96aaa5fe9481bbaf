"""Serves a policy over the OpenAI API: `/v1/models`, `/v1/chat/completions`, `/v1/completions` (streaming, n,
temperature, top_p, max_tokens, stop, seed, logprobs, usage), concurrent requests batched into one sampler call.

    python -m launch.serve --policy=pretrained:smollm2-135m-instruct --port=8000
    python -m launch.serve --policy=runs/demo_arena_live               # an RL run: its latest checkpoint
    python -m launch.serve --policy=runs/demo_arena_live --step=40     # … or a given one
    python -m launch.serve --policy=exported/ --name=my-policy         # `launch.export`'s output, any HF directory
    python -m launch.serve --policy=model.gguf

Then any OpenAI client: `openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="none")`, or this project's
judge (`--config.judge.url=http://127.0.0.1:8000 --config.judge.model=<name>`): the policy as a judge.
"""

import asyncio

from absl import flags

from arena_jax import cli
from arena_jax import serving
from arena_jax.errors import ConfigError

_POLICY = flags.DEFINE_string(
  "policy",
  None,
  "An RL run directory, a policy / exported / HF directory, a .gguf file or pretrained:<name>.",
  required=True,
)
_STEP = flags.DEFINE_integer("step", None, "A run directory's checkpoint step (default: its latest).")
_NAME = flags.DEFINE_string("name", "", "The served model name (default: the directory's or file's name).")
_HOST = flags.DEFINE_string("host", "127.0.0.1", "Interface to bind.")
_PORT = flags.DEFINE_integer("port", 8000, "TCP port (0 = any free port).")
_CONTEXT = flags.DEFINE_integer("context", 0, "Most prompt + completion tokens (0: the checkpoint's).")
_MAX_ROWS = flags.DEFINE_integer("max_rows", 32, "Most samples decoded in one batched call.")
_MAX_N = flags.DEFINE_integer("max_n", 16, "Most completions one request may ask for (n × prompts).")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens_default", 512, "max_tokens of a request that names none.")
_WINDOW_MS = flags.DEFINE_float("window_ms", 50.0, "How long a request waits for companions before its call.")
_EVERY = flags.DEFINE_integer("stream_every", 16, "Decode steps between two reads of the tokens (streaming, stop).")


def main(argv):
  del argv
  for flag in (_MAX_ROWS, _MAX_N, _MAX_TOKENS, _EVERY):
    if flag.value < 1:
      raise ConfigError(f"--{flag.name}={flag.value}: must be ≥ 1")
  if _WINDOW_MS.value < 0 or _CONTEXT.value < 0:
    raise ConfigError("--window_ms and --context must be ≥ 0")
  policy = serving.load_served_policy(_POLICY.value, step=_STEP.value, name=_NAME.value, context=_CONTEXT.value)
  engine = serving.Engine(policy, max_rows=_MAX_ROWS.value, window_s=_WINDOW_MS.value / 1000, stream_every=_EVERY.value)
  limits = serving.Limits(max_n=min(_MAX_N.value, _MAX_ROWS.value), max_tokens_default=_MAX_TOKENS.value)
  asyncio.run(serving.serve_forever(engine, host=_HOST.value, port=_PORT.value, limits=limits))


if __name__ == "__main__":
  cli.run(main)
