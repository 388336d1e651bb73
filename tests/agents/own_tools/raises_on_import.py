"""A tools module whose import fails (its owner's bug)."""

raise RuntimeError("the tools module is broken")
