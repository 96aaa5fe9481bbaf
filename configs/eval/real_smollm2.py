"""The real model's baseline evaluation (docs/results/real_model.md): every sample suite, on the tasks of
configs/real_smollm2.py (its arithmetic difficulty, chat template with a worked example, last-number answers).

    python -m launch.eval --hf_path=/models/SmolLM2-135M-Instruct.Q4_1.gguf --suite=configs/eval/real_smollm2.py

arithmetic (the real run's task and difficulty), arithmetic_shift (arithmetic no training problem could be),
countdown (another task), sample_math, sample_choice and sample_code (configs/eval/samples.py's files): greedy
accuracy and mean pass ratio@8 with 95% intervals, pass@1 and pass@8, mean response length. The samples are drawn
at the real run's temperature (0.7).
"""

import ml_collections

from configs import real_smollm2
from configs.eval import samples


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg
  shipped = samples.get_config()
  return ml_collections.ConfigDict(
    dict(
      data_root=shipped.data_root,
      suite=dict(
        sample_math=dict(task="jsonl", path="math_sample.jsonl"),
        sample_choice=dict(task="choice", path="choice_sample.jsonl"),
        sample_code=dict(task="code", path="code_sample.jsonl", ks=(1, 8)),
      ),
      benchmarks=("arithmetic", "arithmetic_shift", "countdown", "sample_math", "sample_choice", "sample_code"),
      tasks=real_smollm2.tasks_config(),
      num_examples=40,
      num_samples=8,
      ks=(1, 8),
      temperature=real_smollm2.TEMPERATURE,
      max_new_tokens=256,
      samples_per_benchmark=4,
    )
  )
