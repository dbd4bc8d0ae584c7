"""Everything the project cites is in the repository: the methods page's section references
resolve, and no file cites a document the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "docs" / "methods.md"
SCANNED = ("privaudit", "tests", "benchmarks", "docs", "README.md")
# The background file the methods page replaced; spelled in two halves so that this test
# does not cite it itself.
MISSING_DOCUMENT = "papers" + ".md"

REF = r"[A-Z](?:\.\d+)?(?!\w)"
# "methods.md A.2", also lists and ranges: "methods.md A.2 and C", "methods.md B.1–B.2".
CITATION = re.compile(rf"methods\.md\s+({REF}(?:\s*(?:,|and|–|-)\s*{REF})*)")
HEADING = re.compile(r"^#{2,3}\s+([A-Z](?:\.\d+)?)\.?\s+\S", re.MULTILINE)


def _text_files():
    for name in SCANNED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix in (".pyc", ".png", ".npz", ".npy"):
                continue
            try:
                yield f, f.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def headings(text: str) -> list[str]:
    """Section labels of the methods page: "A", "A.1", … in the order they appear."""
    return HEADING.findall(text)


def citations(text: str) -> list[str]:
    """Every section label cited after "methods.md" in ``text``."""
    return [label for group in CITATION.findall(text) for label in re.findall(REF, group)]


def test_no_file_cites_a_document_outside_the_repository():
    offenders = [f"{f.relative_to(ROOT)}:{text[:text.index(MISSING_DOCUMENT)].count(chr(10)) + 1}"
                 for f, text in _text_files() if MISSING_DOCUMENT in text]
    assert not offenders, f"cites {MISSING_DOCUMENT}, which is not in the repository: {offenders}"


def test_methods_page_headings_are_unique_and_nested():
    labels = headings(METHODS.read_text(encoding="utf-8"))
    assert {"A", "A.1", "A.5", "B", "B.3", "C", "D"} <= set(labels)
    assert len(labels) == len(set(labels)), "duplicate section labels"
    sections = [label for label in labels if "." not in label]
    assert sections == sorted(sections)
    for label in labels:
        if "." in label:
            assert label.split(".")[0] in sections, f"{label} has no parent section"


def test_every_section_reference_resolves():
    known = set(headings(METHODS.read_text(encoding="utf-8")))
    cited: dict[str, list[str]] = {}
    for f, text in _text_files():
        for label in citations(text):
            cited.setdefault(label, []).append(str(f.relative_to(ROOT)))
    assert len(cited) >= 8, f"too few citations found ({sorted(cited)}): is the pattern still right?"
    unresolved = {label: files for label, files in cited.items() if label not in known}
    assert not unresolved, f"docs/methods.md has no such section: {unresolved}"


@pytest.mark.parametrize("text, labels", [
    ("see docs/methods.md A.2 and C.", ["A.2", "C"]),
    ("(docs/methods.md B.1–B.2)", ["B.1", "B.2"]),
    ("docs/methods.md A.2, Figures 1–2", ["A.2"]),
    ("of docs/methods.md\n  A.5; Abadi", ["A.5"]),
    ("docs/methods.md B.3's values", ["B.3"]),
])
def test_citation_pattern(text, labels):
    assert citations(text) == labels
