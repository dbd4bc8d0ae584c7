"""matplotlib's SVG written short, the drawing unchanged.

:func:`svg_element` turns matplotlib's SVG document into one ``<svg>`` element for a page or
a file: no prolog, metadata or namespaces it does not need, every id prefixed per figure,
path data and coordinates to 0.01 pt (:func:`compact_paths`), and the markup itself short
(:func:`compact_markup`: ids only where something refers to them, no empty groups, a style
that several elements repeat written once as a class). :func:`share_styles` goes one step
further for a page of many figures: short ids per figure, and each distinct style one class
of the page's own stylesheet instead of one per figure.
"""

from __future__ import annotations

import hashlib
import html
import re

#: ids that privaudit gives (``gid=series-<i>``: a plot's series, which readers and tests find)
KEPT_ID = "series-"


def svg_element(raw: str, title: str, standalone: bool = False, salt: str | None = None) -> str:
    """matplotlib's SVG document as one ``<svg>`` element whose first child is ``<title>``:
    without the XML prolog, doctype and RDF metadata block, links as SVG 2 ``href`` (so that
    no namespace but SVG's is needed), and inline (``standalone=False``) without any xmlns,
    ready for an HTML page. Every element id gets a prefix from ``salt`` (default: the title), so
    that several figures on one page never share an id."""
    text = raw[raw.index("<svg"):]
    prefix = "f" + hashlib.sha1((title if salt is None else salt).encode()).hexdigest()[:8] + "-"
    text = re.sub(r'(\sid="|href="#|url\(#)([^")]+)', lambda m: m.group(1) + prefix + m.group(2), text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
    text = text.replace("xlink:href=", "href=")
    head_end = text.index(">") + 1
    head = re.sub(r'\sxmlns:xlink="[^"]*"', "", text[:head_end])
    if not standalone:  # matplotlib's document-wide <style> would leak into the page: report.css scopes it
        head = re.sub(r'\sxmlns="[^"]*"', "", head)
        text = re.sub(r'<style type="text/css">[^<]*</style>', "", text)
    head = head.replace("<svg", f'<svg role="img" aria-label="{html.escape(title)}" class="plot"', 1)
    return head + f"<title>{html.escape(title)}</title>" + compact_markup(compact_paths(text[head_end:]), prefix)


_ATTR_NUMBER = re.compile(r'(\s(?:x|y|width|height)=")(-?\d+\.\d+)"')
_FONT_FAMILY = re.compile(r"font-family: 'DejaVu Sans',[^;\"]*")


def compact_markup(svg: str, prefix: str) -> str:
    """The rest of matplotlib's markup written short, the drawing unchanged: no indentation,
    ids only where something refers to them (and then short: ``<prefix><n>``) or where
    privaudit named the element (:data:`KEPT_ID`), no group without attributes (it styles,
    moves and names nothing), x, y, width and height to 0.01 pt, no zero rotations and empty
    ``<defs>``, one short font list (the browser draws the text with the first font it has, as
    it did with the long one), and repeated styles as classes (:func:`_style_classes`)."""
    refs = list(dict.fromkeys(re.findall(r'(?:href="#|url\(#)([^")]+)', svg)))
    short = {old: f"{prefix}{i}" for i, old in enumerate(refs)}
    svg = re.sub(r'\sid="([^"]+)"', lambda m: f' id="{short[m.group(1)]}"' if m.group(1) in short
                 else m.group(0) if m.group(1).startswith(f"{prefix}{KEPT_ID}") else "", svg)
    svg = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: m.group(1) + short.get(m.group(2), m.group(2)), svg)
    svg = re.sub(r">\s+<", "><", svg).strip()
    svg = _ATTR_NUMBER.sub(lambda m: m.group(1) + (f"{float(m.group(2)):.2f}".rstrip("0").rstrip(".") or "0") + '"',
                           svg)
    svg = re.sub(r'\stransform="rotate\(-?0 [^)]*\)"', "", svg)
    svg = svg.replace("<defs></defs>", "")
    svg = _FONT_FAMILY.sub("font-family: 'DejaVu Sans', Arial, sans-serif", svg)
    return _group_classes(_style_classes(_unwrap_groups(svg), prefix))


_G_TAG = re.compile(r"<g(?:\s[^>]*)?>|</g>")


def _unwrap_groups(svg: str) -> str:
    """Every ``<g>`` without attributes replaced by what it holds."""
    out: list[str] = []
    bare: list[bool] = []
    pos = 0
    for m in _G_TAG.finditer(svg):
        tag = m.group()
        if tag.endswith("/>"):  # an empty group holds nothing to unwrap
            continue
        if tag == "</g>":
            drop = bare.pop()
        else:
            drop = tag == "<g>"
            bare.append(drop)
        if drop:
            out.append(svg[pos:m.start()])
            pos = m.end()
    return "".join(out) + svg[pos:]


_USES_ONLY = re.compile(r'<g((?:\s[^>]*)?)>((?:<use\s[^>]*/>)+)</g>')
_CLASS = re.compile(r'\sclass="([^"]*)"')


def _group_classes(svg: str) -> str:
    """A group of ``<use>`` elements (a series' markers, its error bars' caps) that share one
    class: the class written once, on the group, which the uses inherit from."""
    def hoist(m: re.Match) -> str:
        attrs, uses = m.group(1), m.group(2)
        classes = {c.group(1) if c else None for c in map(_CLASS.search, re.findall(r"<use\s[^>]*/>", uses))}
        if len(classes) != 1 or None in classes or _CLASS.search(attrs):
            return m.group(0)
        return f'<g{attrs} class="{classes.pop()}">{_CLASS.sub("", uses)}</g>'

    return _USES_ONLY.sub(hoist, svg)


def _style_classes(svg: str, prefix: str) -> str:
    """Every inline ``style`` that several elements repeat, given once in the figure's own
    ``<style>`` as a class (``<prefix>s<n>``, unique on the page); the rest stays inline."""
    counts: dict[str, int] = {}
    for style in re.findall(r' style="([^"]*)"', svg):
        counts[style] = counts.get(style, 0) + 1
    shared = {st: f"{prefix}s{i}" for i, st in enumerate(st for st, n in counts.items() if n >= 3)}
    if not shared:
        return svg
    svg = re.sub(r' style="([^"]*)"', lambda m: f' class="{shared[m.group(1)]}"' if m.group(1) in shared
                 else m.group(0), svg)
    rules = "".join(f".{name}{{{_declarations(st)}}}" for st, name in shared.items())
    head = svg.index("</title>") + len("</title>") if "</title>" in svg else 0
    return svg[:head] + f"<style>{rules}</style>" + svg[head:]


def _declarations(style: str) -> str:
    """An inline style as a rule's declarations, without matplotlib's spaces."""
    return re.sub(r"([:;,]) ", r"\1", html.unescape(style))


_PATH_DATA = re.compile(r' d="([^"]*)"')
_DECIMAL = re.compile(r"-?\d+\.\d+")


def compact_paths(svg: str) -> str:
    """Path data written short: coordinates to 0.01 pt (matplotlib writes 6 decimals; a
    hundredth of a point is far below a pixel), no spaces around the commands, and a line of
    straight segments as relative steps (:func:`_relative`). Only the ``d`` attributes change,
    so text, ticks and ids stay as they are."""
    def short(number: re.Match) -> str:
        text = f"{float(number.group()):.2f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text

    def compact(match: re.Match) -> str:
        d = _DECIMAL.sub(short, match.group(1))
        d = re.sub(r"\s*([MLHVCSQTAZmlhvcsqtaz])\s*", r"\1", d)
        d = re.sub(r"\s+", " ", d).strip()
        return ' d="' + _relative(d) + '"'

    return _PATH_DATA.sub(compact, svg)


_MOVE_LINE = re.compile(r"([ML])(-?[\d.]+) (-?[\d.]+)")


def _relative(d: str) -> str:
    """A path of straight segments (M and L only, as a ROC curve is) written as steps: after
    the first point, each as its move from the one before (``h`` or ``v`` where the step is
    horizontal or vertical), counted in whole hundredths of a point, so that the points are the
    same and no rounding adds up along the path."""
    steps = _MOVE_LINE.findall(d)
    if not steps or "".join(f"{c}{x} {y}" for c, x, y in steps) != d:
        return d
    _, x0, y0 = steps[0]
    out, px, py = [f"M{x0} {y0}"], round(float(x0) * 100), round(float(y0) * 100)
    for c, x, y in steps[1:]:
        xi, yi = round(float(x) * 100), round(float(y) * 100)
        dx, dy = _hundredths(xi - px), _hundredths(yi - py)
        if c == "L" and yi == py and xi != px:
            out.append(f"h{dx}")
        elif c == "L" and xi == px and yi != py:
            out.append(f"v{dy}")
        else:
            out.append(f"{c.lower()}{dx}{'' if dy.startswith('-') else ' '}{dy}")
        px, py = xi, yi
    return "".join(out)


def _hundredths(n: int) -> str:
    """``n`` hundredths as the shortest decimal: 93 → ``.93``, -150 → ``-1.5``."""
    text = f"{abs(n) / 100:.2f}".rstrip("0").rstrip(".").removeprefix("0") or "0"
    return f"-{text}" if n < 0 else text


_INLINE_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_FIGURE_STYLE = re.compile(r"<style>([^<]*)</style>")
_RULE = re.compile(r"\.(f[0-9a-f]{8}-s\d+)\{([^}]*)\}")
_PREFIXED = re.compile(r'(\sid="|href="#|url\(#)f[0-9a-f]{8}-')


def share_styles(fragments: list[str]) -> tuple[list[str], str]:
    """The inline figures of a page's HTML ``fragments`` (:func:`svg_element`, in page order)
    with page-wide short names: figure i's ids as ``f<i>-…``, and each distinct style of
    their ``<style>`` blocks one class ``s<n>`` of the page's stylesheet, whichever figures
    use it. Returns the fragments and those rules, for the page's ``<style>``."""
    sheet: dict[str, str] = {}
    count = 0

    def one(m: re.Match) -> str:
        nonlocal count
        svg, count = m.group(), count + 1
        style = _FIGURE_STYLE.search(svg)
        if style:
            names = {old: sheet.setdefault(rule, f"s{len(sheet)}") for old, rule in _RULE.findall(style.group(1))}
            svg = svg[:style.start()] + svg[style.end():]
            svg = _CLASS.sub(lambda c: f' class="{names.get(c.group(1), c.group(1))}"', svg)
        return _PREFIXED.sub(lambda p: f"{p.group(1)}f{count}-", svg)

    out = [_INLINE_SVG.sub(one, f) for f in fragments]
    return out, "".join(f".{name}{{{rule}}}" for rule, name in sheet.items())
