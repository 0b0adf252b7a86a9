"""NCCL's extended NVTX payloads (2.16+): sizes and communicator sizes from binaryData blobs decoded through the schema
tables, exactly as from the same payloads' jsonText; busbw with nccl-tests' size convention; blobs that cannot be
decoded skipped and counted; exports without payload values say how to get them."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from nccl_payloads import COMMS, LAYOUTS, blob, nccl_export, planted_calls
from nsys_fixtures import write_export
from real_exports import decompress

from nsyskit.analysis.read.discover import open_export
from nsyskit.analysis.trace import RankTrace, analyze_run

OPS = {"ncclAllReduce": "AllReduce", "ncclAllGather": "AllGather", "ncclReduceScatter": "ReduceScatter",
       "ncclBroadcast": "Broadcast", "ncclSend": "Send/Recv", "ncclAlltoAll": "AllToAll"}  # fmt: skip


def operations(path):
    """The rank's collectives table and the export's warnings."""
    reader = open_export(path)
    try:
        table = RankTrace(0, reader.path, reader).nccl_operations()
        return table, list(reader.warnings)
    finally:
        reader.close()


@pytest.mark.parametrize("layout", ["2.19", "2.28"])
def test_blob_and_json_forms_of_one_trace_give_the_same_collectives_table(tmp_path, layout):
    blobs, _ = operations(write_export(tmp_path / "blob.sqlite", nccl_export(layout, "blob")))
    jsons, _ = operations(write_export(tmp_path / "json.sqlite", nccl_export(layout, "json")))
    assert len(blobs) == len(jsons) == len([c for c in planted_calls() if c.api in LAYOUTS[layout]])
    for column in blobs.columns:
        if column != "size_origin":
            assert str(blobs[column].tolist()) == str(jsons[column].tolist()), column
    assert set(blobs["size_origin"]) == {"payload"} and set(jsons["size_origin"]) == {"json"}


@pytest.mark.parametrize("layout", ["2.19", "2.28"])
def test_blob_sizes_and_communicator_sizes_are_the_planted_ones(tmp_path, layout):
    table, warnings = operations(write_export(tmp_path / "r.sqlite", nccl_export(layout, "blob")))
    calls = [c for c in planted_calls() if c.api in LAYOUTS[layout]]
    assert warnings == []
    assert table["op"].tolist() == [OPS[c.api] for c in calls]
    assert table["size_bytes"].tolist() == [float(c.size) for c in calls]
    # 2.25+ states each call's communicator, whose size its init payload states; 2.16-2.24 states none (0: the
    # world size stands in later)
    assert table["nranks"].tolist() == [COMMS[c.comm] if layout == "2.28" else 0 for c in calls]
    assert set(table["source"]) == {"gpu"}


def test_busbw_follows_nccl_tests_size_convention_per_collective(tmp_path):
    """One 2.28 rank: each row's busbw checked against a value computed by hand from the planted size, kernel time and
    the communicator's size (8 or 2): nccl-tests' size is n x the per-rank payload for AllGather, ReduceScatter and
    AlltoAll; busbw factor 2(n-1)/n for AllReduce, (n-1)/n for those three, 1 for Broadcast and Send/Recv."""
    write_export(tmp_path / "run_rank_0.sqlite", nccl_export("2.28", "blob"))
    analysis = analyze_run([tmp_path], workers=1)
    rows = {(r["op"], r["nranks"]): r for r in analysis.nccl_sizes.rows()}
    by_hand = {  # (op, n): (payload bytes, kernel ns) planted -> busbw in GB/s (bytes per ns)
        ("AllReduce", 8): 4096 / 20_000 * 2 * 7 / 8,
        ("AllReduce", 2): 5120 / 23_000 * 2 * 1 / 2,
        ("AllGather", 8): 65536 * 8 / 27_000 * 7 / 8,
        ("AllGather", 2): 66560 * 2 / 30_000 * 1 / 2,
        ("ReduceScatter", 8): 1048576 * 8 / 34_000 * 7 / 8,
        ("ReduceScatter", 2): 1049600 * 2 / 37_000 * 1 / 2,
        ("Broadcast", 8): 16777216 / 41_000,
        ("Broadcast", 2): 16778240 / 44_000,
        ("Send/Recv", 8): 268435456 / 48_000,
        ("Send/Recv", 2): 268436480 / 51_000,
        ("AllToAll", 8): 4294967296 * 8 / 55_000 * 7 / 8,
        ("AllToAll", 2): 4294968320 * 2 / 58_000 * 1 / 2,
    }
    assert set(rows) == set(by_hand)
    for key, busbw in by_hand.items():
        assert rows[key]["busbw_median_gbps"] == pytest.approx(busbw, rel=1e-12), key
        assert rows[key]["n_source"] == "report"
    from nsyskit.analysis.present.sections import n_source_note

    note = n_source_note(analysis.nccl_sizes, analysis.nccl.sums)  # under the terminal table and in report.html
    assert note.endswith("nranks from the report's NCCL payloads; message sizes from NCCL's payloads (12)")
    assert analysis.to_json()["nccl_sizes_from"] == {"0": {"payload": 12, "json": 0, "log": 0}}  # analysis.json


def test_the_cluster_map_and_merge_give_analyzes_collectives_table(tmp_path):
    from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts

    for rank in range(2):
        write_export(tmp_path / f"run_rank_{rank}.sqlite", nccl_export("2.28", "blob"))
    direct = analyze_run([tmp_path], workers=1).nccl_sizes
    map_reports([tmp_path], tmp_path / "parts")
    merged = merge_parts(tmp_path / "parts")[0].nccl_sizes
    assert str(list(direct.rows())) == str(list(merged.rows()))
    assert {r["n_source"] for r in merged.rows()} == {"report"} and {r["nranks"] for r in merged.rows()} == {2, 8}


def test_blobs_without_a_schema_or_of_the_wrong_length_are_skipped_and_counted_once(tmp_path):
    export = nccl_export("2.28", "blob")
    ranges = [r for r in export.ranges if r.text == "ncclAllReduce"]
    ranges[0].blob = ranges[0].blob[:-4]  # shorter than its schema says
    ranges[1].blob = blob("2.28", "ncclAllReduce", {"NCCL communicator ID": 1, "Message size [bytes]": 8,
                                                   "Reduction operation": 0}).replace(b"\x05\x00\x00\x01", b"\x63\x00\x00\x01", 1)  # fmt: skip
    table, warnings = operations(write_export(tmp_path / "r.sqlite", export))
    allreduce = table["op"] == "AllReduce"
    assert np.isnan(table["size_bytes"][allreduce]).all()  # unknown, never a wrong number
    assert (table["size_bytes"][~allreduce] > 0).all()
    skipped = [w for w in warnings if "payload blobs" in w]
    assert len(skipped) == 1 and "2 of 14 NVTX payload blobs" in skipped[0] and "fix: nsys export" in skipped[0]


def test_a_header_that_disagrees_with_its_schemas_size_is_skipped(tmp_path):
    export = nccl_export("2.28", "blob")
    first = next(r for r in export.ranges if r.text == "ncclAllGather")
    first.blob = first.blob[:16] + (99).to_bytes(8, "little") + first.blob[24:]  # payload size field: not 16
    table, warnings = operations(write_export(tmp_path / "r.sqlite", export))
    assert np.isnan(table["size_bytes"][table["op"] == "AllGather"][0])
    assert any("1 of 14 NVTX payload blobs" in w for w in warnings)


def test_the_disputed_header_field_is_never_read(tmp_path):
    export = nccl_export("2.28", "blob")
    for r in export.ranges:
        r.blob = r.blob[:24] + (0xDEADBEEF).to_bytes(8, "little") + r.blob[32:]
    table, warnings = operations(write_export(tmp_path / "r.sqlite", export))
    assert warnings == [] and not np.isnan(table["size_bytes"]).any()


def test_blob_and_json_ranges_in_one_trace_share_their_communicators(tmp_path):
    """A JSON init range states the communicator's size; the blob collectives name the communicator: n joins them."""
    blob_form, json_form = nccl_export("2.28", "blob"), nccl_export("2.28", "json")
    json_inits = [r for r in json_form.ranges if r.text == "ncclCommInitRank"]
    blob_form.ranges = json_inits + [r for r in blob_form.ranges if r.text != "ncclCommInitRank"]
    table, _ = operations(write_export(tmp_path / "r.sqlite", blob_form))
    calls = planted_calls()
    assert table["nranks"].tolist() == [COMMS[c.comm] for c in calls]


BLOBLESS = ["nsysai_mfu_2gpu_before.sqlite", "nsysai_mfu_2gpu_after.sqlite", "h100_gpt2_ddp_nsys2025.3.1.sqlite"]


@pytest.mark.parametrize("name", BLOBLESS)
def test_real_exports_with_payload_schemas_but_no_values_say_how_to_export_them(name, real_exports_dir):
    """nsys 2025.3 and 2026.2 exports of NCCL 2.25+/2.28 runs: NCCL ranges and payload schemas, binaryData all NULL
    (exported without --include-blobs). One warning names the fix; the analysis goes on with unknown sizes."""
    path = decompress(name, real_exports_dir)
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM NVTX_PAYLOAD_SCHEMAS").fetchone()[0] > 0
    assert con.execute("SELECT count(binaryData) FROM NVTX_EVENTS").fetchone()[0] == 0
    con.close()
    table, warnings = operations(path)
    missing = [w for w in warnings if "carry no payload values" in w]
    assert len(missing) == 1
    assert missing[0].endswith(f"fix: nsys export --type sqlite --include-blobs=true --force-overwrite=true "
                               f"{path.stem}.nsys-rep")  # fmt: skip
    assert len(table) and np.isnan(table["size_bytes"]).all()


def test_an_export_whose_nccl_ranges_carry_values_gets_no_missing_payload_warning(tmp_path):
    for form in ("blob", "json"):
        _, warnings = operations(write_export(tmp_path / f"{form}.sqlite", nccl_export("2.28", form)))
        assert not [w for w in warnings if "carry no payload values" in w]
