"""The text format (prototxt): the direct reader, the located parser, their shared literals, the canonical layout."""
