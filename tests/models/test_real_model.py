"""The real model (SmolLM2-135M-Instruct, the GGUF of `make real-model`) at parity with transformers' own GGUF load:
float32 logits, greedy continuations of chat prompts, and the GGUF exported as a HF directory that transformers
loads. The tokenizer's parity is tests/test_gguf_tokenizer.py's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import sampling
from arena_jax import export
from arena_jax.train import policy_io
from tests import cache

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONVERSATIONS = [
  [{"role": "user", "content": "What is 17 + 25? Show your steps."}],
  [
    {"role": "system", "content": "You are a careful math tutor."},
    {"role": "user", "content": "Compute 9 * 7 - 12, one operation per line, then give the answer."},
  ],
  [
    {"role": "user", "content": "Write a Python function that returns the sum of a list."},
    {"role": "assistant", "content": "def total(xs):\n    return sum(xs)"},
    {"role": "user", "content": "Now make it skip None values."},
  ],
  [{"role": "user", "content": "Name three prime numbers larger than 50, and explain why each is prime."}],
]
POSITIONS = 64  # logits compared at the first 64 positions of each conversation
NEW_TOKENS = 64


@pytest.fixture(scope="module")
def real(real_gguf):
  """Ours and transformers' own load of the GGUF, held under the real-model lock for the module: both models and their
  programs are several GB, and the suite's other real-model tests wait meanwhile (`cache.real_model_lock`).

  Transformers' load is its GGUF loader's (it dequantises in Python: about a minute on 2 cores), saved once as an HF
  directory by the `transformers serve` judge's conversion (`judges.transformers_server.hf_directory`, cached by
  the GGUF's path, size and time): the suite's real-model smoke serves the same directory, so the session pays the
  dequantisation once."""
  from arena_jax.judges import transformers_server  # noqa: PLC0415

  transformers.logging.set_verbosity_error()
  with cache.real_model_lock():
    policy = policy_io.load_policy(real_gguf, weight_dtype="float32", dtype="float32")
    directory = transformers_server.hf_directory(real_gguf)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    yield policy, hf


# The slow tier (`make test-all`, CI): the parity tests below need transformers' load of the trained 135M weights
# (about a minute) and run both models, 64 greedy tokens of four chats on each side: minutes of compute on 2 cores.
# `make test` loads the real model and checks its config in tests/real_model/test_smoke.py.
parity = pytest.mark.slow


REPLY = {
  "role": "assistant",
  "content": "Let me work through this carefully, one step at a time, and check each result:\n\n1. First,",
}


def rendered(policy, add_generation_prompt):
  """Token ids of each conversation: to be continued by the assistant, or (False) with a reply begun."""
  return [
    policy.tokenizer.encode(
      policy.tokenizer.apply_chat_template(
        c if add_generation_prompt else c + [REPLY], add_generation_prompt=add_generation_prompt
      )
    )
    for c in CONVERSATIONS
  ]


def roundoff(logits: np.ndarray, d_model: int) -> float:
  """float32 round-off between two float32 forward passes: eps × √(terms of a dot product) × the logit scale,
  × 64 for 30 layers of accumulated error (the issue's bound, 1e-3 × the scale, is looser still)."""
  return 64 * np.finfo(np.float32).eps * np.sqrt(d_model) * float(np.abs(logits).max())


@parity
def test_logits_match_transformers(real):
  policy, hf = real
  sequences = [s[:POSITIONS] for s in rendered(policy, False)]
  assert all(len(s) == POSITIONS for s in sequences)
  tokens = np.asarray(sequences)
  ours = np.asarray(jax.jit(lambda t: policy.model(t))(jnp.asarray(tokens, jnp.int32)))
  with torch.no_grad():
    ref = hf(torch.from_numpy(tokens)).logits.numpy()
  scale = float(np.abs(ref).max())
  diff = float(np.abs(ours - ref).max())
  assert diff <= 1e-3 * scale and diff <= roundoff(ref, policy.config.d_model), (diff, scale)
  assert (ours.argmax(-1) == ref.argmax(-1)).mean() >= 0.999


@parity
def test_greedy_chat_continuations_match_transformers_generate(real):
  """64 greedy tokens from each of 4 chat prompts equal transformers' greedy `generate`; where they part, the
  top two logits there are within float32 round-off of each other (a tie that either side may break)."""
  policy, hf = real
  prompts = rendered(policy, True)
  sampler = sampling.Sampler(config=policy.config, max_new_tokens=NEW_TOKENS, method=sampling.Greedy())
  ours = np.asarray(sampler(policy.model, prompts, jax.random.key(0)).tokens)
  for i, prompt in enumerate(prompts):
    ids = torch.tensor([prompt])
    with torch.no_grad():
      ref = hf.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        eos_token_id=None,
        pad_token_id=policy.tokenizer.pad_id,
      )[0, len(prompt) :].numpy()
    differ = np.flatnonzero(ours[i] != ref)
    if differ.size:  # the first divergence must be a near-tie of transformers' own logits
      k = int(differ[0])
      with torch.no_grad():
        logits = hf(torch.tensor([prompt + list(ref[:k])])).logits[0, -1].numpy()
      top2 = np.sort(logits)[-2:]
      assert top2[1] - top2[0] <= roundoff(logits, policy.config.d_model), (i, k, top2)


@parity
def test_the_gguf_exports_as_a_directory_transformers_loads(real, real_gguf, tmp_path):
  policy, hf = real
  out = export.export_gguf(real_gguf, tmp_path / "smollm2")
  assert out.architecture == "LlamaForCausalLM"
  assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(out.files)
  loaded = transformers.AutoModelForCausalLM.from_pretrained(out.out_dir, dtype=torch.float32).eval()
  tokens = torch.tensor([rendered(policy, True)[0]])
  with torch.no_grad():
    a, b = loaded(tokens).logits.numpy(), hf(tokens).logits.numpy()
  assert np.abs(a - b).max() <= roundoff(b, policy.config.d_model)
  tok = transformers.AutoTokenizer.from_pretrained(out.out_dir)
  text = policy.tokenizer.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True)
  assert tok.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True, tokenize=False) == text
  assert tok(text, add_special_tokens=True)["input_ids"] == policy.tokenizer.encode(text)
  # And it is a policy this project loads too, with the same logits.
  again = policy_io.load_policy(out.out_dir)
  ours = np.asarray(again.model(jnp.asarray(tokens.numpy(), jnp.int32)))
  assert np.abs(ours - b).max() <= roundoff(b, policy.config.d_model)
