"""The registry of extractor kinds: every other module reads the kinds from here.

A kind is one config class (a subclass of `ExtractorArm` with `extractor: Literal["<kind>"]`) that
builds its datatrove step (`step()`) and reads that step's counters (`accounting()`). A new kind
is one place here: a module, or a package whose `__init__` holds the config and whose `step.py`
holds the step where datatrove has none (imported where the config builds it, so loading a config
loads no step); plus its line in `KINDS`. Every arm's extraction stage is `stages.py`, the steps
before any extractor `prefilters.py`.
"""

from __future__ import annotations

from typing import Annotated, Union, get_args

from pydantic import Field, TypeAdapter, ValidationError

from corpus.extractors.base import ExtractorArm
from corpus.extractors.baselines import JustextArm, ReadabilityArm, ResiliparseArm, WholePageArm
from corpus.extractors.block_classifier import BlockClassifierArm
from corpus.extractors.dripper import DripperArm
from corpus.extractors.gold import GoldArm
from corpus.extractors.trafilatura import TrafilaturaArm

KINDS: tuple[type[ExtractorArm], ...] = (
    TrafilaturaArm, DripperArm, BlockClassifierArm, ResiliparseArm, ReadabilityArm, JustextArm, WholePageArm, GoldArm)

ArmConfig = Annotated[Union[KINDS], Field(discriminator="extractor")]


def kind_name(kind: type[ExtractorArm]) -> str:
    return get_args(kind.model_fields["extractor"].annotation)[0]


def default_arm(name: str) -> ExtractorArm:
    """The arm of kind `name` with its default options."""
    return TypeAdapter(ArmConfig).validate_python({"extractor": name})


def standalone_kinds() -> list[str]:
    """Kinds that run with no options (Dripper needs a labeler), bounds aside: what `--arms`
    takes by name."""
    names = []
    for kind in KINDS:
        if kind.bound:
            continue
        try:
            default_arm(kind_name(kind))
        except ValidationError:
            continue
        names.append(kind_name(kind))
    return names


__all__ = ["KINDS", "ArmConfig", "BlockClassifierArm", "DripperArm", "ExtractorArm", "GoldArm", "TrafilaturaArm", "default_arm",
           "kind_name", "standalone_kinds"]
