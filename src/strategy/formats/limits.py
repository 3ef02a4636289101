"""Bounds on input size and shape, so hostile files fail fast with bounded memory.

A real strategy file is a few hundred bytes and three levels deep; these leave generous room.
"""

MAX_BYTES = 1 << 20  # 1 MiB
MAX_DEPTH = 32  # nested mappings/lists/messages
MAX_NODES = 100_000  # values in one document, after YAML aliases are expanded
MAX_NUMBER_CHARS = 400  # one number literal: no field holds a longer one, and int() of thousands of digits is refused
