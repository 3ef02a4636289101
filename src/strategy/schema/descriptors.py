"""Generic access to the schema: messages, fields, custom options and field docs, read from descriptors.

Nothing here names a strategy field; every rule comes from `proto/distributed_strategy.proto`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from .._generated import distributed_strategy_pb2 as pb2
from .._generated import strategy_options_pb2 as options_pb2

__all__ = [
    "ROOT",
    "closest",
    "did_you_mean",
    "doc",
    "field_by_path",
    "fields_with",
    "is_message",
    "is_repeated",
    "message_doc",
    "message_option",
    "option",
    "walk",
]

ROOT: Descriptor = pb2.DistributedStrategy.DESCRIPTOR

_OPTIONS = dict(options_pb2.DESCRIPTOR.extensions_by_name)


@functools.cache
def option(field: FieldDescriptor, name: str) -> Any:
    """The custom option `name` declared on `field`; None (or () for repeated options) when absent.

    Cached: descriptors are immutable, and the loader asks on every field of every file.
    """
    ext = _OPTIONS[name]
    opts = field.GetOptions()
    if ext.is_repeated:
        return tuple(opts.Extensions[ext])
    return opts.Extensions[ext] if opts.HasExtension(ext) else None


@functools.cache
def message_option(desc: Descriptor, name: str) -> Any:
    """The custom message option `name` declared on the message `desc`; None when absent."""
    ext = _OPTIONS[name]
    opts = desc.GetOptions()
    return opts.Extensions[ext] if opts.HasExtension(ext) else None


def is_message(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE


def is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


@functools.cache
def fields_with(name: str) -> tuple[tuple[str, FieldDescriptor, Any], ...]:
    """(path, field, value) for every field of the schema that declares the custom option `name`."""
    return tuple((path, f, option(f, name)) for path, f in walk() if option(f, name) not in (None, ()))


def walk(desc: Descriptor = ROOT, prefix: str = "") -> Iterator[tuple[str, FieldDescriptor]]:
    """Every field of the schema, depth first, with its dotted path."""
    for field in desc.fields:
        path = f"{prefix}{field.name}"
        yield path, field
        if is_message(field):
            yield from walk(field.message_type, path + ".")


def closest(name: str, candidates: list[str]) -> str | None:
    """The candidate `name` is most likely a misspelling of (difflib's ratio at least 0.6, letter case ignored), or
    None: what every "did you mean" in an error message suggests."""
    import difflib  # only for an error message

    spelled: dict[str, str] = {}
    for c in candidates:
        spelled.setdefault(c.lower(), c)
    close = difflib.get_close_matches(name.lower(), list(spelled), n=1, cutoff=0.6)
    return spelled[close[0]] if close else None


def did_you_mean(name: str, candidates: list[str]) -> str:
    """`; did you mean 'x'?`, or the list of valid names when nothing is close."""
    close = closest(name, candidates)
    if close:
        return f"; did you mean '{close}'?"
    if len(candidates) > _LIST_AT_MOST:
        shown = ", ".join(candidates[:_LIST_AT_MOST])
        return f"; valid names: {shown}, ... ({len(candidates)} in all; `strategy defaults` lists every field)"
    return "; valid names: " + ", ".join(candidates)


_LIST_AT_MOST = 12


def field_by_path(path: str, root: Descriptor = ROOT) -> list[FieldDescriptor]:
    """The chain of fields named by a dotted path; KeyError(message) naming the bad segment."""
    chain: list[FieldDescriptor] = []
    desc: Descriptor | None = root
    done: list[str] = []
    for name in path.split("."):
        if desc is None:
            raise KeyError(f"{'.'.join(done)} is not a message and has no field '{name}'")
        field = desc.fields_by_name.get(name)
        if field is None:
            where = ".".join(done) or desc.name
            raise KeyError(f"{where} has no field '{name}'" + did_you_mean(name, [f.name for f in desc.fields]))
        chain.append(field)
        done.append(name)
        desc = field.message_type if is_message(field) else None
    return chain


@functools.cache
def _docs() -> dict[tuple[str, str], str]:
    """Leading comments of every message (key (name, "")) and field, from the descriptor set built with
    --include_source_info."""
    from importlib import resources  # only when docs are asked for: keeps `strategy validate` quick

    data = resources.files("strategy._generated").joinpath("distributed_strategy.desc").read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data)
    out: dict[tuple[str, str], str] = {}
    for file in files.file:
        comments = {tuple(loc.path): loc.leading_comments for loc in file.source_code_info.location}
        # Path [4, i] is message_type[i], [4, i, 2, j] its field[j], [5, i] enum_type[i] (see descriptor.proto).
        for i, message in enumerate(file.message_type):
            full = f"{file.package}.{message.name}" if file.package else message.name
            out[(full, "")] = _one_line(comments.get((4, i), ""))
            for j, field in enumerate(message.field):
                out[(full, field.name)] = _one_line(comments.get((4, i, 2, j), ""))
        for i, enum in enumerate(file.enum_type):
            out[(f"{file.package}.{enum.name}", "")] = _one_line(comments.get((5, i), ""))
    return out


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines())


def doc(field: FieldDescriptor) -> str:
    """The field's documentation: the comment above it in the .proto, on one line."""
    return _docs().get((field.containing_type.full_name, field.name), "")


def message_doc(desc: Any) -> str:
    """A message's or enum's documentation: the comment above it in the .proto, on one line."""
    return _docs().get((desc.full_name, ""), "")
