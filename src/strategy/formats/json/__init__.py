"""JSON: the direct reader (the C decoder), its lazy locator, and the located reader that owns the errors."""
