"""counterstats.c bound with ctypes: a series' weighted quantiles by counting and time-weighted sums (numpy's), the
time bins' running sums and maxima of the series sharing their times in one walk, and how much of each sample a union
covers, or None to use numpy.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_COUNTERSTATS=0, every function here returns None and its caller's numpy path gives the same numbers.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_COUNTERSTATS"
NOT_WHOLE = 1  # nsk_quantiles: a value is not a whole number

_loaded: list = []  # [(quantiles, exact_weights, bin_walk, covered, weighted_sums) or None] once looked for in this process


def functions():
    """The compiled (nsk_quantiles, nsk_exact_weights, nsk_bin_walk, nsk_covered, nsk_weighted_sums), typed; None when they cannot be built here."""
    size, pointer, real = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    return native.load(_loaded, "counterstats", DISABLE_VARIABLE, {
        "nsk_quantiles": (ctypes.c_int, [size, pointer, pointer, ctypes.c_int, real, real, size, pointer, pointer]),
        "nsk_exact_weights": (ctypes.c_int, [size, pointer]),
        "nsk_bin_walk": (ctypes.c_int, [size, pointer, size, pointer, size, pointer, pointer, pointer, size,
                                        pointer, pointer, pointer]),
        "nsk_covered": (ctypes.c_int, [size, pointer, pointer, size, pointer, pointer, pointer]),
        "nsk_weighted_sums": (ctypes.c_int, [size, pointer, size, pointer, pointer]),
    })  # fmt: skip


def _doubles(values: np.ndarray) -> np.ndarray:
    """`values` as a contiguous float64 array (no copy when it is one)."""
    return np.ascontiguousarray(values, dtype=np.float64)


def exact_weights(weights: np.ndarray) -> bool:
    """Whether the weights are whole numbers whose total is below 2^52 (every sum of them exact: quantiles() may
    count them as integers); False without the helper."""
    compiled = functions()
    weights = _doubles(weights)
    return compiled is not None and bool(compiled[1](len(weights), weights.ctypes.data))


def quantiles(
    values: np.ndarray, weights: np.ndarray, exact: bool, low: float, high: float, qs: tuple[float, ...]
) -> list[float] | bool | None:
    """The weighted quantiles of whole-number `values` (min `low` < max `high`, spanning less than 2^32), as
    counters._quantiles counts them (`exact`: exact_weights(weights)); False where a value is not a whole number
    (numpy sorts); None: use numpy."""
    compiled = functions()
    if compiled is None or len(values) != len(weights) or not len(values):
        return None
    values, weights, wanted = _doubles(values), _doubles(weights), np.asarray(qs, dtype=np.float64)
    found = np.empty(len(qs))
    done = compiled[0](len(values), values.ctypes.data, weights.ctypes.data, int(exact), low, high, len(qs),
                       wanted.ctypes.data, found.ctypes.data)  # fmt: skip
    return found.tolist() if done == 0 else False if done == NOT_WHOLE else None


def bin_walk(values: list[np.ndarray], weights: np.ndarray, marks: np.ndarray, tail: np.ndarray, first: np.ndarray,
             spans: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """For series of values sharing their samples' times (weights: the time each sample holds), a row per series:
    (the integrals up to the points where `marks` samples start before and the last holds on for `tail`, as
    counters._Clipped.integral finds them; each of `bins` bins' max of the values of the samples overlapping it:
    sample i overlaps first[i] .. first[i] + spans[i] - 1, -inf where none); None: use numpy."""
    compiled = functions()
    if compiled is None or not len(weights) == len(first) == len(spans) or len(marks) != len(tail):
        return None
    if any(len(v) != len(weights) for v in values):
        return None
    values, weights = [_doubles(v) for v in values], _doubles(weights)
    marks, tail, first, spans = (np.ascontiguousarray(a, dtype=np.int64) for a in (marks, tail, first, spans))
    integral, highest = np.empty((len(values), len(marks))), np.empty((len(values), bins))
    pointers = (ctypes.c_void_p * max(len(values), 1))(*(v.ctypes.data for v in values))
    done = compiled[2](len(values), pointers, len(weights), weights.ctypes.data, len(marks), marks.ctypes.data,
                       tail.ctypes.data, integral.ctypes.data, bins, first.ctypes.data, spans.ctypes.data,
                       highest.ctypes.data)  # fmt: skip
    return (integral, highest) if done == 0 else None


def covered(union_start: np.ndarray, union_end: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """intervals.covered's numbers (how much of each [start, end) the disjoint sorted union covers) as float64 (whole
    ns), in one walk where the spans come in time order; None: use numpy."""
    compiled = functions()
    if compiled is None or len(union_start) != len(union_end) or len(start) != len(end):
        return None
    union_start, union_end, start, end = (np.ascontiguousarray(a, dtype=np.int64)
                                          for a in (union_start, union_end, start, end))  # fmt: skip
    out = np.empty(len(start))
    done = compiled[3](len(union_start), union_start.ctypes.data, union_end.ctypes.data, len(start),
                       start.ctypes.data, end.ctypes.data, out.ctypes.data)  # fmt: skip
    return out if done == 0 else None


def weighted_sums(values: np.ndarray, weights: list[np.ndarray]) -> list[float] | None:
    """[(values * w).sum() for w in weights] (up to 4) as numpy adds them (its pairwise order), with no array of
    products; None: use numpy."""
    compiled = functions()
    if compiled is None or not 1 <= len(weights) <= 4 or any(len(w) != len(values) for w in weights):
        return None
    values, weights = _doubles(values), [_doubles(w) for w in weights]
    pointers = (ctypes.c_void_p * len(weights))(*(w.ctypes.data for w in weights))
    out = np.empty(len(weights))
    done = compiled[4](len(values), values.ctypes.data, len(weights), pointers, out.ctypes.data)
    return out.tolist() if done == 0 else None
