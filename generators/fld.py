"""FLD-style deduction problems, generated offline with every label confirmed by the prover.

Following the FLD recipe (REFERENCE-FACTS; Morishita et al.): a proof tree is
built backwards from a target literal with deduction rules (implication,
conjunction, disjunction by cases, negation, universal instantiation), kept as
a networkx DiGraph whose edges run from premises to conclusions; its leaves
become the facts. Distractor facts and rules over the same vocabulary are
added only if the prover says the label is unchanged. The hypothesis is the
target (PROVED), the negation of a proved target (DISPROVED), or a target whose
proof lost a needed leaf fact (UNKNOWN; the prover must then prove neither the
hypothesis nor its negation). Everything is rendered to English in FLD's
`sent1: ... sent2: ...` context layout, and the depth and distractor count are
recorded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

from solvers.logic import Disjunction, Lit, Rule, Theory, Universal, verdict

ADJECTIVES = ["red", "quiet", "bright", "cold", "heavy", "round", "wet", "soft", "tall", "old", "calm", "sharp",
              "green", "hollow", "loud", "smooth", "warm", "tiny", "rough", "clean"]
NAMES = ["the lantern", "the kettle", "the ferry", "Ada", "Bruno", "the garden", "the violin", "Chidi", "the tower",
         "Dana", "the river", "the owl", "Emil", "the anvil", "the meadow", "Farah"]
LABEL_OF_VERDICT = {"PROVED": "True", "DISPROVED": "False", "UNKNOWN": "Unknown"}
RULE_KINDS = ("implication", "conjunction", "universal", "disjunction", "negation")


@dataclass
class FLDProblem:
    facts: list[Any]  # Lit, Rule, Universal or Disjunction, in presentation order
    hypothesis: Lit
    verdict: str  # PROVED / DISPROVED / UNKNOWN, from the prover
    depth: int
    distractors: int
    proof: nx.DiGraph = field(repr=False)

    @property
    def label(self) -> str:
        return LABEL_OF_VERDICT[self.verdict]

    def theory(self) -> Theory:
        return theory_of(self.facts)

    def context(self) -> str:
        return " ".join(f"sent{i}: {render(f)}" for i, f in enumerate(self.facts, start=1))

    def hypothesis_text(self) -> str:
        return render(self.hypothesis)


def theory_of(items: list[Any]) -> Theory:
    t = Theory()
    for it in items:
        if isinstance(it, Lit):
            t.facts.add(it)
        elif isinstance(it, Rule):
            t.rules.append(it)
        elif isinstance(it, Universal):
            t.universals.append(it)
        elif isinstance(it, Disjunction):
            t.disjunctions.append(it)
    return t


def _lit_text(lit: Lit) -> str:
    return f"{lit.const} is {'' if lit.positive else 'not '}{lit.pred}"


def render(item: Any) -> str:
    if isinstance(item, Lit):
        return _lit_text(item)
    if isinstance(item, Rule):
        return f"if {' and '.join(_lit_text(p) for p in item.premises)}, then {_lit_text(item.conclusion)}"
    if isinstance(item, Universal):
        parts = " and ".join(("" if s else "not ") + p for p, s in item.premises)
        q, qs = item.conclusion
        return f"everything that is {parts} is {'' if qs else 'not '}{q}"
    if isinstance(item, Disjunction):
        return f"either {_lit_text(item.a)} or {_lit_text(item.b)}"
    raise TypeError(item)


class _Builder:
    def __init__(self, rng: random.Random):
        import networkx as nx  # 0.18 s: imported by the first problem, not by every command that loads the definitions

        self.rng = rng
        self.graph = nx.DiGraph()
        self.items: list[Any] = []
        self.used_preds: set[str] = set()

    def fresh(self, const: str | None = None) -> Lit:
        free = [a for a in ADJECTIVES if a not in self.used_preds] or ADJECTIVES
        pred = self.rng.choice(free)
        self.used_preds.add(pred)
        return Lit(pred, const or self.rng.choice(NAMES), True)

    def prove(self, target: Lit, depth: int) -> None:
        """Add items that prove `target` with a proof of exactly `depth` rule steps."""
        self.graph.add_node(target)
        if depth == 0:
            self.items.append(target)
            self.graph.nodes[target]["leaf"] = True
            return
        kind = self.rng.choice(RULE_KINDS if target.positive else ("negation", "universal", "implication"))
        if kind == "conjunction":
            a, b = self.fresh(), self.fresh()
            self.items.append(Rule((a, b), target))
            for p, d in ((a, depth - 1), (b, self.rng.randint(0, depth - 1))):
                self.graph.add_edge(p, target, rule="conjunction")
                self.prove(p, d)
        elif kind == "universal":
            p = self.fresh(target.const)
            self.items.append(Universal(((p.pred, True),), (target.pred, target.positive)))
            self.graph.add_edge(p, target, rule="universal instantiation")
            self.prove(p, depth - 1)
        elif kind == "disjunction":
            a, b = self.fresh(), self.fresh()
            self.items += [Disjunction(a, b), Rule((a,), target), Rule((b,), target)]
            for p in (a, b):
                self.graph.add_edge(p, target, rule="disjunction elimination")
            self.graph.nodes[a]["leaf"] = self.graph.nodes[b]["leaf"] = False
            if depth > 1:  # the disjunction itself is a fact; deepen through one branch's rule premise
                c = self.fresh()
                self.items.remove(Rule((a,), target))
                self.items.append(Rule((a, c), target))
                self.graph.add_edge(c, target, rule="disjunction elimination")
                self.prove(c, depth - 1)
        else:  # implication, or negation (a rule concluding a negative literal)
            p = self.fresh()
            self.items.append(Rule((p,), target))
            self.graph.add_edge(p, target, rule=kind)
            self.prove(p, depth - 1)


def generate_problem(rng: random.Random, depth: int, label: str, max_distractors: int = 4,
                     max_tries: int = 50) -> FLDProblem:
    """One problem with the requested label ('True', 'False' or 'Unknown') and proof depth >= 1."""
    if label not in ("True", "False", "Unknown"):
        raise ValueError(f"label must be True, False or Unknown, got {label!r}")
    for _ in range(max_tries):
        b = _Builder(rng)
        target = b.fresh()
        if label == "False" or (label == "Unknown" and rng.random() < 0.5):
            target = target.negated()  # prove not-h; hypothesis h is then DISPROVED
        b.prove(target, depth)
        # True: the proved target; False: the negation of the proved (negated) target; Unknown: the target
        hypothesis = target.negated() if label == "False" else target
        items = list(b.items)
        if label == "Unknown":
            leaves = [it for it in items if isinstance(it, Lit)]
            rng.shuffle(leaves)
            for leaf in leaves:
                trial = [it for it in items if it != leaf]
                if verdict(theory_of(trial), hypothesis) == "UNKNOWN":
                    items = trial
                    break
            else:
                continue
        want = {"True": "PROVED", "False": "DISPROVED", "Unknown": "UNKNOWN"}[label]
        if verdict(theory_of(items), hypothesis) != want:
            continue
        distractors = 0
        for _ in range(rng.randint(0, max_distractors)):
            extra = _distractor(rng, b)
            if verdict(theory_of(items + [extra]), hypothesis) == want:
                items.append(extra)
                distractors += 1
        rng.shuffle(items)
        return FLDProblem(items, hypothesis, want, depth, distractors, b.graph)
    raise RuntimeError(f"could not generate a {label} problem of depth {depth} in {max_tries} tries")


def _distractor(rng: random.Random, b: _Builder) -> Any:
    a, c = b.fresh(), b.fresh()
    kind = rng.choice(["fact", "rule", "universal"])
    if kind == "fact":
        return a if rng.random() < 0.7 else a.negated()
    if kind == "rule":
        return Rule((a,), c)
    return Universal(((a.pred, True),), (c.pred, rng.random() < 0.7))
