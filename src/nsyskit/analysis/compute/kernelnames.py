"""Short kernel names for people: the demangled C++ name cut to its function's own name (no return type, template
arguments, parameters or namespaces), as nsys' shortName is, keeping a template argument that is one plain name
(CUTLASS's `Kernel2<cutlass_80_tensorop_..._align8>` tells its variants apart); the full name stays beside it.

Kernels whose short names collide in one table (PyTorch's many `elementwise_kernel`s) each keep the least of their
template arguments, or else of their parameters, that tells them apart (`elementwise_kernel<CUDAFunctor_add<float>>`),
written compactly (no namespaces, casts, lambda boilerplate) and within SHORT_WIDTH characters (see distinct_short).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable

import numpy as np

OPEN, CLOSE = "<([{", ">)]}"
SIMPLE_ARGUMENT = re.compile(r"[A-Za-z_]\w{0,95}")
SHORT_WIDTH = 80  # a told-apart short name fits the terminal's name column (the full name is in JSON and on hover)
# A template argument or parameter made compact, in this order: lambda instance numbers and call operators dropped,
# lambdas without parameters (nesting only) dropped, `void ` return types, casts before numbers ((int)128), namespaces,
# then functions' parameter lists (a lambda keeps its parameter types: they tell its dtype), written `f(float)`.
COMPACT_STEPS = (
    (re.compile(r"\s*\(instance \d+\)"), ""),
    (re.compile(r"::operator \(\)\((?:[^()]|\([^()]*\))*\)(?: const)?"), ""),
    (re.compile(r"::\[lambda\(\)\]"), ""),
    (re.compile(r"(?<![\w])void\s+"), ""),
    (re.compile(r"\([A-Za-z_][\w ]*\)(?=-?\d)"), ""),
    (re.compile(r"(?:[A-Za-z_]\w*|<unnamed>|\(anonymous namespace\))::(?!\[)"), ""),
    (re.compile(r"(?<=[\w>])(?<!lambda)\((?:[^()]|\([^()]*\))*\)"), ""),
    (re.compile(r"(?<=>)::\[lambda\(int\)\]$"), ""),  # the lambda gpu_kernel_impl<F> wraps F in: F tells
    (re.compile(r"::\[lambda(\([^()]*\))\]"), r"\1"),
    (re.compile(r"\s+"), " "),
)
LAMBDA_INSTANCE = re.compile(r"\[lambda\([^()]*\) \(instance (\d+)\)\]")
PLAIN = re.compile(r"-?\d+|(?:unsigned |signed |const )*(?:bool|char|short|int|long|float|double|half|__half|Half|"
                   r"BFloat16|__nv_bfloat16|size_t|[A-Z]\d?)(?: \*| &)?")  # fmt: skip


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


@functools.lru_cache(maxsize=1 << 14)  # the ranks of a run share their kernels: a process maps several, then merges
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
    """short_name of each name, computed once per distinct name; names whose short names collide are told apart
    (distinct_short), so two rows share a short name only when their full names are equal."""
    names = list(names)
    distinct = sorted(set(names))
    cache = {name: short_name(name) for name in distinct}
    colliding: dict[str, list[str]] = {}
    for name in distinct:
        colliding.setdefault(cache[name], []).append(name)
    for short, group in colliding.items():
        if len(group) > 1:
            cache |= dict(zip(group, _told_apart(short, tuple(group)), strict=True))
    return np.asarray([cache[name] for name in names], dtype=object)


@functools.lru_cache(maxsize=1 << 10)
def _told_apart(short: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """distinct_short of one group of colliding names, computed once per process (every rank has the same groups)."""
    return tuple(distinct_short(short, list(names)))


def distinct_short(short: str, names: list[str]) -> list[str]:
    """A short name for each of `names` (all cut to `short`) that tells it from the others: its least template
    argument (or parameter, or a pair of them) that no other name has at the same place, at most SHORT_WIDTH long.

    A form that is a whole argument keeps its place when it is plain (`softmax_warp_forward<float, …>`), a named one
    needs none (`elementwise_kernel<CUDAFunctor_add<float>>`); a single-argument wrapper may be peeled to its inner
    argument when that alone tells it apart. Names that no such form tells apart get their compact template
    arguments in full, then their lambdas' instance numbers (`#3`), then a count (`(2)`) as the last resort: the result
    never repeats a short name.
    """
    pieces = [_pieces(name) for name in names]
    holders: dict[tuple, set[int]] = {}  # a form as shown (see _key) -> the names that have it
    for index, places in enumerate(pieces):
        for form in itertools.chain.from_iterable(places):
            for alone in (True, False):
                holders.setdefault(_key(form, alone), set()).add(index)
    chosen = []
    for index, forms in enumerate(pieces):
        shown = [(_render(short, combo), combo) for combo in _combinations(forms)]
        shown = [(text, combo) for text, combo in shown if len(text) <= SHORT_WIDTH]
        picked = next((text for text, combo in shown
                       if set.intersection(*(holders[_key(part, len(combo) == 1)] for part in combo)) == {index}), None)  # fmt: skip
        instances = LAMBDA_INSTANCE.findall(names[index])
        if picked is None and instances and shown:  # equal but for their lambdas' instance numbers: those tell
            picked = f"{shown[0][0]} #{','.join(instances)}"
        whole = [place[0][2] for place in forms if place[0][0] == "<"]  # every template argument, compact
        chosen.append(picked or _cut(f"{short}<{', '.join(whole)}>" if whole else short))
    repeated = {text for text in chosen if chosen.count(text) > 1}
    seen: dict[str, int] = {}
    for index, text in enumerate(chosen):  # the last resort: equal ones numbered in the names' order
        if text in repeated:
            seen[text] = seen.get(text, 0) + 1
            chosen[index] = f"{_cut(text, SHORT_WIDTH - 4)} ({seen[text]})"
    return chosen


def _key(form: tuple, alone: bool) -> tuple:
    """What a form shows (_render): a named one alone, its text (wherever it stands); else its text at its place."""
    kind, at, text, _count, _depth = form
    return (kind, text) if alone and not PLAIN.fullmatch(text) else (kind, at, text)


def _pieces(name: str) -> list[list[tuple[str, int, str, int, int]]]:
    """The name's template arguments and parameters as (kind '<' or '(', place, compact form, count, depth) per place:
    the whole argument first, then what is inside it (depth 0: a single-argument wrapper peeled; 1: a template of
    several arguments with all but its first or last elided, `BinaryFunctor<…, MulFunctor<float>>`; 2: that first or
    last argument alone)."""
    text = name.strip()
    outside = _top_level(text)
    params = max((at for at, char in outside if char == "("), default=len(text))
    opens = [at for at, char in outside if at < params and char == "<"]
    template = text[opens[-1] + 1 : params].rstrip().removesuffix(">") if opens else ""
    parameters = text[params + 1 :].rstrip().removesuffix(")") if params < len(text) else ""
    places = []
    for kind, listed in (("<", template), ("(", parameters)):
        arguments = _split(listed)
        for at, argument in enumerate(arguments):
            found: dict[str, int] = {}  # form -> its depth (the least when found twice)
            queue = [(_compact(argument), 0)]
            while queue:
                form, depth = queue.pop(0)
                if not form or form in found:
                    continue
                found[form] = depth
                # A lambda in a template function: `masked_scale_kernel(float, bool)`, `masked_scale_kernel<bool, ...>`
                called = re.fullmatch(r"([A-Za-z_]\w*)(<.*>)(\([^()]*\))", form)
                if called:
                    function, bracketed, types = called.groups()
                    queue += [(function + types, max(depth, 1)), (function + bracketed, max(depth, 1))]
                inner = re.fullmatch(r"([A-Za-z_]\w*)<(.*)>", form)
                every = _split(inner.group(2)) if inner else []
                parts = [part for part in every if not PLAIN.fullmatch(part)]  # `float` alone tells little
                if len(every) == 1:
                    queue += [(part, depth) for part in parts]
                elif inner:
                    head, *_middle, tail = every
                    for elided in (f"{inner.group(1)}<{head}, …>", f"{inner.group(1)}<…, {tail}>"):
                        found.setdefault(elided, max(depth, 1))  # not taken apart again
                    queue += [(part, 2) for part in parts[:1] + parts[-1:]]
            if found:
                places.append([(kind, at, form, len(arguments), depth) for form, depth in found.items()])
    return places or [[("<", 0, text, 1, 0)]]


def _combinations(places: list[list[tuple]]) -> list[tuple[tuple, ...]]:
    """One form, then pairs of forms at two places, each in the order of _weight."""
    singles = sorted((form for forms in places for form in forms), key=_weight)
    pairs = [tuple(sorted(pair, key=lambda f: (f[0] != "<", f[1]))) for a, b in itertools.combinations(places, 2)
             for pair in itertools.product(a, b)]  # fmt: skip
    by_weight = sorted(pairs, key=lambda pair: tuple(map(sum, zip(*map(_weight, pair), strict=True))))
    return [(form,) for form in singles] + by_weight


def _weight(form: tuple) -> tuple[int, int, int, int, int]:
    """The order forms are tried in: named before plain (a number or a bare type tells little alone), template
    arguments before parameters, the earlier place (the functor comes before the launch details), the shallower (see
    _pieces), the shorter."""
    kind, at, text, _count, depth = form
    return (bool(PLAIN.fullmatch(text)), kind == "(", at, depth, len(text))


def _render(short: str, combo: tuple[tuple, ...]) -> str:
    """The short name with the chosen forms: a named single form alone in brackets, plain ones at their places."""
    kind, _at, text, _count, _depth = combo[0]
    if len(combo) == 1 and not PLAIN.fullmatch(text):
        return f"{short}{kind}{text}{'>' if kind == '<' else ')'}"
    out = short
    for bracket in ("<", "("):
        parts = [f for f in combo if f[0] == bracket]
        if parts:
            cells, last = [], -1
            for _kind, at, form, _n, _depth in parts:
                cells += (["…"] if at > last + 1 else []) + [form]
                last = at
            cells += ["…"] if last < parts[-1][3] - 1 else []
            out += f"{bracket}{', '.join(cells)}{'>' if bracket == '<' else ')'}"
    return out


def _compact(argument: str) -> str:
    """A template argument or parameter without what tells nothing apart (COMPACT_STEPS)."""
    text = argument.strip()
    for pattern, replacement in COMPACT_STEPS:
        text = pattern.sub(replacement, text)
    return text.strip()


def _split(text: str) -> list[str]:
    """The top-level comma-separated parts of a template argument or parameter list."""
    if not text.strip():
        return []
    commas = [at for at, char in _top_level(text) if char == ","]
    return [text[a + 1 : b].strip() for a, b in zip([-1, *commas], [*commas, len(text)], strict=True)]


def _cut(text: str, width: int = SHORT_WIDTH) -> str:
    """The text within `width` characters: its end replaced by '…' when longer."""
    return text if len(text) <= width else text[: width - 1] + "…"
