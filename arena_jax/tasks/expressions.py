"""A tiny, safe parser and exact evaluator for the arithmetic the built-in tasks use.

Model output is never passed to `eval`/`exec`: a completion's equations are tokenised and parsed by a
recursive-descent parser over numbers, `+ - * /` (also `× ÷ · −`), parentheses and unary minus, and
evaluated with `fractions.Fraction`, so `7 / 2 * 2 = 7` is exact and no float tolerance is needed.
Input length, nesting depth and digit counts are bounded so that a pathological string costs
microseconds, not seconds.

The tree (`Expr`) doubles as the problem representation of the arithmetic and countdown generators:
`render` prints it with the fewest parentheses that make `parse(render(e))` the same tree, and the
post-order of its operations is the canonical order of solution steps.
"""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction
from typing import Iterator

OPS = ("+", "-", "*", "/")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_COMMUTATIVE = frozenset("+*")
# Unicode spellings a model (or a user) may write, mapped to the ASCII the tasks use.
_ALIASES = {"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-"}
MAX_CHARS = 512
MAX_DEPTH = 64
MAX_DIGITS = 40

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([-+*/()×·÷−–]))")


class ParseError(ValueError):
  """The text is not an arithmetic expression this parser accepts (or divides by zero)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Expr:
  """A node of an expression tree; identity-hashed so that equal sub-expressions stay distinct.

  `op` is None for a number, one of `OPS` for a binary operation, or "neg" for unary minus.
  `value` is the exact value of the sub-tree.
  """

  op: str | None
  value: Fraction
  children: tuple["Expr", ...] = ()

  @property
  def is_leaf(self) -> bool:
    return self.op is None

  @property
  def num_ops(self) -> int:
    """Number of operations in the sub-tree."""
    return (0 if self.is_leaf else 1) + sum(c.num_ops for c in self.children)


def leaf(value) -> Expr:
  return Expr(None, Fraction(value))


def apply_op(op: str, a: Fraction, b: Fraction) -> Fraction:
  """a op b, exactly; raises ParseError on division by zero."""
  if op == "+":
    return a + b
  if op == "-":
    return a - b
  if op == "*":
    return a * b
  if op == "/":
    if b == 0:
      raise ParseError("division by zero")
    return a / b
  raise ParseError(f"unknown operator {op!r}")


def binary(op: str, left: Expr, right: Expr) -> Expr:
  return Expr(op, apply_op(op, left.value, right.value), (left, right))


# ───────────────────────────────────────────── parsing ─────────────────────────────────────────────


def _tokenize(text: str) -> list[str]:
  if len(text) > MAX_CHARS:
    raise ParseError(f"expression longer than {MAX_CHARS} characters")
  tokens, pos = [], 0
  text = text.rstrip()
  while pos < len(text):
    m = _TOKEN.match(text, pos)
    if not m:
      raise ParseError(f"unexpected character {text[pos:].lstrip()[:1]!r}")
    number, sym = m.groups()
    if number is not None:
      if len(number) > MAX_DIGITS:
        raise ParseError(f"number with more than {MAX_DIGITS} digits")
      tokens.append(number)
    else:
      tokens.append(_ALIASES.get(sym, sym))
    pos = m.end()
  if not tokens:
    raise ParseError("empty expression")
  return tokens


class _Parser:
  """expr := term (('+'|'-') term)*;  term := unary (('*'|'/') unary)*;  unary := '-' unary | atom."""

  def __init__(self, tokens: list[str]):
    self.tokens = tokens
    self.pos = 0
    self.depth = 0

  def peek(self) -> str | None:
    return self.tokens[self.pos] if self.pos < len(self.tokens) else None

  def take(self) -> str:
    tok = self.peek()
    if tok is None:
      raise ParseError("unexpected end of expression")
    self.pos += 1
    return tok

  def expr(self) -> Expr:
    node = self.term()
    while self.peek() in ("+", "-"):
      op = self.take()
      node = binary(op, node, self.term())
    return node

  def term(self) -> Expr:
    node = self.unary()
    while self.peek() in ("*", "/"):
      op = self.take()
      node = binary(op, node, self.unary())
    return node

  def unary(self) -> Expr:
    if self.peek() == "-":
      self.take()
      self._enter()
      operand = self.unary()
      self.depth -= 1
      # A negative number is a number; only "-(...)" needs a node of its own.
      return leaf(-operand.value) if operand.is_leaf else Expr("neg", -operand.value, (operand,))
    return self.atom()

  def atom(self) -> Expr:
    tok = self.take()
    if tok == "(":
      self._enter()
      node = self.expr()
      self.depth -= 1
      if self.take() != ")":
        raise ParseError("missing ')'")
      return node
    if tok[0].isdigit():
      return leaf(Fraction(tok))
    raise ParseError(f"unexpected {tok!r}")

  def _enter(self):
    self.depth += 1
    if self.depth > MAX_DEPTH:
      raise ParseError(f"nesting deeper than {MAX_DEPTH}")


def parse(text: str) -> Expr:
  """Parses an arithmetic expression into an exactly evaluated tree; raises ParseError."""
  parser = _Parser(_tokenize(text))
  node = parser.expr()
  if parser.peek() is not None:
    raise ParseError(f"unexpected {parser.peek()!r}")
  return node


def evaluate(text: str) -> Fraction:
  """The exact value of an arithmetic expression (the safe replacement for `eval`)."""
  return parse(text).value


# ─────────────────────────────────────────── printing ───────────────────────────────────────────


def format_number(value: Fraction) -> str:
  """12, -3, 2.5 or 1/3: an integer when it is one, a terminating decimal, else a fraction."""
  value = Fraction(value)
  if value.denominator == 1:
    return str(value.numerator)
  d = value.denominator
  while d % 2 == 0:
    d //= 2
  while d % 5 == 0:
    d //= 5
  if d == 1:  # terminating decimal
    text = f"{float(value):.12f}".rstrip("0")
    if Fraction(text) == value:
      return text
  return f"{value.numerator}/{value.denominator}"


def _needs_parens(child: Expr, parent_op: str, is_right: bool) -> bool:
  if child.is_leaf:
    return child.value < 0 or child.value.denominator != 1
  if child.op == "neg":
    return True
  # The parser is left-associative, so a right child of equal precedence keeps its parentheses
  # (a - (b - c), and also a + (b + c), so that the tree round-trips exactly).
  if is_right:
    return _PRECEDENCE[child.op] <= _PRECEDENCE[parent_op]
  return _PRECEDENCE[child.op] < _PRECEDENCE[parent_op]


def render(node: Expr, operand_text=None) -> str:
  """Prints a tree with minimal parentheses: `parse(render(e))` has the same structure as `e`.

  `operand_text(child)`, when given, may return the text to print for a child instead of recursing
  into it (the solution writer prints computed sub-results as numbers); None means recurse.
  """
  if node.is_leaf:
    return format_number(node.value)
  if node.op == "neg":
    return "-(" + render(node.children[0], operand_text) + ")"
  parts = []
  for is_right, child in enumerate(node.children):
    text = operand_text(child) if operand_text else None
    if text is None:
      text = render(child, operand_text)
      if _needs_parens(child, node.op, bool(is_right)):
        text = f"({text})"
    parts.append(text)
  return f"{parts[0]} {node.op} {parts[1]}"


def canonical_key(node: Expr) -> str:
  """A normalised form for de-duplication: fully parenthesised, operands of + and * sorted."""
  if node.is_leaf:
    return format_number(node.value)
  keys = [canonical_key(c) for c in node.children]
  if node.op == "neg":
    return f"(-{keys[0]})"
  if node.op in _COMMUTATIVE:
    keys.sort()
  return f"({keys[0]}{node.op}{keys[1]})"


def operations(node: Expr) -> list[Expr]:
  """The operation nodes in post-order (left sub-tree, right sub-tree, node): the canonical step order."""
  out = []

  def visit(n):
    for c in n.children:
      visit(c)
    if not n.is_leaf:
      out.append(n)

  visit(node)
  return out


def leaves(node: Expr) -> Iterator[Expr]:
  if node.is_leaf:
    yield node
  for c in node.children:
    yield from leaves(c)


def is_commutative(op: str) -> bool:
  return op in _COMMUTATIVE
