"""docs/strategy-reference.md is generated from the schema and committed fresh; it covers every field."""

from __future__ import annotations

from conftest import ROOT
from strategy import schema
from strategy.schema.reference import reference
from test_paddle_schema import PADDLE


def test_the_committed_reference_page_is_fresh():
    committed = (ROOT / "docs" / "strategy-reference.md").read_text()
    assert committed == reference(), "docs/strategy-reference.md is stale: run `make docs` and commit it"


def test_the_reference_page_has_every_message_and_field_with_its_status():
    page = reference()
    for message, fields in PADDLE["messages"].items():
        section = page.split(f"\n## {message}\n", 1)[1].split("\n## ", 1)[0]
        for fact in fields:
            assert f"| {fact['number']} | `{fact['name']}` |" in section, f"{message}.{fact['name']}"
    assert "| 4 | `localsgd` | bool | `false` | **not implemented**: torch offers it as PostLocalSGDOptimizer" in page
    assert "| 2 | `amp` | bool | `false` | implemented |" in page
    assert schema.doc(schema.field_by_path("hybrid_configs.mp_configs.mp_skip_c_identity")[-1]) in page
