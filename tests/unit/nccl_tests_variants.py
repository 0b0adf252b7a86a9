"""nccl-tests outputs written the way each version prints them (printf widths from the real files), with the
launchers' and NCCL's interference applied: for the reader's tests on variants the real corpus lacks.

A row is written in pieces, as nccl-tests does (the head, then each placement once measured, then the newline),
so a test can put an OpenMPI tag or an NCCL INFO line between the pieces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INFO = "node-a:4242:4242 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 2 datatype 7"
# Column header per layout: (banner, names, units), as the files of each generation print them.
HEADERS = {
    "L2": (
        "#                                                              out-of-place                       in-place  ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ),
    "L3": (
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
    ),
    "L1-redop": (
        "#                                                     out-of-place                       in-place",
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ),
    "L1-none": (
        "#                                             out-of-place                       in-place",
        "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ),
    "L1-root": (
        "#                                                     out-of-place                       in-place",
        "#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ),
    "L1-both": (
        "#                                                             out-of-place                       in-place",
        "#       size         count    type   redop    root     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ),
}
HEAD_COLUMNS = {"L2": 5, "L3": 5, "L1-redop": 4, "L1-none": 3, "L1-root": 4, "L1-both": 5}
# busbw / algbw at 16 ranks (nccl-tests' PERFORMANCE.md): 2(n-1)/n, (n-1)/n, 1
FACTORS = {"all_reduce": 1.875, "all_gather": 0.9375, "reduce_scatter": 0.9375, "alltoall": 0.9375, "broadcast": 1.0,
           "reduce": 1.0, "sendrecv": 1.0}  # fmt: skip
UNCHECKED_IN_PLACE = ("sendrecv", "alltoall")  # their in-place #wrong cells print N/A


@dataclass(frozen=True)
class Measured:
    """One row's numbers as written (the texts a reader must give back as numbers)."""

    size: int
    count: int
    out: tuple[str, str, str, str]  # time, algbw, busbw, wrong: the printed texts
    inplace: tuple[str, str, str, str]


def _time(us: float) -> str:
    return f"{us:.2f}" if us < 10000 else f"{us:.0f}"


def measurements(op: str = "all_reduce", sizes: int = 12, start: int = 8, wrong: str = "0",
                 step: int = 2) -> list[Measured]:  # fmt: skip
    """Rows with plausible numbers: time grows with size, busbw = algbw x the op's factor (16 ranks)."""
    rows = []
    size = start
    for index in range(sizes):
        rows_out = []
        for placement in (0, 1):
            us = 20.0 + size / 2e4 + 3.7 * placement + index * 0.13
            algbw = size / us / 1e3
            busbw = algbw * FACTORS.get(op, 1.0)
            check = "N/A" if wrong == "N/A" or (placement and op in UNCHECKED_IN_PLACE) else wrong
            rows_out.append((_time(us), f"{algbw:.2f}", f"{busbw:.2f}", check))
        rows.append(Measured(size, size // 4, rows_out[0], rows_out[1]))
        size *= step
    return rows


def pieces(layout: str, row: Measured, redop: str = "sum", root: int = -1) -> list[str]:
    """A row as its three printf pieces (head, out-of-place, in-place), without the newline."""
    columns = HEAD_COLUMNS[layout]
    type_width = 8 if layout in ("L2", "L3") else 6
    head = f"{row.size:12d}  {row.count:12d}  {'float':>{type_width}}"
    if layout in ("L2", "L3", "L1-redop", "L1-both"):
        head += f"  {redop:>6}"
    if layout in ("L2", "L3", "L1-root", "L1-both"):
        head += f"  {root:6d}"
    assert head.count(" ") and columns
    wrong_width = 6 if layout == "L3" else 5
    return [head] + [f"  {t:>7}  {a:>6}  {b:>6}  {w:>{wrong_width}}" for t, a, b, w in (row.out, row.inplace)]


@dataclass
class Output:
    """A whole output being written: the lines, and where each row and the average went (1-based lines)."""

    lines: list[str] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    avg_lines: list[int] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.lines += lines

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def write_test(output: Output, op: str = "all_reduce", layout: str = "L2", rows: list[Measured] | None = None,
               banner: bool = True, command: bool = False, average: str | None = "67.9217", ranks: int = 16,
               between: str | None = None, glued: str | None = None) -> list[Measured]:  # fmt: skip
    """Append one test as nccl-tests prints it. BETWEEN: a line put between rows and after the header;
    GLUED: text written right after each piece (an NCCL INFO line that lands mid-row, ending that line)."""
    rows = measurements(op) if rows is None else rows
    binary = f"{op}_perf"
    if command:
        output.add(f"$ mpirun -np {ranks} ./build/{binary} -b 8 -e 128M -f 2 -g 1")
    if banner:
        output.add("# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902",
                   f"# Collective test starting: {binary}")  # fmt: skip
    output.add("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 "
               "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices")  # fmt: skip
    output.add(*(f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on     node-a device {r % 8:2d} [0000:1b:00] NVIDIA H100"
                 for r in range(ranks)))  # fmt: skip
    output.add("#", *HEADERS[layout])
    redop = "none" if op in ("all_gather", "broadcast", "alltoall") and layout in ("L2", "L3") else "sum"
    root = 0 if op in ("broadcast", "reduce") else -1
    for row in rows:
        if between:
            output.add(between)
        parts = pieces(layout, row, redop, root)
        output.row_lines.append(len(output.lines) + 1)
        if glued:
            output.add(parts[0] + glued, parts[1] + glued, parts[2])
        else:
            output.add("".join(parts))
    output.add("# Out of bounds values : 0 OK")
    if average is not None:
        output.add(f"# Avg bus bandwidth    : {average} ")
        output.avg_lines.append(len(output.lines))
    output.add("#")
    if banner:
        output.add(f"# Collective test concluded: {binary}", "#")
    return rows


def prefixed(text: str, prefix: str) -> str:
    """Every line of TEXT with a launcher's prefix in front."""
    return "".join(prefix + line + "\n" for line in text.splitlines())


def tag_pieces(layout: str, row: Measured, tag: str = "[1,0]<stdout>:") -> str:
    """A row as OpenMPI --tag-output writes it: a tag before each piece (each flush), inside the line."""
    return "".join(tag + piece for piece in pieces(layout, row))


def scaled(rows: list[Measured], factor: float) -> list[Measured]:
    """The same sizes with busbw and algbw times FACTOR (time divided): a faster or slower fabric."""
    out = []
    for row in rows:
        cells = []
        for time, algbw, busbw, wrong in (row.out, row.inplace):
            cells.append((_time(float(time) / factor), f"{float(algbw) * factor:.2f}", f"{float(busbw) * factor:.2f}",
                          wrong))  # fmt: skip
        out.append(Measured(row.size, row.count, cells[0], cells[1]))
    return out


def average(rows: list[Measured]) -> str:
    """The 'Avg bus bandwidth' nccl-tests prints: the mean busbw of both placements over the rows, 6 digits."""
    values = [float(cells[2]) for row in rows for cells in (row.out, row.inplace)]
    return f"{sum(values) / len(values):g}"


def example_outputs() -> dict[str, str]:
    """The examples in tests/data/nccl-tests (the docs' commands read them): a 16-GPU all_reduce (NCCL INFO lines
    inside its rows) and all_gather, and a baseline run of the same tests 10% faster."""
    examples = {}
    for name, factor in (("example-16gpu.out", 1.0), ("example-16gpu-baseline.out", 1.1)):
        output = Output()
        reduce = scaled(measurements("all_reduce", sizes=24), factor)
        gather = scaled(measurements("all_gather", sizes=24), factor)
        write_test(output, "all_reduce", "L3", reduce, average=average(reduce), glued=INFO)
        write_test(output, "all_gather", "L3", gather, average=average(gather))
        examples[name] = output.text()
    return examples
