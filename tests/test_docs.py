"""Everything the project cites is in the repository: the methods page's section references
resolve, no file cites a document the repository does not hold, every link of the README and
of the documentation site leads to a file (and heading) that exists, and every page of the site
is in its navigation. Fast: nothing here builds the site (CI runs `mkdocs build --strict`)."""

from __future__ import annotations

import json
import re
import unicodedata
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


# -- the documentation site: links, navigation, the notebook ----------------------------------

DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
#: a page whose headings the site generates at build time (docs/hooks.py): its anchors are
#: checked by `mkdocs build --strict`, not here
GENERATED = "<!-- privaudit-cli-reference -->"
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"``.*?``|`[^`\n]*`", re.DOTALL)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MD_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def site_pages() -> list[Path]:
    """Every page of the site: the Markdown files and notebooks under docs/."""
    return sorted(p for p in DOCS.rglob("*") if p.suffix in (".md", ".ipynb") and ".ipynb_checkpoints" not in p.parts)


def markdown_of(path: Path) -> str:
    """A page's Markdown: the file, or a notebook's Markdown cells."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text(encoding="utf-8"))
        return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """Markdown without its code blocks and code spans (a link in code is not a link)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc extension writes it (MkDocs' default)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"(\*\*|__|\*|_)(.+?)\1", r"\2", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown page's headings (duplicates get _1, _2, … as in MkDocs)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in MD_HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        s = slug(heading)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}_{n}")
    return out


def links(path: Path) -> list[str]:
    return LINK.findall(prose(markdown_of(path)))


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, relative to docs/."""
    text = MKDOCS.read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r":\s*\"?([\w./-]+\.(?:md|ipynb))\"?\s*$", nav, re.MULTILINE)


def broken_links(page: Path, inside: Path) -> list[str]:
    """The links of ``page`` that lead nowhere: to a missing file, outside ``inside``, to an
    address outside the repository, or to a heading the target page does not have."""
    bad = []
    for target in links(page):
        if SCHEME.match(target):
            bad.append(f"{target} (the repository links only to its own files)")
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page.resolve()
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif not dest.is_relative_to(inside.resolve()):
            bad.append(f"{target} (outside {inside.relative_to(ROOT) if inside != ROOT else 'the repository'})")
        elif anchor and dest.suffix == ".md" and GENERATED not in dest.read_text(encoding="utf-8") \
                and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    return bad


def test_every_relative_link_of_the_readme_and_the_site_resolves():
    bad = {str(README.relative_to(ROOT)): broken_links(README, ROOT)}
    bad.update({str(p.relative_to(ROOT)): broken_links(p, DOCS) for p in site_pages()})
    bad = {page: b for page, b in bad.items() if b}
    assert not bad, f"broken links: {bad}"
    assert len(links(README)) >= 10 and sum(len(links(p)) for p in site_pages()) >= 50, "is LINK still right?"


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    listed = nav_pages()
    assert len(listed) == len(set(listed)), "a page is listed twice in mkdocs.yml's nav"
    pages = {str(p.relative_to(DOCS)).replace("\\", "/") for p in site_pages()}
    assert set(listed) - pages == set(), f"nav entries without a file: {sorted(set(listed) - pages)}"
    assert pages - set(listed) == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - set(listed))}"


def test_the_readme_is_a_landing_page_that_links_every_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is the landing page; the documentation lives in docs/"
    assert "python3 -m pytest -q" in text and 'pip install -e ".[test]"' in text
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    unlinked = [str(p.relative_to(ROOT)) for p in site_pages() if p.resolve() not in linked]
    assert not unlinked, f"pages the README does not link to: {unlinked}"


def test_the_tutorial_notebook_is_committed_without_outputs():
    for path in DOCS.rglob("*.ipynb"):
        nb = json.loads(path.read_text(encoding="utf-8"))
        dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                 and (c.get("outputs") or c.get("execution_count") is not None)]
        assert not dirty, f"{path.relative_to(ROOT)}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", [README, MKDOCS, *sorted(DOCS.rglob("*.md")), *sorted(DOCS.rglob("*.ipynb"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documentation_names_no_path_of_a_particular_machine(path):
    text = path.read_text(encoding="utf-8")
    for needle in ("/work/", "../shared", "/home/", "/root/", "/tmp/"):
        assert needle not in text, (f"{path.relative_to(ROOT)} names {needle!r}: write a placeholder "
                                    "(/path/to/data, DIR)")


@pytest.mark.parametrize("text, expected", [
    ("A.2 Theory", "a2-theory"),
    ("Which defence leaks less?", "which-defence-leaks-less"),
    ("D. Strongest attacks and empirical ε lower bounds", "d-strongest-attacks-and-empirical-lower-bounds"),
    ("`privaudit audit`", "privaudit-audit"),
    ("Papers' figures", "papers-figures"),
])
def test_slug(text, expected):
    assert slug(text) == expected
