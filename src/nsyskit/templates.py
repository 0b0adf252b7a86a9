"""Render one Jinja2 template of the project (k8s/, slurm/); a missing or broken template is a one-line NsyskitError."""

from __future__ import annotations

from typing import Any

import jinja2

from nsyskit.errors import NsyskitError


class TemplateProblem(NsyskitError):
    """A template of the project is missing or cannot be rendered: names the file and the fix."""


def render_template(env: jinja2.Environment, name: str, folder: str, context: dict[str, Any]) -> str:
    """ENV's template NAME (under the project's FOLDER, for messages) rendered with CONTEXT."""
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateNotFound:
        raise TemplateProblem(
            f"template {folder}/{name} is missing",
            fix=f"restore it from the nsyskit repository (git checkout -- {folder}/)",
        ) from None
    except jinja2.TemplateError as exc:
        where = f" line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        raise TemplateProblem(
            f"template {folder}/{name}{where} cannot be rendered: {exc.message}",
            fix=f"undo local edits to it (git diff -- {folder}/)",
        ) from None
