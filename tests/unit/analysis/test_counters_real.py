"""The GPU metrics of a real A100 export (76,502 JSON generic events, nsys 2022.4) against SQL over the JSON itself."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from real_exports import decompress

from nsyskit.analysis.trace import analyze_run

A100 = "aiprofiler_a100_secondOptimization.sqlite"


# Each sample holds its value until the next one (the last holds for no time), clipped to the window: the
# time-weighted mean, the time covered, the samples that hold some time and their max of every field, in one SQL
# scan over the JSON text (its own JSON functions: an independent reading of the values).
def sql(fields: int) -> str:
    values = ", ".join(f"CAST(coalesce(json_extract(data, :p{i}), json_extract(data, :s{i})) AS REAL) AS v{i}"
                       for i in range(fields))  # fmt: skip
    stats = ", ".join(f"sum(v{i} * (b - a)) / sum(b - a), max(v{i})" for i in range(fields))
    return f"""
WITH samples AS (
    SELECT rawTimestamp AS t, LEAD(rawTimestamp) OVER (ORDER BY rawTimestamp) AS next, {values}
    FROM GENERIC_EVENTS WHERE typeId = :type
), clipped AS (
    SELECT max(t, :low) AS a, min(next, :high) AS b, * FROM samples WHERE next IS NOT NULL
)
SELECT sum(b - a), count(*), {stats} FROM clipped WHERE b > a
"""


@pytest.fixture(scope="module")
def counters(a100):
    return analyze_run([a100]).counters


@pytest.fixture(scope="module")
def a100(tmp_path_factory):
    return decompress(A100, tmp_path_factory.mktemp("a100"))


def test_gpu_metric_means_equal_sql_over_the_json(a100, counters):
    con = sqlite3.connect(a100)
    # The analyzed window of a report without 'step N' ranges: its kernels' span
    low, high = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    (type_id,) = con.execute(
        "SELECT t.typeId FROM GENERIC_EVENT_TYPES t JOIN GENERIC_EVENT_SOURCES s USING (sourceId) "
        "WHERE json_extract(s.data, '$.Name') = 'GpuMetrics'"
    ).fetchone()
    names = [n for (n,) in con.execute(
        "SELECT json_extract(f.value, '$.Name') FROM GENERIC_EVENT_TYPES t, json_each(t.data, '$.Fields') f "
        "WHERE t.typeId = ?", (type_id,))]  # fmt: skip
    assert len(names) == 22 and "Tensor Active" in names and "SM Active" in names
    assert sorted(counters["metric"]) == sorted(names)
    paths = {f"p{i}": '$."' + name.replace('"', '\\"') + '"' for i, name in enumerate(names)}
    # ... and as nsys spells the key ("Vertex\/Tess"): SQLite before 3.45 matches a key's text as it is
    paths |= {f"s{i}": path.replace("/", "\\/") for i, path in enumerate(paths.values())}
    covered, samples, *stats = con.execute(
        sql(len(names)), {**paths, "type": type_id, "low": low, "high": high}
    ).fetchone()
    assert samples > 70_000
    for i, name in enumerate(names):
        mean, highest = stats[2 * i], stats[2 * i + 1]
        row = counters.take(counters["metric"] == name)
        assert row["device"][0] == "GPU 0"
        assert row["window_start_ns"][0] == low and row["window_end_ns"][0] == high
        assert row["mean"][0] == pytest.approx(mean, rel=1e-12), name
        assert (row["covered_ns"][0], row["samples"][0], row["max"][0]) == (covered, samples, highest), name


def test_gpu_metric_percentiles_are_time_weighted(a100, counters):
    """p50 and p95: the smallest value holding at least half (95%) of the window's time, from the JSON again."""
    con = sqlite3.connect(a100)
    low, high = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    rows = con.execute(
        "SELECT rawTimestamp, CAST(json_extract(data, '$.\"SM Active\"') AS REAL) FROM GENERIC_EVENTS ORDER BY 1"
    ).fetchall()
    times, values = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    weights = np.clip(np.minimum(times[1:], high) - np.maximum(times[:-1], low), 0, None)
    by_value = sorted(zip(values[:-1], weights, strict=True))
    held = np.cumsum([w for _v, w in by_value])
    row = counters.take(counters["metric"] == "SM Active")
    for q, column in ((0.5, "p50"), (0.95, "p95")):
        expected = next(v for (v, _w), cum in zip(by_value, held, strict=True) if cum >= q * held[-1])
        assert row[column][0] == expected


def test_the_mean_while_kernels_run_is_over_the_union_of_the_kernels(a100, counters):
    """busy_mean (what tensor_cores_idle reads): each sample weighted by the time it overlaps any kernel, computed
    here by a plain walk over the kernels' union and the samples."""
    con = sqlite3.connect(a100)
    kernels = sorted(con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end > start"))
    union: list[list[int]] = []
    for start, end in kernels:
        if union and start <= union[-1][1]:
            union[-1][1] = max(union[-1][1], end)
        else:
            union.append([start, end])
    low, high = union[0][0], union[-1][1]
    rows = con.execute(
        "SELECT rawTimestamp, CAST(json_extract(data, '$.\"Tensor Active\"') AS REAL) FROM GENERIC_EVENTS ORDER BY 1"
    ).fetchall()
    total = weight = 0.0
    k = 0
    for (t, v), (next_t, _v) in zip(rows, rows[1:], strict=False):
        a, b = max(t, low), min(next_t, high)
        while k < len(union) and union[k][1] <= a:
            k += 1
        j = k
        while j < len(union) and union[j][0] < b:
            inside = max(0, min(b, union[j][1]) - max(a, union[j][0]))
            total, weight = total + v * inside, weight + inside
            j += 1
    row = counters.take(counters["metric"] == "Tensor Active")
    assert row["busy_mean"][0] == pytest.approx(total / weight, rel=1e-9)
