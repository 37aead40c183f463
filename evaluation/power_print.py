"""The tables `python -m evaluation.power` prints: the MDD of every score under assumed noise, or under
noise measured from a run, the primary decision's, and the seeds each observed difference would need."""

from __future__ import annotations

from evaluation.power_simulation import MAX_SEEDS
from evaluation.statistics.accuracy_slope import converted_text
from evaluation.tasks.suite import CATEGORY_TITLES


def mdd_text(value: float | None, scale: float, decimals: int) -> str:
    """An MDD in the score's unit; a fraction (shown in points) past 100 points is out of reach."""
    if value is None:
        return "-"
    return f">{100:.{decimals}f}" if scale == 100 and value > 1 else f"{scale * value:.{decimals}f}"


def print_primary(report: dict) -> None:
    primary = report.get("primary")
    if not primary:
        return
    family, _ = primary["score"].split(":")
    scale = 100 if family in ("accuracy", "p_gold") else 1
    value = primary["mdd"]
    shown = (f"{mdd_text(value, scale, 2 if scale == 100 else 3)}{' points' if scale == 100 else ''}" if value is not None
             else "not measured here" if "from_run" in report else
             f"nothing assumed for {family}'s documents: measure them on a run (--item-noise-from CONFIG)"
             if family not in report["families"] else "needs 2 seeds or more")
    print(f"  primary decision (evaluation.primary: {' − '.join(primary['pair'])} on {primary['score']}, alone at "
          f"{primary['alpha']:.2g}): {shown}" + (f"; +{100 * report['paper_effect']:.2f} points is "
                                                 f"{'within' if value <= report['paper_effect'] else 'out of'} reach"
                                                 if scale == 100 and value is not None and "paper_effect" in report else ""))
    if rho := primary.get("rho"):
        interval = f" [{rho['low']:.2f}, {rho['high']:.2f}]" if rho["low"] is not None else ""
        print(f"    item correlation rho {rho['rho']:.2f}{interval}, from {rho['source']}" if rho["rho"] is not None
              else f"    item correlation: none measured ({rho['source']})")
    if primary.get("accuracy_slope"):
        slope = primary["accuracy_slope"]
        print(f"    {converted_text(value, slope, scale, 'bits/byte')}, measured on {slope['source']}")
    if len(primary.get("average_by_family", {})) > 1:
        print("    the same pair on each family's average, alone at the same level: " + "; ".join(
            f"{name} {mdd_text(v, 100, 2)} points" for name, v in primary["average_by_family"].items()))


def print_power(report: dict) -> None:
    a = report["assumptions"]
    rung = f"rung {report['rung']}: " if report["rung"] else ""
    measured = {name: [v for v in r.values() if v is not None] for name, r in report["item_correlation"].items()}
    documents = (f"item correlation measured on {report['item_noise']} (mean over benchmarks "
                 + ", ".join(f"{name} {sum(v) / len(v):.2f}" for name, v in measured.items() if v)
                 + "; each benchmark's clipped to [0, 0.95])" if report["item_noise"] else
                 f"assumed accuracy {a['accuracy']:.2f}, item correlation {a['item_correlation']:.2f} (assumed)")
    print(f"{rung}Minimum detectable difference (the report calls it a result 80% of the time; {report['seeds']} paired "
          f"seeds, {report['arms']} arms; {documents}, seed std {100 * a['seed_std']:.2f} points per benchmark, "
          f"seed-by-document share {a['seed_item_share']:.2f}, seed correlation across benchmarks "
          f"{a['seed_correlation']:.2f} (assumed)):")
    print_primary(report)
    titles = {"average": "Avg", **CATEGORY_TITLES}
    for family in report["families"].values():
        if len(report["families"]) > 1:
            print(f"  {family['title']}:")
        for key, title in titles.items():
            if key not in family["mdd"]:
                continue
            value, level = family["mdd"][key], family["levels"][key]
            shown = f"{mdd_text(value, 100, 2):>7} points" if value is not None else "  needs 2 seeds or more"
            print(f"  {title:<18} {shown}  ({level['table']}, tested at {level['alpha']:.4g})")
    verdict = "can" if report["resolves_paper_effect"] else "cannot"
    print(f"  this run {verdict} resolve an effect the size of the paper's "
          f"+{100 * report['paper_effect']:.2f} points on the accuracy average in its decision table")
    if "difference" in report:
        needed = report["seeds_needed"]
        print(f"  {100 * report['difference']:.2f} points on the average: "
              + (f"{needed} paired seeds resolve it 80% of the time" if needed else f"no seed count up to {MAX_SEEDS} "
                 "resolves it 80% of the time (the test documents' noise, or the seeds' with every seed agreeing)"))


def print_run_power(report: dict) -> None:
    steps = report["compared_steps"]
    if not report["families"]:
        print("no two arms with evaluated checkpoints at a common step: nothing measured yet")
        return
    rung = f"rung {report['rung']}: " if report["rung"] else ""
    print(f"{rung}Noise measured at step {steps[-1] if steps else '-'} of {', '.join(report['arms'])} on seeds "
          f"{report['measured_on_seeds']}; minimum detectable difference with the configured {report['seeds']} paired "
          "seeds (the report calls it a result 80% of the time, at the level of the table that decides it; '>100': "
          "out of reach of a score in points). seed sd: net of the seed-by-document part (0: the seeds spread no "
          "more than that part explains); diff, seeds: each arm's difference to the reference and the fewest seeds "
          f"that resolve it 80% of the time (>{MAX_SEEDS}: none up to {MAX_SEEDS}):")
    print_primary(report | {"from_run": True})
    for f in report["families"].values():
        decimals = 2 if f["scale"] == 100 else 3
        print(f"\n{f['title']} ({f['unit']}); seed correlation across benchmarks {f['seed_correlation']:.2f}")
        print(f"  {'score':<28}{'MDD':>9}  {'tested at':<10} sigma2  rho   phi   seed sd"
              + "".join(f"  {arm + ': diff, seeds':>26}" for arm in f["differences"]))
        for score, value in f["mdd"].items():
            n = f["noise"].get(score)
            params = (f"  {n['item_variance']:.3f} {n['item_correlation']:5.2f} {n['seed_item_share']:5.2f} "
                      f"{f['scale'] * n['seed_std']:7.{decimals}f}") if n else " " * 31
            cells = ""
            for d in f["differences"].values():
                needed = "" if "seeds_needed" not in d[score] else d[score]["seeds_needed"] or (
                    f">{MAX_SEEDS}" if d[score]["difference"] else "-")
                cells += f"  {f['scale'] * d[score]['difference']:+14.{decimals}f}, {needed:>9}"
            shown = f"{mdd_text(value, f['scale'], decimals):>9}"
            print(f"  {f['titles'][score]:<28}{shown}  {f['levels'][score]['alpha']:<10.4g}{params}{cells}")
