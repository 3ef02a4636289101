"""Where each field of a JSON document the direct reader filled was set, found when first asked.

The document is known good by then (it decoded, and every key named a field), so one pass over its tokens records
what the builder would: each key's position under its field's dotted path, and each item of a repeated field's
list (a lone value: the key's).
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import Descriptor

from .direct import Slot, fields
from .errors import Location

__all__ = ["locate"]

# Each token with the whitespace, colons and commas before it (findall then yields plain pairs, the fastest way to
# lex in Python; in a known good document the order of keys and values says which is which): strings whole,
# brackets, and any other run (numbers, true, false, null).
_TOKEN = re.compile(r'([ \t\n\r:,]*)("[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|[^ \t\n\r{}\[\]:,"]+)')
_scan = json.decoder.scanstring  # type: ignore[attr-defined]
_new = tuple.__new__


def locate(text: str, source: str, root: Descriptor) -> Iterator[tuple[str, Location]]:
    """Each set field's dotted path and location in `text`, a document the direct reader filled a `root` message
    from, in document order (each path once): a caller after one path reads only as far as it."""
    count, rfind = text.count, text.rfind

    def where(offset: int) -> Location:  # counted in C, for the few offsets recorded
        return _new(Location, (source, count("\n", 0, offset) + 1, offset - rfind("\n", 0, offset)))

    # Open containers, innermost last: an object (its field names, its prefix) or a repeated field's list (its
    # slot, its path, the index of its next item).
    stack: list[list[Any]] = []
    key: tuple[Slot, str, int] | None = None  # the key whose value comes next, and its offset
    offset = 0
    for ws, token in _TOKEN.findall(text):
        at = offset + len(ws)
        offset = at + len(token)
        head = token[0]
        if head in "}]":
            stack.pop()
            continue
        if key is None:
            if not stack:  # the document's object
                stack.append([fields(root, True), ""])
                continue
            top = stack[-1]
            if len(top) == 2:  # in an object: a key
                slot = top[0][token[1:-1] if "\\" not in token else _scan(token, 1, True)[0]]
                path = top[1] + slot.name
                yield path, where(at)
                key = (slot, path, at)
                continue
            slot, path, k = top  # in a list: an item
            item = f"{path}[{k}]"
            top[2] = k + 1
            yield item, where(at)
            if head == "{":
                stack.append([fields(slot.message, True), item + "."])
            continue
        slot, path, key_at = key
        key = None
        if slot.repeated and head == "[":
            stack.append([slot, path, 0])
        elif token == "null":
            continue  # not set
        elif slot.repeated:  # a lone value: the list's one item, at the key
            yield f"{path}[0]", where(key_at)
            if head == "{":
                stack.append([fields(slot.message, True), f"{path}[0]."])
        elif head == "{":
            stack.append([fields(slot.message, True), path + "."])
