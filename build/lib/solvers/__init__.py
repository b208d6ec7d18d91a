"""Exact solvers: complete solution enumeration for MuSoBench's TimeTabling and SubsetSum.

Each task has two enumerators that share no code: a backtracking search
(pure Python) and OR-Tools CP-SAT all-solutions search with a callback. Both
accept a `limit` for early stop: they return at most `limit + 1` solutions, so
a caller can tell "more than limit" without enumerating the rest.
"""
