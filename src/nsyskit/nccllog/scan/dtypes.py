"""NCCL's enums as the INFO lines print them: datatypes (name, element size), reduction ops, algorithms, protocols."""

from __future__ import annotations

# ncclDataType_t as of NCCL 2.28 (nccl.h): values 0-8 are unchanged since NCCL 2.0, bf16 came with 2.10,
# the two fp8 types with 2.24+. Names follow the public nsys-profiling awk scripts.
DATATYPES: dict[int, tuple[str, int]] = {
    0: ("int8", 1),  # ncclInt8, ncclChar
    1: ("uint8", 1),
    2: ("int32", 4),  # ncclInt32, ncclInt
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("fp16", 2),  # ncclFloat16, ncclHalf
    7: ("fp32", 4),  # ncclFloat32, ncclFloat
    8: ("fp64", 8),  # ncclFloat64, ncclDouble
    9: ("bf16", 2),  # ncclBfloat16
    10: ("fp8_e4m3", 1),  # ncclFloat8e4m3
    11: ("fp8_e5m2", 1),  # ncclFloat8e5m2
}

# ncclRedOp_t; values from ncclNumOps (5) on are user-defined (ncclRedOpCreatePreMulSum).
REDUCTION_OPS: dict[int, str] = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}

# Older NCCL versions print TUNING choices as numbers ("Algo 1 proto 2"); newer ones print the names.
ALGORITHMS: dict[int, str] = {
    0: "Tree",
    1: "Ring",
    2: "CollNetDirect",
    3: "CollNetChain",
    4: "NVLS",
    5: "NVLSTree",
    6: "PAT",
}
PROTOCOLS: dict[int, str] = {0: "LL", 1: "LL128", 2: "Simple"}

# Message-size buckets of the public scripts' histogram: upper bounds are exclusive.
SIZE_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("<64KB", 64 * 1024),
    ("64KB-1MB", 1024 * 1024),
    ("1MB-16MB", 16 * 1024 * 1024),
    (">16MB", None),
)
BUCKET_NAMES: tuple[str, ...] = tuple(name for name, _ in SIZE_BUCKETS)


def datatype(code: int) -> tuple[str, int] | None:
    """(name, element size in bytes) of an ncclDataType_t value, or None for a value NCCL does not define."""
    return DATATYPES.get(code)


def reduction_op(code: int) -> str:
    """The name of an ncclRedOp_t value ('premulsum/user' for the user-created ones)."""
    return REDUCTION_OPS.get(code, "premulsum/user")


def size_bucket(nbytes: int) -> str:
    """The histogram bucket of a message size in bytes."""
    for name, limit in SIZE_BUCKETS:
        if limit is None or nbytes < limit:
            return name
    return BUCKET_NAMES[-1]


def bucket_of(count: int, dtype: bytes) -> str | None:
    """The size bucket of one call, or None when the byte statistics leave it out (unknown datatype, count 0)."""
    known = datatype(int(dtype))
    return size_bucket(count * known[1]) if known and count > 0 else None


def algorithm_name(token: str) -> str:
    """An algorithm as printed ('1' or 'RING' or 'Ring') in one spelling: NCCL's own names."""
    if token.isdigit():
        return ALGORITHMS.get(int(token), f"algo{token}")
    by_upper = {name.upper(): name for name in ALGORITHMS.values()}
    return by_upper.get(token.upper(), token)


def protocol_name(token: str) -> str:
    """A protocol as printed ('2' or 'SIMPLE' or 'Simple') in one spelling: NCCL's own names."""
    if token.isdigit():
        return PROTOCOLS.get(int(token), f"proto{token}")
    by_upper = {name.upper(): name for name in PROTOCOLS.values()}
    return by_upper.get(token.upper(), token)
