"""Short kernel names for people: the demangled C++ name cut to its function's own name (no return type, template
arguments, parameters or namespaces), as nsys' shortName is, keeping a template argument that is one plain name
(CUTLASS's `Kernel2<cutlass_80_tensorop_..._align8>` tells its variants apart); the full name stays beside it."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

OPEN, CLOSE = "<([{", ">)]}"
SIMPLE_ARGUMENT = re.compile(r"[A-Za-z_]\w{0,95}")


def _top_level(text: str) -> list[tuple[int, str]]:
    """(position, character) of every character outside brackets: <...>, (...), [...], {...}."""
    depth, out = 0, []
    for at, char in enumerate(text):
        if char in OPEN:
            if depth == 0:
                out.append((at, char))
            depth += 1
        elif char in CLOSE and depth:
            depth -= 1
        elif depth == 0:
            out.append((at, char))
    return out


def short_name(name: str) -> str:
    """`void at::native::vectorized_elementwise_kernel<4, ...>(int, T2, T3)` -> `vectorized_elementwise_kernel`.

    Names that are no C++ signature (a plain C kernel, an NCCL kernel, `<unnamed kernel>`) come back as they are.
    """
    text = name.strip()
    if not text or text.startswith("<"):
        return text
    outside = _top_level(text)
    # The parameter list is the last top-level (...): `(anonymous namespace)::f<...>(int)` has one before it.
    params = max((at for at, char in outside if char == "("), default=len(text))
    head = [(at, char) for at, char in outside if at < params and char not in OPEN]
    spaces = [at for at, char in head if char == " "]  # `void f`, `T1 cutlass::f`: the return type ends at a space
    start = spaces[-1] + 1 if spaces else 0
    name_part = "".join(char for at, char in head if at >= start)  # outside brackets only: template args dropped
    name_part = name_part.split("::")[-1] or name_part
    # One plain identifier as the template argument names the variant (CUTLASS' tile configs): it stays.
    opens = [at for at, char in outside if at < params and char == "<"]
    if opens and name_part:
        argument = text[opens[-1] + 1 : params].rstrip().removesuffix(">")
        if SIMPLE_ARGUMENT.fullmatch(argument):
            name_part += f"<{argument}>"
    return name_part or text


def short_names(names: Iterable[str]) -> np.ndarray:
    """short_name of each name, computed once per distinct name."""
    names = list(names)
    cache = {name: short_name(name) for name in set(names)}
    return np.asarray([cache[name] for name in names], dtype=object)
