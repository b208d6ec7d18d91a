"""FOLIO's first-order logic (`premises-FOL`, `conclusion-FOL`) parsed and decided with z3.

Syntax: ∀x / ∃x quantifiers (their scope runs as far right as possible), ¬, ∧,
∨, ⊕ (exclusive or), → (right-associative), ↔, parentheses, predicates
`Name(t1, t2)` and propositional atoms `Name`. A name bound by an enclosing
quantifier is a variable; any other term is a constant.

`decide(premises, conclusion)` returns True when the premises entail the
conclusion, False when they entail its negation, Unknown when neither,
Inconsistent when the premises contradict each other, and Timeout when z3
gives up (first-order entailment is undecidable in general).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"\s*(∀|∃|¬|∧|∨|⊕|→|↔|\(|\)|,|[A-Za-z_][A-Za-z0-9_'-]*)")


class FOLParseError(ValueError):
    """A formula could not be parsed; the message names the formula and position."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FOLParseError(f"{text!r}: unexpected character at {pos}: {text[pos]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


@dataclass
class _Ctx:
    z3: Any
    sort: Any
    preds: dict[tuple[str, int], Any]
    consts: dict[str, Any]


class _Parser:
    def __init__(self, text: str, ctx: _Ctx):
        self.text, self.toks, self.i, self.ctx = text, _tokens(text), 0, ctx

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
        while self.peek() == "∧":
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
        if not re.match(r"[A-Za-z_]", name):
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


def decide(premises: Sequence[str], conclusion: str, timeout_ms: int = 5000) -> str:
    """True / False / Unknown / Inconsistent / Timeout (see the module docstring).

    Raises FOLParseError for a formula it cannot read.
    """
    import z3

    ctx = _Ctx(z3, z3.DeclareSort("Obj"), {}, {})
    parsed = [_Parser(p, ctx).parse() for p in premises if p.strip()]
    goal = _Parser(conclusion, ctx).parse()
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
