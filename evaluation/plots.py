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


def plot_ladder(ladder: dict, out: Path) -> Path | None:
    """`ladder.png`: per decision score, every arm's score against training compute across the
    rungs (seeds as dots, their range as a band), its curve fitted through the rungs below the target
    dashed out to the target rung's compute, and there the prediction with its interval (hollow: a
    prediction, not a run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import NullFormatter

    scores = [s for s in ladder["scores"].values() if any(a["points"] for a in s["arms"].values())]
    if not scores:
        return None
    fig, axes = plt.subplots(1, len(scores), figsize=(4.6 * len(scores), 3.8), squeeze=False)
    target = ladder["compute"][ladder["target"]]
    for ax, score in zip(axes[0], scores, strict=True):
        k = score["scale"]
        for arm, data in score["arms"].items():
            xs = sorted(p["compute"] for p in data["points"].values())
            seeds = {p["compute"]: [k * v for v in p["scores"]] for p in data["points"].values()}
            line, = ax.plot(xs, [statistics.fmean(seeds[x]) for x in xs], marker="o", label=arm)
            color = line.get_color()
            ax.fill_between(xs, [min(seeds[x]) for x in xs], [max(seeds[x]) for x in xs], alpha=0.2, color=color)
            for x in xs:
                ax.scatter([x] * len(seeds[x]), seeds[x], s=8, color=color, alpha=0.6)
            fit = data["fit"]
            if fit:
                grid = np.logspace(np.log10(xs[0]), np.log10(max(target, xs[-1])), 50)
                ax.plot(grid, [k * y for y in _fitted(fit, grid)], linestyle="--", color=color, alpha=0.8)
                # fitted below the target: beside its own runs where it has run, a test out of sample
                low, high = fit["interval"]
                y = k * fit["prediction"]
                err = None if np.isnan(low) else [[y - k * low], [k * high - y]]
                ax.errorbar([target], [y], yerr=err, fmt="o", mfc="white", color=color, capsize=3)
        ax.axvline(target, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels overlap
        ax.set_title(score["title"], fontsize=9)
        ax.set_xlabel("training compute (FLOPs, causal attention)")
        ax.set_ylabel(score["unit"] + (" (lower is better)" if score["lower_is_better"] else ""))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"The ladder: score against compute; dotted, the target rung {ladder['target']}")
    fig.tight_layout()
    path = out / "ladder.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fitted(fit: dict, compute) -> list[float]:
    from evaluation.ladder import Fit

    return list(Fit(fit["form"], fit["params"], fit["lower_is_better"])(compute))
