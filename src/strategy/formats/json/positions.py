"""Where each field of a JSON document the direct reader filled was set, found when first asked.

The document is known good by then (it decoded, and every key named a field), so one pass records what the builder
would: each key's position under its field's dotted path, and each item of a repeated field's list (a lone value:
the key's). A document without a backslash (what protobuf, Paddle and json.dumps write) holds no escaped quote, so
its strings, objects and lists open in the text in the order of its decoded pairs: each is found with str.find
from the last. Any other document is lexed token by token.
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf.descriptor import Descriptor

from ..direct import Slot, fields
from ...errors import Location

__all__ = ["locate", "location_of"]

# Each token with the whitespace, colons and commas before it (findall then yields plain pairs, the fastest way to
# lex in Python; in a known good document the order of keys and values says which is which): strings whole,
# brackets, and any other run (numbers, true, false, null).
_TOKEN = re.compile(r'([ \t\n\r:,]*)("[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|[^ \t\n\r{}\[\]:,"]+)')
_scan = json.decoder.scanstring  # type: ignore[attr-defined]
_new = tuple.__new__


def locate(text: str, root: Descriptor, document: tuple[tuple[str, Any], ...]) -> Iterator[tuple[str, int]]:
    """Each set field's dotted path and offset in `text`, a document the direct reader filled a `root` message
    from (`document`: as decoded, objects as tuples of pairs), in document order (each path once): a caller after
    one path reads only as far as it."""
    if "\\" in text:
        return _lexed(text, root)
    return _in_order(text, root, document)


def location_of(text: str, source: str) -> Callable[[int], Location]:
    """Offset in `text` -> its Location (line and column counted in C)."""
    count, rfind = text.count, text.rfind

    def where(offset: int) -> Location:
        return _new(Location, (source, count("\n", 0, offset) + 1, offset - rfind("\n", 0, offset)))

    return where


def _in_order(text: str, root: Descriptor, document: tuple[tuple[str, Any], ...]) -> Iterator[tuple[str, int]]:
    """`locate` for a document without escapes: every quote delimits a string, so `"name"` found from the last
    position is the next key (or string value) of the decoded document, and `{` / `[` the next object or list.
    One loop over a stack of open objects and message lists (this runs on every warning a JSON file gives)."""
    find = text.find
    at = find("{") + 1
    # Open containers, innermost last: an object's (pairs left, field names, prefix), or a message list's
    # (items left, item type's field names, path).
    stack: list[tuple[Iterator[Any], dict[str, Slot], str, bool]] = [(iter(document), fields(root, True), "", False)]
    while stack:
        left, names, prefix, in_list = stack[-1]
        if in_list:  # the next message of a list
            for k, item in left:
                at = find("{", at)
                yield f"{prefix}[{k}]", at
                at += 1
                stack.append((iter(item), names, f"{prefix}[{k}].", False))
                break
            else:
                stack.pop()
            continue
        for key, value in left:
            slot = names[key]
            path = prefix + slot.name
            key_at = find(f'"{key}"', at)
            at = key_at + len(key) + 2
            yield path, key_at
            if value is None:
                continue  # not set
            kind = type(value)
            if slot.repeated:
                if kind is list:
                    at = find("[", at) + 1
                    if slot.message is not None:
                        stack.append((enumerate(value), fields(slot.message, True), path, True))
                        break
                    for k, item in enumerate(value):
                        if type(item) is str:
                            at = find(f'"{item}"', at)
                            start, at = at, at + len(item) + 2
                        else:  # a number, true, false or null: after the `[` or the `,` before it
                            start = _ITEM_GAP.match(text, at).end()  # type: ignore[union-attr]  # matches "" too
                            at = _SCALAR.match(text, start).end()  # type: ignore[union-attr]  # the decoder read one
                        yield f"{path}[{k}]", start
                    continue
                yield f"{path}[0]", key_at  # a lone value: the list's one item, at the key
                path += "[0]"
            if kind is tuple:
                at = find("{", at) + 1
                stack.append((iter(value), fields(slot.message, True), path + ".", False))  # type: ignore[arg-type]
                break
            if kind is str:
                at = find(f'"{value}"', at) + len(value) + 2
        else:
            stack.pop()


_ITEM_GAP = re.compile(r"[ \t\n\r,]*")
_SCALAR = re.compile(r"[^ \t\n\r,\]]+")


def _lexed(text: str, root: Descriptor) -> Iterator[tuple[str, int]]:
    """`locate` for any document, one token at a time."""
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
                yield path, at
                key = (slot, path, at)
                continue
            slot, path, k = top  # in a list: an item
            item = f"{path}[{k}]"
            top[2] = k + 1
            yield item, at
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
            yield f"{path}[0]", key_at
            if head == "{":
                stack.append([fields(slot.message, True), f"{path}[0]."])
        elif head == "{":
            stack.append([fields(slot.message, True), path + "."])
