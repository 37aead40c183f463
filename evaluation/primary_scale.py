"""The primary decision in accuracy points, for the report and the plan: its MDD on its own pair's
measured noise (priced as `python -m evaluation.power --from-run` prices it: evaluation/power_measured.py),
and the slope of the average accuracy on the primary score (evaluation/statistics/accuracy_slope.py)
that converts an MDD in the primary score's unit into accuracy points."""

from __future__ import annotations

from configs.experiment import ExperimentConfig
from evaluation.metrics import Family
from evaluation.power_measured import measure_family, primary_rho, run_matrices
from evaluation.power_simulation import mdd, primary_level
from evaluation.runs import Comparison
from evaluation.statistics.accuracy_slope import accuracy_slope
from evaluation.statistics.intervals import arm_scores


def report_slope(families: dict[str, dict], score: str, seeds_of: dict[str, list[int]]) -> dict | None:
    """The slope of accuracy:average on the primary `score` through a rung report's arms (their
    final scores per seed, in the order of `seeds_of[arm]`, their seed numbers); None where the
    primary score is accuracy's own average or a family is absent."""
    family, column = score.split(":")
    if family == "accuracy" or "accuracy" not in families or family not in families:
        return None
    return accuracy_slope(families[family]["finals"]["columns"].get(column, {}),
                          families["accuracy"]["finals"]["columns"].get("average", {}), seeds=seeds_of)


def primary_noise(comparison: Comparison, family: Family, column: str, pair: tuple[str, str], seeds: int,
                  sides: str) -> dict | None:
    """The primary decision's MDD (alone at 0.05, `sides` as decided, 80% power) at `seeds` paired seeds, its noise
    measured on the pair's own paired seeds and documents, and the item correlation rho and seed-by-document share
    phi that noise holds, with their intervals and source (`primary_rho`): {"mdd", "rho"}; None below two paired
    seeds or where a task is missing."""
    paired = sorted(set(comparison.by_arm.get(pair[0], {})) & set(comparison.by_arm.get(pair[1], {})))
    keys = family.task_keys()
    if len(paired) < 2 or not all(comparison.documents(t, k) and set(pair) <= set(comparison.arms_with(t))
                                  for t, k in keys.items()):
        return None
    matrices = {arm: {t: comparison.matrix(arm, paired, t, keys[t]) for t in keys} for arm in pair}
    measured, key = measure_family(family, matrices), ("columns", column)
    return {"mdd": mdd(measured.noise(key, pair), seeds, primary_level(sides)),
            "rho": primary_rho(measured, matrices, key, pair)}


def _by_seed(family: Family, matrices: dict[str, dict], column: str) -> dict[str, list[float]]:
    """arm -> its seeds' scores on a column, from its task -> seeds x documents matrices."""
    return {arm: arm_scores(m, family.task_weights(column)).tolist() for arm, m in matrices.items()}


def measured_slope(config: ExperimentConfig, score: str) -> dict | None:
    """The slope of accuracy:average on the primary `score` from a config's evaluated runs: at its
    largest rung with two arms or more on two seeds or more, and which rung (`source`)."""
    family, column = score.split(":")
    if family == "accuracy":
        return None
    for rung in reversed(config.rungs() or [None]):
        summary, measured = run_matrices(config.for_rung(rung) if rung else config)
        if "accuracy" not in measured or family not in measured:
            continue
        slope = accuracy_slope(_by_seed(*measured[family], column), _by_seed(*measured["accuracy"], "average"),
                               seeds=dict.fromkeys(summary["arms"], summary["measured_on_seeds"]))
        if slope:
            where = f", rung {rung}" if rung else ""
            return slope | {"source": f"{config.name}{where} ({', '.join(summary['arms'])} on seeds "
                                      f"{summary['measured_on_seeds']})"}
    return None
