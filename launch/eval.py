"""Checkpoint-driven evaluation of an RL run (`arena_jax.eval.watch`; the metrics of SPEC §9).

    python -m launch.eval --workdir=runs/arena_live                      # every checkpoint not yet evaluated
    python -m launch.eval --workdir=runs/arena_live --step=40            # one checkpoint
    python -m launch.eval --workdir=runs/arena_live --watch --stop_after_step=200   # follow a live run
    python -m launch.eval --workdir=runs/arena_live --watch              # follow it until Ctrl-C / SIGTERM
    python -m launch.eval --workdir=... --config.num_samples=16 --config.benchmarks='("arithmetic",)'

Results go to <workdir>/eval/: eval.jsonl (one row per step), eval.md (a table), samples.jsonl (a few
completions per benchmark and step: `--config.samples_per_benchmark`), TensorBoard (scalars and the
completions as text). `--step` prints the table and the completions instead.
The problems are the run's own: its task settings are read from <workdir>/tasks.json (a flag that
contradicts the trained task's settings is an error naming both values).
"""

import signal

from absl import flags
from absl import logging

from arena_jax import cli
from arena_jax.eval import watch as watch_lib

_CONFIG = cli.config_dict_flag("config", watch_lib.default_config())
_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory.", required=True)
_OUT = flags.DEFINE_string("out_dir", None, "Where results go (default <workdir>/eval).")
_STEP = flags.DEFINE_integer("step", None, "Evaluate this checkpoint only.")
_WATCH = flags.DEFINE_boolean(
  "watch",
  False,
  "Keep polling for new checkpoints until --stop_after_step, --timeout_s or, with neither, Ctrl-C / SIGTERM.",
)
_STOP = flags.DEFINE_integer("stop_after_step", None, "With --watch: stop once this step is evaluated.")
_POLL = flags.DEFINE_float("poll_s", 30.0, "With --watch: seconds between polls.")
_TIMEOUT = flags.DEFINE_float("timeout_s", None, "With --watch: stop after this long without a new checkpoint.")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  if _STEP.value is not None:
    results = watch_lib.evaluate_step(_WORKDIR.value, _STEP.value, _CONFIG.value)
    samples = watch_lib.pop_samples(results)
    print(watch_lib.markdown_table([{"step": _STEP.value, "results": results}]))
    for bench, rows in samples.items():
      print(f"\n### {bench}: what the policy wrote\n\n{watch_lib.samples_markdown(rows)}")
    return
  if _WATCH.value:  # SIGTERM (a scheduler stopping the job) ends the watch as Ctrl-C does: cleanly
    signal.signal(signal.SIGTERM, signal.default_int_handler)
  rows = watch_lib.watch(
    _WORKDIR.value,
    _CONFIG.value,
    out_dir=_OUT.value,
    poll_s=_POLL.value,
    stop_after_step=_STOP.value if _WATCH.value else None,
    timeout_s=_TIMEOUT.value if _WATCH.value else None,
    follow=_WATCH.value,
  )
  out_dir = _OUT.value or f"{_WORKDIR.value}/eval"
  print(f"evaluated {len(rows)} new checkpoint(s); table: {out_dir}/{watch_lib.TABLE_FILE}")
  print(watch_lib.markdown_table(watch_lib.read_results(out_dir)))


if __name__ == "__main__":
  cli.run(main)
