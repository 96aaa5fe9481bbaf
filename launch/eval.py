"""Checkpoint-driven evaluation of an RL run (`arena_jax.eval.watch`; the metrics of SPEC §9).

    python -m launch.eval --workdir=runs/arena_live                      # every checkpoint not yet evaluated
    python -m launch.eval --workdir=runs/arena_live --step=40            # one checkpoint
    python -m launch.eval --workdir=runs/arena_live --watch --stop_after_step=200   # follow a live run
    python -m launch.eval --workdir=runs/arena_live --watch              # follow it until Ctrl-C / SIGTERM
    python -m launch.eval --workdir=... --config.num_samples=16 --config.benchmarks='("arithmetic",)'
    python -m launch.eval --workdir=runs/real --suite=configs/eval/paper.py:/data/eval   # the paper's Table 1
    python -m launch.eval --hf_path=/ckpt/Qwen3-8B --suite=configs/eval/paper.py:/data/eval  # before any RL

Results go to <workdir>/eval/: eval.jsonl (one row per step), eval.md (a table), samples.jsonl (a few
completions per benchmark and step: `--config.samples_per_benchmark`), TensorBoard (scalars and the
completions as text). `--step` evaluates that checkpoint again (replacing its row) and also prints its table
and the completions.
The problems are the run's own: its task settings are read from <workdir>/tasks.json (a flag that
contradicts the trained task's settings is an error naming both values); `--suite` adds named benchmarks on
other files (`arena_jax.eval.benchmarks`), and eval.md shows each checkpoint in the paper's Table 1 layout.
`--hf_path` evaluates a Hugging Face checkpoint itself (step 0 of <out_dir>, default runs/eval_<name>), with
prompts through its chat template unless `--config.tasks.prompt_format` says otherwise.
"""

import os
import signal

from absl import flags
from absl import logging

import configs

from arena_jax import cli
from arena_jax.errors import ConfigError
from arena_jax.eval import watch as watch_lib

_CONFIG = cli.config_dict_flag("config", watch_lib.default_config())
_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory (or --hf_path).")
_HF = flags.DEFINE_string("hf_path", None, "Evaluate this Hugging Face checkpoint directory instead of a run.")
_SUITE = flags.DEFINE_string(
  "suite", None, "A suite config, configs/eval/<name>.py[:arg]: named benchmarks (`--config.*` flags still apply)."
)
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


def _config():
  config = _CONFIG.value
  if _SUITE.value:
    # `--config.<field>` flags given on the command line win over the suite's values.
    given = {
      n[len("config.") :].split(".")[0] for n in flags.FLAGS if n.startswith("config.") and flags.FLAGS[n].present
    }
    config = watch_lib.with_suite(config, configs.get_config(_SUITE.value), keep=given)
  return config


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  if bool(_WORKDIR.value) == bool(_HF.value):
    raise ConfigError("give one of --workdir (an RL run) and --hf_path (a Hugging Face checkpoint)")
  config = _config()
  if _HF.value:
    if not flags.FLAGS["config.tasks.prompt_format"].present:  # an instruct checkpoint reads its chat template
      config.tasks.prompt_format = "chat"
    out_dir = _OUT.value or os.path.join("runs", "eval_" + os.path.basename(os.path.normpath(_HF.value)))
    row = watch_lib.evaluate_hf(_HF.value, config, out_dir=out_dir)
    print(watch_lib.table1_markdown(row))
    print(f"results: {out_dir}/{watch_lib.RESULTS_FILE}, table: {out_dir}/{watch_lib.TABLE_FILE}")
    return
  if _STEP.value is not None:
    out_dir = _OUT.value or os.path.join(_WORKDIR.value, "eval")
    results = watch_lib.evaluate_step(_WORKDIR.value, _STEP.value, config)
    samples = {b: m[watch_lib.SAMPLES] for b, m in results.items() if watch_lib.SAMPLES in m}  # record takes them out
    row = watch_lib.record_step(out_dir, _STEP.value, results, watch_lib.benchmark_meta(config))
    print(watch_lib.table1_markdown(row))
    for bench, rows in samples.items():
      print(f"\n### {bench}: what the policy wrote\n\n{watch_lib.samples_markdown(rows)}")
    return
  if _WATCH.value:  # SIGTERM (a scheduler stopping the job) ends the watch as Ctrl-C does: cleanly
    signal.signal(signal.SIGTERM, signal.default_int_handler)
  rows = watch_lib.watch(
    _WORKDIR.value,
    config,
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
