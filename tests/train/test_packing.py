"""Packed training rows (`rollout.pack_tokens`, `train.packing`): the packer's layout invariants, and
the packed RL update equals the padded one (loss, metrics, gradients, new params) on one device and on meshes.

Tolerances. Both updates compute the same float32 terms: packing changes only the lengths of the rows the
attention softmax runs over (masked keys add exact zeros) and the order of the sums (the loss over a
micro-batch's tokens, each weight's gradient over every position). A float32 sum of T terms of size ≤ |x| in
another order differs by ≲ T·2⁻²⁴·|x|: over the ≤ 200 tokens here, a relative 2e-5 bounds the loss and the
metrics; a gradient is compared against its tensor's largest entry (every entry carries the round-off of the
same sums). The new params follow from AdamW's first step, which is Lipschitz in the gradient
(`assert_same_update`).
"""

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import aot, models, parallel, rl
from arena_jax.errors import ConfigError
from arena_jax.train import base_config, read_metrics, train, validate_config
from arena_jax.train import packing
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib
from tests.parallel.conftest import CONFIG, MESHES, NEEDS_8, loss_config, optim_config
from tests.train.conftest import smoke_config

LR = 1e-4


def skewed_rollout(rows=16, prompt_len=6, new_tokens=24, seed=0, *, hole=False, empty=False):
  """Right-padded prompts of random lengths and completions whose lengths are skewed short like RL's
  (benchmarks.sampler's stop steps: 10-100 % of the budget, x ~ Beta(1, 2)); truncated at the budget.
  `hole`: one completion with a masked token inside it; `empty`: one completion with no token."""
  rng = np.random.default_rng(seed)
  plen = rng.integers(1, prompt_len + 1, rows)
  prompts = np.where(np.arange(prompt_len)[None] < plen[:, None], rng.integers(1, 128, (rows, prompt_len)), 0)
  x = rng.beta(1.0, 2.0, rows)
  lengths = np.clip(np.ceil(new_tokens * (0.1 + 0.9 * x)).astype(int), 1, new_tokens)
  tokens = rng.integers(1, 128, (rows, new_tokens))
  old = rng.normal(size=(rows, new_tokens)) * 0.1 - np.log(128)
  batch = step_lib.rows_to_rollout(prompts, plen, tokens, lengths, old, rng.normal(size=rows), lengths == new_tokens)
  mask = np.asarray(batch.mask).copy()
  if hole:
    r = int(np.argmax(lengths))
    mask[r, lengths[r] // 2] = False
  if empty:
    mask[int(np.argmin(lengths))] = False
  return batch._replace(mask=jnp.asarray(mask))


# ─────────────────────────────────────── the packer ───────────────────────────────────────


def unpack(batch, packed):
  """{row: (prompt, completion, segment ids, positions)} read back from the packed rows (where each row's
  sequence was put), and every packed row's segments in order."""
  tokens, pos, seg = (np.asarray(x) for x in (packed.tokens, packed.positions, packed.segment_ids))
  blocks, per_block = np.asarray(packed.row).shape
  plen, clen = packing.sequence_lengths(batch.prompt_lengths, batch.mask)
  out = {}
  for k in range(blocks):
    for j in range(per_block):
      r = k * per_block + j
      if clen[r] == 0:
        continue
      b, s = int(packed.row[k, j]), int(packed.start[k, j])
      first = s - plen[r] + 1
      sl = slice(first, s + 1 + clen[r])
      out[r] = (tokens[k, b, first : s + 1], tokens[k, b, s + 1 : sl.stop], seg[k, b, sl], pos[k, b, sl], (k, b, sl))
  return out


@pytest.mark.parametrize("micro_batches,shards", [(1, 1), (2, 1), (2, 4)])
@pytest.mark.parametrize("seed", [0, 1])
def test_packer_lays_every_sequence_once_in_its_own_block(micro_batches, shards, seed):
  batch = skewed_rollout(rows=32, seed=seed, hole=True, empty=True)
  length = 40
  out = packing.pack_rollout(batch, pack_tokens=length, micro_batches=micro_batches, shards=shards)
  p = out.packed
  blocks = micro_batches * shards
  assert np.asarray(p.tokens).shape[0] == blocks and np.asarray(p.row).shape == (blocks, 32 // blocks)
  assert np.asarray(p.tokens).shape[2] == length  # no row over its budget: the rows are L long by construction
  prompts, completions, mask = np.asarray(batch.prompt_tokens), np.asarray(batch.tokens), np.asarray(batch.mask)
  plen, clen = packing.sequence_lengths(batch.prompt_lengths, batch.mask)
  seqs = unpack(batch, p)
  assert set(seqs) == set(np.flatnonzero(clen > 0))  # every sequence with a token to predict, and only those
  used = np.zeros(np.asarray(p.tokens).shape, int)
  for r, (prompt, completion, seg, pos, (k, b, sl)) in seqs.items():
    assert k == r // (32 // blocks)  # a sequence stays in its block (its micro-batch's batch shard)
    np.testing.assert_array_equal(prompt, prompts[r, : plen[r]])
    np.testing.assert_array_equal(completion, completions[r, : clen[r]])
    np.testing.assert_array_equal(pos, np.arange(plen[r] + clen[r]))  # positions restart at 0, step by one
    # One segment id of its own per sequence; a masked token inside the completion is padding (segment 0).
    real = np.concatenate([np.ones(plen[r], bool), mask[r, : clen[r]]])
    assert len(set(seg[real])) == 1 and seg[real][0] > 0 and np.all(seg[~real] == 0)
    used[k, b, sl] += 1
  assert used.max() == 1  # sequences never overlap
  seg = np.asarray(p.segment_ids)
  assert np.all((seg > 0) <= (used > 0))  # every other slot is padding
  for k in range(blocks):  # segment ids distinct within a packed row
    for b in range(seg.shape[1]):
      ids = [s for (prompt, _, s_, _, (kk, bb, _)) in seqs.values() if (kk, bb) == (k, b) for s in {int(s_[0])}]
      assert len(ids) == len(set(ids))
  # First-fit decreasing needs at most 11/9 OPT + 1 rows (OPT ≥ the tokens over L); the rows are one bucket.
  per_block = [np.where(clen > 0, plen + clen, 0)[k * 32 // blocks : (k + 1) * 32 // blocks] for k in range(blocks)]
  need = max(int(np.ceil(t.sum() / length)) for t in per_block)
  rb = seg.shape[1]
  assert rb == packing.row_bucket(rb) and rb <= packing.row_bucket(int(11 / 9 * need) + 1, cap=32 // blocks)
  # Deterministic: the same rows again (as on another host) give the same packed arrays, bit for bit.
  again = packing.pack_rollout(
    jax.tree.map(np.asarray, batch), pack_tokens=length, micro_batches=micro_batches, shards=shards
  )
  for a, b in zip(p, again.packed):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow  # a child process
def test_packing_is_the_same_in_another_process():
  """Hosts of a multi-host run pack in processes of their own: nothing may depend on hash seeds or the like."""
  code = (
    "import hashlib, numpy as np; from tests.train.test_packing import skewed_rollout; "
    "from arena_jax.train import packing; "
    "p = packing.pack_rollout(skewed_rollout(rows=32, seed=3), pack_tokens=40, micro_batches=2, shards=2).packed; "
    "print(hashlib.sha256(b''.join(np.asarray(x).tobytes() for x in p)).hexdigest())"
  )
  digests = {
    subprocess.run(
      [sys.executable, "-c", code],
      capture_output=True,
      text=True,
      check=True,
      env={**os.environ, "PYTHONHASHSEED": s, "JAX_PLATFORMS": "cpu"},
    ).stdout.strip()
    for s in ("1", "2")
  }
  assert len(digests) == 1 and len(next(iter(digests))) == 64


def test_row_buckets_are_few_and_close():
  buckets = {packing.row_bucket(n) for n in range(1, 1025)}
  assert len(buckets) == 8 + 4 * 7  # 1 … 8, then four per octave up to 1024
  for n in range(1, 1025):
    assert n <= packing.row_bucket(n) < 1.25 * n + 1
  assert packing.row_bucket(9) == 10 and packing.row_bucket(33) == 40 and packing.row_bucket(33, cap=36) == 36


def test_a_sequence_longer_than_the_rows_is_a_clear_error():
  batch = skewed_rollout(rows=8, prompt_len=6, new_tokens=24)
  plen, clen = packing.sequence_lengths(batch.prompt_lengths, batch.mask)
  longest = int((plen + clen).max())
  with pytest.raises(ConfigError, match=rf"rollout\.pack_tokens: {longest - 1} .* = {longest} tokens"):
    packing.pack_rollout(batch, pack_tokens=longest - 1)
  packing.pack_rollout(batch, pack_tokens=longest)
  with pytest.raises(ValueError, match="blocks"):
    packing.pack_rollout(batch, pack_tokens=longest, micro_batches=3)


def test_config_rejects_rows_too_short_for_a_completion():
  c = base_config()
  c.init.random_model = "tiny"
  c.rollout.pack_tokens = c.rollout.max_new_tokens
  with pytest.raises(ValueError, match="rollout.pack_tokens"):
    validate_config(c, check_devices=False)
  c.rollout.pack_tokens = c.rollout.max_new_tokens + 32
  validate_config(c, check_devices=False)


# ─────────────────────────────────────── the log-probs ───────────────────────────────────────


@pytest.mark.parametrize(
  "prompt_len,new_tokens,pack_tokens",
  [
    (4, 24, 32),  # short prompts: the head projects the packed slots
    pytest.param(12, 4, 32, marks=pytest.mark.slow),  # long ones: the gathered states (`make test-all`)
  ],
  ids=["project-packed", "gather-first"],
)
@pytest.mark.parametrize("attention", ["xla", "splash"])
def test_packed_logprobs_equal_padded(prompt_len, new_tokens, pack_tokens, attention):
  config = CONFIG.replace(attention=attention)
  model = models.init_model(config, seed=0)
  batch = skewed_rollout(rows=8, prompt_len=prompt_len, new_tokens=new_tokens, hole=True, empty=True)
  want, want_ent = models.token_logprobs(
    model, batch.prompt_tokens, batch.prompt_lengths, batch.tokens, batch.mask, return_entropy=True, temperature=0.7
  )
  p = packing.pack_rollout(batch, pack_tokens=pack_tokens, micro_batches=2).packed
  k, rb, length = p.tokens.shape
  projects_packed = k * rb * length <= batch.mask.size
  assert projects_packed == (new_tokens > prompt_len)
  mask = batch.mask.reshape(p.row.shape + (-1,))
  got, got_ent = models.packed_token_logprobs(
    model,
    p.tokens,
    p.positions,
    p.segment_ids,
    p.row,
    p.start,
    mask,
    return_entropy=True,
    temperature=0.7,
    chunk_size=8,
  )
  # The token right after a hole is predicted from the hole's own state, which no layout defines (a masked
  # query: the padded reference lets it see the valid keys, the kernels' segments only padding): not compared.
  after_hole = np.zeros(want.shape, bool)
  after_hole[:, 1:] = np.asarray(batch.mask)[:, 1:] & ~np.asarray(batch.mask)[:, :-1]
  after_hole &= np.cumsum(np.asarray(batch.mask), axis=1) > 0
  assert after_hole.sum() == 1
  # float32 log-softmax over 128 logits of size ~1 (init_std 1): a few ulps of |log p| ≈ 5.
  for g, w in ((got, want), (got_ent, want_ent)):
    np.testing.assert_allclose(np.asarray(g).reshape(want.shape)[~after_hole], np.asarray(w)[~after_hole], atol=2e-5)
  assert np.all(np.asarray(got).reshape(want.shape)[~np.asarray(batch.mask)] == 0)


# ─────────────────────────────────────── the update ───────────────────────────────────────


def adam_mu(state):
  return state.opt_state[1][0].mu  # make_optimizer's chain(clip_by_global_norm, adamw): (1 − b1)·clipped grad


def assert_same_update(got, got_metrics, want, want_metrics):
  got, got_metrics, want, want_metrics = jax.device_get((got, got_metrics, want, want_metrics))
  assert set(got_metrics) == set(want_metrics)
  for name, value in want_metrics.items():
    if name.startswith("rows/"):
      np.testing.assert_allclose(got_metrics[name], value, rtol=1e-6, err_msg=name)
    else:  # sums over ≤ 200 tokens (module docstring)
      np.testing.assert_allclose(got_metrics[name], value, rtol=2e-5, atol=1e-7, err_msg=name)
  for g, w in zip(jax.tree.leaves(adam_mu(got)), jax.tree.leaves(adam_mu(want))):
    np.testing.assert_allclose(g, w, atol=2e-5 * float(np.abs(w).max()) + 1e-12)
  # AdamW's first step moves a weight by lr·u(g), u(g) = g / (|g| + ε) (plus the decay, the same on both sides):
  # u is 1/ε-Lipschitz and bounded by 1, so gradients Δg apart give weights ≤ lr·min(2, |Δg| / ε) apart, plus
  # each side's float32 rounding of u and of w + step. Δg comes from the first moments, m = (1 − b1)·g.
  b1, eps = optim_config().b1, optim_config().eps
  for g, w, mg, mw in zip(*(jax.tree.leaves(t) for t in (got.params, want.params, adam_mu(got), adam_mu(want)))):
    dg = np.abs(np.asarray(mg, np.float64) - np.asarray(mw, np.float64)) / (1 - b1)
    # (+ lr·2⁻²⁰: a few float32 ulps of u ≤ 1, which each side's program rounds in its own order)
    bound = LR * (np.minimum(2.0, dg / eps) + 2.0**-20) + 2 * np.spacing(np.abs(np.asarray(w, np.float32)))
    diff = np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))
    assert np.all(diff <= bound), (diff - bound).max()
    np.testing.assert_allclose(g, w, atol=2 * LR)  # and no weight took a step of the wrong size
  assert int(got.step) == int(want.step) == 1


def fresh_state(params, optimizer):
  return step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer)


@pytest.mark.parametrize("micro_batches", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: `make test-all`
@pytest.mark.parametrize("kl", [0.0, pytest.param(0.05, marks=pytest.mark.slow)], ids=["no-kl", "kl"])
def test_packed_update_equals_padded(micro_batches, kl):
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  ref = jax.tree.map(lambda x: x * 1.01, params) if kl else None  # a reference that differs: KL has a gradient
  optimizer = step_lib.make_optimizer(optim_config(LR))
  update = step_lib.make_update_fn(
    CONFIG, optimizer, loss_config(kl), temperature=1.0, micro_batches=micro_batches, use_reference=bool(kl)
  )
  batch = skewed_rollout(rows=16, empty=True)
  want, want_m = update(fresh_state(params, optimizer), batch, ref)
  packed = packing.pack_rollout(batch, pack_tokens=32, micro_batches=micro_batches)
  assert packing.packed_fill(packed.packed) > 0.6
  got, got_m = update(fresh_state(params, optimizer), packed, ref)
  assert ("kl" in want_m) == bool(kl)
  assert_same_update(got, got_m, want, want_m)


@pytest.mark.slow  # the routed variants of test_packed_update_equals_padded
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean"])
def test_packed_update_with_routed_rewards_equals_padded(aggregation):
  """The trainer's program: arena_live routes the step's rewards and computes the advantages in the jit; the
  second minibatch trains rows 16 … 31 of the step."""
  from tests.train.test_routing import step_rewards  # pylint: disable=g-import-not-at-top

  verifier, judge, judged, diverse = step_rewards()
  verifier, judge = np.tile(verifier, (2, 1)), np.tile(judge, (2, 1))  # 8 groups of 4: 2 minibatches of 16 rows
  judged, diverse = np.tile(judged, 2), np.tile(diverse, 2)
  rewards = step_lib.StepRewards(verifier, np.where(diverse[:, None], np.nan, judge), judged)
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  optimizer = step_lib.make_optimizer(optim_config(LR))
  lc = loss_config(0.0)
  lc.aggregation = aggregation
  update = step_lib.make_update_fn(
    CONFIG, optimizer, lc, temperature=1.0, micro_batches=2, use_reference=False, mode=rl.get_mode("arena_live")
  )
  batch = skewed_rollout(rows=16, seed=4)._replace(advantages=jnp.full(16, 123.0))  # ignored: computed inside
  want, want_m = update(fresh_state(params, optimizer), batch, None, rewards, jnp.int32(1))
  packed = packing.pack_rollout(batch, pack_tokens=32, micro_batches=2)
  got, got_m = update(fresh_state(params, optimizer), packed, None, rewards, jnp.int32(1))
  assert want_m["adv/nonzero_fraction"] > 0
  assert_same_update(got, got_m, want, want_m)


@pytest.fixture(scope="module")
def padded_on_one_device():
  """The padded update of a skewed batch on the default device (KL on, 2 micro-batches): the reference."""
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  ref = jax.tree.map(lambda x: x * 1.01, params)
  optimizer = step_lib.make_optimizer(optim_config(LR))
  update = step_lib.make_update_fn(
    CONFIG, optimizer, loss_config(0.05), temperature=1.0, micro_batches=2, use_reference=True
  )
  batch = skewed_rollout(rows=32, seed=5, empty=True)
  state, metrics = update(fresh_state(params, optimizer), batch, ref)
  return params, ref, batch, jax.device_get(state), jax.device_get(metrics)


@NEEDS_8
@pytest.mark.parametrize("shape", MESHES, ids=lambda s: "x".join(map(str, s)))
def test_packed_update_on_a_mesh_equals_padded_on_one_device(shape, padded_on_one_device):
  params, ref, batch, want, want_m = padded_on_one_device
  mesh = parallel.make_mesh(parallel.mesh_config(*shape))
  optimizer = step_lib.make_optimizer(optim_config(LR))
  sh = train_sharding.train_shardings(CONFIG, optimizer, mesh, packed=True)
  update = train_sharding.train_step_fn(
    CONFIG,
    optimizer,
    loss_config(0.05),
    mesh,
    temperature=1.0,
    micro_batches=2,
    use_reference=True,
    shardings=sh,
    packed=True,
  )
  shards = parallel.batch_shards(mesh)
  packed = packing.pack_rollout(batch, pack_tokens=32, micro_batches=2, shards=shards)
  assert packed.packed.tokens.shape[0] == 2 * shards
  rollout = jax.device_put(packed, sh.rollout)
  # Each of a micro-batch's blocks on its own batch shard: block m·S + s of the [2·S, Rb, L] rows on shard s.
  assert rollout.packed.tokens.sharding.spec[0] == sh.rollout.prompt_tokens.spec[0]
  got, got_m = update(
    train_sharding.init_train_state(params, optimizer, sh), rollout, jax.device_put(ref, sh.state.params)
  )
  assert len(got.params["layers"][0]["attn"]["q_proj"].sharding.device_set) == 8
  assert_same_update(got, got_m, want, want_m)
  with pytest.raises(ValueError, match="packed"):
    train_sharding.train_step_fn(
      CONFIG, optimizer, loss_config(0.0), mesh, temperature=1.0, micro_batches=2, use_reference=False, shardings=sh
    )


@NEEDS_8
def test_packed_gathers_stay_on_their_shard():
  """On a mesh of 8 batch shards the packed step moves no activations between devices: its gathers back to the
  [R, N] layout read the shard's own block. The only collectives besides the gradient's all-reduces (as many
  as the padded step's) lay the inputs out per micro-batch (the split's reshape, as for the padded rows)."""
  mesh = parallel.make_mesh(parallel.mesh_config(8, 1, 1))
  optimizer = step_lib.make_optimizer(optim_config(LR))
  kw = dict(rows=32, prompt_len=8, new_tokens=24, micro_batches=2)
  texts = {
    packed: aot.lower_train_step(CONFIG, optimizer, loss_config(0.0), mesh, pack_tokens=32 if packed else 0, **kw)
    .compile()
    .as_text()
    for packed in (False, True)
  }
  moves = re.compile(r"\b(all-gather|all-to-all|collective-permute|reduce-scatter)(-start)?\(")
  sources = {m.group(1) for line in texts[True].splitlines() if moves.search(line) for m in [_OP_NAME.search(line)]}
  assert sources <= {"jit(update)/reshape"}, sources
  assert texts[True].count("all-reduce(") == texts[False].count("all-reduce(") > 0


_OP_NAME = re.compile(r'op_name="([^"]*)"')


@NEEDS_8
def test_aot_lowers_the_packed_step_at_16k_tokens():
  """`aot.lower_train_step(pack_tokens=…)`: the packed step's program at 16k-token rows lowers and compiles (on
  the CPU's 8 devices here; launch/aot_compile.py does it for a TPU topology)."""
  mesh = parallel.make_mesh(parallel.mesh_config(1, 2, 4))
  optimizer = step_lib.make_optimizer(optim_config(LR))
  shards = parallel.batch_shards(mesh)
  lowered = aot.lower_train_step(
    CONFIG.replace(num_layers=1, num_heads=2, num_kv_heads=1),
    optimizer,
    loss_config(0.0),
    mesh,
    rows=4 * shards,
    prompt_len=1024,
    new_tokens=15360,
    micro_batches=2,
    mode=rl.get_mode("arena_live"),
    group_size=4,
    pack_tokens=16384,
  )
  rollout = lowered.args_info[0][1]
  blocks = 2 * shards
  # As many packed tokens as the padded rows: 4·S rows of 16k tokens in 2·S blocks of one packed row each.
  assert rollout.packed.tokens.shape == (blocks, 2, 16384) and rollout.packed.row.shape == (blocks, 2)
  assert aot.memory_report(lowered.compile(), hbm_bytes=1 << 40).total > 0


@pytest.mark.slow  # two trainer runs, packed and padded
@pytest.mark.heavy
def test_the_trainer_packs_its_rows_and_trains_as_padded(data_dir, coin_verifier, tmp_path):
  """`rollout.pack_tokens` end to end: the trainer packs each minibatch on the host (one block per micro-batch and
  batch shard of the 8-device mesh) and its first update, on the same samples, is the padded run's."""
  rows = {}
  for pack in (0, 128):
    c = smoke_config("rlvr", data_dir)
    c.num_steps, c.checkpoint.every = 1, 1
    c.optim.micro_batches = 2
    c.rollout.pack_tokens = pack
    train(c, str(tmp_path / str(pack)))
    (rows[pack],) = read_metrics(str(tmp_path / str(pack)))
  padded, packed = rows[0], rows[128]
  assert "update/pack_fill" not in padded and 0 < packed["update/pack_fill"] <= 1
  assert packed["gen/tokens"] == padded["gen/tokens"] and packed["adv/l1"] == padded["adv/l1"] > 0
  for key in ("loss", "grad_norm", "entropy", "ratio", "clip_fraction", "response_length", "update/rel_rms"):
    np.testing.assert_allclose(packed[key], padded[key], rtol=2e-5, atol=1e-7, err_msg=key)  # module docstring
