"""NVTX ranges whose names differ only by a trailing step or iteration number are one row ('step N'), on every real
export; any other trailing number ('layer_3', 'MPI Rank 3', 'TBackward0') keeps its own row."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

from nsyskit.analysis import trace
from nsyskit.analysis.compute import analyzers

RANGE_TYPES = (59, 60)  # push/pop and start/end ranges: the ones the NVTX summary counts


def range_texts(export) -> Counter:
    """Each NVTX range text of an export and how many ranges carry it, read with sqlite3 (not the kit's reader)."""
    with sqlite3.connect(export) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "NVTX_EVENTS" not in tables:
            return Counter()
        columns = {row[1] for row in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
        text = "COALESCE(e.text, s.value)" if "textId" in columns else "e.text"
        join = "LEFT JOIN StringIds s ON s.id = e.textId" if "textId" in columns else ""
        rows = db.execute(f"SELECT {text} FROM NVTX_EVENTS e {join} WHERE e.eventType IN {RANGE_TYPES} "
                          "AND e.end IS NOT NULL")  # fmt: skip
        return Counter(row[0] for row in rows if row[0] is not None)


def test_step_numbered_ranges_are_one_row_on_every_real_export(real_export):
    results = trace.analyze_file(0, real_export)
    rows = [row for result in results for row in result["nvtx"].rows()]
    texts = range_texts(real_export)
    for name in {row["name"] for row in rows}:
        assert not analyzers.STEP_NUMBER.search(name), name  # no row is one step's: each family is one 'N' row
    family = re.compile(r"[A-Za-z][\s_:#-]*N$")  # a row grouped by its step number (in the default domain)
    family_rows = {row["name"] for row in rows if "@" not in row["name"] and family.search(row["name"])}
    for name in family_rows:  # the ranges of one family, counted in the file, are the row's instances on all ranks
        numbered = re.compile(re.escape(name[:-1]) + r"\d+\s*")
        counted = sum(count for text, count in texts.items() if numbered.fullmatch(text))
        assert counted and sum(row["instances"] for row in rows if row["name"] == name) == counted, name
    for text in texts:  # a trailing number after any other word is the user's name: a row of its own
        if re.search(r"\d\s*$", text) and not analyzers.STEP_NUMBER.search(text) and "," not in text:
            assert text in {row["name"] for row in rows}, text


def test_the_kits_own_export_shows_step_n_once_and_the_projection_keeps_step(real_exports_dir):
    from real_exports import decompress

    export = decompress("h100_gpt2_ddp_nsys2025.3.1.sqlite", real_exports_dir)  # tests/data/real: in every clone
    (result,) = trace.analyze_file(0, export)
    names = result["nvtx"]["name"].tolist()
    steps = sum(count for text, count in range_texts(export).items() if re.fullmatch(r"step \d+", text))
    assert names.count("step N") == 1 and steps > 1
    assert result["nvtx"]["instances"][names.index("step N")] == steps
    assert "step" in result["nvtx_gpu"]["name"].tolist() and len(result["steps"]) > 0  # step times still found
