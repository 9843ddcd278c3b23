"""Small trend plots drawn on the server as inline SVG (no script, nothing fetched)."""

from __future__ import annotations

from markupsafe import Markup, escape


def sparkline(points: list[tuple[str, float | None]], width: int = 160, height: int = 36) -> Markup:
    """A line over values in 0..1 (a day's mean score or pass rate), one point per day, each with its day and value
    as a tooltip; days without a value break the line. Empty when no day has a value."""
    if not any(value is not None for _, value in points):
        return Markup("")
    pad = 4
    step = (width - 2 * pad) / max(len(points) - 1, 1)

    def xy(i: int, value: float) -> tuple[float, float]:
        return pad + i * step, pad + (1 - min(max(value, 0.0), 1.0)) * (height - 2 * pad)

    lines: list[list[str]] = []
    current: list[str] = []
    dots: list[str] = []
    for i, (day, value) in enumerate(points):
        if value is None:
            if current:
                lines.append(current)
            current = []
            continue
        x, y = xy(i, value)
        current.append(f"{x:.1f},{y:.1f}")
        dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"><title>{escape(day)}: {value:.3f}</title></circle>')
    if current:
        lines.append(current)
    paths = "".join(f'<polyline points="{" ".join(line)}" />' for line in lines)
    return Markup(
        f'<svg class="trend" role="img" aria-label="trend" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><line class="axis" x1="{pad}" y1="{height - pad}" x2="{width - pad}" '
        f'y2="{height - pad}" />{paths}{"".join(dots)}</svg>'
    )
