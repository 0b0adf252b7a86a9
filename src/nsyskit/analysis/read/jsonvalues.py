"""The values of many flat JSON objects (generic events' `data`, one field list per type) as a numeric matrix.

GPU metrics exports hold tens of thousands of objects like {"SM Active": "12", ...}: every key and value a quoted
string, keys in the type's order. Those are read by numpy over the bytes (the quotes' positions give every value's
span; integers are parsed column by column), ~10x faster than json.loads per object, or by one C pass
(native/jsonvals.c) where it is built; anything else (keys in another order per object, nested values) goes through
json.loads, with the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

SEPARATOR = b"\x01"  # between the objects (group_concat's separator: never in JSON text, which escapes controls)
QUOTE, ZERO = ord('"'), ord("0")
MAX_DIGITS = 18  # an int64 holds any 18-digit number


def parse_values(
    text: bytes, count: int, fields: list[str], warn: Callable[[str], None], where: str = ""
) -> np.ndarray:
    """A (count, len(fields)) float64 matrix: object i's value of field j (NaN where it has none or not a number).

    C first (native/jsonvals.c: objects whose keys are the first's, the first's keys the fields in order), then
    numpy over the quotes, then json.loads: the same numbers each way."""
    if _first_keys(text) == fields:
        from nsyskit.native import jsonvals

        found = jsonvals.values(text, count, len(fields))
        if found is not None:
            return found
    fast = _quoted_values(text, count, fields)
    return fast if fast is not None else _loaded_values(text, count, fields, warn, where)


def _first_keys(text: bytes) -> list[str] | None:
    """The keys of the first object, in order (None when it is not a JSON object)."""
    end = text.find(SEPARATOR)
    try:
        first = json.loads(text[: end if end >= 0 else len(text)])
    except ValueError:
        return None
    return list(first) if isinstance(first, dict) else None


def _quoted_values(text: bytes, count: int, fields: list[str]) -> np.ndarray | None:
    """The fast path: every object with the same keys in the same order, every value a quoted string; else None."""
    width = len(fields)
    if not count or not width or b'\\"' in text:
        return None
    raw = np.frombuffer(text, dtype=np.uint8)
    quotes = np.flatnonzero(raw == QUOTE)
    if len(quotes) != count * width * 4:
        return None
    if _first_keys(text) != fields:
        return None
    spans = quotes.reshape(count, width, 4)  # per key: key open, key close, value open, value close
    key_lengths = spans[:, :, 1] - spans[:, :, 0]
    if (key_lengths != key_lengths[0]).any():  # each object's keys as long as the first's, in its order
        return None
    starts, lengths = (spans[:, :, 2] + 1).ravel(), (spans[:, :, 3] - spans[:, :, 2] - 1).ravel()
    return _integers(raw, starts, lengths, text).reshape(count, width)


def _integers(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray, text: bytes) -> np.ndarray:
    """The numbers in the spans: digits parsed column by column; other texts (a sign, a point) by float()."""
    # Most counter values are one digit ("0"): those at once, then the longer ones column by column
    first = raw[starts].astype(np.int16) - ZERO
    plain = (lengths > 0) & (first >= 0) & (first <= 9)
    result = first.astype(np.float64)
    longer = np.flatnonzero(lengths > 1)
    if len(longer):
        at, size = starts[longer], lengths[longer]
        values = first[longer].astype(np.int64)
        ok = size <= MAX_DIGITS
        for column in range(1, min(int(size.max()), MAX_DIGITS)):
            inside = size > column
            digit = raw[np.minimum(at + column, len(raw) - 1)].astype(np.int64) - ZERO
            ok &= ~inside | ((digit >= 0) & (digit <= 9))
            values = np.where(inside, values * 10 + digit, values)
        result[longer] = values
        plain[longer] &= ok
    for index in np.flatnonzero(~plain):  # rare in GPU metrics: a float, a sign, an empty text
        result[index] = _number(text[starts[index] : starts[index] + lengths[index]])
    return result


def _number(text: bytes | str | object) -> float:
    """A JSON value as a number: numbers and numeric texts as they are, anything else NaN."""
    if isinstance(text, bool):
        return np.nan
    if isinstance(text, (int, float)):
        return float(text)
    try:
        return float(text) if isinstance(text, (bytes, str)) and text.strip() else np.nan
    except ValueError:
        return np.nan


def _loaded_values(text: bytes, count: int, fields: list[str], warn: Callable[[str], None], where: str) -> np.ndarray:
    """The general path: json.loads per object; objects that are not JSON objects are left out (NaN) and warned."""
    values = np.full((count, len(fields)), np.nan)
    bad = 0
    for row, chunk in enumerate(text.split(SEPARATOR)[:count]):
        try:
            found = json.loads(chunk)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            bad += 1
            continue
        values[row] = [_number(found.get(name)) for name in fields]
    if bad:
        warn(f"{where}: {bad} of {count} generic events hold no JSON object in `data` and were left out; fix: "
             "re-export the report with 'nsys export --type sqlite'")  # fmt: skip
    return values
