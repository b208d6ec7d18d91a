"""Evaluation protocols (multi-turn flows through the ledger) and metric functions."""
