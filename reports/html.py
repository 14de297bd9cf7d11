"""Self-contained HTML pages: PNGs embedded as base64 data URIs, inline CSS, no scripts, no network.

A page must open from a mail attachment or a CI artifact without its folder, so nothing is linked.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #333; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #bbb; }
p.lead { color: #444; }
table { border-collapse: collapse; margin: .8em 0; font-size: .88em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.fail td { background: #fde2e2; }
tr.pass td.status { color: #17692b; font-weight: bold; }
tr.fail td.status { color: #a40000; font-weight: bold; }
tr.expected td { background: #fff6d6; }
.missing { border: 1px dashed #aaa; color: #666; padding: 1.2em; margin: .8em 0; background: #fafafa; }
figure { margin: .8em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .88em; color: #555; }
.small { font-size: .85em; color: #555; }
.badge { display: inline-block; padding: .1em .5em; border-radius: .3em; font-size: .85em; background: #eee; }
.badge.bad { background: #a40000; color: white; }
.badge.good { background: #17692b; color: white; }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def figure_png(figure: Any, dpi: int = 110) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (figures are not kept alive)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image(png: bytes, alt: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="{data_uri(png)}" alt="{esc(alt)}">{cap}</figure>'


def plot_or_missing(figure: Any, alt: str, caption: str, missing: str) -> str:
    """An embedded plot, or a box saying what was not measured (datasheet profiles have no curves)."""
    if figure is None:
        return f'<div class="missing">Not measured: {esc(missing)}</div>'
    return image(figure_png(figure), alt, caption)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric: Sequence[int] = (),
    row_classes: Sequence[str] | None = None,
    cell_classes: dict[int, str] | None = None,
) -> str:
    """An HTML table; ``numeric`` columns align right; cells are escaped."""
    out = ["<table><thead><tr>", "".join(f"<th>{esc(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for index, row in enumerate(rows):
        css = f' class="{esc(row_classes[index])}"' if row_classes and row_classes[index] else ""
        out.append(f"<tr{css}>")
        for column, cell in enumerate(row):
            classes = []
            if column in numeric:
                classes.append("num")
            if cell_classes and column in cell_classes:
                classes.append(cell_classes[column])
            attr = f' class="{" ".join(classes)}"' if classes else ""
            out.append(f"<td{attr}>{esc(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def page(title: str, body: Sequence[str], subtitle: str = "") -> str:
    lead = f'<p class="lead">{esc(subtitle)}</p>' if subtitle else ""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1>{lead}\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_page(text: str, path: str | os.PathLike[str]) -> Path:
    """Write atomically so a browser never sees half a page."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)
    return target


def write_index(directory: str | os.PathLike[str], title: str = "theodolite reports") -> Path:
    """An index.html linking every page in ``directory`` (each page also stands alone)."""
    folder = Path(directory)
    pages = sorted(p for p in folder.glob("*.html") if p.name != "index.html")
    items = []
    for page_path in pages:
        text = page_path.read_text(encoding="utf-8", errors="replace")
        start, end = text.find("<title>"), text.find("</title>")
        heading = html.unescape(text[start + 7 : end]) if 0 <= start < end else page_path.stem
        items.append(
            f'<li><a href="{esc(page_path.name)}">{esc(heading)}</a> '
            f'<span class="small">{esc(page_path.name)}</span></li>'
        )
    body = ["<ul>" + "".join(items) + "</ul>" if items else "<p>No pages yet.</p>"]
    return write_page(page(title, body, "self-contained pages; each opens on its own"), folder / "index.html")
