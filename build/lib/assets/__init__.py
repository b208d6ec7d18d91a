"""Dagster definitions: assets, checks, resources and jobs for every benchmark family."""
