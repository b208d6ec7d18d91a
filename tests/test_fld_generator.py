"""The FLD-style prover on hand-made theories, and the generator's labels against it."""

import random

import pytest

from generators.fld import generate_problem, theory_of
from solvers.logic import Disjunction, Lit, Rule, Theory, Universal, verdict

A, B, C = Lit("red", "ada"), Lit("tall", "ada"), Lit("calm", "ada")


def test_modus_ponens_and_conjunction():
    t = Theory({A, B}, [Rule((A, B), C)])
    assert verdict(t, C) == "PROVED"
    assert verdict(Theory({A}, [Rule((A, B), C)]), C) == "UNKNOWN"


def test_negated_conclusion_disproves():
    assert verdict(Theory({A}, [Rule((A,), C.negated())]), C) == "DISPROVED"


def test_universal_instantiation_applies_to_every_constant():
    t = Theory({Lit("red", "bo")}, universals=[Universal((("red", True),), ("tall", True))])
    assert verdict(t, Lit("tall", "bo")) == "PROVED"
    assert verdict(t, Lit("tall", "ada")) == "UNKNOWN"


def test_reasoning_by_cases_and_disjunctive_syllogism():
    by_cases = Theory(set(), [Rule((A,), C), Rule((B,), C)], disjunctions=[Disjunction(A, B)])
    assert verdict(by_cases, C) == "PROVED"
    one_branch = Theory(set(), [Rule((A,), C)], disjunctions=[Disjunction(A, B)])
    assert verdict(one_branch, C) == "UNKNOWN"
    syllogism = Theory({A.negated()}, disjunctions=[Disjunction(A, B)])
    assert verdict(syllogism, B) == "PROVED"


def test_contradiction_is_reported():
    assert verdict(Theory({A, A.negated()}), A) == "INCONSISTENT"


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("label", ["True", "False", "Unknown"])
def test_generated_label_equals_the_provers_verdict(seed, label):
    p = generate_problem(random.Random(seed), depth=1 + seed % 4, label=label)
    assert p.label == label
    assert verdict(p.theory(), p.hypothesis) == {"True": "PROVED", "False": "DISPROVED", "Unknown": "UNKNOWN"}[label]
    assert p.depth == 1 + seed % 4 and p.distractors >= 0
    assert p.context().startswith("sent1: ")


@pytest.mark.parametrize("seed", range(20))
def test_unknown_items_lost_a_premise_the_proof_needed(seed):
    """Unprovable both ways; and putting back one leaf of the proof tree makes it decidable again."""
    p = generate_problem(random.Random(seed), depth=2, label="Unknown")
    theory = p.theory()
    assert verdict(theory, p.hypothesis) == "UNKNOWN"
    assert verdict(theory, p.hypothesis.negated()) == "UNKNOWN"
    leaves = [n for n, d in p.proof.nodes(data=True) if d.get("leaf") and n not in theory.facts]
    restored = [verdict(theory_of(p.facts + [leaf]), p.hypothesis) for leaf in leaves]
    assert leaves and any(v != "UNKNOWN" for v in restored)


def test_same_seed_gives_the_same_problem():
    a = generate_problem(random.Random(7), 3, "True")
    b = generate_problem(random.Random(7), 3, "True")
    assert (a.context(), a.hypothesis_text(), a.distractors) == (b.context(), b.hypothesis_text(), b.distractors)
    c = generate_problem(random.Random(8), 3, "True")
    assert c.context() != a.context()
