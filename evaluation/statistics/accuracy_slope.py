"""How many accuracy points one unit of the primary score is worth: the slope of the average accuracy
on the primary score through a rung's arms, with its interval, and the primary MDD converted by it.

The primary decision is taken on a score chosen for its low noise (bits per byte of the gold
answers, or the probability on them); readers think in accuracy points. Each arm of a rung gives one
point (x_k, y_k): its primary score and its average accuracy, each a mean over the arm's seeds. The
slope of y on x through those points says how far accuracy moves when the primary score moves by
one unit, between extractors at this model size.

Errors in variables: x_k is measured with the arm's seed noise, so an ordinary least-squares slope
through the arm means is pulled towards zero by the seeds' share of the arms' spread on x, and a
seed that trains a better model moves x and y together, which biases it further (towards the
within-seed relation). The slope here is the method-of-moments correction (Fuller 1987, ch. 1.2):
both the spread and the co-spread of the arm means lose what the seeds alone put in them,

    b = (S_xy − mean_k C_xy,k / n_k) / (S_xx − mean_k C_xx,k / n_k),

S the sample (co)variance of the arm means over the K arms, C_k the arm's covariance of (x, y)
across its n_k seeds. Where the arms' spread on x is no larger than its seeds' noise the
denominator is not positive, and there is no slope to give.

Seed s of every arm shares its initial weights and data order, so a seed that trains a better
model may move every arm's scores together. That shared part shifts all arm means alike and is
not in their spread, but it is in each arm's own covariance across its seeds: subtracting C_k
would take out more than the spread holds (a shared seed effect as large as the arms' own seed
noise made 5 arms x 3 seeds convertible in 39% of planted rungs instead of 69%, and one twice as
large in 11%, in a review's simulation of 500 rungs each). Where every arm was evaluated on the
same seeds, C is therefore the residual covariance of the arms x seeds layout (each seed's mean
over the arms removed, as the paired intervals remove it), on (K − 1)(S − 1) degrees of freedom,
the same for every arm; arms on different seed lists keep their own C_k (what the seeds share is
then left in, on the safe side).

The interval is a parametric bootstrap of that estimator (`DRAWS` runs, fixed seed). The seeds'
covariance of (x, y) is one for all arms (the residual's, or each arm's own pooled over the arms:
the correction uses its mean over the arms anyway), on its degrees of freedom nu; each run takes
the true covariance as that estimate x nu / W, W ~ chi2(nu) (as the intervals take a seed
variance), redraws every arm's means around the observed ones with it over the arm's seeds, and
estimates the covariance anew on nu degrees of freedom (the correction's own noise); the interval
is the 2.5% and 97.5% points of the redrawn slopes. A run whose denominator is not positive has no
slope; it counts as beyond either end, and where more than 2.5% of runs have none, the interval is
unbounded. bench/calibration.py measures its coverage of planted slopes and how often it converts
(`python -m bench.calibration --settings "slope interval coverage"`), with and without a seed shift
the arms share.

The rule for converting: a slope is used only where its interval excludes 0 and its half-width is at
most half the slope (`MAX_RELATIVE_HALF_WIDTH`); else the MDD is "not converted: slope [lo, hi]". An
interval that wide would make the converted MDD anything from a fraction to several times its
printed value.
"""

from __future__ import annotations

import math

import numpy as np

DRAWS = 2000
LEVEL = 0.95
MAX_RELATIVE_HALF_WIDTH = 0.5


def _moment_slope(x: np.ndarray, y: np.ndarray, noise_xx: np.ndarray, noise_xy: np.ndarray) -> np.ndarray:
    """The corrected slope of y on x through the arms' means, per row (draws x arms); nan where the
    arms' spread on x is not above its seeds' noise."""
    sxx = np.var(x, axis=-1, ddof=1) - noise_xx.mean(axis=-1)
    sxy = ((x - x.mean(axis=-1, keepdims=True)) * (y - y.mean(axis=-1, keepdims=True))).sum(axis=-1) / (x.shape[-1] - 1)
    sxy = sxy - noise_xy.mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sxx > 0, sxy / sxx, np.nan)


def _seed_covariance(cells: list[np.ndarray], seed_ids: list[list[int]] | None) -> tuple[np.ndarray, float, bool]:
    """The seeds' covariance of (x, y) that the arm means' spread holds, each arm's (arms x 2 x 2),
    its degrees of freedom, and whether it is the arms x seeds residual's (every arm on the same
    seeds: a seed's shift shared by the arms cancels in the spread, and is left out here too)."""
    if seed_ids and len({frozenset(s) for s in seed_ids}) == 1 \
            and all(len(set(s)) == len(s) == c.shape[1] for s, c in zip(seed_ids, cells, strict=True)):
        order = sorted(seed_ids[0])
        layout = np.array([c[:, [ids.index(s) for s in order]] for c, ids in zip(cells, seed_ids, strict=True)])
        residual = (layout - layout.mean(axis=2, keepdims=True) - layout.mean(axis=0, keepdims=True)
                    + layout.mean(axis=(0, 2), keepdims=True))  # arms x 2 x seeds
        nu = float((len(cells) - 1) * (len(order) - 1))
        return np.broadcast_to(np.einsum("kis,kjs->ij", residual, residual) / nu, (len(cells), 2, 2)), nu, True
    n = np.array([c.shape[1] for c in cells], dtype=float)
    covariances = np.array([np.cov(c) for c in cells])  # over each arm's own seeds
    # pooled over the arms (the correction uses their mean anyway), on all their degrees of freedom
    nu = float((n - 1).sum())
    return np.broadcast_to((covariances * (n - 1)[:, None, None]).sum(axis=0) / nu, covariances.shape), nu, False


def accuracy_slope(primary: dict[str, list[float]], accuracy: dict[str, list[float]], seed: int = 0,
                   seeds: dict[str, list[int]] | None = None) -> dict | None:
    """The slope of the average accuracy (a fraction) on the primary score (its own unit, a
    fraction for a score in points), through the arms that have both on two seeds or more (arm ->
    its seeds' values, the same seeds in the same order in both): `slope`, `low`, `high` (None:
    unbounded), `arms`, `seeds` (per arm), `convertible` and `why` not. `seeds`: arm -> its seed
    numbers in the order of its values; where every arm has the same ones, the seeds' noise is the
    arms x seeds residual's (a seed's shift the arms share is not noise of their spread). None with
    fewer than two such arms."""
    arms = [a for a in primary if a in accuracy and len(primary[a]) == len(accuracy[a]) >= 2]
    if len(arms) < 2:
        return None
    cells = [np.array([primary[a], accuracy[a]], dtype=float) for a in arms]  # 2 x seeds
    n = np.array([c.shape[1] for c in cells], dtype=float)
    means = np.array([c.mean(axis=1) for c in cells])  # arms x 2
    ids = [list(seeds[a]) for a in arms] if seeds and all(a in seeds for a in arms) else None
    covariances, nu, paired = _seed_covariance(cells, ids)
    slope = float(_moment_slope(means[:, 0], means[:, 1], covariances[:, 0, 0] / n, covariances[:, 0, 1] / n))
    rng = np.random.default_rng(seed)
    pooled = covariances[0]
    values, vectors = np.linalg.eigh(pooled)
    root = vectors * np.sqrt(np.clip(values, 0, None))  # pooled = root root^T, also where it is singular
    # the true noise: the estimate's scale from its fiducial distribution (x nu / W), as the intervals take it
    root = root[None] * np.sqrt(nu / rng.chisquare(nu, DRAWS))[:, None, None]
    drawn_means = means[None] + np.einsum("dij,dkj->dki", root, rng.standard_normal((DRAWS, len(arms), 2))) \
        / np.sqrt(n)[None, :, None]
    z = np.einsum("dij,dsj->dsi", root, rng.standard_normal((DRAWS, int(nu), 2)))
    drawn_noise = (np.einsum("dsi,dsj->dij", z, z) / nu)[:, None] / n[None, :, None, None]  # draws x arms x 2 x 2
    slopes = _moment_slope(drawn_means[..., 0], drawn_means[..., 1], drawn_noise[..., 0, 0], drawn_noise[..., 0, 1])
    tail = (1 - LEVEL) / 2
    undefined = float(np.mean(np.isnan(slopes)))
    low = high = None
    if not math.isnan(slope) and undefined <= tail:
        # a draw without a slope counts as beyond either end
        low, high = (float(np.nanquantile(slopes, q)) for q in ((tail - undefined / 2) / (1 - undefined),
                                                                (1 - tail - undefined / 2) / (1 - undefined)))
    out = {"slope": None if math.isnan(slope) else slope, "low": low, "high": high, "arms": arms,
           "seeds": [int(v) for v in n], "method": "method-of-moments errors-in-variables slope through the arm means, "
           "parametric bootstrap interval (evaluation/statistics/accuracy_slope.py)",
           "seed_noise": "arms x seeds residual (shared seeds)" if paired else "each arm's own seeds"}
    return out | {"convertible": not _uncertain(out), "why": _uncertain(out)}


def _uncertain(slope: dict) -> str:
    """Why a slope is too uncertain to convert by ("": it is not)."""
    if slope["slope"] is None:
        return "the arms' spread on the primary score is no larger than its seeds' noise: no slope"
    if slope["low"] is None:
        return "its interval is unbounded: the arms' spread on the primary score is barely above its seeds' noise"
    if slope["low"] <= 0 <= slope["high"]:
        return "its interval includes 0"
    if (slope["high"] - slope["low"]) / 2 > MAX_RELATIVE_HALF_WIDTH * abs(slope["slope"]):
        return f"its interval's half-width is over {MAX_RELATIVE_HALF_WIDTH:.0%} of the slope"
    return ""


def convert_mdd(mdd: float | None, slope: dict | None) -> dict | None:
    """An MDD in the primary score's unit, in accuracy (a fraction): `value` and its interval from the
    slope's, where the slope is convertible; else None for `value` and `why`."""
    if mdd is None or slope is None:
        return None
    if not slope["convertible"]:
        return {"value": None, "low": None, "high": None, "why": slope["why"]}
    ends = sorted(abs(mdd * s) for s in (slope["low"], slope["high"]))
    return {"value": abs(mdd * slope["slope"]), "low": ends[0], "high": ends[1], "why": ""}


def slope_text(slope: dict | None, primary_scale: float, primary_unit: str) -> str:
    """The slope as the report and the plan print it: accuracy points per unit of the primary score."""
    if slope is None:
        return "no slope (it needs two arms or more with two seeds or more)"
    per = f"accuracy points per {'point' if primary_scale == 100 else primary_unit}"

    def points(v):
        return "unbounded" if v is None else f"{100 * v / primary_scale:.3g}"

    value = "none" if slope["slope"] is None else points(slope["slope"])
    cells = f"{len(slope['arms'])} arms, {'/'.join(map(str, sorted(set(slope['seeds']))))} seeds"
    return f"slope {value} {per} [{points(slope['low'])}, {points(slope['high'])}] ({cells})"


def converted_text(mdd: float | None, slope: dict | None, primary_scale: float, primary_unit: str) -> str:
    """The primary MDD in accuracy points with the slope it was converted by, or why it was not."""
    if slope is None:
        return "in accuracy points: " + slope_text(slope, primary_scale, primary_unit)
    converted = convert_mdd(mdd, slope)
    if converted is None:
        return "accuracy " + slope_text(slope, primary_scale, primary_unit)
    if converted["value"] is None:
        low, high = (("unbounded" if v is None else f"{100 * v / primary_scale:.3g}") for v in (slope["low"], slope["high"]))
        return f"in accuracy points: not converted: slope [{low}, {high}] ({converted['why']})"
    return (f"{100 * converted['value']:.2f} accuracy points [{100 * converted['low']:.2f}, {100 * converted['high']:.2f}] "
            f"by the {slope_text(slope, primary_scale, primary_unit)}")
