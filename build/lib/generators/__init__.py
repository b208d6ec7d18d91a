"""Item builders: MuSoBench instances now; the other families' generators join here."""
