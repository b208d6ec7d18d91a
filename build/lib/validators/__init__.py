"""Checks of items and of model answers: solution validation, answer extraction, judges."""
