"""Every export the kit runs (the wrapper at a rank's end, 'analyze' of a .nsys-rep, the cluster map through the same
opener) asks for the NVTX payload values (--include-blobs=true: NCCL's message sizes) when that nsys has the flag, as
its 'nsys export --help' says, asked once per binary: a stand-in nsys with the flag and one without."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsyskit.analysis.read import nsys
from nsyskit.ranks import nsysargs

# A stand-in 'nsys': 'export --help' lists the flags (--include-blobs only when $HAS_FLAG is 1) and counts the
# times it was asked; 'export' records its arguments and writes the --output file.
STAND_IN = """#!/usr/bin/env python3
import os, re, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
if args[:1] == ["profile"]:  # runs the application, leaves a report named as --output says
    output = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
    code = subprocess.run([a for a in args[1:] if not a.startswith("--")]).returncode
    open(re.sub(r"%q\\{(\\w+)\\}", lambda m: os.environ[m[1]], output) + ".nsys-rep", "w").write("report")
    sys.exit(code)
elif args[:1] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.2.1.130-252135690618v0")
elif args[:2] == ["export", "--help"]:
    open(os.path.join(here, "asked"), "a").write("x")
    print("usage: nsys export [<args>] [nsys-rep-file]")
    print("  --force-overwrite=<true|false>")
    if os.environ.get("HAS_FLAG") == "1":
        print("  --include-blobs=<true|false>   Controls if NVTX extended payloads are exported as binary data.")
    print("  --include-json=<true|false>")
elif args[:1] == ["export"]:
    open(os.path.join(here, "exported"), "a").write(" ".join(args) + "\\n")
    out = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
    if os.environ.get("EXPORT_FROM"):  # a prepared export stands for what nsys would write
        open(out, "wb").write(open(os.environ["EXPORT_FROM"], "rb").read())
    else:
        open(out, "w").write("sqlite")
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The stand-in nsys, first on PATH; the per-binary answers forgotten before and after."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "nsys").write_text(STAND_IN)
    (folder / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setattr(nsysargs, "_exports_payloads", {})
    return folder


@pytest.mark.parametrize("has_flag", [True, False])
def test_analyze_exports_the_payloads_when_that_nsys_can(stand_in, tmp_path, monkeypatch, has_flag):
    monkeypatch.setenv("HAS_FLAG", "1" if has_flag else "0")
    reports = []
    for name in ("a_rank_0", "a_rank_1"):
        (rep := tmp_path / f"{name}.nsys-rep").write_bytes(b"report")
        reports.append(rep)
        assert nsys.export_sqlite(rep) == rep.with_suffix(".sqlite")
    exported = (stand_in / "exported").read_text().splitlines()
    assert len(exported) == 2
    for line, rep in zip(exported, reports, strict=True):
        assert line.startswith("export --type=sqlite") and line.endswith(str(rep))
        assert ("--include-blobs=true" in line.split()) == has_flag
    assert (stand_in / "asked").read_text() == "x"  # asked once for the two exports of one binary


@pytest.mark.parametrize("has_flag", [True, False])
def test_the_wrapper_exports_the_payloads_when_that_nsys_can(stand_in, tmp_path, monkeypatch, has_flag):
    monkeypatch.setenv("HAS_FLAG", "1" if has_flag else "0")
    from test_nsys_wrapper import wrapper  # the wrapper script loaded as a module

    monkeypatch.setattr(wrapper.nsysargs, "_exports_payloads", {})  # the image's copy of the module (same file)
    base = tmp_path / "reports" / "j_node0_rank0_h"
    base.parent.mkdir()
    Path(f"{base}.nsys-rep").write_bytes(b"report")
    ident = {"NSYSKIT_RANK": "0", "NSYSKIT_LOCAL_RANK": "0", "NSYSKIT_NODE": "0"}
    assert wrapper.finish_report({"NSYSKIT_NSYS": str(stand_in / "nsys")}, ident, str(base)) == []
    (line,) = (stand_in / "exported").read_text().splitlines()
    assert ("--include-blobs=true" in line.split()) == has_flag
    assert Path(f"{base}.sqlite").read_text() == "sqlite"


def test_an_nsys_that_cannot_be_asked_exports_without_the_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(nsysargs, "_exports_payloads", {})
    missing = str(tmp_path / "no-such-nsys")
    assert nsysargs.export_args(missing, "out.sqlite", "r.nsys-rep") == [
        missing, "export", "--type=sqlite", "--force-overwrite=true", "--output=out.sqlite", "r.nsys-rep"
    ]  # fmt: skip


@pytest.mark.parametrize("has_flag", [True, False])
def test_a_sqlite_exported_without_the_payloads_is_exported_again_once_from_its_report(
    stand_in, tmp_path, monkeypatch, capsys, has_flag
):
    """A run folder holding X.sqlite made without --include-blobs beside X.nsys-rep: with an nsys that has the flag,
    analyze uses a fresh export with the payloads (made once into the cache, said on the terminal) and the sizes are
    known; without it, the user's export is read and its NVTX read says how to re-export."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent / "analysis"))  # the analysis tests' fixtures
    from nccl_payloads import nccl_export
    from nsys_fixtures import write_export

    from nsyskit.analysis.read.discover import open_export
    from nsyskit.analysis.trace import RankTrace

    full = write_export(tmp_path / "full.sqlite", nccl_export("2.28", "blob"))
    bare = nccl_export("2.28", "blob")
    for r in bare.ranges:
        r.blob = None  # the schema tables stay: what nsys exports without the flag
    run = tmp_path / "run"
    run.mkdir()
    write_export(run / "job_rank_0.sqlite", bare)
    (run / "job_rank_0.nsys-rep").write_bytes(b"report")
    monkeypatch.setenv("EXPORT_FROM", str(full))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HAS_FLAG", "1" if has_flag else "0")
    for _analyze in range(2):  # the second reuses the cached export
        reader = open_export(run / "job_rank_0.sqlite")
        try:
            ops = RankTrace(0, run / "job_rank_0.sqlite", reader).nccl_operations()
            warnings = list(reader.warnings)
            path = reader.path
        finally:
            reader.close()
        if has_flag:
            assert path.parent == tmp_path / "cache" / "nsyskit" / "exports" and path.name.endswith(".payloads.sqlite")
            assert set(ops["size_origin"]) == {"payload"} and warnings == []
        else:
            assert path == run / "job_rank_0.sqlite" and set(ops["size_origin"]) == {""}
            assert any("fix: nsys export --type sqlite --include-blobs=true" in w for w in warnings)
    exported = (stand_in / "exported").read_text().splitlines() if (stand_in / "exported").exists() else []
    assert len(exported) == (1 if has_flag else 0)  # once: the second analyze reuses the cached export
    said = capsys.readouterr().err
    assert ("exported without NCCL's payload values" in said) == has_flag


@pytest.mark.parametrize("has_flag", [True, False])
def test_the_ranks_status_says_whether_its_export_holds_the_payloads(stand_in, tmp_path, monkeypatch, has_flag):
    """A whole rank through the wrapper (the stand-in records and exports): its status (what run.json gathers)
    records 'exported' or 'not exported' as that nsys could."""
    import json
    import subprocess
    import sys

    from test_nsys_wrapper import WRAPPER_PATH

    reports = tmp_path / "reports"
    env = {"PATH": f"{stand_in}:/usr/bin:/bin", "HAS_FLAG": "1" if has_flag else "0", "NSYSKIT_REPORT_DIR": str(reports),
           "NSYSKIT_JOB_ID": "p1", "RANK": "0", "LOCAL_RANK": "0", "NSYSKIT_TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    done = subprocess.run([sys.executable, str(WRAPPER_PATH), sys.executable, "-c", "print('trained')"], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = (reports / "logs").glob("p1_node0_rank0_*.status.json")
    status = json.loads(path.read_text())
    assert status["sqlite"] and status["nccl_payloads"] == ("exported" if has_flag else "not exported")
    (line,) = (stand_in / "exported").read_text().splitlines()
    assert ("--include-blobs=true" in line.split()) == has_flag
