"""The device check: a 1B-class policy's sampler, RL update and long decode on one CUDA GPU, side by side with
transformers' `generate` on the same chip, in one command of at most 8 minutes (docs/device.md).

    bash benchmarks/device.sh [--dry-run] [--out DIR] [--only PART ...]

The plan (`PLAN`): named parts, each in its own process with its own time box (its start, imports, weights and
compiles count), one after another, so that one GPU's memory serves each in turn and a part that fails, or hangs
in a compile that cannot be interrupted in-process, is killed at its box's end and reported while the others
still run:

  chip          40 s  device kind and peaks; cuDNN attention through the policy's own path against xla
  sampler      110 s  ours: B = 128 prompts of P = 512 random tokens, N = 256 new tokens each (device_parts.py)
  transformers  80 s  transformers' `generate` in torch: the same config, batch and budget (device_torch.py)
  update       120 s  the RL update: CISPO, float32 masters, bfloat16 compute, 32 rows of 512 + 512 tokens in 4
                      micro-batches
  long_decode  120 s  8 rows decoding 8192 new tokens each

Each box bounds its part's process (SIGTERM, then SIGKILL); a part's timed repeats stop at 80 % of its box
(each measurement runs at least once). The boxes sum to 470 s, under `BUDGET_S` (480 s); device.sh's backstop,
560 s, stays inside the 10 minutes a device machine gives one command. If the cuDNN check fails (an exception,
or output off xla's), the JSON says why (`cudnn_attention`) and the later parts run xla attention, named in each
part's `attention`; a part that fails with cuDNN all the same runs once more with xla (`part_main`).

The figures (the JSON's top level; `None` where the part that makes it did not finish, `parts` has why):
  sampler_tokens_per_s      ours, B·N useful tokens per second of the whole call (prefill + decode)
  transformers_tokens_per_s theirs, the same
  sampler_vs_transformers   the ratio, ours over theirs
  decode_hbm_fraction       the decode step's bytes (bfloat16 weights once, plus each row's KV cache over its
                            real context, on average P + N/2) per step time, over the chip's HBM bandwidth:
                            a lower bound on the traffic
  update_tokens_per_s       the update's tokens (rows × (P + N)) per second
  update_mfu                model FLOPs per second over the dense bf16 peak: 6 × the matmul parameters per token,
                            causal attention over the real context, the output projection where a token is
                            scored (benchmarks/train_step.py's count)
  update_hlo_fraction       the compiler's FLOPs (XLA's cost analysis of the update as one micro-batch, the
                            recomputed log-prob chunks included) per second over the peak
  long_decode_tokens_per_s  rows × 8192 new tokens per second of the whole call
  long_decode_fits          true: it ran; false: it failed out of memory; null: it did not finish otherwise
The peaks: the vendors' figures by device kind (H100 / H200 SXM: 989 TFLOP/s dense bf16, 3.35 / 4.8 TB/s); another
kind, or the CPU of the dry run, gets measured ones (`peak_source: measured`).

`--dry-run` (tests/test_device_script.py, `make device-dryrun`): the same parts at tiny shapes on the CPU, xla
attention; the transformers part is skipped, and says so, where torch is not importable. The exit status is 1
when a part failed or ran out of its box. A table, then one JSON line.
"""

from __future__ import annotations

import argparse
import collections
import gc
import importlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import traceback

from benchmarks import common  # the table and the JSON line; the standard library only, as this module

REPO = pathlib.Path(__file__).resolve().parent.parent
# (part, time box in seconds): in this order, each in its own process (module docstring).
PLAN = (("chip", 40), ("sampler", 110), ("transformers", 80), ("update", 120), ("long_decode", 120))
BUDGET_S = 480  # 8 minutes: the plan's boxes together, at most
# Where each part's code is: (module, function).
PARTS = {
  "chip": ("benchmarks.device_parts", "chip"),
  "sampler": ("benchmarks.device_parts", "sampler"),
  "transformers": ("benchmarks.device_torch", "generate"),
  "update": ("benchmarks.device_parts", "update"),
  "long_decode": ("benchmarks.device_parts", "long_decode"),
}
# The parts whose policy runs the attention the chip part chose.
CUDNN_PARTS = ("sampler", "update", "long_decode")
# The JSON's top-level figures, in order (module docstring).
FIGURES = (
  "sampler_tokens_per_s",
  "transformers_tokens_per_s",
  "sampler_vs_transformers",
  "sampler_mfu",
  "decode_hbm_fraction",
  "update_tokens_per_s",
  "update_mfu",
  "update_hlo_fraction",
  "long_decode_tokens_per_s",
  "long_decode_fits",
)
REPEATS_UNTIL = 0.8  # a part's timed repeats stop at this fraction of its box


# ─────────────────────────────────────────── one part ───────────────────────────────────────────


def run_part(name: str, command: list[str], box_s: float, env: dict | None = None, echo=None) -> dict:
  """Runs one part's process for at most `box_s` seconds: its result is the last line of its stdout that is a
  JSON object (`part_main`), with `part_s` (the process's wall-clock seconds) and `box_s` added; its stderr is
  echoed to `echo` (default: stderr) as it comes, prefixed with the part's name. A process still running at the
  box's end is killed with its process group (`status: timed_out`); one that ends without a result is `failed`,
  with the tail of its output."""
  echo = echo or sys.stderr
  start = time.monotonic()
  proc = subprocess.Popen(
    command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
  )
  out, tail = [], collections.deque(maxlen=25)

  def read_out():
    for line in proc.stdout:
      out.append(line)

  def read_err():
    for line in proc.stderr:
      tail.append(line.rstrip("\n"))
      print(f"  [{name}] {line}", end="", file=echo, flush=True)

  readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
  for reader in readers:
    reader.start()
  timed_out = False
  try:
    proc.wait(timeout=box_s)
  except subprocess.TimeoutExpired:
    timed_out = True
    _kill(proc)
  except BaseException:  # this process is stopped (device.sh's backstop, Ctrl-C): the part goes with it
    _kill(proc)
    raise
  for reader in readers:
    reader.join(timeout=10)
  part_s = time.monotonic() - start
  if timed_out:
    result = {"status": "timed_out", "error": f"still running at the end of its {box_s:g} s box: killed"}
  else:
    result = next((r for r in map(_json_object, reversed(out)) if r is not None), None)
    if result is None:
      result = {"status": "failed", "error": f"exit status {proc.returncode} without a result"}
  if result.get("status") not in ("ok", "skipped"):
    result["log_tail"] = list(tail)[-12:] + [line.rstrip("\n") for line in out[-5:]]
  return {**result, "part_s": part_s, "box_s": box_s}


def _kill(proc: subprocess.Popen) -> None:
  """SIGTERM to the part's process group, then SIGKILL to whatever of it still runs 5 s later (a compile can
  ignore SIGTERM; a child of the part's can outlive it)."""
  for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 30)):
    try:
      os.killpg(proc.pid, sig)
    except ProcessLookupError:
      return
    try:
      proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
      pass


def _json_object(line: str) -> dict | None:
  line = line.strip()
  if not line.startswith("{"):
    return None
  try:
    value = json.loads(line)
  except ValueError:
    return None
  return value if isinstance(value, dict) else None


def part_main(name: str, box_s: float, dry_run: bool, context: dict) -> int:
  """The part's own process: runs `PARTS[name]` with the deadline of its repeats and prints its result, one JSON
  line, last on stdout (an exception is the result `failed`, with its message; the traceback goes to stderr).

  A part that fails with cuDNN attention, although the chip's check passed, runs once more with xla attention
  in what is left of its box: its figures then say `attention: xla`, and `cudnn_error` why."""
  deadline = time.monotonic() + REPEATS_UNTIL * box_s
  try:
    module, fn = PARTS[name]
    run = getattr(importlib.import_module(module), fn)
    cudnn_error = None
    try:
      result = run(dry_run=dry_run, deadline=deadline, context=context)
    except Exception as e:  # noqa: BLE001
      if context.get("attention") != "cudnn" or name not in CUDNN_PARTS:
        raise
      traceback.print_exc()
      cudnn_error = f"{type(e).__name__}: {e}"[:2000]
    if cudnn_error is not None:  # outside the handler: its traceback no longer holds the first attempt's arrays
      gc.collect()
      print(f"{name}: failed with cuDNN attention; once more with xla attention", file=sys.stderr, flush=True)
      result = run(dry_run=dry_run, deadline=deadline, context={**context, "attention": "xla"})
      result["cudnn_error"] = cudnn_error
    result = {"status": "ok", **result}
  except Exception as e:  # noqa: BLE001  (reported in the JSON; the other parts still run)
    traceback.print_exc()
    result = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:2000]}
  print(json.dumps(result), flush=True)
  return 0


# ─────────────────────────────────────────── the plan ───────────────────────────────────────────


def part_env(name: str, dry_run: bool) -> dict:
  """A part's environment: JAX on the GPU (the CPU in the dry run); the transformers part keeps JAX off the GPU
  (it only reads the policy's config), leaving the chip to torch."""
  platform = "cpu" if dry_run or name == "transformers" else "cuda"
  env = dict(os.environ, JAX_PLATFORMS=platform, PYTHONUNBUFFERED="1")
  # Each part has the chip to itself: JAX's pool may take 90 % of its memory (75 % by default).
  env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")
  return env


def run_plan(dry_run: bool, only=(), torch_python: str | None = None) -> dict:
  """Every part of `PLAN` in order ({name: result}); the chip part's peaks and attention verdict go to the rest."""
  context = {"attention": "xla" if dry_run else "cudnn", "peaks": None}
  results = {}
  for name, box in PLAN:
    if only and name not in only:
      results[name] = {"status": "skipped", "reason": "not among --only"}
      continue
    python = torch_python if name == "transformers" and torch_python else sys.executable
    command = [python, "-m", "benchmarks.device", "--part", name, "--box-s", str(box), "--context", json.dumps(context)]
    print(f"── {name} (box {box} s) ──", file=sys.stderr, flush=True)
    results[name] = result = run_part(name, command + (["--dry-run"] if dry_run else []), box, part_env(name, dry_run))
    print(f"── {name}: {result['status']} in {result['part_s']:.1f} s", file=sys.stderr, flush=True)
    if name == "chip" and result["status"] == "ok":
      context["peaks"] = [result["peak_tflops"] * 1e12, result["peak_hbm_tbps"] * 1e12]
    if name == "chip" and not dry_run:
      check = result.get("attention_check") or {}
      if check.get("status") != "ok":  # loud in the JSON (`cudnn_attention`); the other parts' figures still come
        context["attention"] = "xla"
        why = check.get("error") or result.get("error") or result["status"]
        print(f"!! cuDNN attention failed on this chip: {why}\n!! the other parts run xla attention", flush=True)
  return results


def figures(results: dict, dry_run: bool, elapsed_s: float) -> dict:
  """The JSON: the top-level figures (`FIGURES`, module docstring), the chip, the plan and every part's result."""
  get = lambda part, *path: _get(results.get(part), path)
  ok = lambda part: (results.get(part) or {}).get("status") == "ok"
  ours, theirs = get("sampler", "whole", "tokens_per_s"), get("transformers", "tokens_per_s")
  check = get("chip", "attention_check") or {}
  if dry_run:
    cudnn = {"status": "skipped", "reason": "dry run: the CPU has no cuDNN (the check ran xla against itself)"}
  elif check:
    cudnn = {k: v for k, v in check.items() if k != "impl"}
  else:  # the chip part itself did not finish
    chip = results.get("chip") or {}
    cudnn = {"status": chip.get("status"), "error": chip.get("error") or chip.get("reason")}
  out = {
    "device_kind": get("chip", "device_kind"),
    "platform": get("chip", "platform"),
    "jax": get("chip", "jax"),
    "dry_run": dry_run,
    "attention": get("sampler", "attention") or get("update", "attention"),
    "cudnn_attention": cudnn,
    "peak_tflops": get("chip", "peak_tflops"),
    "peak_hbm_tbps": get("chip", "peak_hbm_tbps"),
    "peak_source": get("chip", "peak_source"),
    "sampler_tokens_per_s": ours,
    "transformers_tokens_per_s": theirs,
    "sampler_vs_transformers": ours / theirs if ours and theirs else None,
    "sampler_mfu": get("sampler", "whole", "mfu"),
    "decode_hbm_fraction": get("sampler", "decode", "hbm_fraction"),
    "update_tokens_per_s": get("update", "tokens_per_s"),
    "update_mfu": get("update", "mfu"),
    "update_hlo_fraction": get("update", "hlo_fraction"),
    "long_decode_tokens_per_s": get("long_decode", "tokens_per_s"),
    "long_decode_fits": True if ok("long_decode") else False if _out_of_memory(results.get("long_decode")) else None,
    "statuses": {name: (results.get(name) or {}).get("status") for name, _ in PLAN},
    "plan": [[name, box] for name, box in PLAN],
    "budget_s": BUDGET_S,
    "elapsed_s": elapsed_s,
    "parts": results,
  }
  return out


def _out_of_memory(result: dict | None) -> bool:
  error = str((result or {}).get("error", "")) + str((result or {}).get("cudnn_error", ""))
  return (
    result is not None
    and result.get("status") == "failed"
    and ("RESOURCE_EXHAUSTED" in error or "out of memory" in error.lower())
  )


def _get(result: dict | None, path) -> object:
  """A figure of a part that ended `ok` (None otherwise)."""
  if not result or result.get("status") != "ok":
    return None
  for key in path:
    result = result.get(key) if isinstance(result, dict) else None
  return result


def print_table(results: dict, out: dict) -> None:
  r = lambda part: results.get(part) or {}
  status = lambda part: f"{r(part).get('status')} {r(part).get('part_s', 0):.0f}/{r(part).get('box_s', 0):g} s"
  sampler, hf, update, long = r("sampler"), r("transformers"), r("update"), r("long_decode")
  shape = lambda d, a, b, c: f"{d.get(a)}×({d.get(b)}+{d.get(c)})" if d.get(a) else ""
  na = lambda v: "—" if v is None else f"{v:.4g}" if isinstance(v, float) else v
  cudnn = out["cudnn_attention"].get("status")
  rows = [
    ("chip", status("chip"), na(out["device_kind"]), "", "", f"cuDNN attention: {cudnn}"),
    ("sampler (ours)", status("sampler"), shape(sampler, "prompts", "prompt_len", "new_tokens"),
     na(out["sampler_tokens_per_s"]), na(out["sampler_mfu"]), f"decode of HBM: {na(out['decode_hbm_fraction'])}"),
    ("transformers generate", status("transformers"), shape(hf, "prompts", "prompt_len", "new_tokens"),
     na(out["transformers_tokens_per_s"]), "", f"ours / theirs: {na(out['sampler_vs_transformers'])}"),
    ("update (CISPO)", status("update"), shape(update, "rows", "prompt_len", "new_tokens"),
     na(out["update_tokens_per_s"]), na(out["update_mfu"]), f"compiler's count: {na(out['update_hlo_fraction'])}"),
    ("long decode", status("long_decode"), shape(long, "rows", "prompt_len", "new_tokens"),
     na(out["long_decode_tokens_per_s"]), "", f"fits: {na(out['long_decode_fits'])}"),
  ]  # fmt: skip
  common.print_table(["part", "status s/box", "shape", "tokens/s", "MFU", ""], rows)
  for name, _ in PLAN:
    if r(name).get("status") in ("failed", "timed_out"):
      print(f"{name}: {r(name)['status']}: {r(name).get('error')}")
    elif r(name).get("status") == "skipped":
      print(f"{name}: skipped: {r(name).get('reason')}")
  print(f"{out['elapsed_s']:.1f} s in all (plan {sum(b for _, b in PLAN)} s, budget {BUDGET_S} s)")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dry-run", action="store_true", help="tiny shapes, xla attention, the CPU (the test)")
  parser.add_argument("--out", help="a folder to write device.json into (the figures)")
  parser.add_argument("--only", action="append", default=[], choices=[n for n, _ in PLAN], help="run these parts only")
  parser.add_argument(
    "--torch-python",
    default=os.environ.get("DEVICE_TORCH_PYTHON"),
    help="the interpreter of the transformers part, where another one has torch (default: this one)",
  )
  # A part's own process (run_plan starts it).
  parser.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)
  parser.add_argument("--box-s", type=float, help=argparse.SUPPRESS)
  parser.add_argument("--context", default="{}", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.part:
    return part_main(args.part, args.box_s, args.dry_run, json.loads(args.context))

  # SIGTERM (device.sh's backstop) unwinds as an exit, so that the running part's process group is killed too.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  start = time.monotonic()
  results = run_plan(args.dry_run, args.only, args.torch_python)
  out = figures(results, args.dry_run, time.monotonic() - start)
  print()
  print_table(results, out)
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    pathlib.Path(args.out, "device.json").write_text(json.dumps(out) + "\n", encoding="utf-8")
  common.emit_json(out)
  return 0 if all(v.get("status") in ("ok", "skipped") for v in results.values()) else 1


if __name__ == "__main__":
  sys.exit(main())
