"""How the report is drawn: a figure per metric family, score against training tokens for every
arm (mean over seeds) with a band from the lowest to the highest seed (the paper's Figures 4, 5)."""

from __future__ import annotations

import statistics
from pathlib import Path

from configs.experiment import ExperimentConfig


def plot_curves(report: dict, config: ExperimentConfig, out: Path) -> list[Path]:
    """`curves_<family>.png` per family with checkpoints, one panel per column (the centered
    average aside); returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, family in report["families"].items():
        scored = {c for seeds in family["checkpoints"].values() for steps in seeds.values()
                  for scores in steps.values() for c, v in scores["columns"].items() if v is not None}
        columns = [c for c in family["columns"] if c != "average_centered" and c in scored]
        if not columns:
            continue
        fig, axes = plt.subplots(1, len(columns), figsize=(4.5 * len(columns), 3.6), squeeze=False)
        for ax, column in zip(axes[0], columns, strict=True):
            for arm, seeds in family["checkpoints"].items():
                points: dict[int, list[float]] = {}
                for steps in seeds.values():
                    for step, scores in steps.items():
                        if scores["columns"].get(column) is not None:
                            points.setdefault(config.pretrain.tokens_at(int(step)), []).append(
                                family["scale"] * scores["columns"][column])
                xs = sorted(points)
                if not xs:
                    continue
                line, = ax.plot(xs, [statistics.fmean(points[x]) for x in xs], marker="o", label=arm)
                ax.fill_between(xs, [min(points[x]) for x in xs], [max(points[x]) for x in xs], alpha=0.2,
                                color=line.get_color())
            ax.set_title(family["columns"][column])
            ax.set_xlabel("training tokens")
            ax.set_ylabel(f"{family['unit']}" + (" (lower is better)" if family["lower_is_better"] else ""))
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.suptitle(family["title"])
        fig.tight_layout()
        path = out / f"curves_{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
