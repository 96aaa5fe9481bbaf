"""What every launch main shares: user errors in one line, quiet logs (thin mains: flags → config → one library
call).

    from arena_jax import cli
    if __name__ == "__main__":
      cli.run(main)

`run` is `absl.app.run` with three differences. A flag that the config rejects (`--config.reward.mdoe=…`)
and an `arena_jax.errors.UserError` raised by the run (a bad config field, a missing policy directory, an
unreachable judge) print `error: <message>` and exit with status 2, without a traceback; with
`--verbosity=1` (or higher) the traceback is shown too. Anything else is a bug and keeps its traceback. And the
logs are at absl's WARNING level unless `--verbosity` is given.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Callable

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from arena_jax import config_schema
from arena_jax.errors import MissingFileError
from arena_jax.errors import UserError

EXIT_USER_ERROR = 2


def _say(message: str) -> None:
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(EXIT_USER_ERROR)


def _verbose() -> bool:
  return flags.FLAGS.is_parsed() and flags.FLAGS["verbosity"].value >= 1


def _parse_flags(argv):
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    _say(f"{e} (--helpfull lists every flag)")
  except (AttributeError, KeyError, TypeError, ValueError) as e:
    if "--verbosity=1" in argv or "-v=1" in argv:
      raise
    moved = _moved_override(argv)
    if moved:
      _say(moved)
    # A --config.<field> override that ml_collections rejects: its message is the repr of a KeyError,
    # e.g. '\'mdoe\'\nDid you mean "mode" instead of "mdoe"?'.
    raw = str(e.args[0] if e.args else e)
    key = re.search(r"'\\?'?([\w.]+)\\?'", raw)
    hint = re.search(r"Did you mean [^?]*\?", raw)
    what = f"no field {key.group(1)!r}" if key and isinstance(e, (AttributeError, KeyError)) else raw.strip()
    _say(
      f"a --config override was rejected: {what}"
      + (f"; {hint.group(0)}" if hint else "")
      + " (--verbosity=1 shows the traceback)"
    )


def _moved_override(argv) -> str | None:
  """The line naming the new field of an override of a config field that moved (`config_schema.moved_to`)."""
  for arg in argv[1:]:
    m = re.match(r"--(\w+)\.([\w.]+)(=|$)", arg)
    new = m and config_schema.moved_to(m.group(2))
    if new:
      return f"--{m.group(1)}.{m.group(2)} has moved: set --{m.group(1)}.{new} instead"
  return None


def run(main: Callable[[list[str]], object]) -> None:
  """`absl.app.run(main)` with user errors in one line (module docstring)."""

  def guarded(argv):
    # Quiet unless asked (--verbosity): at absl's INFO, orbax logs every file operation and JAX names each
    # accelerator backend it did not find ("Unable to initialize backend 'tpu'") on a CPU-only machine.
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)
    try:
      return main(argv)
    except UserError as e:
      if _verbose():
        raise
      _say(f"{e} (--verbosity=1 shows the traceback)")

  app.run(guarded, flags_parser=_parse_flags)


def config_dict_flag(name: str, default, help_string: str = "ConfigDict instance."):
  """`--<name>` and its `--<name>.<field>` overrides of the ConfigDict `default`, locked: an override of a field
  the config does not declare is an error that names it, not a new field."""
  return config_flags.DEFINE_config_dict(name, default, help_string, lock_config=True)


def overridden_fields(name: str) -> set[str]:
  """The fields of the config flag `--<name>` that the command line overrides (`--<name>.<field>=…`), as dotted
  paths ("tasks.prompt_format"); after flag parsing. Ask this, not `flags.FLAGS["<name>.<field>"].present`: an
  override flag exists only once it is given, so asking for one that was not is a KeyError."""
  return set(config_flags.get_override_values(flags.FLAGS[name]))


def field_given(name: str, path: str) -> bool:
  """Whether the command line sets the field `path` ("tasks.prompt_format") of the config flag `--<name>`: by its
  own override, or by one of a section above it (`--<name>.tasks=…`)."""
  return any(path == f or path.startswith(f + ".") for f in overridden_fields(name))


class JsonlJobFlags:
  """The flags of a main that works through a JSONL file row by row, resumably: `--input`, `--output` (appended
  to), `--retry_failed` and `--progress` (`launch.judge_pairs`, `launch.jury`)."""

  def __init__(self, *, input_help: str, output_help: str, retry_help: str):
    self.input = flags.DEFINE_string("input", None, input_help, required=True)
    self.output = flags.DEFINE_string("output", None, output_help + " (appended to; resumable).", required=True)
    self.retry_failed = flags.DEFINE_bool("retry_failed", False, retry_help)
    self.progress = flags.DEFINE_bool("progress", True, "Show a progress bar on stderr.")

  def job_args(self) -> dict:
    """The parsed flags as the file jobs take them: `input_path`, `output_path`, `retry_failed`, `progress`;
    a `--input` that is not a file is a MissingFileError naming it (ask before starting a judge server)."""
    if not os.path.isfile(os.path.expanduser(self.input.value)):
      raise MissingFileError(f"--input={self.input.value}: no such file")
    return dict(
      input_path=self.input.value,
      output_path=self.output.value,
      retry_failed=self.retry_failed.value,
      progress=self.progress.value,
    )
