"""A small static HTML report: headings, plots and tables in one self-contained file.

Plots are drawn by matplotlib (Agg backend) into PNGs embedded as data: URIs, so the file
needs no JavaScript and nothing from the network; without matplotlib the plots' data are
shown as tables instead. Input is plain Python values already collected on the driver
(small aggregates, never raw rows); no Spark here.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from dataclasses import dataclass, field


@dataclass
class Plot:
    """Lines (or bars with ``bars=True``) of ``series``: label -> [(x, y)], x in epoch ms."""

    title: str
    series: dict
    ylabel: str = ""
    bars: bool = False


@dataclass
class Table:
    title: str
    columns: list
    rows: list
    note: str = ""


@dataclass
class Report:
    title: str
    summary: list = field(default_factory=list)  # lines of text
    parts: list = field(default_factory=list)  # Plot or Table

    def html(self) -> str:
        body = [f"<h1>{_e(self.title)}</h1>", "<ul>"] + [f"<li>{_e(s)}</li>" for s in self.summary] + ["</ul>"]
        for part in self.parts:
            body.append(_plot(part) if isinstance(part, Plot) else _table(part))
        return ("<!doctype html><html><head><meta charset='utf-8'><title>" + _e(self.title) + "</title>"
                "<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
                "font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
                "th{background:#eee}img{max-width:100%}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _table(t: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in r) + "</tr>" for r in t.rows)
    note = f"<p>{_e(t.note)}</p>" if t.note else ""
    return f"<h2>{_e(t.title)}</h2>{note}<table><tr>{head}</tr>{rows}</table>"


def _plot(p: Plot) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        rows = [(label, _when(x), y) for label, points in p.series.items() for x, y in points]
        return _table(Table(p.title, ["series", "time", p.ylabel or "value"], rows,
                            note="(matplotlib is not installed: the plot's data)"))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for label, points in p.series.items():
        if not points:
            continue
        xs = [dt.datetime.fromtimestamp(x / 1000, dt.timezone.utc) for x, _ in points]
        ys = [y for _, y in points]
        if p.bars:
            ax.bar(xs, ys, label=str(label), width=0.0005 if len(xs) < 2 else (xs[1] - xs[0]) * 0.8)
        else:
            ax.plot(xs, ys, label=str(label), marker="." if len(xs) < 50 else None)
    ax.set_ylabel(p.ylabel)
    ax.set_xlabel("time (UTC)")
    if 0 < len(p.series) <= 12:
        ax.legend(fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f"<h2>{_e(p.title)}</h2><img alt='{_e(p.title)}' src='data:image/png;base64,{data}'>"


def _when(ms) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")
