"""What a model ladder says about its largest rung: decision agreement across sizes, and scaling fits.

DataDecide (Magnusson et al. 2025: 25 corpora x 14 sizes from 4M to 1B x 3 seeds) measured two
ways of deciding between corpora at small scale: rank them at one small size, or fit a scaling law
per corpus and extrapolate. The single-size ranking at 150M picked the 1B winner in ~80% of pairs,
and none of 8 extrapolation methods beat it for its compute. This module computes both for a ladder:

- `agreement`: per metric and pair of arms, each rung's verdict (better, worse, noise) beside the
  target rung's (the largest that finished), whether the point estimates' signs agree (DataDecide's
  decision accuracy), and per rung the share of pairs whose sign it got right;
- `primary_agreement`: the pre-registered primary decision (evaluation.primary) at every rung,
  beside the target's: the one comparison the ladder was built to decide;
- `fit_scaling`: per arm, score against training compute C (FLOPs), fitted as
  score = e + a * C^(-b) (a loss: bits per byte fall towards e) or e - a * C^(-b) (an accuracy
  rises towards e), a, b > 0; with two compute points only, a line in log C. The fit goes through
  the rungs below the target only, so that where the target has run its score tests the prediction
  out of sample. Its value at the target compute comes with a percentile bootstrap interval over
  seeds (seeds resampled within each rung, the fit redone): with 2-5 seeds a rung such an interval
  is too narrow (a bootstrap over n seeds sees (n-1)/n of their variance and none of what they did
  not sample), so it is a floor on the uncertainty. A prediction, never a result.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

VERDICTS = ("better", "worse", "noise")


@dataclass(frozen=True)
class Decision:
    """One pair's paired difference at one rung: `difference` (other − reference, in the metric's
    own direction of better), and its verdict after the report's rule (interval and seeds)."""

    difference: float
    verdict: str  # better, worse or noise


def agreement(decisions: dict[str, dict[tuple[str, str], Decision]], target: str) -> dict:
    """Per rung (all but `target`), over the (metric, pair) keys both have: how many pairs the
    rung's point sign gets right against `target`'s (DataDecide's decision accuracy), and among the
    pairs `target` resolves, how many the rung resolves the same way, calls noise, or resolves the
    other way. `decisions[rung][(metric, pair)]`."""
    out = {}
    reference = decisions[target]
    for rung, table in decisions.items():
        if rung == target:
            continue
        rows = []
        for key in sorted(set(table) & set(reference)):
            small, large = table[key], reference[key]
            rows.append({"metric": key[0], "pair": key[1], "rung": small.verdict, "target": large.verdict,
                         "rung_difference": small.difference, "target_difference": large.difference,
                         "sign_agrees": bool(np.sign(small.difference) == np.sign(large.difference)),  # 0: no sign
                         "resolved_same": small.verdict == large.verdict != "noise",
                         "resolved_opposite": {small.verdict, large.verdict} == {"better", "worse"}})
        by_metric = {}
        for metric in sorted({r["metric"] for r in rows}):
            mine = [r for r in rows if r["metric"] == metric]
            resolved = [r for r in mine if r["target"] != "noise"]
            by_metric[metric] = {
                "pairs": len(mine), "sign_agrees": sum(r["sign_agrees"] for r in mine),
                "decision_accuracy": sum(r["sign_agrees"] for r in mine) / len(mine),
                "target_resolved": len(resolved), "resolved_same": sum(r["resolved_same"] for r in resolved),
                "called_noise": sum(r["rung"] == "noise" for r in resolved),
                "resolved_opposite": sum(r["resolved_opposite"] for r in resolved)}
        out[rung] = {"rows": rows, "by_metric": by_metric}
    return out


# ---------------------------------------------------------------- scaling fits


@dataclass(frozen=True)
class Fit:
    form: str  # "power law" or "log-linear"
    params: dict[str, float]
    lower_is_better: bool

    def __call__(self, compute) -> np.ndarray:
        c = np.asarray(compute, dtype=float)
        if self.form == "log-linear":
            return self.params["alpha"] + self.params["beta"] * np.log10(c)
        sign = 1 if self.lower_is_better else -1
        return self.params["e"] + sign * self.params["a"] * c ** -self.params["b"]


def fit_curve(compute: np.ndarray, scores: np.ndarray, lower_is_better: bool) -> Fit | None:
    """The scaling curve through (compute, score) points (one per seed and rung): a saturating
    power law where at least three distinct compute values constrain its three parameters, else a
    line in log10 C through two; None when it cannot be fitted."""
    compute, scores = np.asarray(compute, dtype=float), np.asarray(scores, dtype=float)
    distinct = np.unique(compute)
    if len(distinct) < 2:
        return None
    if len(distinct) == 2:
        beta, alpha = np.polyfit(np.log10(compute), scores, 1)
        return Fit("log-linear", {"alpha": float(alpha), "beta": float(beta)}, lower_is_better)
    from scipy.optimize import curve_fit

    # C in units of the smallest rung's compute, so that a and b stay of order one
    unit = distinct[0]
    sign = 1.0 if lower_is_better else -1.0

    def curve(c, a, b, e):
        return e + sign * a * c ** -b

    x = compute / unit
    means = np.array([scores[compute == c].mean() for c in distinct])
    span = abs(means[0] - means[-1]) or abs(means[0]) or 1.0
    best = means.min() if lower_is_better else means.max()
    guess = (span * 2, 0.3, best - sign * span)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (a, b, e), _ = curve_fit(curve, x, scores, p0=guess, bounds=([0, 1e-3, -np.inf], [np.inf, 5, np.inf]),
                                     maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return Fit("power law", {"a": float(a * unit ** b), "b": float(b), "e": float(e)}, lower_is_better)


def fit_scaling(points: dict[float, list[float]], target_compute: float, lower_is_better: bool,
                resamples: int = 200, seed: int = 0) -> dict | None:
    """One arm's scores by training compute (`points[C]`: a score per seed), fitted, and its value
    at `target_compute` with a 95% bootstrap interval (seeds resampled within each compute value,
    the curve fitted again; the share of resamples that could not be fitted is reported)."""
    compute = np.concatenate([[c] * len(s) for c, s in points.items()])
    scores = np.concatenate([list(s) for s in points.values()])
    fit = fit_curve(compute, scores, lower_is_better)
    if fit is None:
        return None
    rng = np.random.default_rng(seed)
    predictions, failed = [], 0
    for _ in range(resamples):
        picks = [(c, rng.choice(np.asarray(s, dtype=float), size=len(s))) for c, s in points.items()]
        again = fit_curve(np.concatenate([[c] * len(s) for c, s in picks]), np.concatenate([s for _, s in picks]),
                          lower_is_better)
        if again is None or again.form != fit.form:
            failed += 1
            continue
        predictions.append(float(again(target_compute)))
    # one seed at a compute value gives the bootstrap nothing to resample there
    varied = all(len(s) >= 2 for s in points.values()) and len(predictions) >= 20
    low, high = np.percentile(predictions, [2.5, 97.5]) if varied else (math.nan, math.nan)
    return {"form": fit.form, "params": fit.params, "lower_is_better": lower_is_better, "target_compute": target_compute,
            "prediction": float(fit(target_compute)), "interval": [float(low), float(high)],
            "resamples": resamples, "failed_resamples": failed,
            "fitted": {str(c): float(fit(c)) for c in points}}


# ---------------------------------------------------------------- the ladder's part of the report


def rung_decisions(report: dict) -> dict[tuple[str, str], Decision]:
    """A rung's every-pair table as Decisions: (score, "b − a") → its difference and verdict."""
    out = {}
    for row in report.get("every_pair", []):
        for key, cell in row.items():
            if key in ("arm", "reference", "dropped") or not cell:
                continue
            out[(key, f"{row['arm']} − {row['reference']}")] = Decision(cell["difference"], cell["result"] or "noise")
    return out


def primary_agreement(reports: dict[str, dict], evaluated: list[str], reference: str) -> dict | None:
    """The pre-registered primary decision at every evaluated rung (its difference and interval; a
    verdict at 0.05 at its deciding rung only, the others descriptive), and whether each rung's sign
    is the deciding rung's (the reference rung's where the deciding one is not evaluated)."""
    primary = reports[reference].get("primary")
    if not primary:
        return None
    rungs = {}
    for rung in evaluated:
        p = reports[rung].get("primary") or {}
        cell = p.get("interval") or p.get("documents_interval")  # the sign only: a documents' interval tests nothing
        rungs[rung] = {"difference": cell and cell["difference"], "low": cell and cell["low"], "high": cell and cell["high"],
                       "verdict": p.get("result") or ("not decided" if not cell else "descriptive" if not p.get("deciding")
                                                      else "not decided" if p.get("why") else "noise"),
                       "why": p.get("why"), "deciding": bool(p.get("deciding"))}
    target = rungs[next((r for r, v in rungs.items() if v["deciding"]), reference)]
    for r in rungs.values():
        r["sign_agrees"] = None if r["difference"] is None or target["difference"] is None else \
            bool(np.sign(r["difference"]) == np.sign(target["difference"]) != 0)
        r["verdict_agrees"] = r["verdict"] == target["verdict"] if r["deciding"] or r is target else None
    return {"arm": primary["arm"], "reference": primary["reference"], "score": primary["score"], "rungs": rungs}


def ladder_report(reports: dict[str, dict], compute: dict[str, float], rungs: list[str], target: str,
                  resamples: int = 200) -> dict:
    """The ladder's part of the report from each evaluated rung's report (`reports`, smallest rung
    first) and each rung's training compute in FLOPs: the agreement of every rung's verdicts with
    the target's (the last configured rung; while fewer than two of its arms have evaluated runs,
    the largest rung where two have, and said so), and per score and arm the scaling fit through
    that arm's scores at the rungs below the target, with its prediction at the target's compute
    (beside the target's own scores, where the arm has run there). Without `compute` (no tokenizer
    yet) there are no fits."""
    # a rung decides something only once two arms have evaluated runs there; an arm's scores count
    # for its fit wherever it has run
    evaluated = [r for r in rungs if r in reports and len(reports[r]["arms"]) >= 2]
    scored = [r for r in rungs if r in reports and reports[r]["arms"]]
    reference = target if target in evaluated else (evaluated[-1] if evaluated else None)
    out = {"rungs": rungs, "evaluated": evaluated, "target": target, "reference": reference,
           "target_evaluated": target in evaluated, "compute": compute, "agreement": {}, "primary": None,
           "scores": {}}
    if reference is None:
        return out
    decisions = {r: rung_decisions(reports[r]) for r in evaluated}
    out["agreement"] = agreement(decisions, reference)
    out["primary"] = primary_agreement(reports, evaluated, reference)
    if not compute:
        return out
    from evaluation.metrics import DECISION

    for family, column in DECISION:
        fams = {r: reports[r]["families"].get(family) for r in scored}
        present = {r: f for r, f in fams.items() if f and column in f["finals"]["columns"]}
        if not present:
            continue
        any_family = next(iter(present.values()))
        lower = any_family["lower_is_better"]
        arms = sorted({a for f in present.values() for a in f["finals"]["columns"][column]},
                      key=lambda a: reports[reference]["arms"].index(a) if a in reports[reference]["arms"] else 99)
        per_arm = {}
        for arm in arms:
            points = {r: f["finals"]["columns"][column][arm] for r, f in present.items()
                      if f["finals"]["columns"][column].get(arm)}
            below = {r: s for r, s in points.items() if r != target}
            fit = fit_scaling({compute[r]: s for r, s in below.items()}, compute[target], lower, resamples) \
                if len(below) >= 2 else None
            per_arm[arm] = {"points": {r: {"compute": compute[r], "scores": s} for r, s in points.items()},
                            "fit": fit and fit | {"through": list(below)}}
        out["scores"][f"{family}:{column}"] = {
            "family": family, "column": column, "title": f"{any_family['title']}: {any_family['columns'][column]}",
            "unit": any_family["unit"], "scale": any_family["scale"], "lower_is_better": lower, "arms": per_arm}
    return out
