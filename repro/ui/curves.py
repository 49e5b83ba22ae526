"""Two runs' metric curves drawn: a PNG or SVG file through matplotlib (`--plot`), and inline SVG
with no dependency for the HTML report. One panel per metric, run A solid, run B dashed, the first
divergence of each metric marked with a red line and its step."""

from __future__ import annotations

import math
from pathlib import Path

from repro.diff.metrics import Curves
from repro.errors import UsageError
from repro.ui import escape

FORMATS = (".png", ".svg")
A_COLOUR, B_COLOUR, MARK_COLOUR = "#1f77b4", "#ff7f0e", "#d62728"
NO_SERIES_HINT = (
    "log metrics with repro.log_metric(name, value, step=...), or let the script write what repro "
    "harvests: TensorBoard events, a metrics.csv or trainer_state.json, `iter N: loss X` lines"
)


def _check(curves: Curves, path: Path) -> str:
    fmt = path.suffix.lower()
    if fmt not in FORMATS:
        raise UsageError(
            f"--plot writes PNG or SVG, not {path.suffix or 'a file without a suffix'}",
            hint=f"name the file {path.stem or 'curves'}.png or {path.stem or 'curves'}.svg",
        )
    if not curves.names:
        raise UsageError("neither run recorded a metric series to plot", hint=NO_SERIES_HINT)
    return fmt[1:]


def _plain(text: str) -> str:
    """``text`` as matplotlib shows it literally: a ``$`` would start mathtext (a metric named
    ``$\\frac{a}{$`` made the plot fail), so each is escaped."""
    return text.replace("$", r"\$")


def plot(curves: Curves, path: Path) -> Path:
    """Both runs' curves, one panel per metric, into a PNG or SVG at ``path`` (by its suffix).

    Raises:
        UsageError: another suffix, matplotlib is not installed, or neither run has a metric series.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UsageError(
            "--plot needs matplotlib, which is not installed", hint="pip install 'repro-capsule[plot]'"
        ) from e
    fmt = _check(curves, path)
    names = curves.names
    cols = min(3, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    try:
        for i, name in enumerate(names):
            ax = axes[i // cols][i % cols]
            sides = ((curves.a.get(name), curves.labels[0], "-", A_COLOUR),
                     (curves.b.get(name), curves.labels[1], "--", B_COLOUR))  # fmt: skip
            for points, label, style, colour in sides:
                if points:
                    steps, values = zip(*points, strict=True)
                    marker = "." if len(points) < 50 else None
                    ax.plot(steps, values, style, color=colour, label=_plain(label), marker=marker)
            d = curves.divergence(name)
            if d is not None and d.step is not None:
                ax.axvline(d.step, color=MARK_COLOUR, linewidth=1, label=f"first divergence: step {d.step:g}")
            source = curves.sources.get(name)
            ax.set_title(_plain(f"{name} ({source})" if source and source != "log_metric" else name))
            ax.set_xlabel("step")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
        for j in range(len(names), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=fmt, dpi=100)
    finally:
        plt.close(fig)
    return path


# --------------------------------------------------------------------------- inline SVG

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 440, 260, 56, 12, 28, 34


def _finite(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(s, v) for s, v in points if math.isfinite(s) and math.isfinite(v)]


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _el(tag: str, text: str | None = None, /, **attrs: object) -> str:
    """An SVG element; attribute names with ``_`` spell ``-`` (``font_size`` → ``font-size``)."""
    shown = " ".join(f'{k.rstrip("_").replace("_", "-")}="{escape.svg(v)}"' for k, v in attrs.items())
    return f"<{tag} {shown}/>" if text is None else f"<{tag} {shown}>{escape.svg(text)}</{tag}>"


def panel_svg(curves: Curves, name: str) -> str:
    """One metric's panel as an SVG element: both runs' lines, axes with their ranges, the divergence."""
    a, b = _finite(curves.a.get(name, [])), _finite(curves.b.get(name, []))
    points = a + b
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}">']
    parts.append(_el("text", name, x=W / 2, y=18, text_anchor="middle", font_size=13, font_weight="bold"))
    if not points:
        parts.append(_el("text", "no numeric values", x=W / 2, y=H / 2, text_anchor="middle"))
        return "".join(parts) + "</svg>"
    x0, x1 = min(s for s, _ in points), max(s for s, _ in points)
    y0, y1 = min(v for _, v in points), max(v for _, v in points)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + abs(y0) * 0.1 + 1e-9)

    def px(s: float) -> str:
        return f"{PAD_L + (s - x0) / (x1 - x0) * (W - PAD_L - PAD_R):.1f}"

    def py(v: float) -> str:
        return f"{H - PAD_B - (v - y0) / (y1 - y0) * (H - PAD_T - PAD_B):.1f}"

    box = {"width": W - PAD_L - PAD_R, "height": H - PAD_T - PAD_B}
    parts.append(_el("rect", x=PAD_L, y=PAD_T, fill="none", stroke="#999", **box))
    small = {"font_size": 10}
    parts.append(_el("text", _fmt(y0), x=PAD_L - 4, y=H - PAD_B + 4, text_anchor="end", **small))
    parts.append(_el("text", _fmt(y1), x=PAD_L - 4, y=PAD_T + 4, text_anchor="end", **small))
    parts.append(_el("text", _fmt(x0), x=PAD_L, y=H - PAD_B + 14, text_anchor="middle", **small))
    parts.append(_el("text", _fmt(x1), x=W - PAD_R, y=H - PAD_B + 14, text_anchor="middle", **small))
    parts.append(_el("text", "step", x=W / 2, y=H - 4, text_anchor="middle", **small))
    sides = ((a, A_COLOUR, "none", "run-a"), (b, B_COLOUR, "6 4", "run-b"))
    for pts, colour, dash, cls in sides:
        if pts:
            line = " ".join(f"{px(s)},{py(v)}" for s, v in pts)
            parts.append(
                _el("polyline", class_=cls, points=line, fill="none", stroke=colour, stroke_width=1.6,
                    stroke_dasharray=dash)
            )  # fmt: skip
    d = curves.divergence(name)
    if d is not None and d.step is not None and math.isfinite(d.step):
        x = px(d.step)
        mark = {"stroke": MARK_COLOUR, "stroke_width": 2, "shape_rendering": "crispEdges"}
        parts.append(_el("line", class_="divergence", x1=x, y1=PAD_T, x2=x, y2=H - PAD_B, **mark))
        left = float(x) > W / 2
        label = f"first divergence: step {_fmt(d.step)}"
        at = {"x": float(x) + (-4 if left else 4), "y": PAD_T + 12, "font_size": 11, "fill": MARK_COLOUR}
        parts.append(_el("text", label, text_anchor="end" if left else "start", **at))
    return "".join(parts) + "</svg>"
