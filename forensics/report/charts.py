"""The report's charts, drawn with matplotlib and returned as inline SVG markup.

Text stays text (svg.fonttype none), ids are salted with a constant and the date metadata is
dropped, so the same data gives the same bytes. Labels from the data are plain text: math
parsing is off, and matplotlib escapes text when it writes SVG."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from markupsafe import Markup  # noqa: E402
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullLocator,
)  # noqa: E402

from forensics.base.textsafe import visible
from forensics.report.rows import Bucket, NodeRow  # noqa: E402

PALETTE = ("#1f3a5f", "#d1495b", "#2e86ab", "#edae49", "#66a182", "#8d6a9f", "#5b5f97", "#c17c74")
INK, GRID, MUTED, ALERT = "#1c2430", "#dfe4ea", "#8a94a3", "#c0392b"
_STYLE: Any = {
    "svg.fonttype": "none",
    "svg.hashsalt": "kvforensics-report",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.grid": True,
    "grid.color": GRID,
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
}


@dataclass(frozen=True)
class TtftPoint:
    prompt_tokens: int
    ttft_ms: float
    suspect: bool


@contextmanager
def _figure(width: float, height: float) -> Iterator[tuple[plt.Figure, plt.Axes]]:
    with matplotlib.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(width, height))
        try:
            yield fig, ax
        finally:
            plt.close(fig)


def _svg(fig: plt.Figure, margins: tuple[float, float, float, float]) -> Markup:
    """The figure as SVG markup; margins (left, right, bottom, top) are fixed fractions, which
    spares the extra drawing pass of an automatic layout."""
    buffer = io.StringIO()
    left, right, bottom, top = margins
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)
    # The SVG is produced by matplotlib from escaped text, never from raw input markup.
    return Markup(text.strip())


def _plain_number(value: float, _pos: object = None) -> str:
    """Tick labels without math text: 1,000 rather than 10^3."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


# One bucket of each timeline unit, in days (matplotlib's date unit), and its tick format.
UNIT_DAYS = {"second": 1 / 86400, "minute": 1 / 1440, "hour": 1 / 24, "day": 1.0, "week": 7.0}
UNIT_FORMAT = {
    "second": "%H:%M:%S",
    "minute": "%m-%d %H:%M",
    "hour": "%m-%d %H:00",
    "day": "%Y-%m-%d",
    "week": "%Y-%m-%d",
}


def _tick_centres(times: Sequence[float], step: float, most: int = 10) -> list[float]:
    """Tick positions at the centres of the buckets, every k-th bucket from the first so that
    at most `most` labels are drawn; every centre when there are few."""
    span = round((times[-1] - times[0]) / step) + 1
    every = max(1, -(-span // most))
    first = times[0]
    return [first + (k + 0.5) * step for k in range(0, span, every)]


def _bucket_label(unit: str, step: float) -> Any:
    """A tick under a bar's centre labelled with the start of its bucket (a week by its
    Monday), in UTC."""

    def label(value: float, _pos: object = None) -> str:
        start = mdates.num2date(value - 0.49 * step, tz=UTC)  # clear of the edge
        return start.strftime(UNIT_FORMAT[unit])

    return label


def timeline_chart(buckets: Sequence[Bucket], unit: str) -> Markup:
    """Stacked bars: cross-account receiving requests per bucket, one colour per node. Each bar
    fills the middle of its bucket and the date ticks sit under the bars' centres; the y axis
    leaves headroom above the tallest bar."""
    if not buckets:
        return Markup("")
    nodes = sorted({b.node for b in buckets})
    stamps = sorted({b.bucket for b in buckets})
    times = [float(mdates.date2num(t)) for t in stamps]
    step = UNIT_DAYS[unit]  # one bucket, in days (matplotlib's date unit)
    width = 0.8 * step
    with _figure(9.0, 3.2) as (fig, ax):
        bottom = dict.fromkeys(times, 0)
        for i, node in enumerate(nodes):
            counts = {b.bucket: b.receivers for b in buckets if b.node == node}
            heights = [counts.get(t, 0) for t in stamps]
            ax.bar(
                [t + 0.5 * step for t in times],
                heights,
                width=width,
                bottom=[bottom[t] for t in times],
                color=PALETTE[i % len(PALETTE)],
                label=visible(node, keep_newlines=False),
                align="center",
            )
            for t, h in zip(times, heights, strict=True):
                bottom[t] += h
        tallest = max(bottom.values())
        ax.set_ylim(0, tallest * 1.15 + 1)
        ax.set_xlim(times[0] - 1.5 * step, times[-1] + 2.5 * step)
        ax.xaxis_date()
        ax.set_ylabel(f"receiving requests per {unit}")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.xaxis.set_major_locator(FixedLocator(_tick_centres(times, step)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(_bucket_label(unit, step)))
        ax.grid(axis="x", visible=False)
        for label in ax.get_xticklabels():
            label.set_rotation(30)
            label.set_horizontalalignment("right")
            label.set_fontsize(8)
        ax.legend(
            title="node", frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0)
        )
        return _svg(fig, (0.08, 0.86, 0.26, 0.95))


def nodes_chart(nodes: Sequence[NodeRow]) -> Markup:
    """Per node: KV pool slots against the advertised context length."""
    known = [n for n in nodes if n.pool_slots is not None and n.context_len is not None]
    if not known:
        return Markup("")
    height = 1.0 + 0.45 * len(known)
    with _figure(9.0, height) as (fig, ax):
        ys = range(len(known))
        ax.barh(
            [y + 0.2 for y in ys],
            [n.context_len or 0 for n in known],
            height=0.38,
            color=GRID,
            edgecolor=MUTED,
            label="context length",
        )
        colours = [ALERT if n.pool_short else PALETTE[0] for n in known]
        ax.barh(
            [y - 0.2 for y in ys],
            [n.pool_slots or 0 for n in known],
            height=0.38,
            color=colours,
            label="KV pool slots",
        )
        for y, n in zip(ys, known, strict=True):
            share = 100.0 * (n.pool_slots or 0) / max(n.context_len or 1, 1)
            ax.text(n.pool_slots or 0, y - 0.2, f"  {share:.0f} %", va="center", fontsize=8)
        ax.set_yticks(list(ys), [visible(n.node, keep_newlines=False) for n in known])
        ax.xaxis.set_major_formatter(FuncFormatter(_plain_number))
        ax.invert_yaxis()
        ax.set_xlabel("tokens")
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, (0.16, 0.86, 0.6 / height, 1 - 0.12 / height))


def ttft_chart(points: Sequence[TtftPoint], max_normal: int = 4000) -> Markup:
    """Time to first token against prompt length; suspects in red over normal requests."""
    usable = [p for p in points if p.prompt_tokens > 0 and p.ttft_ms > 0]
    if not usable:
        return Markup("")
    normal = [p for p in usable if not p.suspect]
    step = max(1, len(normal) // max_normal)
    normal = normal[::step]
    suspects = [p for p in usable if p.suspect]
    with _figure(9.0, 3.6) as (fig, ax):
        ax.scatter(
            [p.prompt_tokens for p in normal],
            [p.ttft_ms for p in normal],
            s=6,
            color=PALETTE[2],
            alpha=0.45,
            linewidths=0,
            label="other requests",
        )
        ax.scatter(
            [p.prompt_tokens for p in suspects],
            [p.ttft_ms for p in suspects],
            s=22,
            color=ALERT,
            marker="D",
            linewidths=0,
            label="suspects",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain = FuncFormatter(_plain_number)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
        ax.set_xlabel("prompt tokens (billed)")
        ax.set_ylabel("time to first token (ms)")
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig, (0.09, 0.86, 0.14, 0.96))
