"""Distils a small pairwise judge from a teacher judge, and exports it to serve (`arena_jax.distill`, SPEC §10).

    python -m launch.distill_judge --out_dir=runs/real_judge        # configs/distill_judge.py: the real model
    python -m launch.distill_judge --config.source=runs/arena_live --out_dir=runs/judge   # a run's judged groups
    python -m launch.distill_judge --config.source=groups.jsonl --config.student.lora_rank=16 --out_dir=runs/judge_lora
    python -m launch.distill_judge --config.source=... --config.teacher.urls=http://judge:8000 \\
        --config.teacher.model=Qwen/Qwen3-32B --out_dir=runs/judge_q       # any OpenAI-compatible teacher

The pairs are the ones the router would send to the judge (non-diverse groups), labelled by the teacher
(`--config.teacher.*`, any judge config: the embedded process checker by default) in both orders; the student
(`--config.student.source`, SmolLM2-135M-Instruct by default) learns the `letter` verdict against the soft labels.
Out: <out_dir>/export (a HF directory), report.json and report.md (the student before and after on held-out
pairs), labels.jsonl (the teacher's labels: a rerun with the same settings reads them), and the commands that
serve the student. The last line printed is the report's summary as one JSON object.
"""

import json

from absl import flags
from ml_collections import config_flags

from arena_jax import cli
from arena_jax import distill

_CONFIG = config_flags.DEFINE_config_file(
  "config",
  "configs/distill_judge.py",
  "Distillation config (`distill.default_config()` and its fields).",
  lock_config=True,
)
_OUT = flags.DEFINE_string("out_dir", None, "Where the labels, the report and the exported student go.", required=True)


def main(argv):
  del argv
  report = distill.distill(_CONFIG.value, _OUT.value, log=lambda m: print(m, flush=True))
  print(f"\nreport: {_OUT.value}/report.md\nserve it:\n  {report['serve']['transformers_serve']}")
  print(f"  {report['serve']['launch_serve']}")
  keys = ("agreement_vs_teacher", "agreement_lo95", "agreement_hi95", "position_bias", "brier")
  print(
    json.dumps(
      {
        "before": {k: report["before"][k] for k in keys},
        "after": {k: report["after"][k] for k in keys},
        "train_s": report["training"]["train_s"],
        "pairs": report["pairs"],
        "export": report["export"],
      }
    )
  )


if __name__ == "__main__":
  cli.run(main)
