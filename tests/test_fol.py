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


# What FOLIO's annotators write, in formulas of our own (the shapes, not their stories).

def test_names_in_any_script_with_apostrophes_and_decimal_numerals():
    premises = ["∀x (BeatByŁucjaWójcik(x) → Ranked(x))", "BeatByŁucjaWójcik(ana)",
                "∀x (TeamMates’Boots(x) → Muddy(x))", "TeamMates’Boots(pair1)", "WorthAt(fund, y12.5million)"]
    assert decide(premises, "Ranked(ana)") == "True"
    assert decide(premises, "Muddy(pair1)") == "True"
    assert decide(premises, "WorthAt(fund, y12.5million)") == "True"
    assert decide(premises, "WorthAt(fund, y12.6million)") == "Unknown"  # a different constant


@pytest.mark.parametrize("iff", ["↔", "⟷", "⇔", "≡"])
def test_every_biconditional_glyph(iff):
    assert decide([f"∀x (Lit(x) {iff} ¬Dark(x))", "¬Dark(room)"], "Lit(room)") == "True"


@pytest.mark.parametrize("imp, neg", [("→", "¬"), ("⟶", "¬"), ("⇒", "~"), ("⊃", "¬")])
def test_every_implication_and_negation_glyph(imp, neg):
    assert decide([f"∀x (Frog(x) {imp} {neg}Furry(x))", "Frog(kermit)"], "Furry(kermit)") == "False"


def test_a_comma_between_formulas_is_a_conjunction_but_not_between_arguments():
    premises = ["∀x ∀y (Film(x), NamedAfter(x, y) → Hero(y))", "Film(f1)", "NamedAfter(f1, zed)"]
    assert decide(premises, "Hero(zed)") == "True"
    # without the film fact the rule does not fire: the comma joined the two conditions
    assert decide(premises[:1] + premises[2:], "Hero(zed)") == "Unknown"


def test_one_stray_closing_bracket_is_dropped_with_a_warning():
    from solvers.fol import verify

    v = verify(["(Tall(bo) ∧ Fast(bo)) ∨ ¬Tall(bo) ∧ ¬Fast(bo))", "Tall(bo)"], "Fast(bo)")
    assert v.label == "True" and v.parsed
    assert len(v.warnings) == 1 and "dropped a closing bracket" in v.warnings[0]
    missing = verify(["∀x (Bird(x) → Flies(x)", "Bird(tweety)"], "Flies(tweety)")
    assert missing.label == "True" and "added the one missing closing bracket" in missing.warnings[0]


def test_two_brackets_off_is_not_guessed_but_reported():
    from solvers.fol import verify

    v = verify(["((P(a) ∧ Q(a)", "P(a)"], "Q(a)")
    assert not v.parsed and v.label is None and "brackets do not balance" in v.reason
