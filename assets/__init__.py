"""Dagster only: definitions, resources, assets, checks and jobs (see assets/definitions.py)."""

import warnings

# Checks partitioned like their assets (AssetCheckSpec.partitions_def), so the UI keeps each
# partition's verdict, are a Dagster preview feature (1.13); we rely on it knowingly.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec")
