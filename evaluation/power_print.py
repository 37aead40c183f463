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


def family_scale(family: str) -> float:
    """The scale a family's fractions print at: 100 for the families in points."""
    return 100 if family in ("accuracy", "p_gold") else 1


def primary_text(score: str, value: float | None) -> str:
    scale = family_scale(score.split(":")[0])
    return f"{mdd_text(value, scale, 2 if scale == 100 else 3)}{' points' if scale == 100 else ''}"


def print_primary(report: dict) -> None:
    primary = report.get("primary")
    if not primary:
        return
    family, _ = primary["score"].split(":")
    scale = family_scale(family)
    value = primary["mdd"]
    shown = (primary_text(primary["score"], value) if value is not None
             else "not measured here" if "from_run" in report else
             f"nothing assumed for {family}'s documents: measure them on a run (--noise-from RUN_CONFIG)"
             if family not in report["families"] else "needs 2 seeds or more")
    where = ("" if "deciding" not in primary or primary["deciding_rung"] is None else
             f" at its deciding rung {primary['deciding_rung']}" if primary["deciding"] else
             f" if decided here (descriptive at this rung; decided at rung {primary['deciding_rung']})")
    sides = ", one-sided" if primary.get("sides") == "one-sided" else ""
    print(f"  primary decision (evaluation.primary: {' − '.join(primary['pair'])} on {primary['score']}, alone at "
          f"{primary['alpha']:.2g}{sides}){where}: {shown}" + (f"; +{100 * report['paper_effect']:.2f} points is "
                                                        f"{'within' if value <= report['paper_effect'] else 'out of'} reach"
                                                        if scale == 100 and value is not None and "paper_effect" in report
                                                        else ""))
    if rho := primary.get("rho"):
        for line in rho_phi_lines(rho):
            print(f"    {line}")
    if primary.get("accuracy_slope"):
        slope = primary["accuracy_slope"]
        unit = "points" if scale == 100 else "bits/byte"  # the scale-1 families (bpb, clean text) are in bits/byte
        print(f"    {converted_text(value, slope, scale, unit)}, measured on {slope['source']}")
    if len(primary.get("average_by_family", {})) > 1:
        print("    the same pair on each family's average, alone at the same level: " + "; ".join(
            f"{name} {mdd_text(v, 100, 2)} points" for name, v in primary["average_by_family"].items()))


def print_deciding_primary(deciding: dict) -> None:
    """The ladder's one line that matters for the primary decision: its MDD at the deciding rung."""
    value = primary_text(deciding["score"], deciding["mdd"]) if deciding["mdd"] is not None else "not priced (see its rung)"
    print(f"primary decision ({' − '.join(deciding['pair'])} on {deciding['score']}) at its deciding rung "
          f"{deciding['rung']}: MDD {value}")


def measured_range(report: dict, key: str) -> str:
    """A measured parameter's range over each family's benchmarks, in the family's unit."""
    parts = []
    for name, units in report["measured"].items():
        values = [u[key] for u in units.values()]
        if not values:
            continue
        scale = report["families"][name]["scale"] if key == "seed_std" else 1
        unit = f" {report['families'][name]['unit']}" if key == "seed_std" else ""
        parts.append(f"{name} {scale * min(values):.2f}-{scale * max(values):.2f}{unit} over {len(values)} benchmarks")
    return "; ".join(parts) or "none of the shown families' benchmarks varied"


def print_assumptions(report: dict) -> None:
    """Each parameter of the noise on its own line: its value and where it comes from."""
    a, sources = report["assumptions"], report["sources"]

    def value(key: str, text: str) -> str:
        if not sources[key].startswith("measured"):
            return text
        if key == "seed_correlation":
            return "per family: " + ", ".join(f"{name} {v:.2f}" for name, v in report["seed_correlation"].items())
        return f"per benchmark ({measured_range(report, key)}; {text} where not measured)"

    rows = [("accuracy", "document variance p (1 − p)", f"at accuracy {a['accuracy']:.2f}"),
            ("item_correlation", "item correlation rho", f"{a['item_correlation']:.2f}"),
            ("seed_item_share", "seed-by-document share phi", f"{a['seed_item_share']:.2f}"),
            ("seed_std", "seed SD", f"{100 * a['seed_std']:.2f} points per benchmark"),
            ("seed_correlation", "seed correlation across benchmarks", f"{a['seed_correlation']:.2f}")]
    for key, title, text in rows:
        print(f"    {title}: {value(key, text)}, {sources[key]}")
    if report["noise_from"]:
        print(f"    (a document's variance in the families other than accuracy: measured on {report['noise_from']})")


def print_power(report: dict) -> None:
    rung = f"rung {report['rung']}: " if report["rung"] else ""
    print(f"{rung}Minimum detectable difference (the report calls it a result 80% of the time; {report['seeds']} paired "
          f"seeds, {report['arms']} arms), on this noise:")
    print_assumptions(report)
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


def rho_phi_lines(rho: dict) -> list[str]:
    """The item correlation rho and seed-by-document share phi a primary MDD is priced on (`primary_rho`),
    each with its 95% interval where one was measured, and where they come from."""
    interval = f" [{rho['low']:.2f}, {rho['high']:.2f}]" if rho["low"] is not None else ""
    lines = [f"item correlation rho {rho['rho']:.2f}{interval}, from {rho['source']}" if rho["rho"] is not None
             else f"item correlation: none measured ({rho['source']})"]
    if rho.get("phi_low") is not None:
        lines.append(f"seed-by-document share phi {rho['phi']:.2f} [{rho['phi_low']:.2f}, {rho['phi_high']:.2f}], from "
                     f"{rho['source']}")
    return lines


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
