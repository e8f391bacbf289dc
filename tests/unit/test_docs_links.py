"""Every relative link in README.md and the docs resolves to a file or folder of the repository:
a document moved, or a benchmark's artefact taken out of git, does not leave a dead link
behind. Links to the web and to anchors within a page are not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "bench" / "log").glob("*.md"),
    ]
)
# [text](target) and ![alt](target); a target ends at whitespace or the closing parenthesis.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def _targets(document: Path) -> list[str]:
    text = _CODE.sub("", document.read_text())  # a link shown as code is not a link
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    dead = [
        target
        for target in _targets(document)
        if not (document.parent / target.split("#", 1)[0]).exists()
    ]
    assert dead == [], f"{document.relative_to(ROOT)} links to what is not there"


def test_links_are_found() -> None:
    assert "docs/benchmarks.md" in _targets(ROOT / "README.md")
