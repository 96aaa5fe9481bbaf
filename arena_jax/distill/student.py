"""The student judge (SPEC §10): a policy the project loads, taught the `letter` verdict of a teacher.

The student is shown exactly what the served judge is later asked: the judge's `pairwise_letter` template
(`judge.template_dir`) with the problem, the reference answer and the two traces as the judge client cleans them
(`judges.hygiene.neutralise` of `tasks.trace_view`), rendered by the student's chat template with the assistant's
turn opened. Its verdict is the next token: `A` (the trace shown first wins) or `B`. Only that position's logits are
computed (the hidden state of the prompt's last token times the output projection), so a step costs the
transformer body and one row of the vocabulary projection per prompt.

The loss (`soft_cross_entropy`) is the cross-entropy of the full-vocabulary distribution at the verdict position
against the teacher's soft outcome: target p on `A` and 1 − p on `B`, so all mass moves onto the two labels; plus
−log P(end of turn) after the label (`stop_loss`), so that the served judge answers one letter and stops. Both
orders of every pair go in the same batch, with targets s and 1 − s (`pair_rows`): a student that prefers a
position pays for it within each batch.

Fully trained (AdamW on every weight) or with LoRA adapters (`models.lora`, the base frozen).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from arena_jax import models
from arena_jax import tasks
from arena_jax.errors import ConfigError, UserError
from arena_jax.judges import hygiene
from arena_jax.judges import prompts
from arena_jax.sampling.decode_state import model_from_params

PROMPT_FORMATS = ("auto", "chat", "plain")
# A plain student's prompt: the messages' contents, a blank line apart, then a newline where the verdict starts. As a
# chat template it is exported with the student, so that a server renders a request as the student was trained.
PLAIN_CHAT_TEMPLATE = "{% for m in messages %}{% if not loop.first %}\n\n{% endif %}{{ m['content'] }}{% endfor %}\n"
LABELS = ("A", "B")
_LENGTH_BUCKETS = (64, 128, 192, 256, 384, 512, 640, 768, 1024, 1536, 2048, 4096)


class StudentError(UserError, ValueError):
  """A student that cannot be taught the letter verdict (the message names the field and the way out)."""


@dataclasses.dataclass
class Student:
  """A student judge: its model config (float32), base weights, tokenizer, how its prompts are rendered, the token
  ids of its two labels, and (LoRA) the spec and the adapters being trained."""

  config: Any
  base: dict
  tokenizer: Any
  prompt_format: str  # chat | plain
  add_bos: bool
  label_ids: tuple[int, int]
  source: str
  lora: Any = None  # a models.LoraSpec
  adapters: dict | None = None

  @property
  def template(self):
    return models.lora_template(self.config, self.lora) if self.lora is not None else None

  @property
  def trainable(self) -> dict:
    return self.adapters if self.lora is not None else self.base

  def with_trainable(self, trainable: dict) -> "Student":
    if self.lora is not None:
      return dataclasses.replace(self, adapters=trainable)
    return dataclasses.replace(self, base=trainable)

  def merged(self) -> dict:
    """The plain model's weights (the adapters folded in with LoRA)."""
    if self.lora is None:
      return self.base
    return jax.jit(functools.partial(models.merge_adapters, spec=self.lora))(self.base, self.adapters)

  def render(self, messages: Sequence[dict]) -> str:
    if self.prompt_format == "chat":
      return self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages) + "\n"

  def encode(self, messages: Sequence[dict]) -> list[int]:
    add_bos = self.add_bos and self.prompt_format == "plain"  # a chat template writes its own BOS
    return list(self.tokenizer.encode(self.render(messages), add_bos=add_bos))


def _label_ids(student: Student) -> tuple[int, int]:
  """The token that starts each label right after a rendered prompt (the verdict the server would sample)."""
  probe = student.render([{"role": "user", "content": "Which trace is better?"}])
  add_bos = student.add_bos and student.prompt_format == "plain"
  base = list(student.tokenizer.encode(probe, add_bos=add_bos))
  ids = []
  for label in LABELS:
    full = list(student.tokenizer.encode(probe + label, add_bos=add_bos))
    if full[: len(base)] != base or len(full) != len(base) + 1:
      raise StudentError(
        f"student={student.source}: its tokenizer does not write the verdict {label!r} as one token after the "
        f"prompt ({len(full) - len(base)} tokens), so the verdict position has no single label to train"
      )
    ids.append(int(full[-1]))
  if ids[0] == ids[1]:
    raise StudentError(f"student={student.source}: the labels A and B are the same token {ids[0]}")
  return tuple(ids)


def load_student(
  source: str,
  *,
  prompt_format: str = "auto",
  lora_rank: int = 0,
  lora_alpha: float = 32.0,
  lora_targets: str = r".*(attn|mlp)",
  remat: str = "minimal",
  seed: int = 0,
) -> Student:
  """Loads `source` (a policy directory, HF directory, `.gguf` or `pretrained:<name>`) as a student in float32.

  `prompt_format`: `chat` (its chat template, refused when it has none), `plain`, or `auto` (chat when it has a
  template). `lora_rank` > 0 trains LoRA adapters (`models.LoraSpec`) instead of every weight. `remat`: the
  blocks' rematerialisation in the backward pass (`models.REMAT_POLICIES`; "minimal" recomputes the attention,
  whose T² scores held most of a 135 M student's 11 GB at 8 rows of 640 tokens without it).

  Raises:
    ConfigError: an unknown prompt format. StudentError: chat asked of a student without a chat template, or
      labels that are not one token each.
  """
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top

  if prompt_format not in PROMPT_FORMATS:
    raise ConfigError(f"config.student.prompt_format={prompt_format!r}: must be one of {PROMPT_FORMATS}")
  policy = policy_io.load_policy(source, weight_dtype="float32", dtype="float32")
  has_template = bool(getattr(policy.tokenizer, "chat_template", None))
  if prompt_format == "chat" and not has_template:
    raise StudentError(
      f"config.student.prompt_format='chat': the student {source} has no chat template (its tokenizer names "
      "none); use --config.student.prompt_format=plain (or auto)"
    )
  fmt = prompt_format if prompt_format != "auto" else ("chat" if has_template else "plain")
  student = Student(
    config=models.with_precision(policy.config, weight_dtype="float32", dtype="float32").replace(remat=remat),
    base=jax.device_get(models.pure_params(policy.model)),
    tokenizer=policy.tokenizer,
    prompt_format=fmt,
    add_bos=policy.add_bos,
    label_ids=(0, 0),
    source=str(source),
  )
  student = dataclasses.replace(student, label_ids=_label_ids(student))
  if lora_rank > 0:
    spec = models.LoraSpec(rank=int(lora_rank), alpha=float(lora_alpha), targets=lora_targets)
    student = dataclasses.replace(
      student, lora=spec, adapters=models.init_adapters(models.lora_template(student.config, spec), seed)
    )
  return student


# ─────────────────────────────────────────── prompts and rows ───────────────────────────────────────────


def verdict_messages(judge_config, pair, swapped: bool, max_trace_chars: int = 0) -> list[dict]:
  """The `letter` request of `pair` as the judge client sends it (module docstring): the pair's first trace
  shown as A unless `swapped`. `max_trace_chars` > 0 cuts each trace's view to that many characters (the served
  judge cuts to `judge.token_budget` tokens)."""
  templates = prompts.load_templates(judge_config.template_dir)

  def trace(text):
    view = hygiene.neutralise(tasks.trace_view(text or "", judge_config.trace_view), templates.delimiters)
    return view[:max_trace_chars] if max_trace_chars > 0 else view

  a, b = (trace(pair.second), trace(pair.first)) if swapped else (trace(pair.first), trace(pair.second))
  reference = hygiene.neutralise(pair.reference, templates.delimiters) if pair.reference else prompts.NOT_GIVEN
  return templates.messages(
    "pairwise_letter",
    problem=hygiene.neutralise(pair.problem, templates.delimiters),
    reference=reference,
    trace_a=a,
    trace_b=b,
  )


@dataclasses.dataclass(frozen=True)
class Row:
  """One prompt of the student: its tokens, P(A) that the teacher gives (the order's target), its pair."""

  tokens: tuple[int, ...]
  target: float
  pair_index: int
  swapped: bool


def pair_rows(student: Student, labels, judge_config, *, max_trace_chars: int, max_tokens: int) -> list[Row]:
  """Both orders of every labelled pair, adjacent: (first as A, target s) then (second as A, target 1 − s). A pair
  whose prompt is longer than `max_tokens` in either order is left out."""
  rows = []
  for i, label in enumerate(labels):
    s = 0.5 if label.outcome is None else float(label.outcome)
    both = [
      Row(tuple(student.encode(verdict_messages(judge_config, label.pair, sw, max_trace_chars))), t, i, sw)
      for sw, t in ((False, s), (True, 1.0 - s))
    ]
    if all(len(r.tokens) <= max_tokens for r in both):
      rows += both
  return rows


def pair_batches(rows: Sequence[Row], batch_pairs: int, seed: int = 0):
  """Endless training batches of `batch_pairs` pairs each, every pair with both of its orders (`pair_rows` keeps
  them adjacent), the pairs reshuffled each epoch."""
  pairs = [rows[i : i + 2] for i in range(0, len(rows), 2)]
  rng = np.random.default_rng(seed)
  order: list[int] = []
  while True:
    if len(order) < batch_pairs:
      order += list(rng.permutation(len(pairs)))
    take, order = order[:batch_pairs], order[batch_pairs:]
    yield [r for i in take for r in pairs[i]]


def pad_batch(rows: Sequence[Row], size: int, pad_id: int, label_ids: tuple[int, int] = (0, 0)):
  """(tokens [size, T], lengths [size], targets [size], weights [size]) with T a length bucket; rows past
  `len(rows)` are padding (weight 0). Each row's prompt is followed by the label its target prefers (`A` at
  p ≥ 1/2): the position after it is where the student learns to stop (`stop_logprobs`); causal attention keeps it
  out of the verdict position's view."""
  longest = max(len(r.tokens) for r in rows) + 1
  t = next((b for b in _LENGTH_BUCKETS if b >= longest), -(-longest // 256) * 256)
  tokens = np.full((size, t), pad_id, np.int32)
  lengths = np.ones((size,), np.int32)
  targets = np.full((size,), 0.5, np.float32)
  weights = np.zeros((size,), np.float32)
  for k, r in enumerate(rows):
    tokens[k, : len(r.tokens)] = r.tokens
    tokens[k, len(r.tokens)] = label_ids[0] if r.target >= 0.5 else label_ids[1]
    lengths[k], targets[k], weights[k] = len(r.tokens), r.target, 1.0
  return tokens, lengths, targets, weights


# ──────────────────────────────────────────── the computation ────────────────────────────────────────────


def verdict_logprobs(config, template, base, adapters, tokens, lengths):
  """log-softmax over the whole vocabulary [B, 2, V]: at each row's verdict position (after its last prompt token,
  index 0) and after the label that `pad_batch` appended (index 1: where the served judge must stop)."""
  model = template.model(base, adapters) if template is not None else model_from_params(config, base)
  valid = jnp.arange(tokens.shape[1])[None, :] < (lengths + 1)[:, None]
  h = model.hidden(tokens, valid=valid)
  at = jnp.stack([lengths - 1, lengths], axis=1)[:, :, None]
  picked = jnp.take_along_axis(h, at, axis=1)
  return jax.nn.log_softmax(model.logits(picked).astype(jnp.float32), axis=-1)


def soft_cross_entropy(logp, label_ids, targets, weights):
  """SPEC §10: −[p log P(A) + (1 − p) log P(B)] over the full vocabulary's log-probs `logp` [B, V], averaged over
  the rows of weight 1."""
  ce = -(targets * logp[:, label_ids[0]] + (1.0 - targets) * logp[:, label_ids[1]])
  return jnp.sum(ce * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def stop_loss(logp_after, stop_id, weights):
  """−log P(stop) after the label, averaged over the rows of weight 1: a served `letter` judge then answers its one
  letter and ends its turn (a student that learned only the verdict token may go on: "BAAAAAAA" is no label)."""
  return jnp.sum(-logp_after[:, stop_id] * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def _params_of(template, trainable, frozen):
  return (frozen, trainable) if template is not None else (trainable, None)


def average_weights(average, trainable, decay: float, steps):
  """SPEC §10: the exponential moving average of the trained weights after `steps` steps, with TensorFlow's
  `ExponentialMovingAverage(num_updates=...)` warm-up: the rate is min(decay, (1 + t) / (10 + t)), so the first
  steps are nearly a running mean and the starting weights fade out within a few dozen steps."""
  t = jnp.asarray(steps, jnp.float32)
  rate = jnp.minimum(decay, (1.0 + t) / (10.0 + t))
  return jax.tree.map(lambda a, w: (rate * a + (1.0 - rate) * w.astype(a.dtype)).astype(a.dtype), average, trainable)


@functools.lru_cache(maxsize=8)
def step_program(config, template, label_ids, stop_id, optimizer, average_decay: float = 0.0):
  """The jitted training step of a student's model, labels, stop token and optimizer: (trainable, opt_state,
  average, frozen, tokens, lengths, targets, weights, steps) → (trainable, opt_state, average, loss, gradient norm);
  `frozen` is the base under LoRA; `average` is the weights' moving average (`average_weights`, after `steps`
  steps; None when `average_decay` is 0). The loss is the verdict's soft cross-entropy plus the stop term
  (`stop_loss`)."""

  def loss_fn(trainable, frozen, tokens, lengths, targets, weights):
    base, adapters = _params_of(template, trainable, frozen)
    logp = verdict_logprobs(config, template, base, adapters, tokens, lengths)
    return soft_cross_entropy(logp[:, 0], label_ids, targets, weights) + stop_loss(logp[:, 1], stop_id, weights)

  @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
  def step(trainable, opt_state, average, frozen, tokens, lengths, targets, weights, steps):
    loss, grads = jax.value_and_grad(loss_fn)(trainable, frozen, tokens, lengths, targets, weights)
    updates, opt_state = optimizer.update(grads, opt_state, trainable)
    trainable = optax.apply_updates(trainable, updates)
    if average is not None:
      average = average_weights(average, trainable, average_decay, steps)
    return trainable, opt_state, average, loss, optax.tree.norm(grads)

  return step


@functools.lru_cache(maxsize=8)
def _prob_program(config, template, label_ids):
  @jax.jit
  def prob_a(trainable, frozen, tokens, lengths):
    base, adapters = _params_of(template, trainable, frozen)
    logp = verdict_logprobs(config, template, base, adapters, tokens, lengths)[:, 0]
    la, lb = logp[:, label_ids[0]], logp[:, label_ids[1]]
    return jax.nn.sigmoid(la - lb), jnp.exp(la) + jnp.exp(lb)  # P(A) / (P(A) + P(B)), and their mass

  return prob_a


def make_optimizer(lr: float, weight_decay: float, warmup_steps: int, total_steps: int):
  schedule = optax.warmup_cosine_decay_schedule(0.0, lr, max(warmup_steps, 1), max(total_steps, warmup_steps + 1))
  return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=weight_decay))


def predict(student: Student, rows: Sequence[Row], batch_rows: int = 8) -> tuple[np.ndarray, np.ndarray, float]:
  """(P(A) / (P(A) + P(B)) per row, the mass P(A) + P(B) per row, seconds) of the student as it is."""
  prob_a = _prob_program(student.config, student.template, student.label_ids)
  frozen = student.base if student.lora is not None else None
  out_p, out_mass = [], []
  start = time.perf_counter()
  for i in range(0, len(rows), batch_rows):
    part = rows[i : i + batch_rows]
    tokens, lengths, _, _ = pad_batch(part, batch_rows, pad_id(student), student.label_ids)
    p, mass = prob_a(student.trainable, frozen, tokens, lengths)
    out_p.append(np.asarray(p)[: len(part)])
    out_mass.append(np.asarray(mass)[: len(part)])
  seconds = time.perf_counter() - start
  return np.concatenate(out_p) if out_p else np.zeros(0), np.concatenate(out_mass) if out_mass else np.zeros(0), seconds


def pad_id(student: Student) -> int:
  tok = student.tokenizer
  return int(tok.pad_id if tok.pad_id is not None and tok.pad_id >= 0 else tok.eos_id)


__all__ = [
  "LABELS",
  "PLAIN_CHAT_TEMPLATE",
  "PROMPT_FORMATS",
  "Row",
  "Student",
  "StudentError",
  "average_weights",
  "load_student",
  "make_optimizer",
  "pad_batch",
  "pair_batches",
  "pair_rows",
  "predict",
  "soft_cross_entropy",
  "stop_loss",
  "step_program",
  "verdict_logprobs",
  "verdict_messages",
]
