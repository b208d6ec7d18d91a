"""Plain-Python views of the warehouse for people: the capacity plan, the report pages and
their panels, and the figures both the pages and the assets draw. Nothing here imports Dagster."""
