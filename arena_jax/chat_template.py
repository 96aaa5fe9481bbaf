"""A checkpoint's own chat template, rendered the way transformers' `apply_chat_template` renders it.

Instruct checkpoints ship their prompt format as a Jinja template: `chat_template.jinja` beside the
tokenizer, or the `chat_template` entry of `tokenizer_config.json` (a string, or a list of named
templates of which "default" is used); the file wins when both exist, as in transformers. Rendering
follows transformers 5 (`utils/chat_template_utils.py`): a sandboxed Jinja environment with
`trim_blocks` and `lstrip_blocks`, loop controls, a `tojson` filter that does not escape HTML,
`raise_exception`, `strftime_now`; the variables are `messages` (keys whose value is None dropped; a
message's reasoning given under `reasoning_content`, `thinking` or `reasoning` visible under all three),
`add_generation_prompt`, `tools` / `documents` (None), the tokenizer's special tokens (`bos_token`,
`eos_token`, …) and any keyword arguments (e.g. Qwen3's `enable_thinking=False`), which override the
special tokens. `{% generation %}` blocks render their body.

jinja2 is imported on first use (pinned in setup.py). Templates come from checkpoints, so they run in
Jinja's immutable sandbox; nothing is downloaded.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import pathlib
from typing import Any, Mapping, Sequence

from arena_jax.errors import UserError

TEMPLATE_FILE = "chat_template.jinja"
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplateError(UserError):
  """A chat template that is missing, malformed, or raised while rendering (names the template's source)."""


def load_chat_template(directory: str | os.PathLike) -> str | None:
  """The chat template of a tokenizer directory (`chat_template.jinja`, else `tokenizer_config.json`'s
  `chat_template`), None when it has none."""
  directory = pathlib.Path(directory)
  file = directory / TEMPLATE_FILE
  if file.is_file():
    return file.read_text(encoding="utf-8")
  config_file = directory / "tokenizer_config.json"
  if not config_file.is_file():
    return None
  try:
    template = json.loads(config_file.read_text(encoding="utf-8")).get("chat_template")
  except ValueError as e:
    raise ChatTemplateError(f"{config_file}: not valid JSON ({e})") from e
  if isinstance(template, list):  # named templates: [{"name": "default", "template": "…"}, …]
    named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
    if "default" not in named:
      raise ChatTemplateError(
        f"{config_file}: chat_template lists templates {sorted(map(str, named))} but no 'default' one"
      )
    template = named["default"]
  if template is not None and not isinstance(template, str):
    raise ChatTemplateError(
      f"{config_file}: chat_template must be a string or a list of named templates, got {type(template).__name__}"
    )
  return template


def special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
  """The named special tokens of a `tokenizer_config.json` (a token is a string or `{"content": …}`)."""
  out = {}
  for key in SPECIAL_TOKEN_KEYS:
    value = config.get(key)
    value = value.get("content") if isinstance(value, dict) else value
    if isinstance(value, str):
      out[key] = value
  return out


def render(
  template: str,
  messages: Sequence[Mapping[str, Any]],
  *,
  add_generation_prompt: bool = True,
  special: Mapping[str, str] | None = None,
  source: str = "chat template",
  **template_kwargs,
) -> str:
  """`messages` rendered by `template` (module docstring); errors name `source`."""
  import jinja2  # pylint: disable=g-import-not-at-top  (imported on use)

  if not messages:
    raise ChatTemplateError(f"{source}: cannot render an empty conversation")
  chat = []
  for i, m in enumerate(messages):
    if not isinstance(m, Mapping):
      raise ChatTemplateError(f"{source}: message {i} must be a dict with 'role' and 'content', got {m!r}")
    m = {k: v for k, v in m.items() if v is not None}
    reasoning = next((m[k] for k in _REASONING_KEYS if k in m), None)
    if reasoning is not None:
      m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
    chat.append(m)
  try:
    compiled = _compile(template)
    return compiled.render(
      messages=chat,
      tools=None,
      documents=None,
      add_generation_prompt=add_generation_prompt,
      **{**dict(special or {}), **template_kwargs},
    )
  except jinja2.TemplateError as e:
    raise ChatTemplateError(f"{source}: {type(e).__name__}: {e}") from e


@functools.lru_cache(maxsize=16)
def _compile(template: str):
  import jinja2  # pylint: disable=g-import-not-at-top
  from jinja2 import ext, nodes, sandbox  # pylint: disable=g-import-not-at-top

  class Generation(ext.Extension):
    """`{% generation %}…{% endgeneration %}` (assistant-mask markers): renders its body."""

    tags = {"generation"}

    def parse(self, parser):
      lineno = next(parser.stream).lineno
      body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
      return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
      return caller()

  def raise_exception(message):
    raise jinja2.TemplateError(message)

  def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters; transformers' does not.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

  env = sandbox.ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[Generation, ext.loopcontrols]
  )
  env.filters["tojson"] = tojson
  env.globals["raise_exception"] = raise_exception
  env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
  return env.from_string(template)
