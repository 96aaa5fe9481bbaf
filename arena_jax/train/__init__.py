"""Training: the RL trainer (Reasoning Arena and baselines), its config, checkpoints and metrics.

train(config, workdir)   the RL loop of docs/architecture.md (`launch/train.py` is its absl main)
base_config / validate_config   the run configuration (configs/*.py start from `base_config()`)
Checkpointer, CheckpointError, MetricsWriter, read_metrics, plot_curves
checkpoint_steps(workdir)   a run's finalised checkpoint steps, read off the disk (the readers' listing)
TranscriptWriter, read_transcripts, read_groups, read_steps   the judge transcripts (`judge.transcripts`)
WorkdirLock, check_resume_config   one run per workdir; a resume that cannot silently change the run
train_sft(config)        the SFT warm start (`launch/sft.py`); save_policy / load_policy / LoadedPolicy
write_policy_spec / load_run_policy   what an RL run directory holds for its evaluator
train_step_fn, train_shardings, init_train_state, abstract_train_state   the RL update on a mesh
                         (`arena_jax.train.sharding`; the mesh itself: `arena_jax.parallel`)
pack_rollout, PackedRows      the update's packed rows (`rollout.pack_tokens`, `arena_jax.train.packing`)
"""

from arena_jax.train.checkpoint import CheckpointError, Checkpointer, checkpoint_steps
from arena_jax.train.config import base_config, validate_config
from arena_jax.train.metrics import MetricsWriter, read_metrics
from arena_jax.train.plot import plot_curves
from arena_jax.train.transcripts import TranscriptWriter, read_groups, read_steps, read_transcripts
from arena_jax.train.trainer import NonFiniteLossError, Trainer, train
from arena_jax.train.policy_io import LoadedPolicy, load_policy, load_run_policy, save_policy, write_policy_spec
from arena_jax.train.sft import train_sft
from arena_jax.train.workdir import WorkdirLock, check_resume_config
from arena_jax.train.packing import PackedRows, pack_rollout
from arena_jax.train.sharding import (
  TrainShardings,
  abstract_rollout,
  abstract_train_state,
  check_train_batch,
  init_train_state,
  train_shardings,
  train_step_fn,
)
