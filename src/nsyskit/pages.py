"""The one Jinja2 environment every HTML page of nsyskit is rendered with: autoescape on, templates by file name.

Templates live beside the code that fills them (nsyskit/analysis/present/templates, nsyskit/nccllog/render/templates) and are
found by file name from either folder, so a page of one feature can include a section of another. Autoescape is on
for every template: text from reports and logs (kernel names such as `void at::native::foo<float, 4>`, NVTX names,
host names, file paths) is escaped wherever it is written, and only template markup is HTML.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape

ROOT = Path(__file__).parent
TEMPLATE_FOLDERS = (ROOT / "analysis" / "present" / "templates", ROOT / "nccllog" / "render" / "templates")


# Where a long name may wrap besides its spaces: after each '_', '<' and ',' (kernel, metric and NVTX names such
# as 'Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>'), never inside a word.
PIECES = re.compile(r"[^\s_<,]*[_<,]+|[^\s_<,]+|\s+")


def breakable(text) -> Markup:
    """TEXT escaped, as pieces that never break inside ('1MB-16MB' stays one: a browser would break it at its '-')
    with a break opportunity after each '_', '<' and ',' and at the spaces."""
    out = []
    for piece in PIECES.findall(str(text)):
        if piece.isspace():
            out.append(" ")
        else:
            out.append(f'<span class="w">{escape(piece)}</span><wbr>')
    return Markup("".join(out))


@functools.cache
def environment() -> Environment:
    """The shared environment (built once): every template autoescaped, blocks trimmed, the `breakable` filter."""
    env = Environment(
        loader=FileSystemLoader([str(folder) for folder in TEMPLATE_FOLDERS]),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
    )  # fmt: skip
    env.filters["breakable"] = breakable
    return env


def render(template: str, **context) -> str:
    """The text of `template` filled with `context` (every value escaped unless the template says otherwise)."""
    return environment().get_template(template).render(**context)
