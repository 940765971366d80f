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


#: Epoch milliseconds from 2001 on; a column ending in ``_ms`` holding less is a duration.
_EPOCH_MS_FLOOR = 1_000_000_000_000


def cell(column: str, v) -> str:
    """A value as a reader wants it: a ``*_ms`` time stamp as a UTC time, a ratio or share rounded
    to what it can mean, a list as its items (raw numbers stay in the Parquet tables)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) and column.endswith("_ms") and v >= _EPOCH_MS_FLOOR:
        return dt.datetime.fromtimestamp(v / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        return f"{v:.1%}" if column.endswith("_share") else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}")
    if isinstance(v, int):
        return f"{v}"
    if isinstance(v, (list, tuple)):
        return ", ".join(cell(column, x) for x in v)
    return str(v)


def _table(t: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(cell(str(c), v))}</td>" for c, v in zip(t.columns, r)) + "</tr>"
                   for r in t.rows)
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
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(9, 3.2))
    width_days = bar_width_ms(p.series) / 86_400_000
    drawn = 0
    for label, points in p.series.items():
        if not points:
            continue
        xs = [dt.datetime.fromtimestamp(x / 1000, dt.timezone.utc) for x, _ in points]
        ys = [y for _, y in points]
        if p.bars:
            ax.bar(xs, ys, label=str(label), width=width_days)
        else:
            ax.plot(xs, ys, label=str(label), marker="." if len(xs) < 50 else None)
        drawn += 1
    ax.set_ylabel(p.ylabel)
    ax.set_xlabel("time (UTC)")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if integer_valued(p.series):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no "0.5 changes"
    if drawn:  # every series gets a legend entry; many go beside the plot
        if drawn <= 8:
            ax.legend(fontsize="small")
        else:
            ax.legend(fontsize="x-small", ncol=1 + drawn // 16, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f"<h2>{_e(p.title)}</h2><img alt='{_e(p.title)}' src='data:image/png;base64,{data}'>"


def bar_width_ms(series: dict) -> float:
    """Bars as wide as 80% of the closest two distinct times, and never more than 1% of the span:
    three events a second apart in a 40 s window stay three thin bars, not one smear."""
    xs = sorted({x for points in series.values() for x, _ in points})
    if len(xs) < 2:
        return 1000.0
    gap = min(b - a for a, b in zip(xs, xs[1:]))
    return max(1.0, min(gap * 0.8, (xs[-1] - xs[0]) / 100))


def integer_valued(series: dict) -> bool:
    ys = [y for points in series.values() for _, y in points]
    return bool(ys) and all(float(y).is_integer() for y in ys)


def _when(ms) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")
