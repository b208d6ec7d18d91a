"""FOLIO's first-order logic (`premises-FOL`, `conclusion-FOL`) parsed and decided with z3.

Syntax: ∀x / ∃x quantifiers (their scope runs as far right as possible), ¬, ∧,
∨, ⊕ (exclusive or), → (right-associative), ↔, parentheses, predicates
`Name(t1, t2)` and propositional atoms `Name`. A name bound by an enclosing
quantifier is a variable; any other term is a constant.

What FOLIO's annotators actually wrote is read too, in general terms:

- every glyph they use for a connective: ↔ ⟷ ⇔ ≡ (biconditional), → ⟶ ⇒ ⊃
  (implication), ¬ ~ (negation), ∧ & (and), ∨ | (or), ⊕ ⊻ (exclusive or);
- names in any script (`LostToIgaŚwiątek`), with apostrophes, straight or
  curly, and hyphens inside (`GrowthCompanies’Stocks`), and numerals with a
  decimal point inside a constant (`y42.3billion`);
- a comma between two formulas (not between a predicate's arguments) as a
  conjunction: `∀x (Movie(x), NamedAfter(x, y) → Good(y))`;
- one unbalanced bracket: a closing bracket that closes nothing is dropped,
  a missing one is added at the end; either is recorded as a warning
  (`parse_formula` returns them), never silently.

`decide(premises, conclusion)` returns True when the premises entail the
conclusion, False when they entail its negation, Unknown when neither,
Inconsistent when the premises contradict each other, and Timeout when z3
gives up (first-order entailment is undecidable in general).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# canonical connective for every glyph FOLIO uses
_GLYPHS = {"⟷": "↔", "⇔": "↔", "≡": "↔", "⟶": "→", "⇒": "→", "⊃": "→", "~": "¬", "&": "∧", "|": "∨", "⊻": "⊕"}
_NAME = r"[^\W\d][\w'’\-]*(?:\.\d[\w'’\-]*)*"  # a letter first (any script); then letters, digits, ' ’ - and 3.5
_TOKEN = re.compile(r"\s*(∀|∃|¬|∧|∨|⊕|→|↔|\(|\)|,|" + "|".join(map(re.escape, _GLYPHS)) + "|" + _NAME + ")")


class FOLParseError(ValueError):
    """A formula could not be parsed; the message names the formula and position."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if not text[pos:].strip():
                break
            raise FOLParseError(f"{text!r}: unexpected character at {pos}: {text[pos]!r}")
        out.append(_GLYPHS.get(m.group(1), m.group(1)))
        pos = m.end()
    return out


def _balance(text: str, toks: list[str]) -> tuple[list[str], list[str]]:
    """Tokens with one unbalanced bracket repaired, and the warning saying so (none if balanced)."""
    depth, stray = 0, None
    for i, t in enumerate(toks):
        depth += (t == "(") - (t == ")")
        if depth < 0 and stray is None:
            stray, depth = i, 0
    if stray is not None and depth == 0:
        return toks[:stray] + toks[stray + 1:], [f"{text!r}: dropped a closing bracket that closes nothing (token {stray})"]
    if stray is None and depth == 1:
        return toks + [")"], [f"{text!r}: added the one missing closing bracket at the end"]
    if stray is None and depth == 0:
        return toks, []
    raise FOLParseError(f"{text!r}: brackets do not balance (more than one bracket off)")


@dataclass
class _Ctx:
    z3: Any
    sort: Any
    preds: dict[tuple[str, int], Any]
    consts: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str, ctx: _Ctx):
        self.toks, warnings = _balance(text, _tokens(text))
        ctx.warnings += warnings
        self.text, self.i, self.ctx = text, 0, ctx

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise FOLParseError(f"{self.text!r}: expected {expected or 'more input'} at token {self.i}, got {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        f = self.iff({})
        if self.peek() is not None:
            raise FOLParseError(f"{self.text!r}: unexpected {self.peek()!r} at token {self.i}")
        return f

    def iff(self, env: dict[str, Any]) -> Any:
        left = self.imp(env)
        while self.peek() == "↔":
            self.take()
            left = left == self.imp(env)
        return left

    def imp(self, env: dict[str, Any]) -> Any:
        left = self.xor(env)
        if self.peek() == "→":
            self.take()
            return self.ctx.z3.Implies(left, self.imp(env))
        return left

    def xor(self, env: dict[str, Any]) -> Any:
        left = self.disj(env)
        while self.peek() == "⊕":
            self.take()
            left = self.ctx.z3.Xor(left, self.disj(env))
        return left

    def disj(self, env: dict[str, Any]) -> Any:
        parts = [self.conj(env)]
        while self.peek() == "∨":
            self.take()
            parts.append(self.conj(env))
        return parts[0] if len(parts) == 1 else self.ctx.z3.Or(*parts)

    def conj(self, env: dict[str, Any]) -> Any:
        parts = [self.unary(env)]
        while self.peek() in ("∧", ","):  # a comma between formulas is a conjunction (FOLIO writes both)
            self.take()
            parts.append(self.unary(env))
        return parts[0] if len(parts) == 1 else self.ctx.z3.And(*parts)

    def unary(self, env: dict[str, Any]) -> Any:
        tok = self.peek()
        z3 = self.ctx.z3
        if tok == "¬":
            self.take()
            return z3.Not(self.unary(env))
        if tok in ("∀", "∃"):
            self.take()
            name = self.take()
            var = z3.Const(f"{name}!{self.i}", self.ctx.sort)
            body = self.iff({**env, name: var})  # scope runs as far right as possible
            return z3.ForAll([var], body) if tok == "∀" else z3.Exists([var], body)
        if tok == "(":
            self.take()
            f = self.iff(env)
            self.take(")")
            return f
        return self.atom(env)

    def atom(self, env: dict[str, Any]) -> Any:
        name = self.take()
        if not re.match(r"[^\W\d]", name):
            raise FOLParseError(f"{self.text!r}: expected a predicate at token {self.i - 1}, got {name!r}")
        args: list[Any] = []
        if self.peek() == "(":
            self.take()
            args.append(self.term(env))
            while self.peek() == ",":
                self.take()
                args.append(self.term(env))
            self.take(")")
        key = (name, len(args))
        if key not in self.ctx.preds:
            z3 = self.ctx.z3
            self.ctx.preds[key] = z3.Function(f"{name}/{len(args)}", *([self.ctx.sort] * len(args)), z3.BoolSort()) \
                if args else z3.Bool(name)
        pred = self.ctx.preds[key]
        return pred(*args) if args else pred

    def term(self, env: dict[str, Any]) -> Any:
        name = self.take()
        if name in env:
            return env[name]
        if name not in self.ctx.consts:
            self.ctx.consts[name] = self.ctx.z3.Const(name, self.ctx.sort)
        return self.ctx.consts[name]


@dataclass(frozen=True)
class Verdict:
    """What z3 made of one FOLIO item: the label it proved (None if the FOL could not be read),
    why not, and the warnings of any repair (a dropped or added bracket)."""

    label: str | None
    reason: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def parsed(self) -> bool:
        return self.label is not None


def verify(premises: Sequence[str], conclusion: str, timeout_ms: int = 5000) -> Verdict:
    """`decide`, with a parse failure returned as its reason instead of raised."""
    warnings: list[str] = []
    try:
        return Verdict(decide(premises, conclusion, timeout_ms, warnings), None, tuple(warnings))
    except FOLParseError as exc:
        return Verdict(None, str(exc)[:300], tuple(warnings))


def decide(premises: Sequence[str], conclusion: str, timeout_ms: int = 5000, warnings: list[str] | None = None) -> str:
    """True / False / Unknown / Inconsistent / Timeout (see the module docstring); the warnings of
    any bracket repair are appended to `warnings`.

    Raises FOLParseError for a formula it cannot read.
    """
    import z3

    ctx = _Ctx(z3, z3.DeclareSort("Obj"), {}, {})
    try:
        parsed = [_Parser(p, ctx).parse() for p in premises if p.strip()]
        goal = _Parser(conclusion, ctx).parse()
    finally:
        if warnings is not None:
            warnings += ctx.warnings
    solver = z3.Solver()
    solver.set(timeout=timeout_ms)
    solver.add(*parsed)
    if solver.check() == z3.unsat:
        return "Inconsistent"
    results = []
    for target in (z3.Not(goal), goal):
        solver.push()
        solver.add(target)
        results.append(solver.check())
        solver.pop()
    if results[0] == z3.unsat:
        return "True"
    if results[1] == z3.unsat:
        return "False"
    if z3.unknown in results:
        return "Timeout"
    return "Unknown"
