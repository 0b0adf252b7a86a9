"""Parsers for the Kubernetes settings: resource quantities, DNS names and node paths."""

from __future__ import annotations

import re
from decimal import Decimal

from nsyskit.config.parse import INT32_MAX, Problem, whole_number

# Kubernetes resource quantity suffixes and their factors (binary and decimal).
_SUFFIXES = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
_QUANTITY = re.compile(r"(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)(?P<suffix>[KMGTPE]i|[kMGTPE])?")
AUTO = "auto"  # a worker size the kit derives from the node (GPU and EFA nodes, or what a CPU run needs)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def quantity_bytes(value: str) -> int:
    """The number of bytes of a Kubernetes quantity such as 64Gi, 5120Mi or 1.5G (0 for empty)."""
    if not value:
        return 0
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    amount = Decimal(match["number"]) * _SUFFIXES[match["suffix"] or ""]
    return int(-amount if match["sign"] == "-" else amount)


def memory_quantity(raw: str, example: str = "256Gi") -> str:
    """Empty (unset) or a non-negative Kubernetes memory quantity such as 256Gi or 32000Mi."""
    value = raw.strip()
    if not value:
        return ""
    match = _QUANTITY.fullmatch(value)
    if not match:
        fix = f"use a size with a unit, e.g. {example} (empty: unset; auto: sized by the kit)"
        raise Problem("is not a Kubernetes quantity", fix)
    if match["sign"] == "-":
        raise Problem("is negative", f"use a size of 0 or more, e.g. {example}")
    return value


def hugepages_quantity(raw: str) -> str:
    """Empty or 0 (none) or a non-negative whole number of 2 MiB pages as a quantity such as 5120Mi."""
    value = memory_quantity(raw, example="5120Mi")
    if value and quantity_bytes(value) % (2 * 2**20):
        raise Problem("is not a whole number of 2Mi pages", "use a multiple of 2Mi, e.g. 5120Mi (0: no huge pages)")
    return "" if value and quantity_bytes(value) == 0 else value


def auto_memory_quantity(raw: str) -> str:
    """'auto' (sized by Config.k8s_worker_sizes from the node's GPUs and ranks) or a memory quantity (memory_quantity)."""
    return AUTO if raw.strip().lower() == AUTO else memory_quantity(raw)


def auto_hugepages_quantity(raw: str) -> str:
    """'auto' (huge pages only with EFA, sized by Config.k8s_worker_sizes) or a quantity of 2Mi pages."""
    return AUTO if raw.strip().lower() == AUTO else hugepages_quantity(raw)


def dns_label(raw: str) -> str:
    """A Kubernetes name such as a namespace: lower-case letters, digits and '-', at most 63."""
    value = raw.strip()
    if not _DNS_LABEL.fullmatch(value):
        raise Problem(
            "is not a Kubernetes name",
            "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit",
        )
    return value


def optional_dns_label(raw: str) -> str:
    """Empty or a Kubernetes name (see dns_label)."""
    return dns_label(raw) if raw.strip() else ""


def absolute_path(raw: str) -> str:
    """An absolute path on the nodes, such as /var/lib/nsyskit/reports."""
    value = raw.strip().rstrip("/") or "/"
    if not value.startswith("/") or value == "/":
        raise Problem("is not an absolute folder below /", "use an absolute path such as /var/lib/nsyskit/reports")
    return value


def optional_absolute_path(raw: str) -> str:
    """Empty or an absolute folder (see absolute_path)."""
    return absolute_path(raw) if raw.strip() else ""


def optional_non_negative_int(raw: str) -> int | None:
    """Empty (unset: None) or a whole number from 0 to 2147483647."""
    text = raw.strip()
    if not text:
        return None
    return whole_number(text, 0, f"use a whole number of 0 or more (at most {INT32_MAX}), or leave it empty (unset)")
