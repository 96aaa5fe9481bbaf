"""Checkpoint-driven evaluation of an RL run (`arena_jax.eval.watch`; the metrics of SPEC §9).

    python -m launch.eval --workdir=runs/arena_live                      # every checkpoint not yet evaluated
    python -m launch.eval --workdir=runs/arena_live --step=40            # one checkpoint
    python -m launch.eval --workdir=runs/arena_live --watch --stop_after_step=200   # follow a live run
    python -m launch.eval --workdir=runs/arena_live --watch              # follow it until Ctrl-C / SIGTERM
    python -m launch.eval --workdir=... --config.num_samples=16 --config.benchmarks='("arithmetic",)'
    python -m launch.eval --workdir=runs/real --suite=configs/eval/paper.py:/data/eval   # the paper's Table 1
    python -m launch.eval --hf_path=/ckpt/Qwen3-8B --suite=configs/eval/paper.py:/data/eval  # before any RL
    python -m launch.eval --hf_path=/models/SmolLM2-135M-Instruct.Q4_1.gguf --suite=configs/eval/samples.py  # a GGUF
    python -m launch.eval --hf_path=pretrained:smollm2-135m-instruct --suite=configs/eval/real_smollm2.py  # real

Results go to <workdir>/eval/: eval.jsonl (one row per step), eval.md (a table), samples.jsonl (a few
completions per benchmark and step: `--config.samples_per_benchmark`), TensorBoard (scalars and the
completions as text). `--step` evaluates that checkpoint again (replacing its row) and also prints its table
and the completions.
The problems are the run's own: its task settings are read from <workdir>/tasks.json (a flag that
contradicts the trained task's settings is an error naming both values); `--suite` adds named benchmarks on
other files (`arena_jax.eval.benchmarks`), and eval.md shows each checkpoint in the paper's Table 1 layout.
`--hf_path` evaluates a Hugging Face checkpoint directory or a `.gguf` file itself (step 0 of <out_dir>, default
runs/eval_<name>), with prompts through its chat template unless `--config.tasks.prompt_format` says otherwise.
"""

import os
import signal

from absl import flags

import configs

from arena_jax import cli
from arena_jax.errors import ConfigError
from arena_jax.errors import MissingFileError
from arena_jax.errors import UserError
from arena_jax.eval import watch as watch_lib

_CONFIG = cli.config_dict_flag("config", watch_lib.default_config())
_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory (or --hf_path).")
_HF = flags.DEFINE_string(
  "hf_path",
  None,
  "Evaluate this Hugging Face checkpoint directory, .gguf file or pretrained:<name> (pretrained), not a run.",
)
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
  """`--config` with its overrides and `--suite`'s fields, its benchmarks checked now (a suite file that is not
  there, an unknown task), before any checkpoint is read."""
  config = _CONFIG.value
  try:
    if _SUITE.value:
      # `--config.<field>` flags given on the command line win over the suite's values.
      given = {f.split(".")[0] for f in cli.overridden_fields("config")}
      config = watch_lib.with_suite(config, configs.get_config(_SUITE.value), keep=given)
    watch_lib.benchmark_meta(config)
  except ValueError as e:  # the ValueErrors of `with_suite` and `benchmarks.resolve` name a field of the config
    if isinstance(e, UserError):
      raise
    raise ConfigError(str(e)) from e
  return config


def main(argv):
  del argv
  if bool(_WORKDIR.value) == bool(_HF.value):
    raise ConfigError("give one of --workdir (an RL run) and --hf_path (a Hugging Face checkpoint)")
  # A path that is not there, named at once, before any file is read. A watch may wait for a run that is starting;
  # a single pass over a missing --workdir would only create <workdir>/eval and report nothing.
  hf_path = _HF.value
  if hf_path and hf_path.startswith("pretrained:"):  # a model shipped in a pinned wheel (`make real-model`)
    from arena_jax import pretrained  # pylint: disable=g-import-not-at-top  (JAX: only for this form)

    hf_path = os.fspath(pretrained.resolve(hf_path))
  if hf_path and not os.path.exists(os.path.expanduser(hf_path)):
    raise MissingFileError(f"--hf_path={_HF.value}: no such file or directory")
  if _WORKDIR.value and not _WATCH.value and not os.path.isdir(os.path.expanduser(_WORKDIR.value)):
    raise MissingFileError(f"--workdir={_WORKDIR.value}: no such directory (an RL run's; --watch waits for one)")
  config = _config()
  if _HF.value:
    if not cli.field_given("config", "tasks.prompt_format"):  # an instruct checkpoint reads its chat template
      config.tasks.prompt_format = "chat"
    name = os.path.basename(os.path.normpath(hf_path))
    out_dir = _OUT.value or os.path.join("runs", "eval_" + (name[: -len(".gguf")] if name.endswith(".gguf") else name))
    row = watch_lib.evaluate_hf(hf_path, config, out_dir=out_dir)
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
