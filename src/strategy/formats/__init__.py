"""The four file formats: reading a document into a checked message (with every field's location) and writing it.

Which reader runs when (`codec.parse`):
1. prototxt, JSON and YAML are first read *directly* into the message (`text.direct`, `json.direct`, `yaml.direct`
   over `direct`'s shared machinery): the plain subset people and tools write, fast. Text and YAML record each
   field's line as they read; JSON's positions are found only when asked (`json.positions`).
2. On anything a direct reader is not sure of (an unknown name, a wrong type, a rare syntax, any error) it gives up
   and the document is read again by the format's *located reader* (`text.located`, `json.located`,
   `yaml.located`), which builds a tree of located values that `builder` fills the message from. The located
   reader owns every error message.
3. binary is protobuf's wire format (`binary`): no lines to locate.
Writing is `codec.serialize` (protobuf's text and JSON printers, PyYAML for YAML); `text.fmt` lays a text file out
canonically with its comments. `io` holds the public load/dump entry points, `overrides` the `--set` values.
Imports `schema` (descriptors, rules, support) and `errors`, nothing of `resolution`.
"""
