"""Reasoning Arena-Live from a real pretrained instruct model on a laptop's CPU: SmolLM2-135M-Instruct, read from
the GGUF that `make real-model` installs (`arena_jax.pretrained`), on arithmetic it gets partly right.

    python -m launch.train --config=configs/real_smollm2.py --workdir=runs/real_smollm2
    python -m launch.train --config=configs/real_smollm2.py --config.init.hf_path=/models/other.gguf --workdir=...
    python -m launch.train --config=configs/real_smollm2.py:smoke --workdir=/tmp/smoke   # 2 tiny steps
    python -m launch.train --config=configs/real_smollm2.py:llm_judge --workdir=...   # judged by a real LLM
    python -m launch.train --config=configs/real_smollm2.py:smoke,llm_judge --workdir=/tmp/smoke
    python -m launch.eval --hf_path=pretrained:smollm2-135m-instruct --suite=configs/eval/real_smollm2.py

Everything that is not the testbed's (configs/arith_arena_live.py, read top to bottom there) is set here and
says why: the policy is the GGUF itself (its weights dequantised into float32 masters, its tokenizer and ChatML
template from its metadata), prompts go through the chat template with one worked example, and the task's
difficulty and sampling temperature are the ones at which the model is mixed before any RL
(docs/results/real_model.md: the baseline evaluation that chose them). Shapes fit two CPU cores: a step samples
4 prompts × G = 8 completions of ≤ 128 tokens and takes one CISPO update on them.
"""

import pathlib

from arena_jax import tasks
from arena_jax.errors import MissingFileError
from configs import arith_arena_live

# The student judge that `make real-judge` distils (configs/distill_judge.py) and `make real` judges with.
DISTILLED_JUDGE = pathlib.Path(__file__).resolve().parent.parent / "runs" / "real_judge" / "export"

# The difficulty at which SmolLM2-135M-Instruct is mixed before RL (docs/results/real_model.md): 1-2 additions
# and subtractions of operands up to 10, sampled at T = 0.7.
ARITHMETIC = dict(min_ops=1, max_ops=2, min_operand=1, max_operand=10, max_value=100, operators="+-")
TEMPERATURE = 0.7  # at T = 1 a 135 M model's samples ramble: pass ratio 0.07 where T = 0.7 gives 0.19
# One worked example in the system message: the model then writes one equation per line (what the process checker
# reads), though it rarely ends with the "Answer:" line it is asked for.
SYSTEM = (
  "You solve arithmetic problems step by step: one operation per line, written as an equation, then the final "
  "answer on its own line. Example:\nCompute 3 + 4 * 2.\n4 * 2 = 8\n3 + 8 = 11\nAnswer: 11"
)


def tasks_config():
  """The real run's tasks (and its evaluation's, configs/eval/real_smollm2.py): the testbed's arithmetic at the
  difficulty above, through the chat template with the worked example, the result read as the last number when
  no answer line is written (`tasks.answer_fallback`: the model writes "5 + 6 = 11" and stops)."""
  c = tasks.default_config()
  c.prompt_format = "chat"  # an instruct model reads its own ChatML template
  c.system_prompt = SYSTEM
  c.answer_fallback = "last_number"
  c.arithmetic.update(ARITHMETIC)
  c.arithmetic.prompt_template = "{question}"  # "Compute 7 + 4 - 2.": the question is the whole user message
  c.arithmetic.num_train = 1000  # of the ~1,100 distinct problems of this size
  c.arithmetic.num_test = 60
  c.eval_tasks = ("arithmetic",)
  return c


def get_config(arg=None):
  c = arith_arena_live.get_config()
  c.num_steps = 20  # a few minutes a step on 2 cores: the first real run is about the path, not a converged policy

  c.init.policy_dir = ""  # no SFT: the pretrained instruct model is the starting policy
  # The wheel's GGUF by name (`arena_jax.pretrained`): loading it is a one-line error naming `make real-model` when
  # it is not installed.
  c.init.hf_path = "pretrained:smollm2-135m-instruct"
  c.model.weight_dtype = "float32"  # float32 masters: the GGUF's dequantised values exactly; a 1e-6 step stays
  c.model.dtype = "float32"  # compute in float32 on the CPU (bfloat16 is emulated there: slower, not faster)

  c.tasks = tasks_config()

  c.rollout.prompts_per_step = 4  # B × G = 32 rows: a step's sampling and update take minutes, not tens of them
  c.rollout.group_size = 8  # G = 8 as in the paper
  c.rollout.max_new_tokens = 128  # the model's solutions of ≤ 2 operations take ~50 tokens; ramblings are cut
  c.rollout.temperature = TEMPERATURE  # CISPO's behaviour log-probs are scored at the same T (SPEC §2)
  c.rollout.compact_every = 32  # finished rows leave the batch every 32 steps: most answers end early

  # The update in 4 slices of 8 rows: all 32 rows at once hold ≈ 32 × 330 × 49,152 float32 logits per pass and
  # their gradients, and ran out of the machine's 24 GiB (the benchmark's 64 rows need 53 GB at once, 11 in 8
  # slices of 8). Slices of 8 rows also split over a mesh of up to 8 devices (one GPU host of 8, or 8 fake CPUs).
  c.optim.micro_batches = 4
  c.optim.lr = 1e-6  # a pretrained policy: far below the testbed's 1e-4 (a 0.4 M policy of its own SFT)
  c.optim.warmup_steps = 2
  c.checkpoint.every = 5
  c.judge.token_budget = 8192  # real traces are longer than the testbed's
  c.log.process_checks = 32  # every completion of a step read by the process checker

  args = [a for a in (arg or "").split(",") if a]
  unknown = sorted(set(args) - {"smoke", "llm_judge", "distilled_judge"})
  if unknown or {"llm_judge", "distilled_judge"} <= set(args):
    raise ValueError(
      f"bad config argument(s) {args}; use none, 'smoke', 'llm_judge' or 'distilled_judge', and 'smoke,' before either"
    )
  if "llm_judge" in args:
    llm_judge(c.judge)
  if "distilled_judge" in args:
    distilled_judge(c.judge)
  if "smoke" in args:  # every code path of the real run in seconds: 2 steps of 2 prompts × 4 short samples
    c.num_steps = 2
    c.rollout.prompts_per_step = 2
    c.rollout.group_size = 4
    c.rollout.max_new_tokens = 16
    c.optim.micro_batches = 1  # 8 short rows fit at once, and split over a mesh of up to 8 devices
    c.checkpoint.every = 2
    c.log.progress = False
    c.log.tensorboard = False
    c.log.plot = False
  return c


def llm_judge(judge):
  """A real LLM judge instead of the embedded process checker: SmolLM2-135M-Instruct itself behind `transformers
  serve`, started and stopped by the run (`judge.serve`), asked for one letter with both orders (`letter`: a 135 M
  model never writes the reasoned format's `[[A]]`; `transformers serve` ignores logprobs). A judge this small
  is near chance (docs/results/real.md): with `debias = both`, a judge that always answers A gives every pair ½,
  and the strengths it fits are then equal."""
  judge.serve = "transformers"
  judge.serve_model = "pretrained:smollm2-135m-instruct"
  judge.model = "smollm2-135m-instruct"
  judge.verdict_format = "letter"
  judge.debias = "both"
  judge.token_budget = 1024  # a 8,192-token judge: two traces and the problem fit many times over


def distilled_judge(judge):
  """The real LLM judge that can judge: SmolLM2-135M-Instruct distilled from the process checker (`make real-judge`,
  docs/results/distilled_judge.md), behind `transformers serve` in the `letter` format, both orders (what it was
  trained on). `llm_judge` is the same model off the shelf."""
  llm_judge(judge)
  judge.serve_model = str(DISTILLED_JUDGE)
  judge.model = "smollm2-135m-distilled-judge"


def check_distilled_judge(judge) -> None:
  """Raises MissingFileError naming `make real-judge` when `judge` serves the distilled student and it is not built."""
  if judge.get("serve") == "transformers" and judge.serve_model == str(DISTILLED_JUDGE):
    if not (DISTILLED_JUDGE / "config.json").exists():
      raise MissingFileError(
        f"judge.serve_model={DISTILLED_JUDGE}: the distilled judge is not built; run `make real-judge` first "
        "(or judge with SmolLM2 off the shelf: --config=configs/real_smollm2.py:llm_judge)"
      )
