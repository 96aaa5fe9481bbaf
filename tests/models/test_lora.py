"""`arena_jax.models.lora`: Qwix LoRA adapters on the decoder, the adapted and the merged forward, and
what the optimizer holds when only the adapters train."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from arena_jax import models
from arena_jax.models import lora
from arena_jax.sampling import model_from_params

pytest.importorskip("qwix")

CONFIG = models.ModelConfig(
  vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48
)
TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 64, (4, 12)), jnp.int32)
SPEC = lora.LoraSpec(rank=4, alpha=8.0)


def test_at_init_the_adapted_model_is_the_base_model():
  base_model = models.init_model(CONFIG, 0)
  adapted = lora.apply_lora(models.init_model(CONFIG, 0), SPEC)
  np.testing.assert_array_equal(np.asarray(adapted(TOKENS)), np.asarray(base_model(TOKENS)))  # B = 0: + 0 exactly
  base, adapters = lora.split_adapters(adapted)
  # Every projection of every block: q, k, v, o and the MLP's three (the attention ones only Qwix's traced init
  # finds, behind our reshapes to 2-D).
  names = sorted({name for _, name in lora.adapter_paths(adapters)})
  assert names == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
  assert len(lora.adapter_paths(adapters)) == 7 * CONFIG.num_layers
  q = adapters["layers"][0]["attn"]
  d, n, h, r = CONFIG.d_model, CONFIG.num_heads, CONFIG.head_dim, SPEC.rank
  assert q["q_proj_lora_a"].shape == (d, r) and q["q_proj_lora_b"].shape == (r, n * h)
  assert q["o_proj_lora_a"].shape == (n * h, r) and q["o_proj_lora_b"].shape == (r, d)
  np.testing.assert_array_equal(np.asarray(q["q_proj_lora_b"]), 0.0)
  for leaf in jax.tree.leaves(base):  # the frozen part is the base model's weights, without adapters
    assert leaf.ndim >= 1
  assert jax.tree.structure(base) == jax.tree.structure(models.pure_params(base_model))


def _train_adapters(adapted, steps=5):
  """`steps` AdamW steps on the adapters alone (next-token loss on TOKENS); the base weights frozen."""
  template = lora.AdaptedTemplate.of(adapted)
  base, adapters = lora.split_adapters(adapted)
  optimizer = optax.adamw(1e-2)
  state = optimizer.init(adapters)

  @jax.jit
  def step(adapters, state):
    def loss(a):
      logits = template.model(base, a)(TOKENS[:, :-1])
      return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), TOKENS[:, 1:, None], -1))

    value, grads = jax.value_and_grad(loss)(adapters)
    updates, state = optimizer.update(grads, state, adapters)
    return optax.apply_updates(adapters, updates), state, value

  losses = []
  for _ in range(steps):
    adapters, state, value = step(adapters, state)
    losses.append(float(value))
  return template, base, adapters, state, losses


def test_merged_and_adapted_logits_agree_after_training_steps():
  adapted = lora.apply_lora(models.init_model(CONFIG, 0), SPEC)
  template, base, adapters, _, losses = _train_adapters(adapted)
  assert losses[-1] < losses[0]  # the adapters learn
  assert any(np.abs(np.asarray(b)).max() > 0 for b in jax.tree.leaves(adapters))
  unmerged = np.asarray(template.logits(base, adapters, TOKENS), np.float64)
  merged_params = lora.merge_adapters(base, adapters, SPEC)
  merged = np.asarray(model_from_params(CONFIG, merged_params)(TOKENS), np.float64)
  untouched = np.asarray(models.init_model(CONFIG, 0)(TOKENS), np.float64)
  assert np.abs(merged - untouched).max() > 1e-3  # the adapters changed the model
  # x (W + s A B) against x W + s (x A) B: each matmul in float32 sums at most max(d_model, mlp_dim) terms
  # (γ_n ≈ n·2⁻²⁴ relative, worst case), through num_layers blocks, on logits of this scale.
  n = max(CONFIG.d_model, CONFIG.mlp_dim, CONFIG.num_heads * CONFIG.head_dim)
  tol = n * 2.0**-24 * CONFIG.num_layers * np.abs(unmerged).max()
  assert np.abs(merged - unmerged).max() <= tol, (np.abs(merged - unmerged).max(), tol)
  # merge_adapters leaves the base weights as they were.
  np.testing.assert_array_equal(
    np.asarray(base["layers"][0]["attn"]["q_proj"]),
    np.asarray(lora.split_adapters(adapted)[0]["layers"][0]["attn"]["q_proj"]),
  )


def test_the_optimizer_holds_moments_for_the_adapters_alone():
  adapted = lora.apply_lora(models.init_model(CONFIG, 0), SPEC)
  _, base, adapters, state, _ = _train_adapters(adapted, steps=1)
  nbytes = lambda tree: sum(x.nbytes for x in jax.tree.leaves(tree))  # noqa: E731
  full = nbytes(optax.adamw(1e-2).init(base))
  # AdamW: two moments per adapter parameter, plus a step counter.
  assert nbytes(state) <= 2 * nbytes(adapters) + 64
  assert lora.adapter_count(adapters) * 4 * 2 == nbytes(state) - sum(
    x.nbytes for x in jax.tree.leaves(state) if x.ndim == 0
  )
  assert nbytes(state) < 0.2 * full  # rank 4 on 32-wide projections: a fraction of full fine-tuning's moments


def test_targets_choose_the_modules_and_bad_targets_are_named():
  only_mlp = lora.apply_lora(models.init_model(CONFIG, 0), lora.LoraSpec(rank=2, alpha=2.0, targets=r".*mlp"))
  assert {name for _, name in lora.adapter_paths(lora.split_adapters(only_mlp)[1])} == {
    "gate_proj",
    "up_proj",
    "down_proj",
  }
  one_layer = lora.apply_lora(models.init_model(CONFIG, 0), lora.LoraSpec(rank=2, alpha=2.0, targets=r"layers/1/attn"))
  assert {path for path, _ in lora.adapter_paths(lora.split_adapters(one_layer)[1])} == {("layers", 1, "attn")}
  with pytest.raises(ValueError, match="match no module"):
    lora.apply_lora(models.init_model(CONFIG, 0), lora.LoraSpec(targets=r".*embedding"))
  with pytest.raises(ValueError, match="not a regular expression"):
    lora.LoraSpec(targets="(")
  with pytest.raises(ValueError, match="rank must be ≥ 1"):
    lora.LoraSpec(rank=0)


def test_exported_peft_adapters_give_the_same_logits_in_transformers_and_peft(tmp_path):
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  peft = pytest.importorskip("peft")
  config = CONFIG.replace(rms_norm_eps=1e-5)
  hf_config = transformers.LlamaConfig(**models.config_to_hf(config, "LlamaForCausalLM"))
  torch.manual_seed(0)
  transformers.LlamaForCausalLM(hf_config).save_pretrained(tmp_path / "base")
  ours = models.load_hf(tmp_path / "base")
  adapted = lora.apply_lora(ours, SPEC)
  template = lora.AdaptedTemplate.of(adapted)
  base, adapters = lora.split_adapters(adapted)
  rng = np.random.default_rng(1)  # trained-looking adapters: B no longer zero
  adapters = jax.tree.map(lambda x: jnp.asarray(rng.normal(0, 0.2, x.shape), x.dtype), adapters)
  logits = np.asarray(template.logits(base, adapters, TOKENS), np.float64)

  files = lora.export_peft_adapters(
    adapters, SPEC, ours.config, tmp_path / "adapters", base_model=str(tmp_path / "base")
  )
  assert files == ["adapter_model.safetensors", "adapter_config.json"]
  reference = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "base", torch_dtype=torch.float32)
  reference = peft.PeftModel.from_pretrained(reference, tmp_path / "adapters").eval()
  names = {n for n, _ in reference.named_parameters() if "lora_" in n}
  assert len(names) == 2 * 7 * config.num_layers  # every adapter loaded, none left at its init
  with torch.no_grad():
    theirs = reference(torch.as_tensor(np.asarray(TOKENS), dtype=torch.long)).logits.double().numpy()
  assert np.abs(theirs - np.asarray(models.load_hf(tmp_path / "base")(TOKENS))).max() > 1e-3  # adapters matter
  # Two float32 implementations of the same sums (≤ max(d_model, mlp_dim) terms a matmul, num_layers blocks).
  n = max(config.d_model, config.mlp_dim, config.num_heads * config.head_dim)
  tol = 4 * n * 2.0**-24 * config.num_layers * np.abs(logits).max()
  assert np.abs(theirs - logits).max() <= tol, (np.abs(theirs - logits).max(), tol)
