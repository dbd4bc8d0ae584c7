"""Everything the project cites is in the repository: the methods pages' section references
resolve (each on the part page it names), no file cites a document the repository does not
hold, every link of the README and of the documentation site leads to a file (and heading)
that exists, and every page of the site is in its navigation. Fast: nothing here builds the
site (CI runs `mkdocs build --strict`)."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the methods: an index page and one page per part (A–E), e.g. docs/methods/d-attacks.md
METHODS = ROOT / "docs" / "methods"
SCANNED = ("privaudit", "tests", "benchmarks", "docs", "README.md")
# Files the project no longer holds: the background file the methods pages replaced, and the
# one methods page they were split from; spelled in two halves so that this test does not
# cite them itself.
MISSING_DOCUMENTS = ("papers" + ".md", "methods" + ".md")

REF = r"[A-Z](?:\.\d+)?(?!\w)"
# "methods/a-mg-noise.md A.2", also lists and ranges: "methods/d-attacks.md D.4, D.6",
# "methods/b-hidden-state.md B.1–B.2".
CITATION = re.compile(rf"methods/([\w-]+)\.md\s+({REF}(?:\s*(?:,|and|–|-)\s*{REF})*)")
HEADING = re.compile(r"^#{2,3}\s+([A-Z](?:\.\d+)?)\.?\s+\S", re.MULTILINE)
#: a heading's explicit anchor (attr_list): "### D.7 Few-reference LiRA … {#d7}"
HEADING_ANCHOR = re.compile(r"^#{2,3}\s+([A-Z](?:\.\d+)?)\.?\s+\S.*?\{:?\s*#([\w-]+)\s*\}[ \t]*$", re.MULTILINE)


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
    """Section labels of a methods page: "A", "A.1", … in the order they appear."""
    return HEADING.findall(text)


def method_pages() -> dict[str, list[str]]:
    """The part pages of the methods (their names without ``.md``) and their section labels."""
    return {p.stem: headings(p.read_text(encoding="utf-8")) for p in sorted(METHODS.glob("*.md"))
            if p.name != "index.md"}


def citations(text: str) -> list[tuple[str, str]]:
    """Every (page, section label) cited as "methods/PAGE.md LABEL" in ``text``."""
    return [(page, label) for page, group in CITATION.findall(text) for label in re.findall(REF, group)]


def test_no_file_cites_a_document_outside_the_repository():
    for missing in MISSING_DOCUMENTS:
        offenders = [f"{f.relative_to(ROOT)}:{text[:text.index(missing)].count(chr(10)) + 1}"
                     for f, text in _text_files() if missing in text]
        assert not offenders, f"cites {missing}, which is not in the repository: {offenders}"


def test_methods_pages_hold_one_part_each_with_unique_nested_headings_and_stable_anchors():
    pages = method_pages()
    labels = [label for page_labels in pages.values() for label in page_labels]
    assert {"A", "A.1", "A.5", "B", "B.3", "C", "D", "D.7", "E"} <= set(labels)
    assert len(labels) == len(set(labels)), "duplicate section labels"
    parts = []
    for page, page_labels in pages.items():
        sections = [label for label in page_labels if "." not in label]
        assert len(sections) == 1 and page_labels[0] == sections[0], f"{page}.md: one part, heading first"
        assert page.startswith(sections[0].lower() + "-"), f"{page}.md holds part {sections[0]}"
        assert all(label.split(".")[0] == sections[0] for label in page_labels), f"{page}.md: a foreign section"
        parts += sections
        text = (METHODS / f"{page}.md").read_text(encoding="utf-8")
        anchored = dict(HEADING_ANCHOR.findall(text))
        for label in page_labels:
            assert anchored.get(label) == label.replace(".", "").lower(), \
                f"{page}.md: section {label} needs the anchor {{#{label.replace('.', '').lower()}}}"
    assert parts == sorted(parts)


def test_every_section_reference_resolves():
    known = {(page, label) for page, labels in method_pages().items() for label in labels}
    cited: dict[tuple[str, str], list[str]] = {}
    for f, text in _text_files():
        for ref in citations(text):
            cited.setdefault(ref, []).append(str(f.relative_to(ROOT)))
    assert len(cited) >= 8, f"too few citations found ({sorted(cited)}): is the pattern still right?"
    unresolved = {f"docs/methods/{page}.md {label}": files for (page, label), files in cited.items()
                  if (page, label) not in known}
    assert not unresolved, f"no such section on that page: {unresolved}"


@pytest.mark.parametrize("text, labels", [
    ("see docs/methods/a-mg-noise.md A.2 and docs/methods/c-masked-neurons.md C.",
     [("a-mg-noise", "A.2"), ("c-masked-neurons", "C")]),
    ("(docs/methods/b-hidden-state.md B.1–B.2)", [("b-hidden-state", "B.1"), ("b-hidden-state", "B.2")]),
    ("docs/methods/a-mg-noise.md A.2, Figures 1–2", [("a-mg-noise", "A.2")]),
    ("of docs/methods/a-mg-noise.md\n  A.5; Abadi", [("a-mg-noise", "A.5")]),
    ("docs/methods/b-hidden-state.md B.3's values", [("b-hidden-state", "B.3")]),
    ("(docs/methods/d-attacks.md D.4, D.6, D.9)", [("d-attacks", "D.4"), ("d-attacks", "D.6"), ("d-attacks", "D.9")]),
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
#: a heading's attribute list (attr_list): "{#id}", "{: #id .class }"
ATTR_LIST = re.compile(r"[ \t]*\{:?[ \t]*([^{}]*)\}$")
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
    """The anchors of a Markdown page's headings: an explicit ``{#id}`` (attr_list) where the
    heading has one, else its slug (duplicates get _1, _2, … as in MkDocs)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in MD_HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        attrs = ATTR_LIST.search(heading)
        explicit = re.search(r"#([\w-]+)", attrs.group(1)) if attrs else None
        if explicit:
            out.add(explicit.group(1))
            continue
        s = slug(heading[:attrs.start()] if attrs else heading)
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
