"""A distilled judge measured against its teacher: the student before and after distillation, side by side, on
held-out pairs of the real policy's own non-diverse groups (`arena_jax.distill`, SPEC §10).

    python -m benchmarks.distilled_judge                     # configs/distill_judge.py: SmolLM2 taught by the checker
    python -m benchmarks.distilled_judge --config-arg smoke       # every step in minutes (no file written)
X

Teacher: the embedded process checker (the real run's default judge), asked in both orders. Student:
SmolLM2-135M-Instruct, the `letter` verdict token, trained on 2 CPU cores. On the test pairs (problems never trained
or validated on):

  agreement_vs_teacher  the share of the teacher's decisive pairs where the student (debiased over both orders)
                        sides with the teacher, with its Wilson 95% interval; per flaw kind the checker reports
  position_bias         |P(the trace shown first wins) − 1/2| over both orders
  brier                 mean squared gap between the student's and the teacher's soft outcomes
  pairs_per_s           pairs judged per second (both orders), student and teacher, and their ratio
  train_s               the student's training time; the pairs' counts

It writes docs/results/distilled_judge.json (the last line) and docs/results/distilled_judge.md unless --smoke.
The last line is JSON.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import configs  # noqa: E402
from arena_jax import distill  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "results"


def figures(report: dict) -> dict:
  def side(m):
    return {
      "agreement_vs_teacher": m["agreement_vs_teacher"],
      "agreement_lo95": m["agreement_lo95"],
      "agreement_hi95": m["agreement_hi95"],
      "decisive_pairs": m["decisive_pairs"],
      "per_kind": m["per_kind"],
      "first_order_agreement": m["first_order_agreement"],
      "single_order_agreement": m["single_order_agreement"],
      "position_bias": m["position_bias"],
      "brier": m["brier"],
    }

  teacher, student = report["teacher"]["pairs_per_s"], report["student"]["pairs_per_s"]
  return {
    "benchmark": "distilled_judge",
    "teacher": f"{report['teacher']['backend']}:{report['teacher']['model']}",
    "student": report["student"]["source"],
    "lora_rank": report["student"]["lora_rank"],
    "before": side(report["before"]),
    "after": side(report["after"]),
    "student_pairs_per_s": student,
    "teacher_pairs_per_s": teacher,
    "student_vs_teacher_speed": student / teacher if teacher else None,
    "train_s": report["training"]["train_s"],
    "train_steps": report["training"]["steps"],
    "best_step": report["training"]["best_step"],
    "stopped": report["training"]["stopped"],
    "pairs": report["pairs"],
    "train_pairs_decisive": report["train_pairs_decisive"],
    "groups": report["groups"],
  }


def markdown(f: dict, command: str, seconds: float) -> str:
  b, a = f["before"], f["after"]
  rows = [
    (
      "agreement with the teacher (decisive test pairs)",
      b,
      a,
      lambda m: (
        f"{m['agreement_vs_teacher']:.3f} "
        f"[{m['agreement_lo95']:.3f}, {m['agreement_hi95']:.3f}] of {m['decisive_pairs']}"
      ),
    ),
    ("one order only (first trace shown as A)", b, a, lambda m: f"{m['first_order_agreement']:.3f}"),
    ("each order on its own (both orders' verdicts)", b, a, lambda m: f"{m['single_order_agreement']:.3f}"),
    ("position bias", b, a, lambda m: f"{m['position_bias']:.3f}"),
    ("Brier score of the soft outcomes", b, a, lambda m: f"{m['brier']:.4f}"),
  ]
  lines = [
    "# A distilled judge: SmolLM2-135M-Instruct taught by the process checker",
    "",
    f"Made by `{command}` ({seconds / 60:.0f} min on this machine's 2 CPU cores); the JSON is "
    "docs/results/distilled_judge.json. The pairs are the real policy's own traces on the real run's task "
    f"({f['groups']} problems × G = 8), the pairs of non-diverse groups only, split by problem: {f['pairs']}. "
    f"Teacher `{f['teacher']}`, both orders; student `{f['student']}`"
    f"{' with LoRA r=' + str(f['lora_rank']) if f['lora_rank'] else ', every weight trained'}: "
    f"{f['train_steps']} steps in {f['train_s'] / 60:.1f} min (best at step {f['best_step']}, stopped by "
    f"{f['stopped']}).",
    "",
    "| test pairs | before | after |",
    "|---|---|---|",
  ]
  lines += [f"| {name} | {fmt(x)} | {fmt(y)} |" for name, x, y, fmt in rows]
  for kind in sorted(set(b["per_kind"]) | set(a["per_kind"])):

    def cell(m):
      return f"{m['agreement']:.3f} [{m['lo95']:.3f}, {m['hi95']:.3f}] of {m['pairs']}" if m else "–"

    lines.append(
      f"| agreement, flaw kind `{kind}` | {cell(b['per_kind'].get(kind))} | {cell(a['per_kind'].get(kind))} |"
    )
  lines += [
    "",
    f"Speed (pairs per second, both orders, 2 cores): student {f['student_pairs_per_s']:.2f}, teacher "
    f"{f['teacher_pairs_per_s']:.1f} (the embedded checker is a rule, not a model: the ratio says what a student costs "
    "against it, not against an LLM teacher).",
    "",
  ]
  return "\n".join(lines)


def main(argv=None) -> dict:
  args = common.parse_flags(__doc__, argv, {"--config-arg": "", "--out-dir": "runs/real_judge", "--smoke": False})
  smoke = args.smoke or args.config_arg == "smoke"
  config = configs.get_config(
    "configs/distill_judge.py" + (":smoke" if smoke else (f":{args.config_arg}" if args.config_arg else ""))
  )
  start = time.perf_counter()
  report = distill.distill(config, args.out_dir, log=lambda m: print(m, flush=True))
  seconds = time.perf_counter() - start
  f = figures(report)
  common.print_table(
    ["test pairs", "before", "after"],
    [
      ["agreement_vs_teacher", f["before"]["agreement_vs_teacher"], f["after"]["agreement_vs_teacher"]],
      ["position_bias", f["before"]["position_bias"], f["after"]["position_bias"]],
      ["brier", f["before"]["brier"], f["after"]["brier"]],
      ["decisive pairs", f["before"]["decisive_pairs"], f["after"]["decisive_pairs"]],
    ],
  )
  print(
    f"student {f['student_pairs_per_s']:.3g} pairs/s, teacher {f['teacher_pairs_per_s']:.3g} pairs/s; "
    f"train {f['train_s']:.0f} s"
  )
  if not smoke:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "distilled_judge.json").write_text(json.dumps(f) + "\n", encoding="utf-8")
    command = "python -m benchmarks.distilled_judge" + (f" --config-arg {args.config_arg}" if args.config_arg else "")
    (RESULTS / "distilled_judge.md").write_text(markdown(f, command, seconds), encoding="utf-8")
  common.emit_json(f)
  return f


if __name__ == "__main__":
  main(sys.argv[1:])
