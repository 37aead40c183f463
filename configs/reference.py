"""The configuration reference (`docs/reference/configuration.md`), generated from the experiment's
pydantic models: every key a YAML may hold, its type, default, constraint and description (a field's
`Field(description=...)`, the one place a key's meaning is written).

    python -m configs.reference            # write the page
    python -m configs.reference --check    # exit 1 when the committed page differs (tests, CI)
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from configs.experiment import ExperimentConfig

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "configuration.md"
COMMAND = "python -m configs.reference"

INTRO = """\
# Configuration reference

An experiment is one YAML file (`configs/local.yaml`: the embedded default; `configs/paper.yaml`: the
paper-scale run; `configs/local-ladder.yaml`, `configs/local-plain.yaml` and `configs/paper-ladder.yaml`:
variants that `include:` one of them). Every entry point loads it with `configs.experiment.load_experiment`,
which validates the whole file before any work starts: an unknown key, a wrong type, a value outside its
constraint, an option of another kind or a missing file fails with the file and the dotted key, e.g.
`configs/x.yaml: invalid experiment config` then `arms.dripper.dripper.labeler.vllm.model: ...`.
Each section below is a table of its keys, in the order the YAML lists its sections; a key whose type
links to another table holds a mapping of that table's keys. `NAME` stands for a name you choose (an
arm's), `[]` for an item of a list. Sections and keys left out take their defaults; a section whose
default is `null` is off.

This page is generated from the config models by `python -m configs.reference`; a test fails when it
differs from what that command writes."""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    constraint: str
    description: str


@dataclass
class Table:
    title: str
    rows: list[Row]


def anchor(title: str) -> str:
    """The id MkDocs (Python-Markdown's toc) and GitHub both give a heading of letters, digits, `.`,
    `_`, `[]`, `(`, `)`, `:`, `,` and single spaces."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def link(title: str) -> str:
    return f"[{title}](#{anchor(title)})"


def _tagged_members(annotation) -> list[tuple[str, type[BaseModel]]] | None:
    """(tag, model) of each member of a tagged union of models: the arm kinds, the labeler kinds."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return None
    members = []
    for member in typing.get_args(annotation):
        tag = None
        if typing.get_origin(member) is Annotated:
            member, *meta = typing.get_args(member)
            tag = next((m.tag for m in meta if hasattr(m, "tag")), None)
        if not (isinstance(member, type) and issubclass(member, BaseModel)):
            return None
        members.append((tag, member))
    return [(tag or _kind_value(member), member) for tag, member in members]


def _kind_value(model: type[BaseModel]) -> str:
    """The Literal value a union member is told apart by (`extractor`, `kind`)."""
    for name in ("extractor", "kind"):
        if name in model.model_fields:
            return typing.get_args(model.model_fields[name].annotation)[0]
    raise ValueError(f"{model.__name__}: a member of a tagged union with neither extractor nor kind")


def _tag_words(tag: str, model: type[BaseModel]) -> str:
    """`extractor: trafilatura`, `kind: vllm`; the reference corpora by their `corpus` values."""
    if tag == "reference":
        return "corpus: " + ", ".join(typing.get_args(model.model_fields["corpus"].annotation))
    return f"{'extractor' if 'extractor' in model.model_fields else 'kind'}: {tag}"


def type_text(annotation, titles: dict[int, str]) -> str:
    """A readable type: `int`, `list[str]`, `'a' | 'b'`, a nested model as a link to its table
    (`titles`: the table of each model object met under this key)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return link(titles[id(annotation)])
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    if isinstance(annotation, type) and origin is None:
        return annotation.__name__
    if origin is Annotated:
        return type_text(args[0], titles)
    if origin is Literal:
        return " | ".join(repr(v) for v in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a, titles) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join(type_text(a, titles) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]"
    return str(annotation)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see its table"
    return f"`{_yaml(value)}`"


def _yaml(value) -> str:
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        value = [list(v) if isinstance(v, tuple) else v for v in value]
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def constraint_text(field: FieldInfo) -> str:
    words = []
    for meta in field.metadata:
        for kind, sign in ((annotated_types.Ge, ">="), (annotated_types.Gt, ">"), (annotated_types.Le, "<="),
                           (annotated_types.Lt, "<")):
            if isinstance(meta, kind):
                words.append(f"{sign} {_yaml(getattr(meta, kind.__name__.lower()))}")
        if isinstance(meta, annotated_types.MinLen):
            words.append(f"at least {meta.min_length} item(s)")
        if isinstance(meta, annotated_types.MaxLen):
            words.append(f"at most {meta.max_length} item(s)")
        if getattr(meta, "pattern", None):
            words.append(f"matches `{meta.pattern}`")
    return ", ".join(words)


def _models_in(annotation) -> list[tuple[str, str, type[BaseModel]]]:
    """(suffix of the key, tag, model) of each model a field's value holds: itself (`""`), a list's
    items (`[]`), a mapping's values (`.NAME`), each member of a tagged union (with its tag)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", "", annotation)]
    if (members := _tagged_members(annotation)) and len(members) > 1:
        return [("", tag, model) for tag, model in members]
    if origin is Annotated:
        return _models_in(args[0])
    if origin in (Union, types.UnionType):
        return [m for a in args for m in _models_in(a)]
    if origin is list:
        return [("[]" + suffix, tag, model) for suffix, tag, model in _models_in(args[0])]
    if origin is dict:
        return [(".NAME" + suffix, tag, model) for suffix, tag, model in _models_in(args[1])]
    return []


def model_tables(model: type[BaseModel], path: str, title: str, defaults: BaseModel | None,
                 context: tuple[str, ...] | list[str] = (), inherits: str | None = None) -> list[Table]:
    """The table of `model` at `path` (its defaults those of the `defaults` instance where the parent
    gives one, e.g. a stage's resources, or those of the keys at `inherits`), then the tables of the
    models it holds, depth first."""
    table, nested = Table(title, []), []
    # a kind's table opens with the key that names the kind
    fields = sorted(model.model_fields.items(), key=lambda item: item[0] not in ("extractor", "kind"))
    for name, field in fields:
        key = f"{path}.{name}" if path else name
        titles: dict[int, str] = {}
        held = _models_in(field.annotation)
        instance = getattr(defaults, name, None) if defaults is not None else field.get_default(call_default_factory=True)
        for suffix, tag, sub in held:
            sub_path, sub_context = key + suffix, [*context, _tag_words(tag, sub)] if tag else context
            titles[id(sub)] = sub_title = sub_path + (f" ({', '.join(sub_context)})" if sub_context else "")
            sub_defaults = instance if isinstance(instance, sub) else None
            nested.extend(model_tables(sub, sub_path, sub_title, sub_defaults, sub_context, DEFAULTS_FROM.get(key)))
        default = default_text(field)
        if defaults is not None and not field.is_required() and not held:
            default = f"`{_yaml(getattr(defaults, name))}`"
        if inherits:
            default = f"`{inherits}.{name}`'s"
        default = ROW_DEFAULTS.get(key, default)
        table.rows.append(Row(key, type_text(field.annotation, titles), default, constraint_text(field),
                              field.description or ""))
    for key, type_, default, constraint, description in KEYS_OUTSIDE_THE_MODELS.get(path, []) if not context else []:
        table.rows.append(Row(key, type_, default, constraint, description))
    return [table, *nested]


# keys read before validation (configs.experiment.read_raw, PretrainConfig's one-size form): no model
# field holds them, so their rows are written here
# defaults a before-validator fills in (PretrainConfig: a rung's name, training and Slurm job)
ROW_DEFAULTS = {"pretrain.ladder[].name": "the name of `model`'s size", "pretrain.ladder[].training": "`pretrain.training`",
                "pretrain.ladder[].slurm": "`pretrain.slurm`"}
DEFAULTS_FROM = {"pretrain.ladder[].training": "pretrain.training", "pretrain.ladder[].slurm": "pretrain.slurm"}

KEYS_OUTSIDE_THE_MODELS = {
    "": [("include", "str", "none", "",
          "Another config file beside this one (e.g. `local.yaml`) read first; each top-level section this file "
          "gives replaces that file's section whole, so a variant states only what differs.")],
    "pretrain": [("pretrain.model", "str | " + link("pretrain.ladder[].model"), "none", "",
                  "One size instead of `ladder`: a size of `configs/models/` by name, or a shape. It becomes a "
                  "one-rung ladder named after the size (`model` for a shape)."),
                 ("pretrain.seeds", "list[int]", "`[1, 2, 3]`", "",
                  "With `model`: the seeds of the one size, one training run per arm and seed.")],
}



def tables() -> list[Table]:
    """The top-level keys, then each section's tables in the YAML's order."""
    return model_tables(ExperimentConfig, "", "Top level", None)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _section(title: str) -> str:
    """The top-level key a table belongs to: `inputs` for `inputs.retries`, `arms` for `arms.NAME (...)`."""
    return re.split(r"[.\[ ]", title, maxsplit=1)[0]


def render() -> str:
    """The page: the intro, the top-level table, then a `##` section per top-level key that holds
    tables (its own table under it, the tables of the models it holds as `###`)."""
    lines, anchors, section = [INTRO], set(), None
    for table in tables():
        if table.title != "Top level" and _section(table.title) != section:
            section = _section(table.title)
            lines += ["", f"## {section}", "", ExperimentConfig.model_fields[section].description]
            anchors.add(anchor(section))
        if table.title == "Top level" or table.title != section:
            lines += ["", f"{'##' if section is None else '###'} {table.title}"]
            if anchor(table.title) in anchors:
                raise ValueError(f"two headings would share the anchor #{anchor(table.title)}: {table.title}")
            anchors.add(anchor(table.title))
        lines += ["", "| key | type | default | constraint | description |", "|---|---|---|---|---|"]
        lines += [f"| `{r.key}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.constraint)} | {_cell(r.description)} |"
                  for r in table.rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Write the configuration reference (every key of the experiment config, from its pydantic "
                    f"models) to {PAGE.relative_to(PAGE.parents[2])}, or check that the committed page is current.")
    parser.add_argument("--out", type=Path, default=PAGE, help="where the page goes (default: docs/reference/configuration.md)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page at --out differs from what this command writes")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not args.out.is_file() or args.out.read_text() != page:
            print(f"{args.out} is not what the config models give: run `{COMMAND}` and commit the page", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
