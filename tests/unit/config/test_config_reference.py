"""docs/configuration.md lists every field exactly as the model defines it."""

from __future__ import annotations

from pathlib import Path

from xds_control.config.field_docs import BEGIN, END, field_reference

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_configuration_doc_matches_the_model() -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == field_reference(), (
        "docs/configuration.md is out of date: regenerate its field reference with "
        "`python -m xds_control.config.field_docs`"
    )
