"""JSON: the direct reader (the C decoder), its positions found when asked, and the located reader that owns the errors."""
