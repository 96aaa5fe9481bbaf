"""One registry type for every place where the paper has alternatives (after tunix's function registry).

A `Registry` maps names to entries of one kind: reward modes, aggregations, tournament topologies,
Bradley–Terry solvers, judge backends, tasks, model configs. An entry is added by decorating it:

    SOLVERS = Registry("Bradley–Terry solver")

    @SOLVERS.register("newton")
    def _solve_newton(w, l2, options): ...

    @SCHEDULERS.register()             # no name: the class's own `name` attribute
    class Swiss(Scheduler): name = "swiss"

A registry is a read-only `Mapping` (`name in R`, `R[name]`, `sorted(R)`), so the config checks read it
when they check (`config_schema.registered(R)`): a new entry is valid everywhere at once, and no tuple of
names elsewhere needs an edit. `R.get_or_raise(name)` refuses an unknown name with one line that names
the kind and every registered name.

This module imports nothing from arena_jax but `errors`: every room can hold a registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Generic, Iterator, TypeVar

from arena_jax.errors import UserError

T = TypeVar("T")


class UnknownNameError(UserError, ValueError, KeyError):
  """A name that no entry of a registry has; the message lists the registered ones."""

  def __str__(self) -> str:  # KeyError would quote the message
    return str(self.args[0]) if self.args else ""


class Registry(Mapping, Generic[T]):
  """Named entries of one kind (see the module docstring).

  Args:
    kind: what an entry is, for messages ("reward mode", "topology").
    check: optional `check(name, entry) -> entry` run at registration: it validates an entry's
      declarations (raising ValueError) and returns what the registry stores (e.g. an instance of a class).
  """

  def __init__(self, kind: str, *, check: Callable[[str, Any], T] | None = None):
    self.kind = kind
    self._check = check
    self._entries: dict[str, T] = {}

  def register(self, name: str | None = None, *, replace: bool = False) -> Callable[[Any], Any]:
    """Decorator: adds the decorated object under `name` (default: its `name` attribute) and returns it
    unchanged; a class gets `name` set. A second entry under one name is refused unless `replace`."""

    def deco(obj):
      key = name if name is not None else getattr(obj, "name", None)
      if not key or not isinstance(key, str):
        raise ValueError(f"a {self.kind} needs a non-empty name (pass one to register, or set `name`)")
      if key in self._entries and not replace:
        raise ValueError(f"a {self.kind} named {key!r} is already registered")
      if isinstance(obj, type) and name is not None:
        obj.name = key
      self._entries[key] = self._check(key, obj) if self._check else obj
      return obj

    return deco

  def get_or_raise(self, name: str, *, field: str = "") -> T:
    """The entry `name`; `UnknownNameError` naming the kind, `field` (a config path) and the choices."""
    if name not in self._entries:
      where = f"{field}: " if field else ""
      raise UnknownNameError(f"{where}unknown {self.kind} {name!r}; choose one of {', '.join(sorted(self))}")
    return self._entries[name]

  def unregister(self, name: str) -> None:
    """Removes an entry (tests that register one of their own take it out again)."""
    del self._entries[name]

  def names(self) -> tuple[str, ...]:
    """The registered names, sorted."""
    return tuple(sorted(self._entries))

  def __getitem__(self, name: str) -> T:
    return self._entries[name]

  def __iter__(self) -> Iterator[str]:
    return iter(self._entries)

  def __len__(self) -> int:
    return len(self._entries)

  def __repr__(self) -> str:
    return f"Registry({self.kind!r}: {', '.join(self._entries)})"
