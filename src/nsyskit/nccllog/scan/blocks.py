"""Reading a log as blocks of whole lines (plain or gzip, whatever its name), in constant memory."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

BLOCK_SIZE = 4 << 20  # 4 MiB: as fast as larger blocks, half the transient memory of 8
MAX_LINE = 16 << 20  # a "line" longer than this is garbage (binary junk): counted and dropped, never buffered


class ReadCounts(Protocol):
    """What read_blocks counts into (a Scan): bytes read, overlong lines dropped, read warnings."""

    bytes_read: int
    overlong_lines: int
    warnings: list[str]


def what_it_holds(path: Path) -> str:
    """What a file without any NCCL line is, in words: empty, UTF-16 text, binary data or other text."""
    with (gzip.open if is_gzip(path) else open)(path, "rb") as f:
        try:
            head = f.read(4096)
        except (OSError, EOFError, zlib.error):
            return "is unreadable data"
    if not head:
        return "is empty"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[1:200:2].count(0) > len(head[1:200:2]) // 2:
        return "is UTF-16 text (convert it: iconv -f UTF-16 -t UTF-8)"
    if b"\0" in head or sum(byte < 9 or 13 < byte < 32 for byte in head) > len(head) // 10:
        return "is binary data"
    return "is text without NCCL INFO lines (was NCCL_DEBUG=INFO set?)"


def is_gzip(path: Path) -> bool:
    """True when the file starts with gzip's magic bytes (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_blocks(
    path: Path, scan: ReadCounts, block_size: int = BLOCK_SIZE, span: tuple[int, int] | None = None
) -> Iterator[tuple[bytearray, int]]:
    """The file as blocks of whole lines: (buffer, end), the block being buffer[:end]; it starts with b'\\n' (so
    every line follows a newline) and ends with one. One buffer is reused (read into, never re-allocated per
    block), so a consumer must copy what it keeps. gzip is read with readinto1, so a damaged stream still gives
    what came before the damage. span: only bytes [start, stop) of a plain file (both at line starts)."""
    compressed = is_gzip(path)
    buf = bytearray(block_size + 1)
    buf[0] = 10  # the newline before the first line
    have = 1  # valid bytes: the leading newline and the partial line carried over from the previous block
    with (gzip.open if compressed else open)(path, "rb") as f:
        fill = f.readinto1 if compressed else f.readinto
        left = None  # bytes of the span still to read
        if span is not None and not compressed:
            f.seek(span[0])
            left = span[1] - span[0]
        eof = False
        while not eof:
            end = have
            try:
                while end < len(buf):
                    with memoryview(buf) as view:
                        n = fill(view[end:] if left is None else view[end : end + left]) if left != 0 else 0
                        if left is not None:
                            left -= n
                    if not n:
                        eof = True
                        break
                    end += n
                    scan.bytes_read += n
                    if not compressed:
                        break
            except (OSError, EOFError, zlib.error) as exc:
                scan.warnings.append(f"{path}: read stopped early ({exc}); analyzed what came before")
                eof = True
            cut = buf.rfind(b"\n", 1, end)
            if cut >= 0:
                yield buf, cut + 1
                rest = end - cut - 1
                buf[1 : 1 + rest] = buf[cut + 1 : end]
                have = 1 + rest
            elif end > MAX_LINE:  # no line ends in the buffer and the line is past any sense: drop it
                scan.overlong_lines += 1
                have = 1
            else:  # one line longer than the buffer: make room for it
                if not eof:
                    buf.extend(bytes(block_size))
                have = end
        if have > 1:  # the last line has no newline
            buf[have : have + 1] = b"\n"
            yield buf, have + 1
