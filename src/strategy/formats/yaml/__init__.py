"""YAML: the direct reader for the block style, and the located reader (PyYAML safe nodes) that owns the errors."""
