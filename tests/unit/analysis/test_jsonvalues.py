"""The values of generic events' JSON objects: the C pass (native/jsonvals.c), numpy over the quotes and json.loads
give the same numbers; objects the fast paths cannot take go to json.loads."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest
from native_built import do_without, require_built

from nsyskit.analysis.read import jsonvalues
from nsyskit.native import jsonvals

FIELDS = ["SM Active", "Vertex/Tess/Geometry Warps In Flight", "GPC Clock Frequency", "Power"]


def joined(objects: list[str]) -> bytes:
    return "\x01".join(objects).encode()


def nsys_style(rows: list[list[object]]) -> bytes:
    """Objects as nsys 2022.4 writes them: indented, '/' escaped, every value a string."""
    return joined([json.dumps(dict(zip(FIELDS, map(str, row), strict=True)), indent=4).replace("/", "\\/")
                   for row in rows])  # fmt: skip


def loaded(text: bytes, count: int, fields=FIELDS) -> np.ndarray:
    return jsonvalues._loaded_values(text, count, fields, lambda line: None, "test")


def test_the_three_paths_agree_on_nsys_style_objects():
    require_built(jsonvals, jsonvals.function, "jsonvals")
    rng = np.random.default_rng(3)
    rows = [[int(a), int(b), 1_154_000_000 + int(c), float(d)] for a, b, c, d in
            zip(rng.integers(0, 101, 500), rng.integers(0, 9, 500), rng.integers(0, 10**6, 500), rng.random(500) * 300,
                strict=True)]  # fmt: skip
    text = nsys_style(rows)
    expected = np.array(rows, dtype=np.float64)
    for found in (jsonvals.values(text, 500, 4), jsonvalues._quoted_values(text, 500, FIELDS), loaded(text, 500)):
        assert found is not None and np.array_equal(found, expected)


@pytest.mark.parametrize(
    "objects",
    [
        [
            '{"SM Active": 12, "Vertex/Tess/Geometry Warps In Flight": -3.5e2, "GPC Clock Frequency": "7", "Power": null}',
            '{"SM Active": "x", "Vertex/Tess/Geometry Warps In Flight": true, "GPC Clock Frequency": 1e308, "Power": ""}',
        ],
        [
            '{"SM Active": 1, "Vertex/Tess/Geometry Warps In Flight": 2, "GPC Clock Frequency": 3, "Power": 4}',
            '{"Power": 4, "SM Active": 1, "Vertex/Tess/Geometry Warps In Flight": 2, "GPC Clock Frequency": 3}',
        ],
        [
            '{"SM Active": 1, "Vertex/Tess/Geometry Warps In Flight": 2, "GPC Clock Frequency": 3, "Power": 4}',
            '{"SM Active": 1, "Vertex/Tess/Geometry Warps In Flight": 2}',
            "not json",
        ],
        [  # quoted whole numbers around the 15 digits read in one pass, and strings that only start like one
            '{"SM Active": "007", "Vertex/Tess/Geometry Warps In Flight": "123456789012345", '
            '"GPC Clock Frequency": "1234567890123456", "Power": "12a"}',
            '{"SM Active": "", "Vertex/Tess/Geometry Warps In Flight": "99999999999999999999", '
            '"GPC Clock Frequency": "1e3", "Power": "-5"}',
        ],
    ],
    ids=["numbers, signs, null, text", "another key order", "missing pairs and no object", "quoted whole numbers"],
)
def test_any_object_gives_json_loads_numbers(objects):
    text = joined(objects)
    assert np.array_equal(jsonvalues.parse_values(text, len(objects), FIELDS, lambda line: None),
                          loaded(text, len(objects)), equal_nan=True)  # fmt: skip


def test_without_the_helper_the_numbers_are_the_same(monkeypatch):
    text = nsys_style([[5, 0, 1_000_000_000, 12.5], [100, 3, 999, 0]])
    with_helper = jsonvalues.parse_values(text, 2, FIELDS, lambda line: None)
    do_without(monkeypatch, jsonvals, jsonvals.function)
    assert np.array_equal(jsonvalues.parse_values(text, 2, FIELDS, lambda line: None), with_helper)
    assert with_helper.tolist() == [[5, 0, 1e9, 12.5], [100, 3, 999, 0]]


@pytest.mark.parametrize("split_at", [jsonvals.SPLIT_AT, 2], ids=["one thread", "two threads"])
def test_objects_at_spans_of_a_buffer_give_the_joined_objects_numbers(split_at, monkeypatch):
    """pagescan hands the objects over where they lie (other bytes between them); some laid out as the first one
    (read by comparing the bytes around their values), some not (other spaces, an escaped quote, a bare number);
    read by one thread, or the second half by another (laid out after the first object all the same)."""
    require_built(jsonvals, jsonvals.function, "jsonvals")
    monkeypatch.setattr(jsonvals, "SPLIT_AT", split_at)
    alike = [json.dumps(dict(zip(FIELDS, map(str, row), strict=True)), indent=4) for row in
             ([1, 22, 1_154_000_000, 3.5], [100, 0, 999, 0], [7, 7, 7, 7])]  # fmt: skip
    other = [alike[0].replace("    ", "  "), alike[1].replace('"3.5"', "-4e1"), alike[2].replace('"7"', '"7\\""', 1)]
    objects = [alike[0], other[0], alike[1], other[1], alike[2], other[2]]
    buffer = b"".join(b"\x00junk{\x00" + o.encode() for o in objects) + b"\x00"
    ends = [buffer.index(b"\x00", buffer.index(o.encode())) for o in objects]
    starts = [end - len(o.encode()) for end, o in zip(ends, objects, strict=True)]
    keep = ctypes.create_string_buffer(buffer, len(buffer))
    found = jsonvalues.parse_spans(ctypes.addressof(keep), len(buffer), np.array(starts), np.array(ends), FIELDS,
                                   lambda line: None)  # fmt: skip
    expected = loaded(joined(objects), len(objects))
    assert np.array_equal(found, expected, equal_nan=True)
    assert found[0].tolist() == [1, 22, 1_154_000_000, 3.5] and np.isnan(found[5][0])  # '7"' is no number
    assert found.flags.f_contiguous  # each field's values contiguous: the counters' series take them with no copy
    assert jsonvals.spans(ctypes.addressof(keep), len(buffer), np.array(starts), np.array(ends) + 2, 4) is None
