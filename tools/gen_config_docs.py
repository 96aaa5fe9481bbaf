"""Generates docs/configuration.md from the configs, and the judge-cost tables of docs/judges.md.

    python -m tools.gen_config_docs           # rewrite both files
    python -m tools.gen_config_docs --check   # exit 1 if either is stale or a field lacks a description

Defaults are read from the configs themselves: `arena_jax.train.config.base_config()` (which embeds
`tasks.default_config()` and `judges.default_config()` with its `server`), every RL config file in
configs/, `configs/sft.py` and `arena_jax.eval.watch.default_config()`. Meanings and valid ranges come
from the tables below; a valid range is what the config's `validate_config` enforces up front, and a
range marked † is not checked up front. A field that a config has and the tables lack, or one the
tables describe that no config has, is an error: the generated page cannot drift from the code.
tests/docs/test_config_docs.py regenerates both files and compares them with the committed ones.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import importlib.util
import os
import pathlib
import sys
from typing import Any, Callable, Iterator, Sequence

import ml_collections

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIG_DOC = ROOT / "docs" / "configuration.md"
JUDGES_DOC = ROOT / "docs" / "judges.md"
NOT_CHECKED = " †"


@dataclasses.dataclass(frozen=True)
class Field:
  path: str      # relative to the section's config
  valid: str     # valid range; `{name}` placeholders are filled from `choices()`
  meaning: str


def F(path: str, valid: str, meaning: str) -> Field:  # pylint: disable=invalid-name
  return Field(path, valid, meaning)


# ───────────────────────────────────── the RL run config ─────────────────────────────────────

RUN = {
    "": [
        F("seed", "int ≥ 0", "Seed of sampling (folded with the step and the generation batch), of the tournament "
          "schedulers (folded with step and group) and of `init.random_model`'s initialisation."),
        F("data_seed", "int ≥ 0", "Order of the training prompts (`tasks.PromptIterator`); separate from `seed` so "
          "that runs differing only in `seed` see the same prompts."),
        F("num_steps", "int ≥ 1", "Optimizer steps (RL steps) of the run."),
        F("resume", "bool", "Continue from the last checkpoint in `--workdir`. A fresh run (False) refuses a workdir "
          "that already holds checkpoints."),
    ],
    "init": [
        F("init.policy_dir", "path or \"\"", "Start from a policy directory written by SFT (`train_sft`) or "
          "`save_policy`. Exactly one of `policy_dir`, `hf_path`, `random_model` must be set; `configs/arith_*.py` "
          "set `policy_dir = \"runs/sft_demo\"` (`make demo`'s SFT policy)."),
        F("init.hf_path", "path or \"\"", "Start from a local Hugging Face checkpoint directory (Llama / Mistral / "
          "Qwen3 `ForCausalLM`: config.json, safetensors, tokenizer.json or tokenizer.model)."),
        F("init.random_model", "\"\" or a name in `models.MODEL_CONFIGS`", "Tests and smoke runs: a randomly "
          "initialised named model (e.g. \"tiny\") with a SentencePiece tokenizer trained on the task corpus."),
        F("init.tokenizer_vocab", "int ≥ 16", "Vocabulary size (an upper bound) of the tokenizer trained for "
          "`init.random_model`."),
    ],
    "rollout": [
        F("rollout.prompts_per_step", "int ≥ 1", "B: prompts, hence groups, per optimizer step."),
        F("rollout.group_size", "int ≥ 2", "G: samples per prompt. A group needs ≥ 2 samples to have a reward "
          "variance (SPEC §1)."),
        F("rollout.max_new_tokens", "int ≥ 1", "Completion budget in tokens; a completion cut here is `truncated`."),
        F("rollout.temperature", "> 0", "Sampling temperature; the behaviour log-probs CISPO needs are recorded "
          "at it."),
        F("rollout.top_k", "int ≥ 0", "Top-k filtering of the sampler; 0 = off."),
        F("rollout.top_p", "(0, 1]", "Nucleus (top-p) filtering of the sampler; 1 = off."),
    ],
    "reward": [
        F("reward.mode", "one of {modes}", "The reward mode (SPEC §7; docs/reward_modes.md)."),
        F("reward.topology", "\"\" or one of {topologies}", "Tournament topology replacing the mode's own (arena: "
          "round_robin, arena_live: live, arenarl: seeded_single_elimination). Pairwise modes only."),
        F("reward.dynamic_sampling", "bool; `rlvr` only", "DAPO refill: non-diverse groups are discarded and more "
          "generation batches are sampled until the step has `prompts_per_step` diverse groups."),
        F("reward.max_gen_batches", "int ≥ 1", "Dynamic sampling: generation batches per step before the run stops "
          "with an error saying so."),
        F("reward.bt_l2", "> 0", "λ, the L2 penalty of the Bradley–Terry fit (SPEC §6)."),
        F("reward.bt_solver", "one of {solvers}", "Bradley–Terry solver (`arena.SOLVERS`, `arena.register_solver`)."),
        F("reward.async_lag", "0 or 1", "1: the judge works on step t's groups while step t + 1 samples, and update t "
          "waits for the judge only if it is slower (`time/judge_wait`); 0: sample, judge, update in turn."),
        F("reward.std_ddof", "int in [0, group_size)", "Delta degrees of freedom of the group standard deviation in "
          "Â (0 = population std, SPEC §1)."),
    ],
    "loss": [
        F("loss.eps_low", "[0, 1]", "IS-weight floor 1 − eps_low (SPEC §2); 1.0 = no lower bound."),
        F("loss.eps_high", "≥ 0", "IS-weight cap 1 + eps_high (SPEC §2); 4.0 = cap 5 as in ScaleRL, verl's example "
          "uses 0.2."),
        F("loss.aggregation", "one of {aggregations}", "`token_mean`: sum over every token of the batch / number of "
          "tokens (the formula); `seq_mean_token_mean`: mean over sequences of each sequence's token mean."),
        F("loss.mask_truncated", "bool", "Completions cut at `max_new_tokens` carry no loss."),
        F("loss.kl_coef", "≥ 0", "β of a KL penalty to the initial policy (k3 estimator); 0 = none, as in the paper. "
          "> 0 keeps a frozen copy of the initial parameters."),
    ],
    "optim": [
        F("optim.lr", "> 0", "Learning rate of AdamW, constant after the warm-up (SPEC §9)."),
        F("optim.warmup_steps", "int ≥ 0", "Linear warm-up from 0 over this many steps; 0 = none."),
        F("optim.b1", "[0, 1)", "Adam β₁."),
        F("optim.b2", "[0, 1)", "Adam β₂."),
        F("optim.eps", "> 0", "Adam ε."),
        F("optim.weight_decay", "≥ 0", "AdamW decoupled weight decay."),
        F("optim.max_grad_norm", "≥ 0", "Global-norm gradient clipping; 0 = off."),
        F("optim.micro_batches", "int ≥ 1", "Exact gradient accumulation: each update is computed in this many "
          "micro-batches (losses as (sum, denominator)). prompts_per_step × group_size must split into "
          "minibatches × micro_batches equal parts."),
        F("optim.minibatches", "int ≥ 1", "Optimizer updates per RL step, each on its own slice of the rollout (the "
          "later ones are off-policy: CISPO's IS weights)."),
    ],
    "checkpoint": [
        F("checkpoint.every", "int ≥ 1", "Orbax checkpoint every this many steps and at the last step; the judge "
          "pipeline drains first, so a checkpoint holds no pending work."),
        F("checkpoint.keep", "int ≥ 1", "Checkpoints kept (the oldest are deleted)."),
    ],
    "log": [
        F("log.progress", "bool", "A tqdm progress bar (accuracy, loss, routed groups, judge calls)."),
        F("log.tensorboard", "bool", "TensorBoard event files in `<workdir>/tensorboard` (`metrics.jsonl` is always "
          "written)."),
        F("log.plot", "bool", "`<workdir>/curves.png` at the end of the run (`train.plot_curves`)."),
    ],
    # Sections that configs/real_*.py add (listed under "Fields of the real-model configs" while
    # base_config() does not have them).
    "mesh": [
        F("mesh.data", "int ≥ 1, or −1 = fill", "Size of the `data` mesh axis: the batch is split, parameters are "
          "replicated. data × fsdp × tensor = number of devices (all hosts); at most one axis is −1."),
        F("mesh.fsdp", "int ≥ 1, or −1 = fill", "Size of the `fsdp` axis: the batch and the parameters, gradients "
          "and optimizer state are split (ZeRO-3)."),
        F("mesh.tensor", "int ≥ 1, or −1 = fill", "Size of the `tensor` axis: heads, KV heads, MLP and vocabulary "
          "are split (Megatron); keep it within a host."),
        F("mesh.sample", "() or (data, fsdp, tensor)", "The sampler's mesh over the same devices; () = the train "
          "mesh (docs/tpu.md)."),
        F("mesh.distributed", "bool", "Call `jax.distributed.initialize()` first (multi-host TPU slices, GPU "
          "clusters)."),
        F("mesh.rules", "tuple of (logical axis, mesh axes)", "Overrides of `models.LOGICAL_AXIS_RULES`, e.g. "
          "((\"embed\", None),) to replicate embed dimensions."),
    ],
    "aot": [
        F("aot.model", "a name in `models.MODEL_CONFIGS`" + NOT_CHECKED, "The named model config that "
          "`launch/aot_compile.py` compiles (the checkpoint's architecture)."),
        F("aot.topology", "a key of the file's `SLICES`", "The TPU topology compiled for (the config argument)."),
        F("aot.prompt_len", "int ≥ 1" + NOT_CHECKED, "The prompt bucket P of the compiled sample and train steps."),
    ],
}

# ───────────────────────────────────── tasks (config.tasks) ─────────────────────────────────────

_TEMPLATE = ("format string with one `{{question}}`", "How a problem becomes the prompt.")
TASKS = {
    "": [
        F("data_dir", "non-empty path", "Where the TFDS datasets (array_record) are built on first use and reused. "
          "The environment variable `ARENA_JAX_DATA_DIR` replaces the default when the config is created."),
        F("seed", "int ≥ 0", "Seed of the synthetic problem generators (a different seed is a different dataset)."),
        F("train_task", "one of {task_names}", "The task trained on: RL prompts and verifier; the task SFT is "
          "evaluated on."),
        F("eval_tasks", "entries among {task_names}", "The tasks the run is meant to be evaluated on (checked; "
          "listing jsonl requires a jsonl file). The evaluator reads its own `benchmarks`."),
        F("corpus_tasks", "entries among {task_names}", "Tasks whose prompts and demonstrations make up the tokenizer "
          "corpus (`tasks.corpus`)."),
    ],
    "arithmetic: multi-step arithmetic, the in-distribution task": [
        F("arithmetic.min_ops", "int ≥ 1, ≤ max_ops", "Fewest operations per problem."),
        F("arithmetic.max_ops", "int ≥ 1", "Most operations per problem."),
        F("arithmetic.min_operand", "int ≥ 0, ≤ max_operand", "Smallest operand."),
        F("arithmetic.max_operand", "int ≥ 0", "Largest operand."),
        F("arithmetic.max_value", "int ≥ max(1, max_operand)", "Every intermediate result lies in [0, max_value]."),
        F("arithmetic.operators", "distinct characters of \"+-*/\"", "Operators used; division only when exact."),
        F("arithmetic.num_train", "int ≥ 0", "Problems in the train split."),
        F("arithmetic.num_test", "int ≥ 0", "Problems in the test split."),
        F("arithmetic.test_fraction", "(0, 1)", "Share of the problem space hashed into the test split: train and test "
          "never share a problem."),
        F("arithmetic.prompt_template", *_TEMPLATE),
    ],
    "countdown: reach a target with given numbers, the out-of-distribution task": [
        F("countdown.min_numbers", "int ≥ 2, ≤ max_numbers", "Fewest numbers given."),
        F("countdown.max_numbers", "int ≥ 2", "Most numbers given."),
        F("countdown.min_number", "int ≥ 1, ≤ max_number", "Smallest given number."),
        F("countdown.max_number", "int ≥ 1", "Largest given number."),
        F("countdown.min_target", "int ≥ 1, ≤ max_target", "Smallest target."),
        F("countdown.max_target", "int ≥ 1", "Largest target."),
        F("countdown.max_value", "int ≥ max_target", "Every intermediate result lies in [1, max_value]."),
        F("countdown.operators", "distinct characters of \"+-*/\"", "Operators allowed; intermediate results stay "
          "positive integers."),
        F("countdown.num_train", "int ≥ 0", "Problems in the train split."),
        F("countdown.num_test", "int ≥ 0", "Problems in the test split."),
        F("countdown.test_fraction", "(0, 1)", "Share of the problem space hashed into the test split."),
        F("countdown.prompt_template", *_TEMPLATE),
    ],
    "jsonl: your own math data": [
        F("jsonl.train_path", "existing file or \"\"", "Local JSONL file of the train split; \"\" = not used. "
          "Required when `train_task` is jsonl."),
        F("jsonl.test_path", "existing file or \"\"", "Local JSONL file of the test split; \"\" = not used."),
        F("jsonl.question_field", "non-empty string", "Field holding the question."),
        F("jsonl.answer_field", "non-empty string", "Field holding the reference answer (compared by math-verify)."),
        F("jsonl.solution_field", "string", "Field holding a worked solution (for SFT); \"\" = none."),
        F("jsonl.dedup", "bool" + NOT_CHECKED, "Drop train rows whose question is also in the test split."),
        F("jsonl.prompt_template", *_TEMPLATE),
        F("jsonl.num_workers", "int ≥ 1", "math-verify worker processes (`tasks.MathVerifyPool`)."),
        F("jsonl.timeout_s", "finite > 0", "Per-answer verification limit; an answer that exceeds it scores 0."),
        F("jsonl.max_items_per_worker", "int ≥ 1", "Answers a worker verifies before it is recycled (sympy caches "
          "grow)."),
    ],
    "sft: the demonstrations of the SFT warm start": [
        F("sft.tasks", "entries among arithmetic, countdown", "Tasks whose demonstrations make up the SFT data "
          "(countdown stays out: it is the out-of-distribution task)."),
        F("sft.seed", "int ≥ 0", "Seed of each demonstration's kind and variant."),
        F("sft.fractions.clean", "[0, 1]; the six sum to 1", "Share of canonical solutions."),
        F("sft.fractions.slip", "[0, 1]", "One arithmetic slip that propagates: the final answer is wrong."),
        F("sft.fractions.compensating", "[0, 1]", "One wrong intermediate result \"fixed\" by the next step: the "
          "answer is right, the process is not."),
        F("sft.fractions.skipped", "[0, 1]", "One operation folded into the step that uses it."),
        F("sft.fractions.bare_answer", "[0, 1]", "Only `Answer: N`."),
        F("sft.fractions.redundant", "[0, 1]", "The canonical solution plus one valid step that contributes nothing."),
    ],
}

# ───────────────────────────────────── the judge (config.judge) ─────────────────────────────────────

JUDGE = {
    "": [
        F("backend", "one of {backends}", "Judge backend (`judges.BACKENDS`). The trainer uses pairwise for the "
          "tournament modes and the rubric judge (pointwise, or jury when set) for rlaif / adaptive_pointwise."),
        F("urls", "tuple of http(s):// URLs", "OpenAI-compatible base URLs (`http://h:8000`, `…/v1` or "
          "`…/v1/chat/completions`); load is spread over them. () = the embedded judge server on a free loopback "
          "port, started and stopped by the run."),
        F("model", "non-empty string", "The model id sent with every request (vLLM / SGLang: the served model name)."),
        F("api_key_env", "string", "Name of the environment variable holding the bearer token; \"\" or unset = no "
          "`Authorization` header."),
        F("seed", "int ≥ 0", "Presentation orders (`debias=random`) and request seeds derive from it and the "
          "query's key."),
        F("margin", "[0, 0.5]", "Soft margin m: a win scores 1/2 + m, a tie 1/2, a loss 1/2 − m (SPEC §4)."),
        F("debias", "one of {debias_modes}", "Order debiasing (SPEC §4): none, a seeded random order per query, or "
          "both orders judged and averaged (twice the calls)."),
        F("temperature", "[0, 2]", "Judge sampling temperature, sent with every request."),
        F("max_tokens", "int ≥ 1", "Answer budget; an answer cut at it counts as unparseable (and is retried)."),
        F("token_budget", "int ≥ 16", "Approximate tokens kept per trace; a longer trace keeps its head and tail "
          "with a marker saying how much was cut."),
        F("tail_fraction", "[0, 0.9]", "Share of the budget kept from the end of a truncated trace."),
        F("template_dir", "existing directory or \"\"", "Directory whose `<name>.txt` files replace the built-in "
          "templates (docs/judges.md)."),
        F("rubric_levels", "≥ 2 distinct numbers", "Pointwise rubric levels, normalised to [0, 1] (SPEC §7)."),
    ],
    "client: how requests are sent": [
        F("client.concurrency", "int ≥ 1", "In-flight requests per endpoint."),
        F("client.timeout_s", "> 0", "Limit of one attempt, the whole request."),
        F("client.connect_timeout_s", "> 0", "Limit of connecting."),
        F("client.max_retries", "int ≥ 0", "Transport retries: connection errors, timeouts, HTTP 408 / 409 / 429 and "
          "5xx, a 200 that is not a completion."),
        F("client.max_parse_retries", "int ≥ 0", "Extra requests (with the next seed) when an answer cannot be "
          "parsed or was cut at max_tokens."),
        F("client.backoff_initial_s", "≥ 0", "Exponential backoff: initial · 2^k, capped, minus up to `jitter` of it."),
        F("client.backoff_max_s", "≥ backoff_initial_s", "The backoff cap."),
        F("client.jitter", "[0, 1]", "Share of a backoff that is randomly taken off."),
        F("client.max_retry_after_s", "≥ 0", "A server's Retry-After is honoured up to this; a longer one is a final "
          "failure."),
        F("client.failures_before_cooldown", "int ≥ 1", "Consecutive failures that take an endpoint out of rotation "
          "(while another one is healthy) ..."),
        F("client.cooldown_s", "≥ 0", "... for this long."),
        F("client.startup_check_s", "≥ 0", "Every configured URL must answer `GET /v1/models` within this before "
          "training starts; 0 = skip the check."),
        F("client.cache_dir", "string", "On-disk answer cache keyed by the request; \"\" = off."),
    ],
    "jury: the Reasoning Jury (SPEC §8)": [
        F("jury.jurors", "tuple of http(s):// URLs", "One base URL per juror; () = `urls` (or the embedded server) "
          "for each of `num_jurors` jurors."),
        F("jury.juror_models", "() or one model per juror", "Model id per juror; () = `model`."),
        F("jury.num_jurors", "int ≥ 1", "Jurors when `jurors` is ()."),
        F("jury.mode", "one of {jury_modes}", "Phase 2: consolidation by one judge, moderated deliberation, or a "
          "Phase-1 majority vote (baseline)."),
        F("jury.consolidator", "\"\" or an http(s):// URL", "The consolidating / moderating judge; \"\" = the first "
          "juror's endpoint."),
        F("jury.max_rounds", "int ≥ 0", "Deliberation turns (a moderator call and a juror call each)."),
        F("jury.stall_rounds", "int ≥ 1", "Deliberation stops after this many turns that change no stance."),
        F("jury.quorum", "int in [0, jurors]", "Agreeing jurors that make a claim consensus; 0 = a strict majority."),
        F("jury.error_min_impact", "one of {impacts}", "Flaws at least this severe mark a step as an error "
          "(ProcessBench scoring)."),
        F("jury.severity_weights.neutral", "≥ 0", "Weight of a neutral flaw in the jury's pointwise score "
          "max(0, 1 − Σ weights)."),
        F("jury.severity_weights.minor", "≥ 0", "Weight of a minor flaw."),
        F("jury.severity_weights.major", "≥ 0", "Weight of a major flaw."),
        F("jury.severity_weights.fatal", "≥ 0", "Weight of a fatal flaw."),
    ],
    "server: the embedded judge server (`launch/serve_judge.py --server.<knob>`)": [
        F("server.host", "non-empty string", "Interface to bind; loopback unless deliberately widened."),
        F("server.port", "int in [0, 65535]", "TCP port; 0 = any free port (announced on stdout when ready)."),
        F("server.model", "non-empty string", "The one model id it serves (`/v1/models`); other ids get 404."),
        F("server.api_key_env", "string", "Name of an environment variable holding the key clients must send; "
          "\"\" = open."),
        F("server.max_request_bytes", "int ≥ 1024", "Larger request bodies get HTTP 413."),
        F("server.seed", "int ≥ 0", "Decorrelates servers; verdict noise is keyed by (seed, request seed, content)."),
        F("server.noise", "≥ 0", "Scale of the logistic noise on the penalty difference, in steps."),
        F("server.position_bias", "any finite number", "Added in favour of the trace shown first (A), in steps."),
        F("server.tie_band", "≥ 0", "A |penalty difference| ≤ tie_band is a tie `[[C]]`."),
        F("server.skip_weight", "≥ 0", "Penalty per operation done without being shown."),
        F("server.answer_weight", "≥ 0", "Penalty for a wrong or missing final answer."),
        F("server.verdict_first", "bool", "State the verdict before the evidence (as some judges do)."),
        F("server.emit_reasoning", "bool", "Also return `reasoning_content`, like a vLLM reasoning parser."),
        F("server.latency_ms", "≥ 0", "Mean time to answer, the judging included."),
        F("server.latency_dist", "one of {latency_dists}", "Distribution of the latency."),
        F("server.latency_sigma", "≥ 0", "Shape of the lognormal latency."),
        F("server.error_rate", "[0, 1]", "Share of requests answered with an HTTP error from `error_statuses`."),
        F("server.error_statuses", "non-empty tuple of 4xx / 5xx codes", "The injected errors."),
        F("server.retry_after_s", "≥ 0", "Retry-After sent with 429 / 503; 0 = none."),
        F("server.hang_rate", "[0, 1]", "Share of requests that sleep `hang_s` before answering."),
        F("server.hang_s", "≥ 0", "Length of a hang (clients should time out)."),
        F("server.disconnect_rate", "[0, 1]", "Share of requests whose connection is dropped without an answer."),
        F("server.bad_body_rate", "[0, 1]", "Share of HTTP 200 answers whose body is not JSON."),
        F("server.malformed_rate", "[0, 1]", "Share of well-formed completions with no parseable verdict."),
        F("server.miss_rate", "[0, 1]", "Juror mode: probability that a real flaw is not reported."),
        F("server.false_alarm_rate", "[0, 1]", "Juror mode: probability that a clean step is reported as flawed."),
        F("server.debate_miss_rate", "[0, 1]", "Deliberation / consolidation review: a real flaw is not confirmed."),
        F("server.debate_false_alarm_rate", "[0, 1]", "Deliberation / consolidation review: a false claim is "
          "confirmed."),
    ],
}

# ───────────────────────────────────── configs/sft.py ─────────────────────────────────────

SFT = {
    "": [
        F("output_dir", "non-empty path", "The policy directory; `--workdir` overrides it. A directory holding the "
          "policy of an equal config is reused without training (the cache `make demo` relies on)."),
        F("seed", "int ≥ 0", "Tokenizer, initialisation and batch order."),
        F("num_demonstrations", "None or int ≥ 1", "Demonstrations used; None = the whole train split."),
        F("num_steps", "int ≥ 1", "Training steps."),
        F("batch_size", "int ≥ 1", "Demonstrations per step."),
        F("learning_rate", "(0, 1]", "Peak learning rate: linear warm-up, then cosine decay to min_lr_ratio · peak."),
        F("warmup_steps", "int ≥ 0, < num_steps", "Warm-up steps."),
        F("min_lr_ratio", "[0, 1]", "Final learning rate as a share of the peak."),
        F("weight_decay", "≥ 0", "AdamW weight decay, on matrices only (not norm scales)."),
        F("b1", "[0, 1]", "Adam β₁."),
        F("b2", "[0, 1]", "Adam β₂."),
        F("grad_clip", "≥ 0", "Global-norm gradient clipping; 0 = off."),
        F("seq_buckets", "non-empty tuple of ints ≥ 8", "Padded sequence lengths, one compiled step each; a longer "
          "demonstration adds a bucket (with a warning)."),
        F("log_every", "int ≥ 1", "Steps per logged loss."),
        F("progress", "bool" + NOT_CHECKED, "A tqdm progress bar."),
    ],
    "model: a named `ModelConfig` with overrides": [
        F("model.name", "a name in `models.MODEL_CONFIGS`", "The named model config (\"demo\": 2 layers, d_model "
          "128, ≈0.43 M parameters)."),
        F("model.d_model", "None or int", "Override of the named config's width; None keeps it. The vocabulary is "
          "always the tokenizer's."),
        F("model.num_layers", "None or int", "Override of the number of layers."),
        F("model.num_heads", "None or int", "Override of the number of attention heads."),
        F("model.num_kv_heads", "None or int", "Override of the number of KV heads (grouped-query attention)."),
        F("model.head_dim", "None or int", "Override of the head dimension."),
        F("model.mlp_dim", "None or int", "Override of the SwiGLU hidden width."),
    ],
    "tokenizer: SentencePiece trained on the task corpus": [
        F("tokenizer.vocab_size", "int ≥ 16", "Upper bound of the vocabulary (the task corpus supports ~175 pieces)."),
        F("tokenizer.model_type", "bpe or unigram", "SentencePiece model type."),
        F("tokenizer.max_corpus_examples", "None or int ≥ 1", "Corpus documents per task; None = all."),
    ],
    "eval: held-out evaluation at the end": [
        F("eval.num_examples", "int ≥ 0", "Test problems of `tasks.train_task`; 0 = no evaluation."),
        F("eval.num_samples", "int ≥ 0", "Samples per problem for the mean pass ratio and pass@k."),
        F("eval.temperature", "> 0", "Sampling temperature of those samples."),
        F("eval.max_new_tokens", "int ≥ 1", "Completion budget."),
        F("eval.batch_size", "int ≥ 1", "Prompts per sampler call."),
    ],
}

# ───────────────────────────────────── arena_jax.eval.watch.default_config() ─────────────────────────────────────

EVAL = {
    "": [
        F("benchmarks", "task names" + NOT_CHECKED, "Benchmarks per checkpoint: arithmetic (in distribution), "
          "countdown (out of distribution), jsonl (`tasks.jsonl.test_path`)."),
        F("num_examples", "int ≥ 1" + NOT_CHECKED, "Problems per benchmark (the first ones of the test split)."),
        F("num_samples", "int ≥ 0" + NOT_CHECKED, "n: mean pass ratio@n (the paper's pass ratio@16) and pass@k for "
          "k ≤ n; 0 = greedy only."),
        F("temperature", "> 0" + NOT_CHECKED, "Temperature of the n samples."),
        F("greedy", "bool" + NOT_CHECKED, "Also decode each problem greedily (greedy accuracy)."),
        F("max_new_tokens", "int ≥ 1" + NOT_CHECKED, "Completion budget; a truncated completion is scored as it is."),
        F("batch_size", "int ≥ 1" + NOT_CHECKED, "Prompts per sampler call."),
        F("seed", "int" + NOT_CHECKED, "Sampling key (folded with the benchmark index)."),
    ],
}


# ───────────────────────────────────── loading the configs ─────────────────────────────────────


def choices() -> dict[str, str]:
  """Registry contents named in valid ranges (so a new mode or topology updates the page)."""
  from arena_jax import arena, judges, rl, tasks  # pylint: disable=g-import-not-at-top
  from arena_jax.judges import config as judge_config  # pylint: disable=g-import-not-at-top
  from arena_jax.tasks import config as tasks_config  # pylint: disable=g-import-not-at-top

  join = lambda names: ", ".join(names)
  return dict(
      modes=join(sorted(rl.REWARD_MODES)), topologies=join(sorted(arena.SCHEDULERS)),
      solvers=join(sorted(arena.SOLVERS)), aggregations=join(rl.AGGREGATIONS),
      task_names=join(tasks_config.TASK_NAMES), backends=join(judges.BACKEND_NAMES),
      debias_modes=join(judges.DEBIAS_MODES), jury_modes=join(judges.JURY_MODES), impacts=join(tasks.IMPACTS),
      latency_dists=join(judge_config.LATENCY_DISTS))


def _load_module(path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(f"_config_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_config_file(path: pathlib.Path, arg: str | None = None) -> ml_collections.ConfigDict:
  """What `--config=path:arg` loads: the file's `get_config(arg)`."""
  return _load_module(path).get_config(arg)


def config_args(path: pathlib.Path) -> list[str | None]:
  """The arguments a config file accepts: none, "smoke" if it has it, and its `SLICES` (topologies)."""
  module = _load_module(path)
  args: list[str | None] = [None]
  slices = list(getattr(module, "SLICES", {}))
  args += slices[1:]  # the first topology is the default (None)
  if not slices:
    try:
      module.get_config("smoke")
      args.append("smoke")
    except ValueError:
      pass
  return args


@contextlib.contextmanager
def _default_environment() -> Iterator[None]:
  """Defaults as a fresh shell sees them: ARENA_JAX_DATA_DIR unset (it replaces `tasks.data_dir`)."""
  saved = os.environ.pop("ARENA_JAX_DATA_DIR", None)
  try:
    yield
  finally:
    if saved is not None:
      os.environ["ARENA_JAX_DATA_DIR"] = saved


def flatten(config: ml_collections.ConfigDict, prefix: str = "") -> dict[str, Any]:
  """{dotted path: value} of every leaf; a placeholder (`placeholder(int)`) is None."""
  out = {}
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def rl_config_files() -> list[pathlib.Path]:
  return sorted(p for p in (ROOT / "configs").glob("*.py") if p.name != "sft.py" and not p.name.startswith("_"))


# ───────────────────────────────────── rendering ─────────────────────────────────────


def fmt(value: Any) -> str:
  """A default as Python writes it, in a code span (pipes escaped for tables)."""
  return "`" + repr(value).replace("|", "\\|") + "`"


def _cell(text: str) -> str:
  return text.replace("|", "\\|").replace("\n", " ")


@dataclasses.dataclass
class Section:
  intro: str
  table: dict[str, list[Field]]
  prefix: str        # shown before every path (e.g. "judge.")
  values: dict       # flattened config of this section
  default_header: str = "default"


def _group_title(key: str) -> tuple[str, str]:
  name, _, rest = key.partition(":")
  return name.strip(), rest.strip()


def render_section(s: Section, ch: dict[str, str], level: str = "###") -> list[str]:
  lines = [s.intro, ""] if s.intro else []
  for key, fields in s.table.items():
    present = [f for f in fields if f.path in s.values]
    if not present:
      continue
    name, rest = _group_title(key)
    if name:
      lines += [f"{level} `{s.prefix}{name}`" + (f" — {rest}" if rest else ""), ""]
    lines += [f"| field | {s.default_header} | valid | meaning |", "|---|---|---|---|"]
    for f in present:
      lines.append(f"| `{s.prefix}{f.path}` | {fmt(s.values[f.path])} | {_cell(f.valid.format(**ch))} | "
                   f"{_cell(f.meaning)} |")
    lines.append("")
  return lines


def _diff(base: dict, other: dict) -> dict[str, Any]:
  """Fields of `other` whose value differs from `base` (or that `base` lacks)."""
  missing = object()
  return {k: v for k, v in other.items() if base.get(k, missing) != v}


def _changes(d: dict[str, Any]) -> str:
  return "<br>".join(f"`{k}` = {fmt(v)}" for k, v in d.items()) or "(nothing)"


def check_table(values: dict, table: dict[str, list[Field]], what: str, choices_: dict, errors: list[str]) -> None:
  """Appends to `errors` what keeps `table` from describing exactly the fields of `values`."""
  described = [f.path for fields in table.values() for f in fields]
  duplicates = sorted({p for p in described if described.count(p) > 1})
  if duplicates:
    errors.append(f"{what}: described twice: {duplicates}")
  missing = [p for p in values if p not in described]
  if missing:
    errors.append(f"{what}: no description for {missing} — add them to the tables in tools/gen_config_docs.py")
  stale = [p for p in described if p not in values]
  if stale:
    errors.append(f"{what}: described but in no config: {stale} — remove them from tools/gen_config_docs.py")
  for fields in table.values():
    for f in fields:
      try:
        f.valid.format(**choices_)
      except (KeyError, IndexError) as e:
        errors.append(f"{what}: {f.path}: unknown placeholder {e} in its valid range")


class DocsError(ValueError):
  pass


def generate_configuration() -> str:
  """The text of docs/configuration.md (raises DocsError when a field lacks a description)."""
  from arena_jax.eval import watch  # pylint: disable=g-import-not-at-top
  from arena_jax.train import config as train_config  # pylint: disable=g-import-not-at-top

  errors: list[str] = []
  ch = choices()
  with _default_environment():
    base = train_config.base_config()
    run = flatten(base)
    files = {(p, arg): flatten(load_config_file(p, arg)) for p in rl_config_files() for arg in config_args(p)}
    sft_path = ROOT / "configs" / "sft.py"
    sft = flatten(load_config_file(sft_path))
    sft_smoke = flatten(load_config_file(sft_path, "smoke"))
    evaluation = flatten(watch.default_config())

  own = lambda d, skip: {k: v for k, v in d.items() if not k.startswith(skip)}
  run_own = own(run, ("tasks.", "judge."))
  tasks_values = {k[len("tasks."):]: v for k, v in run.items() if k.startswith("tasks.")}
  judge_values = {k[len("judge."):]: v for k, v in run.items() if k.startswith("judge.")}
  extras: dict[str, Any] = {}   # fields the RL config files add to base_config() (first file's value)
  for values in files.values():
    for k, v in values.items():
      if k not in run and k not in extras:
        extras[k] = v
  sft_own, eval_own = own(sft, ("tasks.",)), own(evaluation, ("tasks.",))
  for values, table, what in (({**run_own, **extras}, RUN, "run config"), (tasks_values, TASKS, "config.tasks"),
                              (judge_values, JUDGE, "config.judge"), (sft_own, SFT, "configs/sft.py"),
                              (eval_own, EVAL, "eval config")):
    check_table(values, table, what, ch, errors)
  if errors:
    raise DocsError("\n".join(errors))

  out = [
      "# Configuration",
      "",
      "<!-- Generated by `python -m tools.gen_config_docs` from the configs themselves; do not edit by hand. "
      "tests/docs/test_config_docs.py fails when this page and the code disagree. -->",
      "",
      "Configs are Python files returning an `ml_collections.ConfigDict` (`get_config(arg)`, STYLE §2). On the "
      "command line every field is a flag: `--config=configs/arith_arena_live.py:smoke "
      "--config.rollout.group_size=16 --config.judge.urls='(\"http://judge:8000/v1\",)'`. Each config is "
      "checked once, up front, before anything is built: an error names the field and what to change. A "
      "**valid** range is what that check enforces; † marks a range that is not checked up front (a bad value "
      "fails later). Defaults are the values in a fresh shell (`ARENA_JAX_DATA_DIR` unset).",
      "",
      "| config | built by | used by |",
      "|---|---|---|",
      "| [RL run](#rl-run) | `arena_jax.train.config.base_config()`; configs/arith_*.py, configs/real_*.py | "
      "`python -m launch.train`, `arena_jax.train.train(config, workdir)` |",
      "| [tasks](#tasks-configtasks) | `arena_jax.tasks.default_config()` (the RL, SFT and eval configs embed it as "
      "`tasks`) | datasets, verifiers, SFT demonstrations |",
      "| [judge](#judge-configjudge) | `arena_jax.judges.default_config()` (the RL config's `judge`) | the trainer, "
      "`launch/judge_pairs.py`, `launch/jury.py`; `server` also `launch/serve_judge.py` |",
      "| [SFT](#sft-configssftpy) | `configs/sft.py` | `python -m launch.sft`, `arena_jax.train.train_sft` |",
      "| [evaluation](#evaluation-launchevalpy) | `arena_jax.eval.watch.default_config()` | `python -m launch.eval` "
      "(`--config.<field>`) |",
      "",
      "## RL run",
      "",
  ]
  out += render_section(Section("`config.tasks` and `config.judge` are documented in their own sections "
                                "below.", RUN, "", run_own), ch)
  if extras:
    out += ["### Fields of the real-model configs", "",
            "`base_config()` does not have these; the files that set them do (the value shown is the first such "
            "file's).", ""]
    out += render_section(Section("", RUN, "", extras, default_header="value"), ch, level="####")

  out += ["### What each config file changes", "",
          "Every RL config file starts from `base_config()`; these are the fields it changes. A row `file:arg` "
          "lists what the argument changes relative to the same file without it.", ""]
  out += _file_changes(run, files)

  out += ["## Tasks (`config.tasks`)", ""]
  out += render_section(Section("", TASKS, "tasks.", tasks_values), ch)
  out += ["## Judge (`config.judge`)", "", "How to serve a real judge, the templates, debiasing and costs: "
          "[judges.md](judges.md).", ""]
  out += render_section(Section("", JUDGE, "judge.", judge_values), ch)
  out += ["## SFT (`configs/sft.py`)", ""]
  out += render_section(Section("Its `tasks` is `arena_jax.tasks.demo_config()` (see [Tasks](#tasks-configtasks)"
                                "; the RL run must use the same one).", SFT, "", sft_own), ch)
  out += ["`configs/sft.py:smoke` changes: " + _changes(_diff(sft, sft_smoke)).replace("<br>", ", ") + ".", ""]
  out += ["## Evaluation (`launch/eval.py`)", ""]
  out += render_section(Section(
      "Its `tasks` is `arena_jax.tasks.default_config()`: set it to the run's own (for the demo policy, "
      "`tasks.demo_config()`: `--config.tasks.arithmetic.max_operand=10 --config.tasks.arithmetic.max_value=100`).",
      EVAL, "", eval_own), ch)
  return "\n".join(out).rstrip() + "\n"


def _file_changes(run: dict, files: dict) -> list[str]:
  """What each RL config file (and argument) changes: a file relative to `base_config()`, a file with an
  argument relative to the same file without it. Changes that every `arith_*` file shares (with or
  without the same argument) are listed once, above the table."""
  plain = {p: v for (p, arg), v in files.items() if arg is None}
  rows: dict[tuple, dict] = {}
  for (path, arg), values in files.items():
    rows[(path, arg)] = _diff(run, values) if arg is None else _diff(plain[path], values)
  lines = []
  shared: dict[str | None, dict] = {}
  for arg in dict.fromkeys(a for _, a in files):
    group = [key for key in rows if key[1] == arg and key[0].name.startswith("arith_")]
    if len(group) < 2:
      continue
    first, *others = [rows[key] for key in group]
    shared[arg] = {k: v for k, v in first.items() if all(k in d and d[k] == v for d in others)}
    what = "Every `configs/arith_*.py`" + (f" with `:{arg}`" if arg else " (`arena_jax.train.config.mode_config`)")
    relative = " (relative to the same file without it)" if arg else ""
    lines += [f"{what} changes{relative}: {_changes(shared[arg]).replace('<br>', ', ')}.", ""]
  lines += ["| file | other changes |", "|---|---|"]
  for (path, arg), d in rows.items():
    if path.name.startswith("arith_") and arg in shared:
      d = {k: v for k, v in d.items() if k not in shared[arg]}
      if arg is not None and not d:
        continue
    name = f"configs/{path.name}" + (f":{arg}" if arg else "")
    lines.append(f"| `{name}` | {_changes(d)} |")
  return lines + [""]


# ───────────────────────────────────── judge costs (docs/judges.md) ─────────────────────────────────────

BEGIN = "<!-- BEGIN GENERATED: judge costs (python -m tools.gen_config_docs) -->"
END = "<!-- END GENERATED: judge costs -->"
SIZES = (4, 8, 16)
# Closed forms of `arena.expected_calls` as the trainer schedules them (anchored topologies get the
# group's greedy sample as anchor); checked against the code for G = 3 … 32 on every generation.
FORMULAS: dict[str, tuple[str, Callable[[int], int]]] = {
    "round_robin": ("G(G−1)/2", lambda g: g * (g - 1) // 2),
    "live": ("3G−6", lambda g: 3 * g - 6),
    "anchor": ("G−1", lambda g: g - 1),
    "seeded_single_elimination": ("2G−2 (G−1 anchor seeding + G−1 bracket)", lambda g: 2 * g - 2),
    "double_elimination": ("3G−3 (G−1 anchor seeding + 2G−2 brackets)", lambda g: 3 * g - 3),
    "swiss": ("⌈log₂G⌉·⌊G/2⌋", lambda g: (g - 1).bit_length() * (g // 2)),
}


def generate_judge_costs() -> str:
  """The generated block of docs/judges.md: judge calls per group by topology and by reward mode."""
  from arena_jax import arena, rl  # pylint: disable=g-import-not-at-top
  from arena_jax.train.judging import ANCHORED  # pylint: disable=g-import-not-at-top

  def calls(name, g):
    return arena.expected_calls(name, g, **({"anchor": 0} if name in ANCHORED else {}))

  errors = []
  if set(FORMULAS) != set(arena.SCHEDULERS):
    errors.append(f"FORMULAS covers {sorted(FORMULAS)}, the schedulers are {sorted(arena.SCHEDULERS)}")
  for name, (_, f) in FORMULAS.items():
    for g in range(3, 33):
      if name in arena.SCHEDULERS and f(g) != calls(name, g):
        errors.append(f"{name}: the formula gives {f(g)} calls at G = {g}, arena.expected_calls {calls(name, g)}")
        break
  if errors:
    raise DocsError("\n".join(errors))

  lines = [BEGIN, "", "Judge calls per judged group with no failures (`arena.expected_calls(name, G)`; anchored "
           "topologies as the trainer runs them, with the group's greedy sample as anchor). `debias=both` doubles "
           "every figure.", "",
           "| topology | calls per group | " + " | ".join(f"G = {g}" for g in SIZES) + " |",
           "|---|---|" + "---|" * len(SIZES)]
  for name in sorted(arena.SCHEDULERS, key=lambda n: calls(n, 16)):
    lines.append(f"| `{name}` | {FORMULAS[name][0]} | " + " | ".join(str(calls(name, g)) for g in SIZES) + " |")
  lines += ["", "Per reward mode (SPEC §7), per optimizer step of B groups with a fraction ρ of non-diverse groups "
            "(`groups/routed` in the metrics):", "",
            "| mode | groups judged | calls per judged group | G = 8, B = 16, ρ = 1/2 |", "|---|---|---|---|"]
  for name in sorted(rl.REWARD_MODES):
    mode = rl.REWARD_MODES[name]
    if not mode.uses_judge:
      lines.append(f"| `{name}` | none | 0 | 0 |")
      continue
    judged = "all B" if mode.judge_groups == "all" else "the non-diverse ρB"
    if mode.judge_form == "pairwise":
      per, formula = calls(mode.topology, 8), f"`{mode.topology}`: {FORMULAS[mode.topology][0]}"
    else:
      per, formula = 8, "G (one rubric score per trajectory)"
    groups = 16 if mode.judge_groups == "all" else 8
    lines.append(f"| `{name}` | {judged} | {formula} | {per * groups} |")
  lines += ["", END]
  return "\n".join(lines)


def splice(text: str, block: str) -> str:
  if BEGIN not in text or END not in text:
    raise DocsError(f"{JUDGES_DOC} lacks the generated-block markers {BEGIN!r} … {END!r}")
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  return head + block + tail


# ───────────────────────────────────── entry point ─────────────────────────────────────


def expected_files() -> dict[pathlib.Path, str]:
  """{path: the text it should have}."""
  judges_text = JUDGES_DOC.read_text(encoding="utf-8")
  return {CONFIG_DOC: generate_configuration(), JUDGES_DOC: splice(judges_text, generate_judge_costs())}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale; write nothing")
  args = parser.parse_args(argv)
  try:
    files = expected_files()
  except DocsError as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  stale = []
  for path, text in files.items():
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if current == text:
      continue
    stale.append(path)
    if args.check:
      diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(path), "generated", lineterm="", n=1)
      print("\n".join(list(diff)[:60]), file=sys.stderr)
    else:
      path.write_text(text, encoding="utf-8")
      print(f"wrote {path.relative_to(ROOT)}")
  if args.check and stale:
    print(f"stale: {[str(p.relative_to(ROOT)) for p in stale]}; run `python -m tools.gen_config_docs`", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
