"""A small forward-chaining prover for FLD-style deduction problems.

Knowledge: ground literals (`Lit`: predicate, constant, sign), ground rules
(conjunction of literals -> literal), universal rules (for all x: conjunction
of predicates -> predicate, each possibly negated) and disjunctive facts
(a or b). The closure applies rules (universal ones instantiated for every
constant), disjunctive syllogism (a or b, not a |- b) and reasoning by cases
(a or b, a |- c, b |- c  =>  c) until nothing new follows.

`verdict` says PROVED when the hypothesis is in the closure, DISPROVED when
its negation is, UNKNOWN otherwise (and INCONSISTENT when both are, which the
generator never emits).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Lit:
    pred: str
    const: str
    positive: bool = True

    def negated(self) -> Lit:
        return Lit(self.pred, self.const, not self.positive)


@dataclass(frozen=True)
class Rule:
    premises: tuple[Lit, ...]
    conclusion: Lit


@dataclass(frozen=True)
class Universal:
    """for all x: (p1(x) and ...) -> q(x); each part is (predicate, positive)."""

    premises: tuple[tuple[str, bool], ...]
    conclusion: tuple[str, bool]

    def instantiate(self, const: str) -> Rule:
        return Rule(tuple(Lit(p, const, s) for p, s in self.premises), Lit(self.conclusion[0], const, self.conclusion[1]))


@dataclass(frozen=True)
class Disjunction:
    a: Lit
    b: Lit


@dataclass
class Theory:
    facts: set[Lit] = field(default_factory=set)
    rules: list[Rule] = field(default_factory=list)
    universals: list[Universal] = field(default_factory=list)
    disjunctions: list[Disjunction] = field(default_factory=list)

    def constants(self) -> set[str]:
        out = {f.const for f in self.facts}
        for r in self.rules:
            out |= {p.const for p in r.premises} | {r.conclusion.const}
        for d in self.disjunctions:
            out |= {d.a.const, d.b.const}
        return out

    def copy(self) -> Theory:
        return Theory(set(self.facts), list(self.rules), list(self.universals), list(self.disjunctions))


def _horn_closure(facts: set[Lit], rules: list[Rule]) -> set[Lit]:
    known = set(facts)
    changed = True
    while changed:
        changed = False
        for r in rules:
            if r.conclusion not in known and all(p in known for p in r.premises):
                known.add(r.conclusion)
                changed = True
    return known


def closure(theory: Theory, _depth: int = 0) -> set[Lit]:
    """Everything that follows from the theory (see the module docstring)."""
    consts = theory.constants()
    rules = list(theory.rules) + [u.instantiate(c) for u in theory.universals for c in sorted(consts)]
    known = _horn_closure(theory.facts, rules)
    changed = True
    while changed:
        changed = False
        for d in theory.disjunctions:
            if d.a in known or d.b in known:
                continue
            new: set[Lit] = set()
            if d.a.negated() in known:
                new.add(d.b)
            elif d.b.negated() in known:
                new.add(d.a)
            elif _depth < 2:  # reasoning by cases, bounded nesting
                rest = Theory(known, theory.rules, theory.universals, [x for x in theory.disjunctions if x != d])
                with_a = closure(Theory(known | {d.a}, rest.rules, rest.universals, rest.disjunctions), _depth + 1)
                with_b = closure(Theory(known | {d.b}, rest.rules, rest.universals, rest.disjunctions), _depth + 1)
                new = (with_a & with_b) - known
            if new - known:
                known = _horn_closure(known | new, rules)
                changed = True
    return known


def verdict(theory: Theory, hypothesis: Lit) -> str:
    """PROVED, DISPROVED, UNKNOWN, or INCONSISTENT."""
    known = closure(theory)
    pos, neg = hypothesis in known, hypothesis.negated() in known
    if pos and neg:
        return "INCONSISTENT"
    return "PROVED" if pos else "DISPROVED" if neg else "UNKNOWN"
