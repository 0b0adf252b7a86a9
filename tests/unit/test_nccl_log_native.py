"""The compiled line reader (nccllog/linescan.c) gives exactly what the pure-Python scanner gives: same findings in
the same order, same line counts, same Scan, on every real log, the test data, every launcher prefix and damaged
lines; without a compiler the scanner falls back to Python."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from nsyskit import hostpkgs
from nsyskit.nccllog.scan import fastscan, parallel
from nsyskit.nccllog.scan.lines import INFO_LINE, clean_source
from nsyskit.nccllog.scan.scan import Window

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl"
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).parent))
import nccl_log_bench  # noqa: E402
from nccl_real import REAL, real, real_folder  # noqa: E402
from test_nccl_log_formats import PREFIXES  # noqa: E402


@pytest.fixture(scope="module")
def reader() -> fastscan.Reader:
    """The compiled reader; the C compiler is installed first on a machine without one (host step sqlite-ext)."""
    if fastscan.function() is None and hostpkgs.can_install():
        hostpkgs.install("sqlite-ext")
        fastscan._loaded.clear()
        fastscan._readers.clear()
    found = fastscan.reader()
    assert found is not None, "linescan.c could not be built: install a C compiler (invoke host-packages sqlite-ext)"
    return found


def real_lines() -> list[bytes]:
    """Every line of the real logs (without them the prefixed and damaged inputs would be empty: fail, not pass)."""
    logs = sorted(real_folder().glob("*.log"))  # skips a clone without ../shared (fails where it is required)
    return b"".join(path.read_bytes() + b"\n" for path in logs).split(b"\n")


def prefixed() -> bytes:
    """Every real line behind every launcher prefix the scanner knows, and behind bracketed stamps and srun's."""
    prefixes = [p.encode() for p in PREFIXES.values()] + [b"[2025-01-02 03:04:05] ", b"12: ", b"[1,0]<stdout>:"]
    prefixes += [b"3: run(), common.cu:967, ", b"1735787045.123456 "]  # the shared rule's source and epoch tokens
    return b"\n".join(prefix + line for line in real_lines()[:3000] for prefix in prefixes)


def damaged(seed: int, lines: int = 3000) -> bytes:
    """Real lines cut, with characters dropped or inserted (brackets, newlines, field names, prefixes)."""
    rng, source = random.Random(seed), real_lines()
    inserts = [b"[", b"(", b"]", b")", b" ", b"\n", b"0: ", b"[2025-01-02 03:04:05] ", b" count 5", b"\n[x", b"acc "]
    inserts += [b"<stdout>:", b"2025-03-04T05:06:07Z ", b"  | ", b"stdout F ", b" - INFO - ", b"(Ray pid=1, ip=2) "]
    inserts += [b"\n(", b"12.5 ", b"2025-01-02 10:11:12,851 - ", b"+01:00 ", b"run(), common.cu:967, "]
    prefixes = [b"", b"3: ", b"[2025-01-02 03:04:05] "] + [prefix.encode() for prefix in PREFIXES.values()]
    out = []
    for _ in range(lines):
        line = bytearray(rng.choice(prefixes) + rng.choice(source))
        for _ in range(rng.randrange(4)):
            if not line:
                break
            at, how = rng.randrange(len(line)), rng.randrange(4)
            if how == 0:
                del line[at : at + rng.randrange(1, 20)]
            elif how == 1:
                line[at:at] = bytes([rng.choice(b" []()\n:0123456789|<>-aZ\tNCCL INFO opCount")])
            elif how == 2:
                line[at:at] = rng.choice(inserts)
            else:
                del line[at:]
        out.append(bytes(line))
    return b"\n".join(out)


def python_findings(block: bytearray, start: int, end: int) -> Counter:
    """The reference: INFO_LINE's findings with their sources as the scanner reads them (clean_source)."""
    return cleaned(Counter(INFO_LINE.findall(block, start, end)))


def cleaned(found: Counter) -> Counter:
    out: Counter = Counter()
    for (source, *rest), calls in found.items():
        out[(clean_source(source), *rest)] += calls
    return out


# The inputs compared: real logs, test data, prefixed real lines, damaged real lines (the real ones are named even
# when a clone lacks them, so that their tests skip with the reason rather than vanish).
REAL_NAMES = sorted(p.name for p in REAL.glob("*.log")) or ["real-logs"]
TEXTS = {
    **{name: lambda name=name: real_folder().joinpath(name).read_bytes() for name in REAL_NAMES},
    **{path.name: path.read_bytes for path in sorted(DATA.glob("*.log"))},
    "prefixed": prefixed,
    **{f"damaged-{seed}": lambda seed=seed: damaged(seed) for seed in range(12)},
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_findings_equal_the_regex_on_any_range(reader, name):
    text = TEXTS[name]()
    block = bytearray(b"\n" + text + (b"" if text.endswith(b"\n") else b"\n"))
    newlines = [at for at, byte in enumerate(block) if byte == 10]
    rng = random.Random(name)
    ranges = [(0, len(block))] + [tuple(sorted(rng.sample(newlines, 2))) for _ in range(6) if len(newlines) > 2]
    for start, end in ranges:
        found, lines, info, warn = reader.findings(block, start, end)
        expected = python_findings(block, start, end)
        assert list(cleaned(found).items()) == list(expected.items()), (name, start, end)  # order matters: ties
        assert (lines, info, warn) == tuple(
            block.count(word, start, end) for word in (b"\n", b"NCCL INFO", b"NCCL WARN")
        )


def scan_both(path: Path, monkeypatch, window: Window):
    """The file's Scan with the compiled reader and with Python alone."""
    with_c = parallel.scan_file(path, window, block_size=1 << 16)
    monkeypatch.setattr(fastscan, "_readers", [None])
    return with_c, parallel.scan_file(path, window, block_size=1 << 16)


@pytest.mark.parametrize("window", [Window(), Window(steps=(3, 40)), Window(lines=(20, 900))])
def test_whole_scans_are_equal(reader, tmp_path, monkeypatch, window):
    logs = sorted(real_folder().glob("*.log")) + sorted(DATA.glob("*.log*"))
    synthetic = tmp_path / "synthetic.log"
    nccl_log_bench.write_log(synthetic, 1)
    damaged_log = tmp_path / "damaged.log"
    damaged_log.write_bytes(damaged(99, 20000))
    for path in [*logs, synthetic, damaged_log]:
        monkeypatch.setattr(fastscan, "_readers", [reader])
        with_c, python = scan_both(path, monkeypatch, window)
        assert with_c == python, path


def test_without_a_compiler_the_python_scanner_is_used(tmp_path):
    # a fresh process with no compiler on PATH and an empty cache: no native reader, the same report
    log = real("01")
    code = (
        "import json,sys; from pathlib import Path; from nsyskit.nccllog import analyze; from nsyskit.nccllog.scan import fastscan; "
        "print(fastscan.reader() is None); print(json.dumps(analyze([Path(sys.argv[1])]).to_dict()['per_op']))"
    )
    # no compiler, an empty cache, and the libraries built into the package left aside (as an sdist without cc has)
    env = {"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "CC": "no-such-cc", "NSYSKIT_NATIVE_PREBUILT": "0"}
    done = subprocess.run([sys.executable, "-c", code, str(log)], env=env, capture_output=True, text=True)
    with_c = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "True" and with_c.stdout.splitlines()[0] == "False"
    assert done.stdout.splitlines()[1] == with_c.stdout.splitlines()[1]


def test_full_arrays_fall_back_to_the_regex(reader, monkeypatch):
    # more distinct findings or runs in a block than the C reader's arrays hold: that block is read by the regex
    log = real("01")
    monkeypatch.setattr(fastscan, "MAX_FINDINGS", 4)
    monkeypatch.setattr(fastscan, "MAX_RUNS", 2)
    small = fastscan.Reader()
    block = bytearray(b"\n" + log.read_bytes())
    assert small.findings(block, 0, len(block)) is None
    monkeypatch.setattr(fastscan, "_readers", [small])
    with_small, python = scan_both(log, monkeypatch, Window())
    assert with_small == python and sum(with_small.coll.values()) == 990


def test_find_is_bytes_find(reader):
    block = bytearray(b"\nab iteration x step_ms=1\nNCCL version 2 : opCount 1\n")
    for needle in (b"iteration", b"step_ms=", b"NCCL version ", b": opCount ", b"absent", b"\n"):
        for start in range(0, len(block) + 2, 3):
            for end in (start, start + 5, len(block) - 1, len(block), len(block) + 10):
                assert fastscan.find(block, needle, start, end) == block.find(needle, start, end), (needle, start, end)
