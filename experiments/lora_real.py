"""A LoRA RL run on the real model: does training adapters alone move SmolLM2's reward on arithmetic?

    python -m experiments.lora_real [--root runs/lora_real] [--steps 8] [--rank 16] [--lr 2e-4] [--prompts 4]
        [--max-ops 2] [--new-tokens 128]

SmolLM2-135M-Instruct (`configs/real_smollm2.py`, the GGUF of `make real-model`) trained with RLVR (`reward.mode =
rlvr`: the verifier alone, no judge) on the arithmetic task, with `model.lora.rank` adapters on every projection
and the base frozen. The sizes are `experiments.real_arms`'s (4 prompts × G = 8, ≤ 128 new tokens, T = 0.7) with
more steps, and LoRA's usual learning rate (adapters start at B = 0 and need a larger step than full weights).

Measured: the training reward per step (`reward/verifier`, the mean verifier reward of the step's 32 samples) and
the held-out pass ratio (`real_arms.EVAL`: 40 problems × 4 samples at T = 0.7, the same evaluation key) before and
after, paired per problem with a 95% bootstrap interval over problems. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from arena_jax.train import read_metrics, train, validate_config
from experiments import real, real_arms


def lora_config(
  steps: int, rank: int, lr: float, *, prompts: int = 4, max_ops: int = 2, new_tokens: int = 128, seed: int = 0
):
  sizes = {"num_steps": steps, "lr": lr, "group_size": 8, "prompts_per_step": prompts, "max_new_tokens": new_tokens}
  c = real_arms.arm_config("rlvr", seed, sizes)
  c.tasks.arithmetic.max_ops = max_ops
  c.tasks.arithmetic.min_ops = min(c.tasks.arithmetic.min_ops, max_ops)
  # One operation on operands ≤ 10 makes ~100 distinct problems; on operands ≤ 20, ~400: 300 to train, 40 held out.
  if max_ops == 1:
    c.tasks.arithmetic.update(dict(max_operand=20, num_train=300, num_test=40))
  c.model.lora.rank = rank
  c.model.lora.alpha = 2.0 * rank
  c.checkpoint.every = steps
  return c


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--root", default="runs/lora_real")
  parser.add_argument("--steps", type=int, default=8)
  parser.add_argument("--rank", type=int, default=16)
  parser.add_argument("--lr", type=float, default=2e-4)
  parser.add_argument("--prompts", type=int, default=4, help="prompts per step (× G = 8 samples)")
  parser.add_argument("--max-ops", type=int, default=2, help="operations per problem (the preset's: 1-2)")
  parser.add_argument("--new-tokens", type=int, default=128)
  args = parser.parse_args(argv)

  c = lora_config(
    args.steps, args.rank, args.lr, prompts=args.prompts, max_ops=args.max_ops, new_tokens=args.new_tokens
  )
  validate_config(c)
  ec = real.eval_config(c, **real_arms.EVAL)
  workdir = os.path.join(args.root, f"rlvr_lora_r{args.rank}")
  if os.path.isdir(workdir):
    shutil.rmtree(workdir)
  print(f"== before: {ec.num_examples} held-out problems × {ec.num_samples} ==", flush=True)
  before = real_arms._evaluate(ec, start=c.init.hf_path, weight_dtype=c.model.weight_dtype)  # pylint: disable=protected-access
  t0 = time.time()
  train(c, workdir)
  train_min = (time.time() - t0) / 60
  after = real_arms._evaluate(ec, workdir=workdir)  # pylint: disable=protected-access
  rows = read_metrics(workdir)
  reward = [float(r["reward/verifier"]) for r in rows]
  diff = np.asarray([after["problems"]["pass_ratio"]]) - np.asarray([before["problems"]["pass_ratio"]])
  d, lo, hi = real_arms.cluster_bootstrap(diff)
  half = len(reward) // 2
  print(
    f"\nLoRA r={args.rank} (α={2 * args.rank}), lr {args.lr:g}, {args.steps} RLVR steps of {args.prompts} prompts × 8 "
    f"({args.max_ops} operation(s) at most) in {train_min:.1f} min"
  )
  print("step  reward/verifier  update/rel_rms")
  for r in rows:
    print(f"{r['step']:4d}  {r['reward/verifier']:15.3f}  {r['update/rel_rms']:14.2e}")
  print(
    f"held-out pass ratio: before {np.mean(before['problems']['pass_ratio']):.3f}, after "
    f"{np.mean(after['problems']['pass_ratio']):.3f}, Δ {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
  )
  figures = {
    "max_ops": args.max_ops,
    "prompts_per_step": args.prompts,
    "rank": args.rank,
    "lr": args.lr,
    "steps": args.steps,
    "train_min": round(train_min, 2),
    "reward_per_step": [round(x, 4) for x in reward],
    "reward_first_half": round(float(np.mean(reward[:half])), 4),
    "reward_second_half": round(float(np.mean(reward[half:])), 4),
    "heldout_pass_before": round(float(np.mean(before["problems"]["pass_ratio"])), 4),
    "heldout_pass_after": round(float(np.mean(after["problems"]["pass_ratio"])), 4),
    "heldout_delta": [round(d, 4), round(lo, 4), round(hi, 4)],
    "greedy_before": round(float(np.mean(before["problems"]["greedy"])), 4),
    "greedy_after": round(float(np.mean(after["problems"]["greedy"])), 4),
  }
  with open(os.path.join(workdir, "lora_result.json"), "w", encoding="utf-8") as f:
    json.dump(figures, f)
  print(json.dumps(figures))
  return figures


if __name__ == "__main__":
  main(sys.argv[1:])
