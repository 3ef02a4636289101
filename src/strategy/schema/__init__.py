"""The schema: generic access to its descriptors (re-exported here, so `schema.option(...)` reads as before), each
field's support status, the whole-message rules, and what is generated from it (reference page, JSON Schema).

Bottom of the package: imports only `errors` and the generated code. Nothing here names a strategy field.
"""

from .descriptors import (ROOT, closest, did_you_mean, doc, field_by_path, fields_with, is_message, is_repeated,
                          message_doc, message_option, option, walk)

__all__ = ["ROOT", "closest", "did_you_mean", "doc", "field_by_path", "fields_with", "is_message", "is_repeated",
           "message_doc", "message_option", "option", "walk"]
