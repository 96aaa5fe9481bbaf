"""Chat templates: `load_tokenizer(path).apply_chat_template` renders a checkpoint's own Jinja template as
transformers does (text and token ids), on tiny tokenizers built here with Llama-3-, Qwen3- and
Mistral-style templates (tests/data/chat_templates)."""

import json
import pathlib

import pytest

from arena_jax import chat_template
from arena_jax import tokenizer as tok

TEMPLATES = pathlib.Path(__file__).parent / "data" / "chat_templates"
FAMILIES = {  # special tokens, tokenizer_config entries, where the template is stored
  "llama3": (
    ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"],
    {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "config",
  ),
  "qwen3": (
    ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
    {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "file",
  ),
  "mistral": (
    ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[THINK]", "[/THINK]"],
    {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "config",
  ),
}
SYSTEM = {"role": "system", "content": "Solve the problem. End with 'Answer: <number>'."}
USER = {"role": "user", "content": "Compute 3 + 4, then times 2."}
CONVERSATIONS = {
  "user": [USER],
  "system+user": [SYSTEM, USER],
  "multi-turn": [
    SYSTEM,
    USER,
    {"role": "assistant", "content": "3 + 4 = 7.\n\nAnswer: 14", "reasoning_content": "7*2"},
    {"role": "user", "content": "And times 3?", "name": None},
  ],
}


def build(family, root):
  tokenizers = pytest.importorskip("tokenizers")
  specials, config, where = FAMILIES[family]
  model = tokenizers.Tokenizer(tokenizers.models.BPE())
  model.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  model.decoder = tokenizers.decoders.ByteLevel()
  trainer = tokenizers.trainers.BpeTrainer(
    vocab_size=400, special_tokens=specials, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
  )
  model.train_from_iterator([SYSTEM["content"], USER["content"], "assistant user system think"] * 4, trainer)
  d = root / family
  d.mkdir()
  model.save(str(d / "tokenizer.json"))
  template = (TEMPLATES / f"{family}.jinja").read_text()
  config = {**config, "tokenizer_class": "PreTrainedTokenizerFast"}
  if where == "file":
    (d / chat_template.TEMPLATE_FILE).write_text(template)
    config["chat_template"] = "{{ 'the file wins over this' }}"
  else:
    config["chat_template"] = template
  (d / "tokenizer_config.json").write_text(json.dumps(config))
  return d


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("chat_tokenizers")
  return {f: build(f, root) for f in FAMILIES}


def _cases():
  for family in FAMILIES:
    for name in CONVERSATIONS:
      if family == "mistral" and name == "multi-turn":
        continue  # covered below with the alternation check
      yield family, name, {}
  yield "qwen3", "system+user", {"enable_thinking": False}
  yield "qwen3", "multi-turn", {"enable_thinking": True}
  yield "llama3", "system+user", {"date_string": "26 Jul 2024"}
  yield "mistral", "system+user", {"add_generation_prompt": False}


@pytest.mark.parametrize("family, conversation, kwargs", list(_cases()))
def test_rendering_equals_transformers(built, family, conversation, kwargs):
  transformers = pytest.importorskip("transformers")
  ref = transformers.AutoTokenizer.from_pretrained(str(built[family]))
  ours = tok.load_tokenizer(built[family])
  messages = CONVERSATIONS[conversation]
  kwargs = {"add_generation_prompt": True, "date_string": "1 Jan 2026", **kwargs}
  want = ref.apply_chat_template(messages, tokenize=False, **kwargs)
  got = ours.apply_chat_template(messages, **kwargs)
  assert got == want
  want_ids = ref.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)
  assert ours.encode(got) == list(want_ids)  # the template writes the BOS: none is added
  if conversation != "user" and family != "llama3":  # llama3 trims; the others keep it verbatim
    assert SYSTEM["content"] in got
  if family == "qwen3" and kwargs.get("enable_thinking") is False:
    assert got.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_template_errors_name_their_source(built):
  transformers = pytest.importorskip("transformers")
  ours = tok.load_tokenizer(built["mistral"])
  bad = [SYSTEM, USER, USER]  # roles must alternate: the template raises
  with pytest.raises(Exception, match="must alternate"):
    transformers.AutoTokenizer.from_pretrained(str(built["mistral"])).apply_chat_template(bad, tokenize=False)
  with pytest.raises(chat_template.ChatTemplateError, match=r"chat template of .*mistral.*must alternate"):
    ours.apply_chat_template(bad)
  with pytest.raises(chat_template.ChatTemplateError, match="TemplateSyntaxError"):
    chat_template.render("{% for m in messages %}", [USER])


def test_a_tokenizer_without_a_template_says_so(tmp_path):
  sp = tok.SentencePieceTokenizer.train(["Compute 3 + 4. Answer: 7"] * 20, vocab_size=40)
  with pytest.raises(chat_template.ChatTemplateError, match="no chat template.*prompt_format = 'plain'"):
    sp.apply_chat_template([USER])


def test_named_templates_use_the_default(tmp_path):
  (tmp_path / "tokenizer_config.json").write_text(
    json.dumps(
      {
        "chat_template": [
          {"name": "tool_use", "template": "tools"},
          {"name": "default", "template": "{{ messages[0].content }}"},
        ]
      }
    )
  )
  assert chat_template.render(chat_template.load_chat_template(tmp_path), [USER]) == USER["content"]
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": [{"name": "x", "template": "t"}]}))
  with pytest.raises(chat_template.ChatTemplateError, match="no 'default'"):
    chat_template.load_chat_template(tmp_path)


def test_tasks_render_prompts_through_the_chat_template(built):
  transformers = pytest.importorskip("transformers")
  from arena_jax import tasks  # pylint: disable=g-import-not-at-top

  cfg = tasks.default_config()
  example = tasks.Example(uid="0", question="Compute 3 + 4.", answer="7")
  qwen = tok.load_tokenizer(built["qwen3"])
  task = tasks.get_task("arithmetic", cfg)
  assert not task.chat and task.prompt_texts([example], qwen) == [task.prompt(example)]  # plain: as before
  cfg.prompt_format, cfg.system_prompt = "chat", SYSTEM["content"]
  cfg.chat_template_kwargs = {"enable_thinking": False}
  tasks.validate_config(cfg)
  task = tasks.get_task("arithmetic", cfg)
  (text,) = task.prompt_texts([example], qwen)
  ref = transformers.AutoTokenizer.from_pretrained(str(built["qwen3"]))
  assert text == ref.apply_chat_template(
    [SYSTEM, {"role": "user", "content": task.prompt(example)}],
    tokenize=False,
    add_generation_prompt=True,
    enable_thinking=False,
  )
  assert task.chat and text.endswith("<think>\n\n</think>\n\n")
  cfg.system_prompt = ""
  assert "system" not in tasks.get_task("arithmetic", cfg).prompt_texts([example], qwen)[0]
  cfg.prompt_format = "html"
  with pytest.raises(ValueError, match=r"prompt_format: must be one of \('plain', 'chat'\)"):
    tasks.validate_config(cfg)
