"""Progress of long waits (deploy --wait, enroot import): the phase and the time elapsed, on stderr."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from rich.console import Console

from nsyskit import console, enroot
from nsyskit.config import load_config
from nsyskit.errors import CommandError

ROOT = Path(__file__).resolve().parents[2]
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"


@pytest.fixture
def stderr(monkeypatch) -> io.StringIO:
    """What the kit prints on stderr during the test."""
    text = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=text, width=200, highlight=False), raising=False)
    return text


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0 s"), (59.9, "59 s"), (61, "1 min 01 s"), (3599, "59 min 59 s"), (3720, "1 h 02 min")]
)
def test_elapsed_reads_like_a_person_says_it(seconds, shown):
    assert console.elapsed(seconds) == shown


def test_a_line_when_the_phase_changes_and_one_every_interval_while_it_lasts(stderr):
    now = [100.0]
    phases = console.Phases("job 7", every_s=30, clock=lambda: now[0])
    for at, phase in [(100, "PENDING"), (110, "PENDING"), (125, "RUNNING"), (150, "RUNNING"), (156, "RUNNING"),
                      (170, "RUNNING"), (190, "COMPLETED")]:  # fmt: skip
        now[0] = at
        phases.update(phase)
    assert stderr.getvalue().splitlines() == [
        "• job 7: PENDING (0 s elapsed)",
        "• job 7: RUNNING (25 s elapsed)",
        "• job 7: RUNNING (56 s elapsed)",  # 30 s after the last line, still running
        "• job 7: COMPLETED (1 min 30 s elapsed)",
    ]


def stand_in_enroot(folder: Path, script: str) -> None:
    """An `enroot` on PATH that behaves as the script says (enroot itself cannot be installed here)."""
    folder.mkdir()
    program = folder / "enroot"
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)


def test_enroot_import_says_it_is_importing_and_when_it_is_done(tmp_path, monkeypatch, stderr):
    # "$3" is the --output path: the stand-in writes it after a while, as enroot does.
    stand_in_enroot(tmp_path / "bin", 'sleep 0.5; echo "[INFO] Fetching image" >&2; echo sqsh > "$3"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setattr(enroot, "IMPORT_POLL_S", 0.1)
    cfg = load_config(ROOT, overrides={"REGISTRY": ECR, "SLURM_SQSH": str(tmp_path / "k.sqsh")}, environ={})
    path, imported = enroot.import_image(cfg)
    assert imported and path.read_text() == "sqsh\n"
    lines = stderr.getvalue().splitlines()
    assert lines[0] == f"• enroot import of docker://{ECR}#nsyskit:latest: importing (0 s elapsed)"
    assert lines[-1].startswith(f"• enroot import of docker://{ECR}#nsyskit:latest: done (")


def test_enroot_import_failure_carries_enroot_own_words(tmp_path, monkeypatch, stderr):
    stand_in_enroot(tmp_path / "bin", 'echo "[ERROR] URL https://x returned error code: 401 Unauthorized" >&2; exit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    cfg = load_config(ROOT, overrides={"REGISTRY": ECR, "SLURM_SQSH": str(tmp_path / "k.sqsh")}, environ={})
    with pytest.raises(CommandError, match="exited 1: .*401 Unauthorized"):
        enroot.import_image(cfg)
    assert not (tmp_path / "k.sqsh").exists()


def test_nccl_log_reports_each_part_read_of_a_big_input(tmp_path, monkeypatch, stderr):
    from nsyskit.cli import nccl_tasks
    from nsyskit.nccllog.scan.parallel import scan_files

    line = "host1:100:200 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0xa [nranks=2] stream 0xb\n"
    logs = [tmp_path / f"rank{i}.log" for i in range(3)]
    for i, log in enumerate(logs):
        log.write_text(line * (1000 * (i + 1)))
    seen: list[tuple[int, int]] = []
    scan_files(logs, workers=1, progress=lambda read, total: seen.append((read, total)))
    sizes = [log.stat().st_size for log in logs]
    assert seen == [(sizes[0], sum(sizes)), (sizes[0] + sizes[1], sum(sizes)), (sum(sizes), sum(sizes))]

    assert nccl_tasks._progress(logs) is None  # a few hundred kB: nothing to report
    monkeypatch.setattr(nccl_tasks, "PROGRESS_MIN_BYTES", 1)
    report = nccl_tasks._progress(logs)
    report(sizes[0], sum(sizes))
    lines = stderr.getvalue().splitlines()
    assert lines[0].startswith("• nccl-log: reading 3 file(s), ") and "elapsed" in lines[0]
    assert lines[1] == "• nccl-log: read 0 of 1 MB (17%) (0 s elapsed)"  # 1/6 of the bytes: the first file
