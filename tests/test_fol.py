"""FOLIO-style FOL parsed and decided with z3, on hand-written stories with known entailment."""

import pytest

from solvers.fol import FOLParseError, decide

OWLS = ["∀x (OwlInBarn(x) → HuntsAtNight(x))", "OwlInBarn(hedwig)"]


def test_universal_instantiation_entails():
    assert decide(OWLS, "HuntsAtNight(hedwig)") == "True"


def test_negation_is_entailed():
    assert decide(["∀x (Stone(x) → ¬Floats(x))", "Stone(pebble)"], "Floats(pebble)") == "False"


def test_unrelated_conclusion_is_unknown():
    assert decide(OWLS, "Sings(hedwig)") == "Unknown"


def test_existential_and_conjunction():
    premises = ["∃x (Cat(x) ∧ Black(x))", "∀x (Black(x) → Visible(x))"]
    assert decide(premises, "∃x (Cat(x) ∧ Visible(x))") == "True"
    assert decide(premises, "Visible(tom)") == "Unknown"


def test_exclusive_or_and_disjunction_by_cases():
    assert decide(["Czech(mike) ⊕ Slovak(mike)", "Czech(mike)"], "Slovak(mike)") == "False"
    assert decide(["A(x1) ∨ B(x1)", "∀x (A(x) → C(x))", "∀x (B(x) → C(x))"], "C(x1)") == "True"


def test_biconditional_and_multi_argument_predicates():
    assert decide(["∀x ∀y (ParentOf(x, y) ↔ ChildOf(y, x))", "ParentOf(ann, bob)"], "ChildOf(bob, ann)") == "True"


def test_quantifier_scope_runs_to_the_right():
    # ∀x P(x) → Q(x) reads as ∀x (P(x) → Q(x))
    assert decide(["∀x Tall(x) → Seen(x)", "Tall(zed)"], "Seen(zed)") == "True"


def test_inconsistent_premises_are_reported():
    assert decide(["P(a)", "¬P(a)"], "Q(a)") == "Inconsistent"


@pytest.mark.parametrize("bad", ["∀x (P(x) → ", "P(a) ∧ ∧ Q(a)", "P(a) = Q(a)"])
def test_unreadable_formula_names_itself(bad):
    with pytest.raises(FOLParseError, match="expected|unexpected"):
        decide([bad], "Q(a)")
