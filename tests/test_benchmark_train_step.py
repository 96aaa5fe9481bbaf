"""benchmarks.train_step: its plain reference is the same update as the trainer's (so the speed-up compares
like with like), and the benchmark runs end to end at its smoke size and ends with its JSON line (no timing
is checked)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models
from benchmarks import train_step

pytestmark = pytest.mark.heavy  # compiles the update five times: started early (tests/conftest.py)

CONFIG = models.tiny_config().replace(
  num_layers=2, d_model=64, num_heads=2, num_kv_heads=1, head_dim=32, mlp_dim=128, vocab_size=128
)


def first_updates(micro_batches, batch, *, plain_batch=None, states=False):
  """One update of ours (on the tests' 8-device mesh, `micro_batches` micro-batches) and of the plain
  reference from the same params; returns `train_step.agreement` of the two (and with `states`, both new
  states and the initial params)."""
  loss_config, optim_config = train_step.run_config()
  optim_config.weight_decay = 0.01  # the demo has none; the reference must apply it like ours does
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  update, state, place = train_step.ours(CONFIG, params, loss_config, optim_config, micro_batches)
  ours_state, metrics = update(state, place(batch))
  plain_update, plain_state = train_step.plain(CONFIG, params, loss_config, optim_config)
  plain_state, loss = plain_update(plain_state, batch if plain_batch is None else plain_batch)
  agree = train_step.agreement(ours_state, metrics, plain_state, loss)
  if states:
    return agree, float(loss), jax.device_get((ours_state, plain_state)), optim_config
  return agree, float(loss)


@pytest.mark.slow  # the reference update's programs
def test_plain_reference_computes_our_update_on_ragged_rows():
  # Prompts and completions of random lengths: padding, masks and the predicting slots all differ by row.
  batch = train_step.make_batch(CONFIG, 16, 6, 10, seed=3, ragged=True)
  assert not bool(jnp.all(batch.mask)) and len(set(np.asarray(batch.prompt_lengths).tolist())) > 1
  for m in (1, 2):
    agree, loss, (ours, plain), o = first_updates(m, batch, states=True)
    assert loss != 0.0
    # The two sides sum the same float32 terms in different orders: the loss agrees to float32 round-off of a
    # mean over the batch's tokens, the gradient (Adam's first moment) to a few ulps of its largest entry.
    tokens = int(np.asarray(batch.mask).sum())
    assert agree["loss"] < 4 * tokens * 2.0**-24 * max(1.0, abs(loss)), (m, agree)
    assert agree["grad_rel"] < 1e-4, (m, agree)
    # AdamW's first step moves each weight by lr · u(g), u(g) = g / (|g| + ε) after bias correction (plus the
    # decay lr · wd · w, the same on both sides). u is 1/ε-Lipschitz and bounded by 1, so a gradient difference
    # Δg moves the new weights apart by at most lr · min(2, |Δg| / ε). Each side computes its step in float32 (a
    # spacing of lr) and rounds w + step to float32: half a spacing of the *result*, which for a weight near 0
    # is the step's size, not the old weight's (a w0 of 1e-5 moved to 9e-5 rounds at 9e-5's spacing; seen on
    # XLA:CPU at -O0). Δg comes from the first moments: m = (1 − b1) · g.
    for mu_a, mu_b, w_a, w_b, w0 in zip(
      jax.tree.leaves(train_step.first_moments(ours.opt_state)),
      jax.tree.leaves(train_step.first_moments(plain[1])),
      jax.tree.leaves(ours.params),
      jax.tree.leaves(plain[0]),
      jax.tree.leaves(models.pure_params(models.init_model(CONFIG, seed=0))),
    ):
      dg = np.abs(np.asarray(mu_a, np.float64) - np.asarray(mu_b, np.float64)) / (1 - o.b1)
      largest = np.maximum(np.abs(np.asarray(w0, np.float32)), np.maximum(np.abs(w_a), np.abs(w_b)))
      bound = o.lr * np.minimum(2.0, dg / o.eps) + 2 * np.spacing(largest) + 2 * np.spacing(np.float32(o.lr))
      assert np.all(np.abs(np.asarray(w_a, np.float64) - np.asarray(w_b, np.float64)) <= bound), m
    assert agree["params_abs"] < 2 * o.lr  # no weight took a step of the wrong size


def test_agreement_sees_a_different_update():
  batch = train_step.make_batch(CONFIG, 16, 6, 10, seed=3, ragged=True)
  other = batch._replace(advantages=-batch.advantages)  # the plain side trains on flipped advantages
  agree, _ = first_updates(1, batch, plain_batch=other)
  assert agree["loss"] > 1e-3 and agree["grad_rel"] > 0.5 and agree["params_abs"] > 1e-5


def test_train_flops_counts_six_per_param_per_token_plus_attention_and_head():
  c = CONFIG
  layer = c.d_model * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads) + 3 * c.d_model * c.mlp_dim
  # The layers' matmul params are the model's params but the embedding and the norms.
  assert c.num_layers * layer == c.num_params() - c.vocab_size * c.d_model - (2 * c.num_layers + 1) * c.d_model
  rows, p, n = 3, 4, 5
  attention = 4 * c.num_layers * c.num_heads * c.head_dim * sum(range(1, p + n + 1))
  want = 6 * c.num_layers * layer * rows * (p + n) + 3 * rows * (attention + 2 * c.d_model * c.vocab_size * n)
  assert train_step.train_flops(c, rows, p, n) == want


@pytest.mark.slow  # the benchmark compiles the update five times
def test_benchmark_runs_at_smoke_size_and_ends_with_json(capsys):
  train_step.main(["--smoke", "--micro-batches", "2"])
  lines = capsys.readouterr().out.strip().splitlines()
  figures = json.loads(lines[-1])
  assert {"fraction_of_peak", "speedup_vs_plain", "peak_gflops", "tiny", "wide"} <= set(figures)
  for name in ("tiny", "wide"):
    assert set(figures[name]) >= {"ours_m1", "ours_m2", "ours_bf16", "ours_fp8", "plain"}
    for side in ("ours_m1", "ours_m2"):
      assert figures[name][side]["agreement"]["grad_rel"] < 1e-3, (name, side)
    # bf16 compute rounds every matmul operand to 8 significant bits (≤ 2⁻⁹ relative each): its first moments
    # differ from float32's by more than float32 round-off and by less than 2⁻⁴ of the largest entry (a few
    # roundings per matmul, through the layers' chain). FP8 rounds to 4 bits forward (e4m3) and 3 backward (e5m2,
    # ≤ 2⁻³ relative): coarser than bf16, and still no entry off by the largest one.
    bf16, fp8 = (figures[name][side]["agreement"]["grad_rel"] for side in ("ours_bf16", "ours_fp8"))
    assert 1e-5 < bf16 < 2.0**-4, name
    assert bf16 < fp8 < 1.0, name
  assert figures["fp8_speedup_vs_bf16"] > 0
  assert figures["fraction_of_peak"] == figures["wide"]["ours_m1"]["fraction_of_peak"] > 0
  assert figures["speedup_vs_plain"] == figures["wide"]["ours_m1"]["speedup_vs_plain"] > 0
  # The RL shape: the packed update beside the padded one, the same update.
  assert figures["packed_speedup"] == figures["rl"]["packed_speedup"] > 0
  assert figures["rl"]["packed"]["agreement"]["grad_rel"] < 1e-3 and figures["rl"]["packed"]["fill"] <= 1
  assert not any(" NO" in line for line in lines)  # the table's "agrees" column
