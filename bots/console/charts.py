"""Server-rendered SVG charts for the console: no script, no library, escaped labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ("Bar", "bar_chart", "money", "tokens")


@dataclass(frozen=True, kw_only=True)
class Bar:
    """One group of a chart: a label and its input and output tokens."""

    label: str
    """Shown under the bars (a day, a model)."""
    input: int
    """Tokens read (the lighter bar)."""
    output: int
    """Tokens written (the darker bar, stacked on top)."""
    note: str = ""
    """Shown above the bars (the cost)."""


def tokens(count: float) -> str:
    """``1234567`` -> ``1.2M``."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= limit:
            return f"{count / limit:.1f}{suffix}"
    return f"{count:.0f}"


def money(dollars: float) -> str:
    """``$12.30``, or four decimals below a dollar (``$0.0012``), ``$0`` for nothing."""
    if not dollars:
        return "$0"
    return f"${dollars:.2f}" if dollars >= 1 else f"${dollars:.4f}"


def bar_chart(bars: Sequence[Bar], *, title: str, width: int = 720, height: int = 220) -> str:
    """Stacked bars (input below, output above) as an SVG element with a title for screen readers."""
    top, bottom, left, right = 24, 36, 48, 8
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((b.input + b.output for b in bars), default=0) or 1
    slot = plot_w / max(len(bars), 1)
    bar_w = max(min(slot * 0.6, 48), 2)
    parts = [
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#c5cad4"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{tokens(peak)}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    every = max(1, len(bars) // 12)
    for i, bar in enumerate(bars):
        x = left + i * slot + (slot - bar_w) / 2
        h_in = plot_h * bar.input / peak
        h_out = plot_h * bar.output / peak
        y_in = top + plot_h - h_in
        y_out = y_in - h_out
        label = escape(f"{bar.label}: {bar.input} in, {bar.output} out {bar.note}".strip())
        parts.append(
            f"<g><title>{label}</title>"
            f'<rect class="bar-in" x="{x:.1f}" y="{y_in:.1f}" width="{bar_w:.1f}" height="{h_in:.1f}"/>'
            f'<rect class="bar-out" x="{x:.1f}" y="{y_out:.1f}" width="{bar_w:.1f}" height="{h_out:.1f}"/></g>'
        )
        if bar.note and bar.input + bar.output:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{max(y_out - 4, 10):.1f}" text-anchor="middle">'
                f"{escape(bar.note)}</text>"
            )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle">'
                f"{escape(bar.label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
