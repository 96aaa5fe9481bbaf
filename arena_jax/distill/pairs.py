"""The pairs a distilled judge learns from (SPEC §10): the ones the router would send to the judge.

A `Group` is one prompt's G traces with their verifiable rewards. Only a non-diverse group (all rewards equal,
SPEC §1) reaches the judge in a run, so only its pairs are kept: two distinct traces of such a group. Groups come
from three places:

    groups_from_transcripts("runs/arena_live")          the judged groups an RL run recorded (`judge.transcripts`)
    groups_from_jsonl("groups.jsonl")                   {"problem", "reference", "traces", "rewards"} per line
    groups_from_policy(policy, tasks_config, ...)       sampled fresh from a checkpoint, HF directory or GGUF

Held-out pairs are split by prompt (`split_by_prompt`): no problem has pairs on both sides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Iterable, Sequence

import numpy as np

from arena_jax.errors import InputError, MissingFileError


@dataclasses.dataclass(frozen=True)
class Group:
  """One prompt's traces: `rewards[i]` is trace i's verifiable reward (None where unknown: a judged group of a
  run's transcripts, which the router sent to the judge because its rewards were equal)."""

  problem: str
  reference: str
  traces: tuple[str, ...]
  rewards: tuple[float, ...] | None = None

  @property
  def non_diverse(self) -> bool:
    """SPEC §1: all rewards equal (a group without rewards was judged, so it was)."""
    return self.rewards is None or len(set(self.rewards)) <= 1


@dataclasses.dataclass(frozen=True)
class Pair:
  """Two distinct traces of one non-diverse group; `group` indexes the groups it came from."""

  problem: str
  reference: str
  first: str
  second: str
  group: int

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


def problem_key(problem: str) -> str:
  return hashlib.sha256(problem.encode("utf-8")).hexdigest()[:16]


def groups_from_transcripts(workdir: str | os.PathLike) -> list[Group]:
  """The judged groups of an RL run's transcripts (`train.transcripts`: `judge.transcripts` > 0 records them).

  Raises:
    MissingFileError: the directory has no transcripts, or they hold no group.
  """
  from arena_jax.train import transcripts  # pylint: disable=g-import-not-at-top

  directory = pathlib.Path(workdir)
  if not pathlib.Path(transcripts.transcripts_dir(str(directory))).is_dir():
    raise MissingFileError(
      f"{directory}: no transcripts directory ({transcripts.DIRNAME}/): the run recorded no judged group "
      "(train with --config.judge.transcripts > 0, e.g. 1.0)"
    )
  groups = [
    Group(row["problem"], row.get("reference") or "", tuple(row["traces"]))
    for row in transcripts.read_groups(str(directory))
    if row.get("traces")
  ]
  if not groups:
    raise MissingFileError(f"{directory}/{transcripts.DIRNAME}: no judged group with traces in the transcripts")
  return groups


def groups_from_jsonl(path: str | os.PathLike) -> list[Group]:
  """Groups from a JSONL file, one per line: {"problem": str, "reference": str, "traces": [str, ...],
  "rewards": [float, ...] (optional)}.

  Raises:
    MissingFileError: no such file. InputError: a line that is not such an object (named by its number).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise MissingFileError(f"{path}: no such groups file")
  groups = []
  with path.open(encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
        traces = row["traces"]
        if not (
          isinstance(row["problem"], str) and isinstance(traces, list) and all(isinstance(t, str) for t in traces)
        ):
          raise TypeError("'problem' must be a string and 'traces' a list of strings")
        rewards = row.get("rewards")
        if rewards is not None and len(rewards) != len(traces):
          raise ValueError(f"{len(rewards)} rewards for {len(traces)} traces")
        groups.append(
          Group(
            row["problem"],
            str(row.get("reference") or ""),
            tuple(traces),
            None if rewards is None else tuple(float(r) for r in rewards),
          )
        )
      except (ValueError, TypeError, KeyError) as e:
        raise InputError(f"{path}:{n}: not a group ({type(e).__name__}: {e})") from None
  if not groups:
    raise InputError(f"{path}: no groups in the file")
  return groups


def groups_from_policy(
  policy,
  tasks_config,
  *,
  num_prompts: int,
  group_size: int,
  max_new_tokens: int,
  temperature: float,
  batch_size: int = 16,
  seed: int = 0,
  progress: bool = False,
) -> list[Group]:
  """Samples `group_size` traces for each of the first `num_prompts` problems of the train split of the task
  `tasks_config.train_task`, with `policy` (a `policy_io.LoadedPolicy`), and scores them with the task's
  verifier (the router's view, SPEC §1)."""
  import jax  # pylint: disable=g-import-not-at-top

  from arena_jax import tasks  # pylint: disable=g-import-not-at-top
  from arena_jax.models import pure_params  # pylint: disable=g-import-not-at-top
  from arena_jax.sampling import RandomSampling  # pylint: disable=g-import-not-at-top
  from arena_jax.sampling import accuracy  # pylint: disable=g-import-not-at-top

  task = tasks.get_task(tasks_config.train_task, tasks_config)
  examples = list(tasks.load_split(tasks_config, tasks_config.train_task, "train"))[:num_prompts]
  if not examples:
    raise InputError(f"tasks.{tasks_config.train_task}: the train split has no problems")
  add_bos = policy.add_bos and not task.chat
  prompts = policy.tokenizer.encode(task.prompt_texts(examples, policy.tokenizer), add_bos=add_bos)
  texts, _, _ = accuracy.generate(
    pure_params(policy.model),
    policy.tokenizer,
    prompts,
    num_samples=group_size,
    method=RandomSampling(temperature=float(temperature)),
    max_new_tokens=max_new_tokens,
    batch_size=batch_size,
    rng=jax.random.key(seed),
    config=policy.config,
    on_batch=(lambda: print(".", end="", flush=True)) if progress else None,
  )
  repeated = [e for e in examples for _ in range(group_size)]
  rewards = np.asarray(task.verify_batch(repeated, texts), np.float64).reshape(len(examples), group_size)
  return [
    Group(
      task.judge_question(e),
      task.reference_answer(e) or "",
      tuple(texts[i * group_size : (i + 1) * group_size]),
      tuple(float(r) for r in rewards[i]),
    )
    for i, e in enumerate(examples)
  ]


def make_pairs(groups: Sequence[Group], *, per_group: int, seed: int = 0) -> list[Pair]:
  """Up to `per_group` pairs of distinct traces from each non-diverse group, drawn without replacement from all
  of its pairs (seeded); a diverse group gives none (the verifier keeps it, SPEC §1). Which trace is `first` is
  drawn too, so that no order of the source leaks into the labels."""
  rng = np.random.default_rng(seed)
  out = []
  for index, group in enumerate(groups):
    if not group.non_diverse:
      continue
    distinct = list(dict.fromkeys(t for t in group.traces if t.strip()))
    candidates = [(i, j) for i in range(len(distinct)) for j in range(i + 1, len(distinct))]
    if not candidates:
      continue
    chosen = rng.permutation(len(candidates))[:per_group]
    for k in chosen:
      i, j = candidates[int(k)]
      if rng.random() < 0.5:
        i, j = j, i
      out.append(Pair(group.problem, group.reference, distinct[i], distinct[j], index))
  return out


def split_by_prompt(pairs: Iterable[Pair], held_out: float, seed: int = 0) -> tuple[list[Pair], list[Pair]]:
  """(train, held-out) with every pair of one problem on the same side: a problem is held out when a hash of
  (seed, problem) falls below `held_out`."""
  train, test = [], []
  for p in pairs:
    u = int(hashlib.sha256(f"{seed}\x1f{p.problem}".encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    (test if u < held_out else train).append(p)
  return train, test


__all__ = [
  "Group",
  "Pair",
  "groups_from_jsonl",
  "groups_from_policy",
  "groups_from_transcripts",
  "make_pairs",
  "problem_key",
  "split_by_prompt",
]
