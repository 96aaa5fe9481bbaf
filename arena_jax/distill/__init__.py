"""A judge that can judge on a laptop: a small pairwise judge distilled from any teacher (SPEC §10).

pairs.py    the pairs the router would judge: non-diverse groups from a run, a file or a policy; split by problem
teacher.py  the teacher's soft labels, both orders asked (any judge config), and the flaw kind of each pair
student.py  the student: the `letter` verdict token, the soft cross-entropy, both orders in one batch
measure.py  agreement with the teacher (95% intervals, per flaw kind), position bias, Brier score
run.py      `distill(config, out_dir)`: the whole path to an exported, servable HF directory (`launch.distill_judge`)
"""

from arena_jax.distill.measure import judge_measures
from arena_jax.distill.pairs import (
  Group,
  Pair,
  groups_from_jsonl,
  groups_from_policy,
  groups_from_transcripts,
  make_pairs,
  split_by_prompt,
)
from arena_jax.distill.run import DISTILL, TooFewPairsError, default_config, distill, export_student, serve_commands
from arena_jax.distill.student import (
  PLAIN_CHAT_TEMPLATE,
  Student,
  StudentError,
  load_student,
  pair_rows,
  predict,
  soft_cross_entropy,
  verdict_messages,
)
from arena_jax.distill.teacher import FLAW_KINDS, Label, TeacherError, flaw_kind, label_pairs

__all__ = [
  "DISTILL",
  "FLAW_KINDS",
  "Group",
  "Label",
  "PLAIN_CHAT_TEMPLATE",
  "Pair",
  "Student",
  "StudentError",
  "TeacherError",
  "TooFewPairsError",
  "default_config",
  "distill",
  "export_student",
  "flaw_kind",
  "groups_from_jsonl",
  "groups_from_policy",
  "groups_from_transcripts",
  "judge_measures",
  "label_pairs",
  "load_student",
  "make_pairs",
  "pair_rows",
  "predict",
  "serve_commands",
  "soft_cross_entropy",
  "split_by_prompt",
  "verdict_messages",
]
