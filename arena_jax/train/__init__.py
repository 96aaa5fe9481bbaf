"""Training: the RL trainer (Reasoning Arena and baselines), its config, checkpoints and metrics.

  train(config, workdir)   the RL loop of DESIGN.md (`launch/train.py` is its absl main)
  base_config / validate_config   the run configuration (configs/*.py start from `base_config()`)
  Checkpointer, MetricsWriter, read_metrics, plot_curves
  train_sft(config)        the SFT warm start (`launch/sft.py`); save_policy / load_policy / Policy
  run_demo()               `make demo` (`launch/demo.py`)
"""
from arena_jax.train.checkpoint import Checkpointer
from arena_jax.train.config import base_config, validate_config
from arena_jax.train.metrics import MetricsWriter, read_metrics
from arena_jax.train.plot import plot_curves
from arena_jax.train.trainer import NonFiniteLossError, Trainer, train
from arena_jax.train.demo import run_demo
from arena_jax.train.policy_io import Policy, load_policy, save_policy
from arena_jax.train.sft import train_sft
