"""Jinja2 templates shipped as package data, rendered with StrictUndefined."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2


def _load(name: str) -> str:
    try:
        return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise jinja2.TemplateNotFound(name) from exc


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yaml"] = yaml_inline
    return env


def yaml_inline(value: Any) -> str:
    """One-line YAML for a frontmatter value (quoted only when YAML needs it)."""
    import yaml

    text = yaml.safe_dump(
        value, default_flow_style=True, allow_unicode=True, width=1 << 30, sort_keys=False
    )
    text = text.rstrip("\n")
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    return text.strip()


def render(template_name: str, **context: Any) -> str:
    """Render one template from this package (cached compilation)."""
    return environment().get_template(template_name).render(**context)
