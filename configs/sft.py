"""SFT warm start of the embedded policy on the built-in tasks' demonstrations (issue #6).

    python -m launch.sft --config=configs/sft.py            # the demo policy (cached in output_dir)
    python -m launch.sft --config=configs/sft.py:smoke      # seconds; what the tests run
    python -m launch.sft --config=configs/sft.py --config.num_steps=600 --workdir=/tmp/sft

Variants (`arg`): "demo" (default) and "smoke" (everything shrunk for a laptop / CI).
Every field is checked once, up front, by `arena_jax.train.sft.validate_config`.
"""
import ml_collections
from ml_collections.config_dict import placeholder

from arena_jax import tasks


def get_config(arg=None):
  arg = arg or "demo"
  if arg not in ("demo", "smoke"):
    raise ValueError(f"configs/sft.py: unknown variant {arg!r}; use 'demo' or 'smoke'")
  c = ml_collections.ConfigDict()
  # The policy directory (`arena_jax.train.policy_io`); a run whose config equals the stored one
  # returns at once (the cache `make demo` relies on). --workdir overrides it.
  c.output_dir = f"runs/sft_{arg}"
  c.seed = 0

  # A named `ModelConfig` (`arena_jax.models.get_model_config`); None fields keep the named value.
  # vocab_size is always `tokenizer.vocab_size`.
  c.model = ml_collections.ConfigDict(dict(
      name="demo",
      d_model=placeholder(int), num_layers=placeholder(int), num_heads=placeholder(int),
      num_kv_heads=placeholder(int), head_dim=placeholder(int), mlp_dim=placeholder(int),
  ))
  # SentencePiece trained on `tasks.corpus` (newlines kept: step splitting needs "\n\n").
  # vocab_size is an upper bound: the task corpus supports ~175 pieces. The corpus is the first
  # `max_corpus_examples` documents of each corpus task (None = all; a few thousand cover every piece).
  c.tokenizer = ml_collections.ConfigDict(dict(vocab_size=256, model_type="bpe", max_corpus_examples=4000))

  # The tasks config (data, difficulty, demonstration kinds); the RL run must use the same one (it is
  # stored in the policy's meta.json, `sft_config.tasks`). Sized so that two CPU minutes give a
  # *mixed* base policy (issue #6: 20–70% held-out accuracy; all-correct, all-wrong and diverse
  # groups of 8 at temperature 1): operands ≤ 10 and results ≤ 100, 2–4 operations (the 4-operation
  # problems make the all-wrong groups), and mostly clean demonstrations. Every flawed kind stays
  # present, but each is sampled at temperature 1 more often than its share (the policy cannot tell
  # which demonstration it is imitating, so it may deviate at every step): at the default shares
  # (50% clean) sampled accuracy stays near 35% with no all-correct groups at all.
  c.tasks = tasks.demo_config()

  c.num_demonstrations = placeholder(int)  # None = the whole train split (tasks.arithmetic.num_train)
  c.num_steps = 2000                       # ≈ 3.2 epochs of the 20k demonstrations
  c.batch_size = 32
  c.learning_rate = 2e-3                   # peak; linear warm-up then cosine decay to min_lr_ratio · peak
  c.warmup_steps = 100
  c.min_lr_ratio = 0.1
  c.weight_decay = 0.05                    # AdamW, on matrices only (not norm scales)
  c.b1 = 0.9
  c.b2 = 0.98
  c.grad_clip = 1.0                        # global-norm clipping; 0 = off
  # Padded sequence lengths (tokens): each is one compiled train step.
  c.seq_buckets = (48, 64, 80, 96)

  # Held-out evaluation at the end (the test split of `tasks.train_task`).
  c.eval = ml_collections.ConfigDict(dict(
      num_examples=256, num_samples=8, temperature=1.0, max_new_tokens=96, batch_size=64))

  c.log_every = 25
  c.progress = True                        # tqdm bar with ETA and loss

  if arg == "smoke":
    c.model.update(dict(d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, mlp_dim=64))
    c.tasks.arithmetic.update(dict(num_train=96, num_test=16, min_ops=1, max_ops=2))
    c.tasks.countdown.update(dict(num_train=16, num_test=4))
    c.num_steps = 12
    c.batch_size = 8
    c.warmup_steps = 2
    c.learning_rate = 3e-3
    c.seq_buckets = (32, 48, 64)
    c.eval.update(dict(num_examples=8, num_samples=2, max_new_tokens=24, batch_size=8))
    c.log_every = 4
    c.progress = False
  return c
