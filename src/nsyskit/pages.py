"""The one Jinja2 environment every HTML page of nsyskit is rendered with: autoescape on, templates by file name.

Templates live beside the code that fills them (nsyskit/analysis/present/templates, nsyskit/nccllog/render/templates) and are
found by file name from either folder, so a page of one feature can include a section of another. Autoescape is on
for every template: text from reports and logs (kernel names such as `void at::native::foo<float, 4>`, NVTX names,
host names, file paths) is escaped wherever it is written, and only template markup is HTML.
"""

from __future__ import annotations

import functools
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

ROOT = Path(__file__).parent
TEMPLATE_FOLDERS = (ROOT / "analysis" / "present" / "templates", ROOT / "nccllog" / "render" / "templates")


@functools.cache
def environment() -> Environment:
    """The shared environment (built once): every template autoescaped, blocks trimmed."""
    return Environment(
        loader=FileSystemLoader([str(folder) for folder in TEMPLATE_FOLDERS]),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
    )  # fmt: skip


def render(template: str, **context) -> str:
    """The text of `template` filled with `context` (every value escaped unless the template says otherwise)."""
    return environment().get_template(template).render(**context)
