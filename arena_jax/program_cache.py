"""Jitted programs shared within a process by everything they are a function of.

A second run of the same shapes and settings (a notebook's next `train()`, the test suite's many runs, the
evaluation after training) traces, lowers and compiles nothing again: `jax.jit` caches per function
object, so two equal samplers or two equal update builders would otherwise each trace their own copy.

    fn = program_cache.shared(("update", update_spec, model_config, ...), lambda: jax.jit(...))

    class Sampler:                      # a frozen dataclass: every field static and compared
      @program_cache.shared_property
      def _decode_fn(self): return jax.jit(self._decode)

The newest `MAX_PROGRAMS` keys are kept.
"""

from __future__ import annotations

import collections
import functools
from typing import Any, Callable

MAX_PROGRAMS = 64
_PROGRAMS: collections.OrderedDict = collections.OrderedDict()


def shared(key: tuple, build: Callable[[], Any]) -> Any:
  """`build()` once per `key` in this process. `key` must name every input the program depends on (a frozen
  spec of the config it reads, the model config, the mesh): two callers with equal keys get the same object.
  `build` must read those frozen values, not a mutable config: jax traces at the first call and at each new
  input shape, so a value read then that can differ from the key's compiles one program under another's key
  (`train.step.UpdateSpec`)."""
  if key in _PROGRAMS:
    _PROGRAMS.move_to_end(key)
    return _PROGRAMS[key]
  _PROGRAMS[key] = value = build()
  while len(_PROGRAMS) > MAX_PROGRAMS:
    _PROGRAMS.popitem(last=False)
  return value


def shared_property(build: Callable[[Any], Any]) -> property:
  """Like `functools.cached_property`, but one value for all equal instances (`build(self)` runs once per
  equal set): for frozen dataclasses whose fields are everything the value depends on. An instance that
  cannot be hashed keeps its own value."""
  name = f"{build.__module__}.{build.__qualname__}"

  @functools.wraps(build)
  def get(self):
    try:
      hash(self)
    except TypeError:
      own = self.__dict__.setdefault("_own_programs", {})
      if name not in own:
        own[name] = build(self)
      return own[name]
    return shared((name, self), lambda: build(self))

  return property(get)
