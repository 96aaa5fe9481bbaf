"""The tokenizer of a GGUF file (`load_tokenizer("….gguf")`): built from its metadata, it must tokenize, decode and
render the chat template as transformers' own GGUF tokenizer does, on the real model (SmolLM2-135M-Instruct, the
`real_gguf` fixture) and on small GGUF files written here; `save_hf_tokenizer` writes it out as a HF tokenizer
directory that both loaders read back the same.

One difference from transformers is deliberate (arena_jax/tokenizer.py, "a GGUF file's tokenizer"): for SmolLM2's
`tokenizer.ggml.pre = "smollm"` we isolate each digit before GPT-2's split, as llama.cpp and SmolLM2's own
tokenizer.json do, where transformers uses GPT-2's split alone. The tests pin it: on every string our ids equal
those of transformers' tokenizer given that pre-tokenizer, and they equal transformers' GGUF tokenizer on every
string where that pre-tokenizer changes nothing, which is every string without a numeric character.
"""

import json
import os
import random

import numpy as np
import pytest

from arena_jax import chat_template
from arena_jax import gguf_file
from arena_jax import tokenizer as tok

# ── the strings ──

_FIXED = [
  "",
  " ",
  "  ",
  "\n",
  "\n\n",
  "\r\n",
  "\t",
  "Hello, world!",
  " Hello",
  "Hello ",
  "   leading and trailing   ",
  "multiple   internal    spaces",
  "tabs\tand\nnewlines\r\nmixed\r\n\r\n",
  "I'm sure they'll say it's fine, don't you think? We've seen it. I'd",
  "Café naïve résumé façade Ångström Œuvre",
  "e\u0301 combining acute, n\u0303",
  "你好，世界！这是一个测试。",
  "日本語のテキストとカタカナ ー",
  "한국어 텍스트입니다",
  "مرحبا بالعالم، هذا اختبار",
  "Привет, мир! Ёлка и щи.",
  "Ελληνικά γράμματα",
  "עברית מימין לשמאל",
  "हिन्दी पाठ",
  "🙂😀🎉 emoji",
  "👨‍👩‍👧‍👦 family ZWJ",
  "🏳️‍🌈 flag and 👍🏽 skin tone",
  "❤️ variation selector",
  "def f(x):\n    return x * 2\n",
  "class A:\n\tdef g(self):\n\t\tpass\n",
  "if (a && b) { return c[0]->d; }",
  "    indented four\n        eight\n",
  "x = {'a': 1, \"b\": [2, 3]}",
  "<div class=\"x\">&amp;</div>",
  "0",
  "12",
  "1234567890",
  "3.14159265358979",
  "-42 +17 1e10 0x1F 1,000,000",
  "Answer: 987654321",
  "12 + 34 = 46",
  "1.\n\n2.\n\n3.",
  "x  1",
  "x   12",
  "\n 1",
  "\t\t7",
  "a\n\n\n9",
  "½ ² ٣٤ ⅷ",
  "<|im_start|>user\nhi<|im_end|>",
  "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
  "<|endoftext|>",
  "text<|im_end|>more",
  "<|im_start|><|im_start|>",
  "<|im_start",
  "<repo_name>x<file_sep>y",
  "\u00a0non-breaking\u2009thin\u3000ideographic",
  "zero\u200bwidth",
  "\x00\x01\x7f control",
  "a" * 200,
  "ab " * 50,
  "\n" * 10,
  " " * 17,
  "?!?!... --- ___ ***",
  "https://example.com/path?q=1&r=two#frag",
  "user@example.org",
]

_POOLS = {
  "latin": ["the", "quick", "Brown", "FOX", "jumps", "über", "façade", "naïve", "Ærø", "ß"],
  "cjk": ["中文", "測試", "日本", "ひらがな", "カタカナ", "한국"],
  "arabic": ["العربية", "سلام", "كتاب"],
  "cyrillic": ["Москва", "щука", "ёж", "Україна"],
  "emoji": ["🙂", "🚀", "👩‍💻", "🧑🏾‍🚀", "🇫🇷", "✨", "☕️"],
  "code": ["def", "(x)", "->", "::", "{}", "[i]", "==", "!=", "#", "//", "'''", '"s"'],
  "digits": ["0", "7", "42", "2024", "3.5", "-1", "1000000", "9999999999999"],
  "space": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "    ", "\n    "],
  "special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>"],
  "punct": [".", ",", "!", "?", ";", ":", "'s", "'ll", "—", "…", "«", "»"],
}


def _strings() -> list[str]:
  """Fixed edge cases plus 200 seeded mixtures of words, scripts, emoji, code, numbers, whitespace and special
  tokens as text."""
  rng = random.Random(20250101)
  kinds = list(_POOLS)
  mixed = []
  for _ in range(200):
    parts = [rng.choice(_POOLS[rng.choice(kinds)]) for _ in range(rng.randint(1, 12))]
    seps = [rng.choice(["", " ", " ", "\n", "  "]) for _ in parts]
    mixed.append("".join(p + s for p, s in zip(parts, seps)))
  return _FIXED + mixed


STRINGS = _strings()
CONVERSATIONS = {
  "system+user": [
    {"role": "system", "content": "You solve arithmetic. End with 'Answer: <number>'."},
    {"role": "user", "content": "What is 12 + 34?"},
  ],
  "user only": [{"role": "user", "content": "Bonjour ! Comment ça va ? 🙂"}],
  "multi-turn": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Name a prime."},
    {"role": "assistant", "content": "7"},
    {"role": "user", "content": "Another, in Japanese?"},
    {"role": "assistant", "content": "十一 (11)."},
    {"role": "user", "content": "Thanks.\nBye."},
  ],
}


def _has_numeric(s: str) -> bool:
  return any(c.isnumeric() for c in s)


# ── the real model, against transformers ──


@pytest.fixture(scope="module")
def hf_gguf(real_gguf):
  """transformers' tokenizer of the real GGUF (its own GGUF loader), built once."""
  transformers = pytest.importorskip("transformers")
  return transformers.AutoTokenizer.from_pretrained(os.path.dirname(real_gguf), gguf_file=os.path.basename(real_gguf))


@pytest.fixture(scope="module")
def ours(real_gguf):
  return tok.load_tokenizer(real_gguf)


@pytest.fixture(scope="module")
def hf_digits(hf_gguf):
  """transformers' tokenizer with the pre-tokenizer llama.cpp applies for "smollm" (and SmolLM2's tokenizer.json
  has): each digit isolated, then GPT-2's byte-level split. Everything else is transformers' own."""
  from tokenizers import pre_tokenizers  # pylint: disable=g-import-not-at-top

  backend = type(hf_gguf.backend_tokenizer).from_str(hf_gguf.backend_tokenizer.to_str())
  backend.pre_tokenizer = pre_tokenizers.Sequence(
    [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
  )
  return backend


def test_special_ids_template_and_flags_come_from_the_metadata(ours, hf_gguf, real_gguf):
  assert isinstance(ours, tok.HFTokenizer) and ours.path == str(real_gguf)
  assert (ours.bos_id, ours.eos_id, ours.pad_id) == (hf_gguf.bos_token_id, hf_gguf.eos_token_id, hf_gguf.pad_token_id)
  assert ours.unk_id == hf_gguf.unk_token_id and ours.vocab_size == len(hf_gguf) == 49152
  assert ours.special_tokens == hf_gguf.special_tokens_map
  assert ours.chat_template == hf_gguf.chat_template
  # SmolLM2's GGUF says tokenizer.ggml.add_bos_token = false; transformers adds none either.
  assert ours.add_bos_default is False and hf_gguf("hi")["input_ids"] == hf_gguf.encode("hi", add_special_tokens=False)
  assert ours.model_max_length == 8192  # llama.context_length
  ours.check_vocab(49152)
  # The recorded path rebuilds the same tokenizer (a run directory reloads it).
  again = tok.load_tokenizer(ours.path)
  assert again.encode(STRINGS[:40]) == ours.encode(STRINGS[:40])
  # From the in-memory tokenizer: the ids of the special tokens are found from their text.
  clone = tok.HFTokenizer.from_tokenizer(
    ours.backend, path=ours.path, chat_template=ours.chat_template, special_tokens=ours.special_tokens
  )
  assert (clone.bos_id, clone.eos_id, clone.pad_id, clone.unk_id) == (
    ours.bos_id,
    ours.eos_id,
    ours.pad_id,
    ours.unk_id,
  )
  messages = CONVERSATIONS["system+user"]
  assert clone.apply_chat_template(messages) == ours.apply_chat_template(messages)
  assert clone.encode(STRINGS[:40]) == ours.encode(STRINGS[:40]) and clone.add_bos_default is None


def test_ids_equal_transformers(ours, hf_gguf, hf_digits):
  assert len(STRINGS) >= 250
  mine = ours.encode(STRINGS)
  theirs = [hf_gguf.encode(s, add_special_tokens=False) for s in STRINGS]
  digits = [e.ids for e in hf_digits.encode_batch(STRINGS, add_special_tokens=False)]
  # Everywhere: transformers' vocabulary, merges and added tokens under llama.cpp's "smollm" pre-tokenizer.
  assert [(s, m) for s, m, d in zip(STRINGS, mine, digits) if m != d] == []
  # transformers' GGUF tokenizer itself: identical on every string without a numeric character, and on most of those
  # with one (where no whitespace run precedes a digit).
  differ = [s for s, m, t in zip(STRINGS, mine, theirs) if m != t]
  assert [s for s in differ if not _has_numeric(s)] == []
  assert len(STRINGS) - len(differ) >= 200
  assert {"1.\n\n2.\n\n3.", "x  1", "\n 1"} <= set(differ)  # SmolLM2 has "ĊĊ", "ĠĠ", "ĊĠ": transformers splits them
  assert ours.encode("1.\n\n2.") == [33, 30, 1116, 34, 30] != hf_gguf.encode("1.\n\n2.", add_special_tokens=False)


def test_decode_round_trips_like_transformers(ours, hf_gguf):
  checked = 0
  for s, ids in zip(STRINGS, ours.encode(STRINGS)):
    # `decode` drops padding, and the pad token is <|im_end|>: strings holding it are checked without the drop.
    assert ours.backend.decode(ids, skip_special_tokens=False) == hf_gguf.decode(ids, skip_special_tokens=False)
    if hf_gguf.decode(hf_gguf.encode(s, add_special_tokens=False)) == s:
      assert ours.backend.decode(ids, skip_special_tokens=False) == s
      if "<|im_end|>" not in s:
        assert ours.decode(ids, stop_at_eos=False) == s
      checked += 1
  assert checked >= 250
  batch, lengths = ours.encode_batch(STRINGS[:20])
  assert batch.dtype == np.int32 and ours.decode_batch(batch, lengths, stop_at_eos=False)[7] == STRINGS[7]


@pytest.mark.parametrize("name", list(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_renders_like_transformers(ours, hf_gguf, name, add_generation_prompt):
  messages = CONVERSATIONS[name]
  rendered = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
  expected = hf_gguf.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
  assert rendered == expected
  if name == "user only":  # the template's own default system prompt
    assert rendered.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
  assert rendered.endswith("<|im_start|>assistant\n") == add_generation_prompt
  ids = hf_gguf.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
  ids = ids["input_ids"] if not isinstance(ids, list) else ids
  assert ours.encode(rendered) == list(ids) == hf_gguf.encode(rendered, add_special_tokens=False)


def test_saved_hf_directory_loads_the_same_in_both(ours, hf_digits, tmp_path):
  transformers = pytest.importorskip("transformers")
  names = tok.save_hf_tokenizer(ours, tmp_path / "hf")
  assert set(names) == {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}
  config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert config["add_bos_token"] is False and config["model_max_length"] == 8192
  assert config["chat_template"] == ours.chat_template
  theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
  mine = tok.load_tokenizer(tmp_path / "hf")
  expected = ours.encode(STRINGS)
  # transformers' encode adds nothing (add_bos_token false), and both keep llama.cpp's pre-tokenizer.
  assert theirs(STRINGS)["input_ids"] == expected == mine.encode(STRINGS)
  assert (theirs.bos_token_id, theirs.eos_token_id, theirs.pad_token_id) == (ours.bos_id, ours.eos_id, ours.pad_id)
  assert (mine.bos_id, mine.eos_id, mine.pad_id, mine.unk_id) == (ours.bos_id, ours.eos_id, ours.pad_id, ours.unk_id)
  assert (mine.add_bos_default, mine.model_max_length, mine.vocab_size) == (False, 8192, ours.vocab_size)
  assert [theirs.decode(i) for i in expected[:80]] == [
    ours.backend.decode(i, skip_special_tokens=False) for i in expected[:80]
  ]
  for messages in CONVERSATIONS.values():
    for gen in (True, False):
      rendered = ours.apply_chat_template(messages, add_generation_prompt=gen)
      assert theirs.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen) == rendered
      assert mine.apply_chat_template(messages, add_generation_prompt=gen) == rendered
  # With a BOS asked for, both loaders start every encoding with it.
  tok.save_hf_tokenizer(ours, tmp_path / "bos", add_bos=True)
  with_bos = transformers.AutoTokenizer.from_pretrained(tmp_path / "bos")
  assert with_bos("hi")["input_ids"] == [ours.bos_id] + ours.encode("hi")
  assert tok.load_tokenizer(tmp_path / "bos").add_bos_default is True


# ── small GGUF files written here ──


def _write_gguf(path, *, model="gpt2", tokens, types, merges=None, scores=None, template=None, pre=None, ids=None):
  """A GGUF of architecture "llama" with a tokenizer and one tiny tensor (enough for both loaders)."""
  gguf = pytest.importorskip("gguf")
  w = gguf.GGUFWriter(str(path), "llama")
  w.add_block_count(1)
  w.add_context_length(64)
  w.add_embedding_length(8)
  w.add_feed_forward_length(16)
  w.add_head_count(2)
  w.add_head_count_kv(2)
  w.add_layer_norm_rms_eps(1e-5)
  w.add_rope_freq_base(10000.0)
  w.add_tokenizer_model(model)
  if pre:
    w.add_tokenizer_pre(pre)
  w.add_token_list(tokens)
  w.add_token_types(types)
  if merges is not None:
    w.add_token_merges(merges)
  if scores is not None:
    w.add_token_scores(scores)
  for key, i in (ids or {}).items():
    getattr(w, f"add_{key}_token_id")(i)
  if template is not None:
    w.add_chat_template(template)
  w.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return path


def _byte_level_vocab():
  """A byte-level BPE vocabulary: the 256 byte characters, a few merges and three control tokens."""
  tokenizers = pytest.importorskip("tokenizers")
  tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
  merges = ["h e", "l l", "he ll", "Ġ w", "o r"]
  tokens += ["he", "ll", "hell", "Ġw", "or"]
  return tokens, [3, 3, 3] + [1] * 261, merges


def test_a_gguf_without_chat_template_says_to_use_plain_prompts(tmp_path):
  tokens, types, merges = _byte_level_vocab()
  path = _write_gguf(tmp_path / "no_template.gguf", tokens=tokens, types=types, merges=merges, ids={"eos": 2})
  small = tok.load_tokenizer(path)
  assert small.encode("hello world<|im_end|>")[-1] == 2 and small.decode(small.encode("hello world")) == "hello world"
  assert small.chat_template is None and small.add_bos_default is False
  with pytest.raises(chat_template.ChatTemplateError) as e:
    small.apply_chat_template([{"role": "user", "content": "hi"}])
  message = str(e.value)
  assert str(path) in message and "tasks.prompt_format = 'plain'" in message and "\n" not in message


@pytest.mark.parametrize(
  "change, expected",
  [
    ({"model": "bert"}, "tokenizer.ggml.model 'bert'; the supported tokenizer models are 'gpt2', 'llama'"),
    ({"pre": "no-such-pre"}, "tokenizer.ggml.pre 'no-such-pre' is not a pre-tokenizer this loader knows"),
    ({"merges": None}, "no tokenizer.ggml.merges"),
    ({"ids": {"eos": 9999}}, "tokenizer.ggml.eos_token_id = 9999 is outside the vocabulary"),
  ],
)
def test_a_gguf_whose_tokenizer_cannot_be_built_is_a_one_line_error(tmp_path, change, expected):
  tokens, types, merges = _byte_level_vocab()
  kwargs = {"tokens": tokens, "types": types, "merges": merges, "ids": {"eos": 2}, **change}
  path = _write_gguf(tmp_path / "bad.gguf", **kwargs)
  with pytest.raises(gguf_file.GGUFError) as e:
    tok.load_tokenizer(path)
  message = str(e.value)
  assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


def test_a_sentencepiece_gguf_matches_transformers(tmp_path):
  """`tokenizer.ggml.model = "llama"` (SentencePiece BPE with byte fallback, merges rebuilt from the scores), on a
  vocabulary trained here and written as llama.cpp's converter writes one."""
  transformers = pytest.importorskip("transformers")
  corpus = [
    "Hello world, this is a test of the tokenizer.",
    "The quick brown fox jumps over the lazy dog 12345.",
    "def f(x):\n    return x * 2\n",
    "naïve café résumé",
    "多语言 文本 测试",
    "Привет мир",
  ] * 20
  sp = tok.SentencePieceTokenizer.train(corpus, 500, byte_fallback=True)
  proto = sp._sp
  tokens = [proto.id_to_piece(i) for i in range(proto.get_piece_size())]
  scores = [proto.get_score(i) for i in range(proto.get_piece_size())]
  types = [
    2 if proto.is_unknown(i) else 3 if proto.is_control(i) else 6 if proto.is_byte(i) else 1
    for i in range(proto.get_piece_size())
  ]
  template = "{% for m in messages %}{{ bos_token }}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
  path = _write_gguf(
    tmp_path / "spm.gguf",
    model="llama",
    tokens=tokens,
    types=types,
    scores=scores,
    template=template,
    ids={"bos": sp.bos_id, "eos": sp.eos_id, "unk": sp.unk_id, "pad": sp.pad_id},
  )
  ours = tok.load_tokenizer(path)
  theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
  strings = STRINGS[:120]
  assert ours.encode(strings) == [theirs.encode(s, add_special_tokens=False) for s in strings]
  ids = ours.encode(strings)
  assert [ours.backend.decode(i, skip_special_tokens=False) for i in ids] == [theirs.decode(i) for i in ids]
  assert (ours.bos_id, ours.eos_id, ours.pad_id, ours.unk_id) == (2, 1, 0, 3)
  assert ours.add_bos_default is True and theirs("hi")["input_ids"][0] == ours.bos_id  # SentencePiece's default
  messages = CONVERSATIONS["system+user"]
  assert ours.apply_chat_template(messages) == theirs.apply_chat_template(messages, tokenize=False)
