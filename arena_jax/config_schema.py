"""One declaration per config field: its default, the values it accepts and what it means.

Each config room declares its fields once, as a `Section` of `field(...)`s: the typed, self-checking
config of tunix, written as big_vision writes a commented `get_config()`. From that one declaration come

  * the default `ml_collections.ConfigDict`: `Section.defaults()`;
  * the up-front check: `Section.validate(config, prefix)` raises `ValueError("<prefix>.<path>: <what is
    wrong and what to change>")` for the first bad field, before anything is built or compiled;
  * the reference tables of docs/configuration.md: `Section.fields()`, `rule_docs()` and `table()`, which
    tools/gen_config_docs.py renders.

A check of one value is a `Check`, built by the predicates below (`integer`, `number`, `boolean`,
`one_of`, ...). A check that relates several fields is a named function registered with `@section.rule`;
the docs list it by its docstring.

This module imports nothing from arena_jax but `errors`, so that every room can declare its config with it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Any, Callable, Iterable, Iterator, Sequence

import ml_collections
from ml_collections.config_dict import placeholder as _placeholder

from arena_jax.errors import ConfigError

NOT_CHECKED = " †"  # marks, in the docs, a documented range that no up-front check enforces


def fail(path: str, message: str):
  """The one way a config check reports: `ConfigError("<path>: <message>")` (a ValueError)."""
  raise ConfigError(f"{path}: {message}")


# ───────────────────────────────────── checks of one value ─────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class Check:
  """A test of one value.

  Attributes:
    valid: the accepted values, as the docs' "valid" column writes them ("int ≥ 1"); a zero-argument
      callable when they come from a registry filled at import time (reward modes, solvers, ...).
    test: None for a valid value, else what is wrong ("must be an integer ≥ 1, got 0").
  """

  valid: str | Callable[[], str]
  test: Callable[[Any], str | None]

  def describe(self) -> str:
    return self.valid() if callable(self.valid) else self.valid


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bounds(lo, hi, lo_open: bool = False, hi_open: bool = False) -> str:
  if lo is not None and hi is not None:
    return f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
  if lo is not None:
    return f"{'>' if lo_open else '≥'} {lo}"
  if hi is not None:
    return f"{'<' if hi_open else '≤'} {hi}"
  return ""


def _phrase(expect: str, why: str, message: str | None) -> str:
  """ "must be <expect> (<why>)", or `message` when the field words its own rule."""
  return message or f"must be {expect}" + (f" ({why})" if why else "")


def satisfies(
  valid: str, ok: Callable[[Any], bool], expect: str, *, why: str = "", message: str | None = None
) -> Check:
  """A check by predicate: `ok(value)`, else "must be <expect> (<why>), got <value>"."""
  phrase = _phrase(expect, why, message)
  return Check(valid, lambda v: None if ok(v) else f"{phrase}, got {v!r}")


def integer(lo: int | None = None, hi: int | None = None, *, why: str = "", message: str | None = None) -> Check:
  """An int (not a bool) in [lo, hi]; either bound may be None."""
  bounds = _bounds(lo, hi)
  return satisfies(
    f"int {bounds}".rstrip(),
    lambda v: _is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi),
    f"an integer {bounds}".rstrip(),
    why=why,
    message=message,
  )


def number(
  lo: float | None = None,
  hi: float | None = None,
  *,
  lo_open: bool = False,
  hi_open: bool = False,
  why: str = "",
  message: str | None = None,
) -> Check:
  """A finite int or float in the interval; inf and nan are refused (they pass one-sided tests such as
  `lr > 0`, and no field means them)."""
  bounds = _bounds(lo, hi, lo_open, hi_open)

  def ok(v):
    return (
      _is_number(v)
      and (lo is None or (v > lo if lo_open else v >= lo))
      and (hi is None or (v < hi if hi_open else v <= hi))
    )

  valid = bounds.removeprefix("in ") or "any finite number"
  return satisfies(valid, ok, f"a finite number {bounds}".rstrip(), why=why, message=message)


def boolean() -> Check:
  return satisfies("bool", lambda v: isinstance(v, bool), "True or False")


def _names(choices) -> tuple:
  return tuple(choices() if callable(choices) else choices)


def one_of(
  choices: Sequence | Callable[[], Iterable], *, noun: str = "", message: str | None = None, valid: str | None = None
) -> Check:
  """A value among `choices` (a callable is read at check time: a registry that grows on import).

  With `noun`, the error reads "unknown <noun> 'x'; choose one of [...]"."""

  def test(v):
    names = _names(choices)
    if v in names:
      return None
    if message:
      return f"{message}, got {v!r}"
    return f"unknown {noun} {v!r}; choose one of {list(names)}" if noun else f"must be one of {names}, got {v!r}"

  return Check(valid or (lambda: "one of " + ", ".join(map(str, _names(choices)))), test)


def registered(registry, *, where: Callable[[Any], bool] | None = None, optional: bool = False) -> Check:
  """A name of `registry` (an `arena_jax.registry.Registry`, read when the check runs, so an entry registered
  later is valid at once): "unknown <kind> 'x'; choose one of [...]". `where(entry)` keeps only some entries
  (e.g. tasks with a train split); `optional` also accepts "" (= none, or the default)."""

  def names():
    return sorted(n for n, e in registry.items() if where is None or where(e))

  valid = lambda: ('"" or one of ' if optional else "one of ") + ", ".join(names())
  return one_of(lambda: ([""] if optional else []) + names(), noun=registry.kind, valid=valid)


def entries_of(choices: Sequence | Callable[[], Iterable]) -> Check:
  """A tuple whose every entry is among `choices`."""

  def test(v):
    names = _names(choices)
    if isinstance(v, str):
      return f"must be a tuple of names among {names}, got {v!r}"
    for name in v:
      if name not in names:
        return f"entries must be among {names}, got {name!r}"
    return None

  return Check(lambda: "entries among " + ", ".join(map(str, _names(choices))), test)


def string(*, nonempty: bool = False, noun: str = "string") -> Check:
  """A str; `nonempty` refuses ""."""
  kind = f"non-empty {noun}" if nonempty else noun
  return satisfies(kind, lambda v: isinstance(v, str) and (bool(v) or not nonempty), f"a {kind}")


def existing_dir_or_empty() -> Check:
  """ "" or the path of a directory that exists (`~` expanded)."""

  def test(v):
    if not isinstance(v, str):
      return f"must be a directory path or '', got {v!r}"
    if v and not os.path.isdir(os.path.expanduser(v)):
      return f"no such directory: {v!r}"
    return None

  return Check('existing directory or ""', test)


# A URL's user-info part (`user:password@`): a credential that would reach logs, errors and checkpoint metadata.
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")
CREDENTIALS_IN_URL = (
  "must not carry credentials (`user:password@`): they would be printed and stored with the "
  "config; put the key in an environment variable and name it in judge.api_key_env (sent as "
  "a bearer token)"
)


def redact_url(text: str) -> str:
  """`text` with the user-info of every URL in it replaced by `***` (for messages and anything stored)."""
  return _USERINFO.sub("***@", text)


def urls() -> Check:
  """A tuple of http(s):// URLs without credentials (a comma-separated string is a common slip: say so)."""

  def test(v):
    if isinstance(v, str):
      return f"must be a tuple of URLs (split a comma-separated string), got {redact_url(repr(v))}"
    for u in v:
      if not isinstance(u, str) or not u.startswith(("http://", "https://")):
        return f"entries must be http(s):// URLs, got {redact_url(repr(u))}"
      if _USERINFO.search(u):
        return f"{redact_url(u)}: {CREDENTIALS_IN_URL}"
    return None

  return Check("tuple of http(s):// URLs", test)


def json_object_value(v) -> dict:
  """The plain dict a JSON-object field holds: a dict, a ConfigDict (what a dict becomes after
  `copy_and_resolve_references`) or the JSON text of an object (what an absl flag leaves when its value is
  not a Python literal, e.g. JSON's `true`). Keys must be strings and the values JSON-serialisable.

  Raises:
    ValueError: saying what is wrong with `v`.
  """
  if isinstance(v, str):
    try:
      v = json.loads(v)
    except ValueError as e:
      raise ValueError(f"must be a dict or the JSON text of an object; {v!r} is not JSON ({e})") from None
  elif isinstance(v, ml_collections.ConfigDict):
    v = v.to_dict()
  if not isinstance(v, dict):
    raise ValueError(f"must be a dict (a JSON object), got {v!r}")
  _check_keys(v)
  try:
    text = json.dumps(v, allow_nan=False)
  except (TypeError, ValueError) as e:
    raise ValueError(f"must hold only JSON values (str, finite number, bool, None, lists, dicts): {e}") from None
  return json.loads(text)  # a fresh copy, tuples as lists: exactly what a request body will carry


def _check_keys(v) -> None:
  """Raises ValueError for a key, at any depth, that is not a str (json.dumps would quietly stringify it)."""
  if isinstance(v, dict):
    for k, x in v.items():
      if not isinstance(k, str):
        raise ValueError(f"keys must be strings, got {k!r}")
      _check_keys(x)
  elif isinstance(v, (list, tuple)):
    for x in v:
      _check_keys(x)


def json_object(*, reserved: Sequence[str] = (), why: str = "") -> Check:
  """A JSON object (see `json_object_value`) none of whose top-level keys is in `reserved`; `why` says
  why those are refused."""

  def test(v):
    try:
      obj = json_object_value(v)
    except ValueError as e:
      return str(e)
    taken = [k for k in obj if k in reserved]
    if taken:
      return f"must not set {taken}" + (f" ({why})" if why else "") + f", got {v!r}"
    return None

  valid = "dict (or its JSON text)" + (f" without keys {', '.join(reserved)}" if reserved else "")
  return Check(valid, test)


def optional(check: Check) -> Check:
  """None, or a value that passes `check`."""
  return Check(lambda: "None or " + check.describe(), lambda v: None if v is None else check.test(v))


# ───────────────────────────────────── declarations ─────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class Field:
  """One config field.

  Attributes:
    default: its value in `defaults()` (None with `placeholder` = a typed None, `placeholder(int)`).
    meaning: what it does, for the docs (one or two sentences).
    check: what values it accepts; None when a rule or another room checks it (then `valid` says what).
    valid: the docs' "valid" column when `check` does not say it (or says too little).
    checked: False when nothing checks it up front: the docs mark the range †.
    when: `when(section_config)`: check the field only then (a knob used by one variant only).
    factory: computes the default when the config is built (an environment variable).
    placeholder: the type of a None default.
  """

  default: Any
  meaning: str
  check: Check | None = None
  valid: str | None = None
  checked: bool = True
  when: Callable[[ml_collections.ConfigDict], bool] | None = None
  factory: Callable[[], Any] | None = None
  placeholder: type | None = None

  def describe(self) -> str:
    """The docs' "valid" cell."""
    text = self.valid if self.valid is not None else (self.check.describe() if self.check else "")
    return text + ("" if self.checked else NOT_CHECKED)

  def value(self):
    if self.factory is not None:
      return self.factory()
    if self.default is None and self.placeholder is not None:
      return _placeholder(self.placeholder)
    return self.default


def field(default: Any, meaning: str, check: Check | None = None, **options) -> Field:
  """Declares a field: `field(8, "G: samples per prompt.", integer(2))`; options as `Field`'s."""
  return Field(default, meaning, check, **options)


class Reporter:
  """What a rule reports through: `report(name, message)` raises for the field `name` of the section;
  `report.path(name)` is that field's full path, for messages that name another field."""

  def __init__(self, prefix: str):
    self.prefix = prefix

  def path(self, name: str) -> str:
    return f"{self.prefix}.{name}" if self.prefix and name else (name or self.prefix)

  def __call__(self, name: str, message: str):
    fail(self.path(name), message)


Rule = Callable[[ml_collections.ConfigDict, Reporter], None]

_MOVED: dict[str, str] = {}  # every declared Section's `moved`: what `moved_to` answers


def moved_to(path: str) -> str | None:
  """The new dotted path of a config field declared moved (`Section.moved`, paths from a config's root), or None."""
  return _MOVED.get(path)


@dataclasses.dataclass
class Section:
  """A group of fields and sub-sections, in the order the docs list them.

  Attributes:
    entries: {name: Field | Section}.
    title: the docs' heading after the section's name ("how requests are sent").
    rules: checks relating several fields, `rule(config, report)` (see `Reporter`); they run after
      every field of the section (and of its sub-sections) passed its own check.
    exact: the key set is fixed (a share per demonstration kind): any other key is an error, and this
      noun names the keys in it ("kinds").
    removed: {name: what to do instead} of fields that no longer exist, so that a config still setting
      one fails saying what replaced it instead of being silently ignored.
    moved: {old dotted path: new dotted path} (both from this section) of fields that moved to another section: a
      config still setting the old one fails naming the new one, and so does a command line (`moved_to`, `cli`).
    when: `when(parent_config)`: validate the section only then (the judge, for modes that use one).
    optional: the section may be absent (added by some config files only); `defaults()` leaves it out.
    documented_apart: the docs give the section its own chapter (an embedded room's config).
    factory: builds the section's defaults instead of its declared ones (a room's variant, such as
      `tasks.demo_config`, embedded as another config's default).
  """

  entries: dict[str, Field | Section]
  title: str = ""
  rules: list[Rule] = dataclasses.field(default_factory=list)
  exact: str = ""
  removed: dict[str, str] = dataclasses.field(default_factory=dict)
  moved: dict[str, str] = dataclasses.field(default_factory=dict)
  when: Callable[[ml_collections.ConfigDict], bool] | None = None
  optional: bool = False
  documented_apart: bool = False
  factory: Callable[[], ml_collections.ConfigDict] | None = None

  def __post_init__(self):
    _MOVED.update(self.moved)

  def rule(self, fn: Rule) -> Rule:
    """Registers `fn` as a check of this section (decorator); its docstring is its documentation."""
    self.rules.append(fn)
    return fn

  def but(self, **changes) -> Section:
    """The same declarations (and rules, shared) embedded differently: `JUDGE.but(when=...)`."""
    return dataclasses.replace(self, **changes)

  # ── defaults ──

  def defaults(self) -> ml_collections.ConfigDict:
    """A new ConfigDict holding every declared default (optional sections left out)."""
    if self.factory is not None:
      return self.factory()
    c = ml_collections.ConfigDict()
    for name, entry in self.entries.items():
      if isinstance(entry, Section):
        if not entry.optional:
          c[name] = entry.defaults()
      else:
        c[name] = entry.value()
    return c

  # ── validation ──

  def validate(self, config: ml_collections.ConfigDict, prefix: str) -> ml_collections.ConfigDict:
    """Checks every declared field of `config` once; raises ValueError naming the first bad one.

    `prefix` is the section's path in messages ("config.tasks"). Returns `config`.
    """
    report = Reporter(prefix)
    at = report.path

    if self.exact:
      keys = tuple(config.keys())
      if set(keys) != set(self.entries):
        fail(prefix, f"must have exactly the {self.exact} {tuple(self.entries)}, got {keys}")
    for name, instead in self.removed.items():
      if name in config:
        fail(at(name), f"no longer exists: {instead}")
    for old, new in self.moved.items():
      *sections, name = old.split(".")
      node = config
      for part in sections:
        node = node.get(part) if isinstance(node, ml_collections.ConfigDict) else None
      if isinstance(node, ml_collections.ConfigDict) and name in node:
        fail(at(old), f"moved to {at(new)}: set that instead")
    for name, entry in self.entries.items():
      if isinstance(entry, Section):
        if name not in config:
          if entry.optional:
            continue
          fail(at(name), "missing section; start the config from its defaults")
        if not isinstance(config[name], ml_collections.ConfigDict):
          fail(at(name), f"must be a section of fields (a ConfigDict), got {config[name]!r}")
        if entry.when is None or entry.when(config):
          entry.validate(config[name], at(name))
        continue
      if name not in config:
        fail(at(name), f"missing field (declared default {entry.value()!r})")
      if entry.check is None or (entry.when is not None and not entry.when(config)):
        continue
      problem = entry.check.test(config[name])
      if problem:
        fail(at(name), problem)
    for rule in self.rules:
      rule(config, report)
    return config

  # ── documentation ──

  def walk(self, prefix: str = "") -> Iterator[tuple[str, Field | Section]]:
    """(dotted path, declaration) of every entry, sections before their fields, in declaration order."""
    for name, entry in self.entries.items():
      path = f"{prefix}{name}"
      yield path, entry
      if isinstance(entry, Section):
        yield from entry.walk(f"{path}.")

  def fields(self, prefix: str = "") -> dict[str, Field]:
    """{dotted path: Field} of every field, but those of sections documented apart (they have their own)."""
    out = {}
    for name, entry in self.entries.items():
      if isinstance(entry, Section):
        if not entry.documented_apart:
          out.update(entry.fields(f"{prefix}{name}."))
      else:
        out[f"{prefix}{name}"] = entry
    return out


def rule_docs(section: Section) -> list[tuple[str, str]]:
  """(name, first docstring paragraph) of the rules of `section` and of its sub-sections (but not of those
  documented apart, which list their own)."""
  out = []
  for rule in section.rules:
    doc = (rule.__doc__ or "").strip().split("\n\n")[0]
    out.append((rule.__name__.lstrip("_"), " ".join(doc.split())))
  for entry in section.entries.values():
    if isinstance(entry, Section) and not entry.documented_apart:
      out += rule_docs(entry)
  return out


def _cell(text: str) -> str:
  return text.replace("|", "\\|").replace("\n", " ")


def fmt(value: Any) -> str:
  """A value as Python writes it, in a code span (pipes escaped for tables)."""
  return "`" + repr(value).replace("|", "\\|") + "`"


def table(rows: Iterable[tuple[str, Any, Field]], default_header: str = "default") -> list[str]:
  """Markdown lines of a (field, default, valid, meaning) table of (shown path, value, declaration) rows."""
  lines = [f"| field | {default_header} | valid | meaning |", "|---|---|---|---|"]
  for path, value, decl in rows:
    lines.append(f"| `{path}` | {fmt(value)} | {_cell(decl.describe())} | {_cell(decl.meaning)} |")
  return lines
