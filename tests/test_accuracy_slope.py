"""The accuracy slope's seeds' noise where the arms share their seeds: a seed's shift common to every
arm is not noise of the arms' spread, and the slope neither subtracts it nor pairs the wrong seeds."""

import numpy as np
import pytest

from evaluation.statistics.accuracy_slope import accuracy_slope

PLANTED = -0.5  # accuracy (a fraction) per bit/byte


def shared_seed_run(seed: int = 13, arms: int = 5, seeds: int = 3):
    """arm -> its seeds' bits/byte and accuracy, arm means on a line of slope PLANTED, each seed's shift
    shared by every arm (30x the arms' own seed noise) and moving both scores, as a shared init would."""
    rng = np.random.default_rng(seed)
    x = 1.0 + np.linspace(-0.04, 0.04, arms)
    shared = rng.normal(0, 0.06, seeds)
    own = rng.normal(0, 0.002, (arms, seeds))
    primary = {f"a{k}": (x[k] + shared + own[k]).tolist() for k in range(arms)}
    accuracy = {f"a{k}": (0.4 + PLANTED * (x[k] - 1) - 0.5 * shared - 0.3 * own[k]).tolist() for k in range(arms)}
    return primary, accuracy


def test_a_seed_shift_every_arm_shares_is_not_subtracted_from_the_arms_spread():
    primary, accuracy = shared_seed_run()
    ids = dict.fromkeys(primary, [1, 2, 3])
    slope = accuracy_slope(primary, accuracy, seeds=ids)
    assert slope["seed_noise"] == "arms x seeds residual (shared seeds)"
    assert slope["slope"] == pytest.approx(PLANTED, abs=0.03) and slope["low"] <= PLANTED <= slope["high"]
    assert slope["convertible"]
    # each arm's own covariance holds the shared shift, which is not in the arms' spread: no slope is left
    unpaired = accuracy_slope(primary, accuracy)
    assert unpaired["seed_noise"] == "each arm's own seeds" and unpaired["slope"] is None and not unpaired["convertible"]


def test_the_seeds_are_matched_by_number_not_by_position():
    primary, accuracy = shared_seed_run()
    ids = dict.fromkeys(primary, [1, 2, 3])
    reordered = {arm: [v[2], v[0], v[1]] for arm, v in primary.items()}
    reordered_accuracy = {arm: [v[2], v[0], v[1]] for arm, v in accuracy.items()}
    ids_reordered = dict(ids) | {arm: [3, 1, 2] for arm in list(primary)[:2]}  # two arms list their seeds in another order
    mixed = {arm: reordered[arm] if ids_reordered[arm] == [3, 1, 2] else v for arm, v in primary.items()}
    mixed_accuracy = {arm: reordered_accuracy[arm] if ids_reordered[arm] == [3, 1, 2] else v for arm, v in accuracy.items()}
    assert accuracy_slope(mixed, mixed_accuracy, seeds=ids_reordered)["slope"] == \
        pytest.approx(accuracy_slope(primary, accuracy, seeds=ids)["slope"], rel=1e-12)


@pytest.mark.parametrize("other_seeds", [[2, 3, 4], [1, 2]], ids=["another seed list", "fewer seeds"])
def test_arms_on_different_seeds_keep_their_own_seed_covariance(other_seeds):
    primary, accuracy = shared_seed_run()
    ids = dict.fromkeys(primary, [1, 2, 3]) | {"a4": other_seeds}
    primary["a4"], accuracy["a4"] = primary["a4"][:len(other_seeds)], accuracy["a4"][:len(other_seeds)]
    slope = accuracy_slope(primary, accuracy, seeds=ids)
    assert slope["seed_noise"] == "each arm's own seeds" and slope["seeds"] == [3, 3, 3, 3, len(other_seeds)]
    assert slope == accuracy_slope(primary, accuracy)
