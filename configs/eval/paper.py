"""The paper's Table 1 benchmarks (SPEC §9), on files you provide in the project's row formats.

    python -m launch.eval --workdir=runs/real --suite=configs/eval/paper.py:/data/eval
    python -m launch.eval --hf_path=/ckpt/Qwen3-8B --suite=configs/eval/paper.py:/data/eval   # before RL

The argument is the directory holding aime24.jsonl, aime25.jsonl, aime26.jsonl, beyond_aime.jsonl (math rows:
question, answer), gpqa_diamond.jsonl (choice rows: question, options, answer) and lcb_v6.jsonl (code rows:
question, tests[, fn_name]); docs/evaluation.md gives the formats. Nothing is downloaded: convert each benchmark
from its own release. Math and choice are scored by mean pass ratio@16, code by pass@1 and pass@5 of 16.

The budget of 32,768 new tokens is the paper's reasoning length. The sampler today stops well short of it
on one chip's memory (a dense per-row cache; docs/tpu.md says what fits where): lower
`--config.max_new_tokens` (or an entry's) to what your slice holds.
"""

import ml_collections

MATH = ("aime24", "aime25", "aime26", "beyond_aime")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  suite = {name: dict(task="jsonl", path=f"{name}.jsonl", num_samples=16) for name in MATH}
  suite["gpqa_diamond"] = dict(task="choice", path="gpqa_diamond.jsonl", num_samples=16)
  suite["lcb_v6"] = dict(task="code", path="lcb_v6.jsonl", num_samples=16, ks=(1, 5))
  return ml_collections.ConfigDict(
    dict(
      data_root=arg or "",
      suite=suite,
      benchmarks=MATH + ("gpqa_diamond", "lcb_v6"),
      num_examples=0,  # every problem of each file
      max_new_tokens=32768,
      greedy=False,
    )
  )
