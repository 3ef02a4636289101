"""The text format (prototxt): the direct reader, the located reader, their shared literals, the canonical layout."""
