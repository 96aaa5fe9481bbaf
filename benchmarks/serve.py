"""`launch.serve`'s server against `transformers serve`, on the same machine, weights, prompts and budget.

    python -m benchmarks.serve [--requests 16] [--new-tokens 128] [--concurrency 1,8] [--continuous-batching]
    python -m benchmarks.serve --smoke        # the same code at tiny sizes

Workload: SmolLM2-135M-Instruct (the GGUF of `make real-model`; transformers serves the same weights, converted once
by its own GGUF loader, as `judge.serve = "transformers"` does), float32 on the CPU. `--requests` chat requests
(16 different questions, the GGUF's own chat template on both sides) of `max_tokens = --new-tokens`, greedy
(temperature 0, so both servers decode the same tokens and stop at the same place), through the official `openai`
client from `c` threads at once, each sending its next request as soon as its last is answered (a closed loop),
for each concurrency c of `--concurrency`.

Each server is measured on its own (the other one idle), ours first: both warm up with the whole workload at each
concurrency once (our server compiles its programs there; transformers loads its model), then the measured pass.

  tokens_per_s      completion tokens (the servers' `usage`) ÷ the pass's wall-clock time
  p50_latency_s     the median time from a request's send to its whole answer
  speedup_vs_transformers_serve    ours ÷ transformers' tokens_per_s at the highest concurrency (the project's
                    target: ≥ 2 at concurrency 8); `speedup_c<c>` at each

`--continuous-batching` also measures `transformers serve --continuous-batching` (its paged-attention batching).
The last line is JSON.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import openai  # noqa: E402

from arena_jax import judges, serving  # noqa: E402

QUESTIONS = [
  "Explain why the sky is blue.",
  "Write a short poem about the sea.",
  "What is the capital of France, and what is it known for?",
  "Give three tips for learning a new language.",
  "How does a bicycle stay upright?",
  "Describe the water cycle in simple terms.",
  "What are prime numbers? Give examples.",
  "Tell me a story about a brave mouse.",
  "Why do we have seasons on Earth?",
  "How do plants make their food?",
  "What is the difference between weather and climate?",
  "Explain how a rainbow forms.",
  "Give a recipe for a simple salad.",
  "What does a computer's memory do?",
  "Why is exercise good for health?",
  "Describe a day in the life of a lighthouse keeper.",
]


def run_pass(url: str, model: str, requests: int, concurrency: int, new_tokens: int) -> dict:
  client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=3600)

  def one(i):
    t0 = time.perf_counter()
    r = client.chat.completions.create(
      model=model,
      messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
      max_tokens=new_tokens,
      temperature=0,
    )
    return time.perf_counter() - t0, r.usage.completion_tokens

  start = time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
    results = list(pool.map(one, range(requests)))
  wall = time.perf_counter() - start
  tokens = sum(n for _, n in results)
  return {
    "tokens_per_s": tokens / wall,
    "p50_latency_s": statistics.median(t for t, _ in results),
    "completion_tokens": tokens,
    "wall_s": wall,
  }


def measure(label: str, url: str, model: str, args) -> dict:
  out = {}
  for c in args.concurrency:
    run_pass(url, model, args.requests, c, args.new_tokens)  # warm-up: compiles, caches, lazy loads
    out[c] = run_pass(url, model, args.requests, c, args.new_tokens)
    print(f"# {label} at concurrency {c}: {json.dumps(out[c])}", file=sys.stderr, flush=True)
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--requests", type=int, default=16, help="requests per pass")
  parser.add_argument("--new-tokens", type=int, default=128, help="max_tokens of each request")
  parser.add_argument("--concurrency", default="1,8", help="client threads of each pass, comma-separated")
  parser.add_argument(
    "--continuous-batching", action="store_true", help="also transformers serve --continuous-batching"
  )
  parser.add_argument("--smoke", action="store_true", help="4 requests of 16 tokens at concurrency 1 and 4 (the test)")
  args = parser.parse_args(argv)
  if args.smoke:
    args.requests, args.new_tokens, args.concurrency = 4, 16, "1,4"
  args.concurrency = [int(c) for c in str(args.concurrency).split(",")]
  source = "pretrained:smollm2-135m-instruct"
  name = "smollm2"

  sides = {}
  policy = serving.load_served_policy(source, name=name)
  with serving.PolicyServer(policy, max_rows=max(args.concurrency)) as server:
    sides["ours"] = measure("ours", server.url, name, args)
    stats = server.engine.stats
  variants = [("transformers", ())] + (
    [("transformers_cb", ("--continuous-batching",))] if args.continuous_batching else []
  )
  failed = {}
  for label, extra in variants:
    with judges.TransformersJudgeServer(source, name=name, extra_args=extra) as hf:
      try:
        sides[label] = measure(label, hf.url, name, args)
      except openai.APIError as e:
        if label == "transformers":
          raise
        failed[label] = f"{type(e).__name__}: {e}"  # the optional variant's failure is a figure too

  rows = []
  for label, by_c in sides.items():
    for c, m in by_c.items():
      rows.append(
        [
          label,
          c,
          f"{m['tokens_per_s']:.1f}",
          f"{m['p50_latency_s']:.2f}",
          m["completion_tokens"],
          f"{m['wall_s']:.1f}",
        ]
      )
  common.print_table(["server", "concurrency", "tokens/s", "p50 latency s", "tokens", "wall s"], rows)
  top = max(args.concurrency)
  figures = {
    "benchmark": "serve",
    "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised, float32, CPU)",
    "requests": args.requests,
    "new_tokens": args.new_tokens,
    "batches": stats["batches"],
    "batch_sizes": stats["batch_sizes"],
  }
  for label, by_c in sides.items():
    for c, m in by_c.items():
      figures[f"{label}_tokens_per_s_c{c}"] = round(m["tokens_per_s"], 2)
      figures[f"{label}_p50_latency_s_c{c}"] = round(m["p50_latency_s"], 3)
  for c in args.concurrency:
    figures[f"speedup_c{c}"] = round(sides["ours"][c]["tokens_per_s"] / sides["transformers"][c]["tokens_per_s"], 2)
    if "transformers_cb" in sides:
      cb = sides["transformers_cb"][c]["tokens_per_s"]
      figures[f"speedup_vs_continuous_batching_c{c}"] = round(sides["ours"][c]["tokens_per_s"] / cb, 2)
  figures["speedup_vs_transformers_serve"] = figures[f"speedup_c{top}"]
  if failed:
    figures["failed"] = failed
  common.emit_json(figures)


if __name__ == "__main__":
  main()
