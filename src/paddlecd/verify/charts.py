"""Pictures of a verification: busbw against message size and the convergence loss curve, drawn as
Markdown mermaid ``xychart-beta`` blocks (GitHub renders them in step summaries and comments).

Pure: an evidence record in, Markdown text out. Syntax: https://mermaid.js.org/syntax/xyChart.html
The figures of a variant's releases are also drawn as a PNG (:func:`history_png`, matplotlib),
for ``invoke release.compare --history``.
"""

from __future__ import annotations

from collections.abc import Sequence

from paddlecd.verify.evidence import Evidence

_UNITS = ("B", "KiB", "MiB", "GiB")


def size_label(nbytes: int) -> str:
    """``4`` → ``"4 B"``, ``4096`` → ``"4 KiB"``, ``2**30`` → ``"1 GiB"`` (binary units)."""
    value, unit = float(nbytes), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:g} {_UNITS[unit]}"


def xychart(title: str, *, x_title: str, x_labels: Sequence[str], y_title: str,
            values: Sequence[float]) -> str:
    """One mermaid line chart: ``values[i]`` above the category ``x_labels[i]``; the y axis runs
    from 0 to the largest value (rounded up to 3 significant digits)."""
    top = float(f"{max(max(values), 1e-9) * 1.05:.3g}")
    labels = ", ".join(f'"{label}"' for label in x_labels)
    points = ", ".join(f"{v:.4g}" for v in values)
    return "\n".join(["```mermaid", "xychart-beta", f'    title "{title}"',
                      f'    x-axis "{x_title}" [{labels}]', f'    y-axis "{y_title}" 0 --> {top:g}',
                      f"    line [{points}]", "```"])


def busbw_chart(record: Evidence) -> str | None:
    """busbw (GB/s) per message size of the float32 all-reduce rows, or None without results."""
    rows = [r for c in record.checks if c.name == "allreduce/test_allreduce_exact_sums"
            for r in c.metrics.get("results") or () if r.get("dtype") == "float32"]
    if not rows:
        return None
    rows.sort(key=lambda r: r["bytes"])
    world = next((c.metrics.get("world_size") for c in record.checks
                  if c.name == "allreduce/test_allreduce_exact_sums"), "?")
    return xychart(f"all-reduce busbw, {world} ranks on {record.node_count} node(s)",
                   x_title="message size", x_labels=[size_label(r["bytes"]) for r in rows],
                   y_title="busbw (GB/s)", values=[float(r["busbw_GBps"]) for r in rows])


def loss_chart(record: Evidence) -> str | None:
    """The single-process training loss per recorded step, or None when it was not recorded."""
    check = next((c for c in record.checks if c.name.startswith("convergence/")
                  and c.metrics.get("loss_curve")), None)
    if check is None:
        return None
    every = int(check.metrics.get("loss_every", 1))
    losses = [float(v) for v in check.metrics["loss_curve"]]
    return xychart("convergence: training loss", x_title="step",
                   x_labels=[str(i * every) for i in range(len(losses))], y_title="MSE loss",
                   values=losses)


def charts(record: Evidence) -> list[str]:
    """Every chart the record has data for, busbw first."""
    return [c for c in (busbw_chart(record), loss_chart(record)) if c]


def history_png(series: dict[str, dict], path, *, title: str) -> None:
    """One PNG with a line chart per figure: ``series`` is ``{name: {"unit", "points": [[label,
    value], …]}}`` (a label per release, in order). Drawn with matplotlib's Agg backend (no
    display needed); the folder of ``path`` is made."""
    import io
    from pathlib import Path

    import matplotlib

    from paddlecd.files import write_text

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    names = list(series)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        points = series[name]["points"]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
        ax.set_title(name, fontsize=9)
        ax.set_ylabel(series[name]["unit"], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=80)
    plt.close(fig)
    write_text(Path(path), png.getvalue())  # whole or not at all
