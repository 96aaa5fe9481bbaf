"""Errors a user causes and can fix: a config field, a path, a judge that does not answer.

The launch mains (`arena_jax.cli.run`) print these as one line with the fix and no traceback;
`--verbosity=1` shows the traceback as well. Each also derives from the builtin type callers
already catch (ValueError, FileNotFoundError, …), so library users are not affected.
"""


class UserError(Exception):
  """Base of the errors whose message says what to change."""


class ConfigError(UserError, ValueError):
  """A config field with a bad value: `config.<field>: <what is wrong, what to change>`."""


class MissingFileError(UserError, FileNotFoundError):
  """A file or directory the run needs is not there; the message says how to make it."""


class WorkdirError(UserError, FileExistsError):
  """The work directory holds another run's state."""


class InputError(UserError, ValueError):
  """A user's input file with malformed rows; the message names each as `path:line: field: problem`."""
