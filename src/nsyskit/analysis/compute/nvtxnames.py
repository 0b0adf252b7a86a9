"""NVTX range names as the summaries group them: PyTorch's per-call suffixes cut, trailing step numbers written N,
'@domain' outside the default domain; which names are training steps."""

from __future__ import annotations

import re

import numpy as np

from nsyskit.analysis.read.records import NvtxRanges, factorize, refactorize
from nsyskit.native import texts as native_texts

STEP_NAME = re.compile(r"^\s*(?:train[ _-]?)?step[\s_:#-]*(\d+)\s*$", re.IGNORECASE)
PER_CALL_SUFFIX = re.compile(r"(?:,\s*(?:seq|op_id)\s*=\s*\d+)+\s*$")
# The same suffix ending before a NUL (texts joined by NULs), written to begin with a literal ',' that the regex
# engine scans for: half the time of the grouped form over 40K texts.
PER_CALL_SUFFIX_BEFORE_NUL = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+(?:,\s*(?:seq|op_id)\s*=\s*\d+)*\s*(?=\0)")
# A trailing step or iteration number ('step 7', 'Batch 12', 'train_step:3', 'epoch_2'): one of these words, in any
# case and with no ASCII letter or digit right before it, [\s_:#-]*, the number, \s* to the end. The number is written
# N ('step N'): one group for every step. Any other trailing number ('layer_3', 'MPI Rank 3', 'TBackward0') stays.
STEP_WORDS = ("step", "iter", "iteration", "epoch", "batch", "microbatch", "minibatch")
STEP_NUMBER = re.compile(rf"(?<![0-9A-Za-z])((?:{'|'.join(STEP_WORDS)})[\s_:#-]*)\d+\s*$", re.IGNORECASE)
STEP_NUMBER_BEFORE_NUL = re.compile(STEP_NUMBER.pattern.replace("$", "(?=\0)"), re.IGNORECASE)


def group_texts(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(distinct texts without PyTorch's per-call ', seq = N' / ', op_id = N' parts and with a trailing step number
    written N, index of each of `texts` among them): the tens of thousands of per-call texts of a rank fall into a few
    hundred groups, and 'step 1' ... 'step 20' into one, 'step N'."""
    return factorize(_without_per_call_suffix(texts))


def group_text(text: str) -> str:
    """One text's group (group_texts): its per-call suffix cut (PER_CALL_SUFFIX), then its step number N (STEP_NUMBER)."""
    cut = text[: match.start()] if (match := PER_CALL_SUFFIX.search(text)) else text
    return STEP_NUMBER.sub(r"\1N", cut, count=1)


def is_step_label(label: str) -> bool:
    """Whether a text or its group names a training step (STEP_NAME; 'step N' stands for the numbers it groups)."""
    return bool(STEP_NAME.match(label) or (label.endswith("N") and STEP_NAME.match(label[:-1] + "0")))


def nvtx_labels(nvtx: NvtxRanges, grouped: tuple[list[str], np.ndarray] | None = None) -> tuple[list[str], np.ndarray]:
    """(distinct summary labels, label of each range): a range's text without its per-call parts (group_texts: the
    texts' groups when known), '@domain' appended outside the default domain; labels in first-seen order."""
    if len(nvtx) == 0:
        return [], np.empty(0, dtype=np.int64)
    texts, text_codes = nvtx.texts
    cut, cut_of_text = grouped if grouped is not None else group_texts(texts)
    group = cut_of_text[text_codes]
    domains, domain_codes = nvtx.domains
    if len(domains) == 1:  # one domain (usually the default): a label per group
        return refactorize([text + (f"@{domains[0]}" if domains[0] else "") for text in cut], group)
    pairs, pair_codes = np.unique(group * len(domains) + domain_codes, return_inverse=True)
    labels = []
    for pair in pairs.tolist():
        domain = domains[pair % len(domains)]
        labels.append(cut[pair // len(domains)] + (f"@{domain}" if domain else ""))
    return refactorize(labels, pair_codes)


def _without_per_call_suffix(texts: list[str]) -> list[str]:
    """Each text's group (group_text): without PyTorch's per-call suffix, a trailing step number written N."""
    found = native_texts.cut_suffixes(texts)  # texts.c: ASCII texts in one C pass, the others here
    if found is not None:
        cut, whole = found
        for index in whole.tolist():
            cut[index] = group_text(texts[index])
        return cut
    # One regex pass of each over the texts joined by NULs (the suffix then ends before a NUL, not at the end) instead
    # of a search per text: per-call texts are tens of thousands. A text holding a NUL is searched on its own.
    joined = "\0".join(texts)
    if joined.count("\0") != max(len(texts) - 1, 0):
        return [group_text(text) for text in texts]
    cut = PER_CALL_SUFFIX_BEFORE_NUL.sub("", joined + "\0")
    return STEP_NUMBER_BEFORE_NUL.sub(r"\1N", cut).split("\0")[:-1] if texts else []
