"""The configuration reference (`python -m configs.reference`): every key has a description, the
committed page is what the command writes, and every key the models accept or the shipped YAMLs use
is in it. The models are walked here independently of the generator."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from configs import reference
from configs.experiment import ExperimentConfig
from evaluation.tasks.suite import Suite

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def held_models(annotation, suffix: str = "") -> list[tuple[str, type[BaseModel]]]:
    """Every (key suffix, model) a value of this type may hold, by brute force over the type's
    arguments: a list item adds `[]`, a mapping value `.NAME`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(suffix, annotation)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        return held_models(args[0], suffix + "[]")
    if origin is dict:
        return held_models(args[1], suffix + ".NAME")
    return [found for arg in args for found in held_models(arg, suffix)]


def accepted_keys(model: type[BaseModel], path: str = "") -> dict[str, type[BaseModel]]:
    """Every dotted key the model accepts, with the model that declares it."""
    keys = {}
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        keys[key] = model
        for suffix, sub in held_models(field.annotation):
            keys |= accepted_keys(sub, key + suffix)
    return keys


def page_rows(text: str) -> dict[str, set[str]]:
    """The page's keys, each with the type cells its rows give it (a key of several kinds has several)."""
    rows: dict[str, set[str]] = {}
    for line in text.splitlines():
        if match := re.match(r"\| `([^`]+)` \| (.*?) \| ", line):
            rows.setdefault(match[1], set()).add(match[2])
    return rows


@pytest.fixture(scope="module")
def page() -> str:
    return reference.render()


def test_every_field_of_every_config_model_has_a_description():
    models = {*accepted_keys(ExperimentConfig).values(), *accepted_keys(Suite).values(), ExperimentConfig, Suite}
    missing = [f"{m.__module__}.{m.__name__}.{name}" for m in models for name, field in m.model_fields.items()
               if not (field.description or "").strip()]
    assert not missing, f"fields without Field(description=...): {sorted(missing)}"


def test_the_committed_page_is_what_the_command_writes(page):
    assert reference.PAGE.read_text() == page, "docs/reference/configuration.md is stale: run python -m configs.reference"


def test_check_fails_on_a_stale_page_naming_the_command(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration reference\n")
    assert reference.main(["--check", "--out", str(stale)]) == 1
    assert "python -m configs.reference" in capsys.readouterr().err
    assert reference.main(["--out", str(stale)]) == 0
    assert reference.main(["--check", "--out", str(stale)]) == 0


def test_every_key_the_models_accept_is_in_the_page(page):
    documented = page_rows(page)
    missing = sorted(set(accepted_keys(ExperimentConfig)) - set(documented))
    assert not missing, f"keys the config accepts that the reference leaves out: {missing}"


def yaml_keys(value, path: str, documented: dict[str, set[str]]) -> list[str]:
    """The page's form of every key a YAML mapping uses: an arm's name is NAME, a list item []; a
    free mapping (a `dict[...]` key such as storage_options) ends the walk."""
    def holds(prefix: str) -> bool:
        return any(k.startswith(prefix + ".") for k in documented)

    keys = []
    for name, sub in value.items():
        key = f"{path}.NAME" if holds(f"{path}.NAME") else f"{path}.{name}" if path else str(name)
        if not holds(f"{path}.NAME"):
            keys.append(key)
        free = all(t.startswith("dict[") for t in documented.get(key, {""})) and not holds(f"{key}.NAME")
        if isinstance(sub, dict) and not free:
            keys += yaml_keys(sub, key, documented)
        if isinstance(sub, list) and holds(f"{key}[]"):
            for item in sub:
                keys += yaml_keys(item, f"{key}[]", documented) if isinstance(item, dict) else []
    return keys


@pytest.mark.parametrize("config", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_key_a_shipped_config_uses_is_in_the_page(config, page):
    documented = page_rows(page)
    used = yaml_keys(yaml.safe_load((CONFIGS / config).read_text()), "", documented)
    assert used and not sorted(set(used) - set(documented))


def test_every_key_of_a_named_model_size_is_in_the_page(page):
    documented = page_rows(page)
    for size in sorted((CONFIGS / "models").glob("*.yaml")):
        used = yaml_keys(yaml.safe_load(size.read_text()), "pretrain.ladder[].model", documented)
        assert not sorted(set(used) - set(documented)), size.name


def test_every_shipped_config_says_what_it_is_for_and_where_its_keys_are():
    for config in sorted(CONFIGS.glob("*.yaml")):
        head = config.read_text().split("\n\n")[0]
        assert head.startswith("# ") and "Keys: docs/reference/configuration.md" in head, config.name
