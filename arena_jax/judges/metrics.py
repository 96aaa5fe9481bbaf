"""Step-level flaw-detection metrics of the Reasoning Jury (SPEC §8 "Evaluation").

  balanced F1   2·TPR·TNR / (TPR + TNR) over labelled steps (a flawed step found is a true positive,
                a clean step left alone a true negative), pooled over traces;
  ProcessBench  each trace has a label, the 0-based index of its earliest erroneous step or −1; a
                prediction is the earliest step flagged as an error (−1: none). acc1 = exact matches
                on erroneous traces, acc2 = exact matches on correct ones, F1 = 2·acc1·acc2/(acc1 + acc2)
                (the ProcessBench paper's evaluation code).
ProcessBench labels say nothing about steps after the first error, so those steps are unlabelled
in the step-level counts (`processbench_step_truth`).
"""

from __future__ import annotations

from typing import Mapping, Sequence


def harmonic(a: float, b: float) -> float:
  return 2.0 * a * b / (a + b) if a + b > 0 else 0.0


def balanced_f1(tpr: float, tnr: float) -> float:
  """2·TPR·TNR / (TPR + TNR) (SPEC §8); 0 when both are 0."""
  return harmonic(tpr, tnr)


def processbench_step_truth(label: int, num_steps: int) -> dict[int, bool]:
  """{step: flawed} for the steps a ProcessBench label determines (steps after the error are unknown)."""
  if label < 0:
    return {i: False for i in range(num_steps)}
  return {**{i: False for i in range(min(label, num_steps))}, label: True}


def step_detection(predicted: Sequence[set[int]], truth: Sequence[Mapping[int, bool]]) -> dict:
  """Pooled step-level confusion counts, TPR, TNR and balanced F1 over traces."""
  if len(predicted) != len(truth):
    raise ValueError(f"{len(predicted)} predictions but {len(truth)} labelled traces")
  tp = fn = tn = fp = 0
  for flagged, labels in zip(predicted, truth):
    for step, flawed in labels.items():
      hit = step in flagged
      if flawed:
        tp, fn = tp + hit, fn + (not hit)
      else:
        fp, tn = fp + hit, tn + (not hit)
  tpr = tp / (tp + fn) if tp + fn else 0.0
  tnr = tn / (tn + fp) if tn + fp else 0.0
  return {"tp": tp, "fn": fn, "tn": tn, "fp": fp, "tpr": tpr, "tnr": tnr, "balanced_f1": balanced_f1(tpr, tnr)}


def processbench_scores(predictions: Sequence[int], labels: Sequence[int]) -> dict:
  """acc1 (erroneous traces), acc2 (correct traces) and their harmonic mean F1, as fractions."""
  if len(predictions) != len(labels):
    raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
  err = [p == l for p, l in zip(predictions, labels) if l != -1]
  cor = [p == l for p, l in zip(predictions, labels) if l == -1]
  acc1 = sum(err) / len(err) if err else 0.0
  acc2 = sum(cor) / len(cor) if cor else 0.0
  return {"acc1": acc1, "acc2": acc2, "f1": harmonic(acc1, acc2), "num_erroneous": len(err), "num_correct": len(cor)}
