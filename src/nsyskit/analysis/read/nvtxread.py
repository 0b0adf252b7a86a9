"""The NVTX part of the export reader (reader.py), built on ExportFile's public interface: ranges, their text, domains and payloads in every export version."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.read import pagescan, payloadblob, payloadtables
from nsyskit.analysis.read.exportfile import PID_SHIFT, ExportFile
from nsyskit.analysis.read.records import NvtxRanges, empty_nvtx
from nsyskit.analysis.read.sqlitefile import REEXPORT, packed_scan
from nsyskit.analysis.read.sqlitefile import as_text as _text

NVTX_TABLES = ("NVTX_EVENTS",)
# NVTX event types of ranges: push/pop, start/end, and their NVTX-T (imported .nvtxt) twins.
NVTX_RANGE_TYPES = (59, 60, 70, 71)
NVTX_DOMAIN_CREATE = 75
PAYLOAD_COLUMNS = ("uint64Value", "int64Value", "uint32Value", "int32Value", "doubleValue", "floatValue")
BLOB_COLUMN = payloadblob.BLOB_COLUMN  # extended payloads' raw bytes (nsys export --include-blobs=true), TEXT
BLOB_SQL = f"CAST(e.{BLOB_COLUMN} AS BLOB)"  # their bytes as they are (a TEXT read would decode them)


def read_nvtx_ranges(reader: ExportFile, pid: int | None = None) -> NvtxRanges:
    """NVTX push/pop and start/end ranges that ended, text resolved from `text` or `textId`; bad rows left out.
    An export whose NCCL ranges lack the payload values it has schemas for gets one warning naming the fix."""
    table = reader.table(NVTX_TABLES)
    if not table:
        return empty_nvtx()
    cols = reader.columns(table)
    ranges = _read_pages(reader, table, cols, pid)
    if ranges is None:
        ranges = _read_sql(reader, table, cols, pid)
    if payloadblob.held_no_values(reader, ranges):
        reader.warn(f"{reader.path}: its NCCL ranges carry no payload values (the export has their payload schemas "
                    "but not the values, which nsys exports only when asked), so their message sizes are unknown; "
                    f"fix: {payloadblob.fix_command(reader.path)}")  # fmt: skip
    return ranges


def _read_sql(reader: ExportFile, table: str, cols: set[str], pid: int | None) -> NvtxRanges:
    """The ranges through SQLite: columnar scans where every id is an integer, else one row-wise query."""
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    scope = reader.scope(table, pid, column="globalTid", alias="e.")
    where = f"e.eventType IN ({types}) AND e.end IS NOT NULL{' AND ' + scope if scope else ''}"
    valid = "typeof(e.start) = 'integer' AND typeof(e.end) = 'integer'"
    dropped = reader.query(f"SELECT count(*) FROM {table} AS e WHERE {where} AND NOT ({valid})")[0][0]
    if dropped:
        reader.warn(f"{reader.path}: {dropped} NVTX ranges with a non-integer start/end were left out; fix: {REEXPORT}")
    ranges = _read_columnar(reader, table, cols, f"{where} AND {valid}") if reader.blob else None
    if ranges is None:  # no int64s, or a thread/domain id that is not an integer: one row-wise query, joins in SQL
        ranges = _read_rows(reader, table, cols, f"{where} AND {valid}")
    backwards = ranges.end < ranges.start
    if backwards.any():
        reader.warn(
            f"{reader.path}: {int(backwards.sum())} NVTX ranges end before they start and were left out; fix: {REEXPORT}"
        )
        ranges = ranges.take(~backwards)
    return ranges


def _with_blobs(reader: ExportFile, ranges: NvtxRanges, blobs: np.ndarray) -> NvtxRanges:
    """The ranges with what their payload blobs (bytes or None, one per range) state decoded (payloadblob): the
    message size as the payload where the range has no scalar one, the communicator and its size; skipped blobs
    warned in one line."""
    held = np.flatnonzero(np.not_equal(blobs, None))
    if not len(held):
        return ranges
    return _with_values(reader, ranges, held, payloadblob.decode(blobs[held].tolist(), payloadblob.read_schemas(reader)))


def _with_values(reader: ExportFile, ranges: NvtxRanges, held: np.ndarray, values: payloadblob.BlobValues) -> NvtxRanges:
    """The ranges with what the blobs of the ranges at `held` state (see _with_blobs)."""
    if values.skipped:
        reader.warn(f"{reader.path}: {values.skipped} of {len(held)} NVTX payload blobs have no schema in the export "
                    "or a length other than their schema's and were left out (their sizes unknown); fix: "
                    f"{payloadblob.fix_command(reader.path)} with the nsys that recorded it")  # fmt: skip
    payload = ranges.payload.copy()
    comm = ranges.comm.copy() if ranges.comm is not None else np.zeros(len(ranges), np.int64)
    nranks = ranges.nranks.copy() if ranges.nranks is not None else np.zeros(len(ranges), np.int64)
    payload[held] = np.where(np.isnan(payload[held]), values.size, payload[held])
    comm[held], nranks[held] = values.comm, values.nranks
    return NvtxRanges(ranges.start, ranges.end, ranges.text, ranges.domain, ranges.thread, payload, ranges.json,
                      comm, nranks)  # fmt: skip


def _with_tables(reader: ExportFile, ranges: NvtxRanges, rowids: np.ndarray) -> NvtxRanges:
    """The ranges (their rows `rowids`) with what their payload tables state (payloadtables: --dynamic-tables)."""
    tables = payloadtables.read_values(reader) if payloadtables.LINK_TABLE in reader.tables else None
    if tables is None or not len(ranges):
        return ranges
    ids, values = tables
    at = np.minimum(np.searchsorted(ids, rowids), len(ids) - 1)
    mine = ids[at] == rowids
    if not mine.any():
        return ranges
    pick = at[mine]
    held = payloadblob.BlobValues(values.size[pick], values.comm[pick], values.nranks[pick], 0)
    return _with_values(reader, ranges, np.flatnonzero(mine), held)


def _read_pages(reader: ExportFile, table: str, cols: set[str], pid: int | None) -> NvtxRanges | None:
    """The ranges from the file's pages (pagescan), the SQL reads' WHERE applied in numpy, texts and JSON from the
    pages too (else fetched through SQLite for the rows that hold them). None: read through SQLite."""
    integer, real, text_kind = (pagescan.KIND_CODES[k] for k in ("integer", "real", "text"))
    wanted = {"row": "rowid", "type": "eventType", "start": "start", "end": "end", "thread": "globalTid"}
    optional = {"domain": "domainId", "text_id": "textId", "text": "text", "json": "jsonText", "blob": BLOB_COLUMN}
    wanted.update({key: column for key, column in optional.items() if column in cols})
    payloads = [column for column in PAYLOAD_COLUMNS if column in cols]
    wanted.update({f"payload {column}": column for column in payloads})
    kinds = tuple(c for c in wanted.values() if c != "rowid")
    # The texts in the same pass (else a second walk of the table); without them when the pages cannot give them
    # (a UTF-16 file): SQLite fetches the rows' texts below.
    in_pass = tuple(column for column in ("text", "jsonText") if column in cols)
    found = reader.pages(table, wanted, pid, kinds=kinds, texts=in_pass) if in_pass else None
    if found is None:
        found = reader.pages(table, wanted, pid, kinds=kinds)
    if found is None:
        return None
    ended = np.isin(found["type"], NVTX_RANGE_TYPES) & (found["type:kind"] == integer) & (found["end:kind"] != 0)
    valid = ended & (found["start:kind"] == integer) & (found["end:kind"] == integer)
    odd_domain = "domain" in found and (found["domain:kind"][valid] > integer).any()  # NULL: no domain, as in SQL
    if (found["thread:kind"][valid] != integer).any() or odd_domain:
        return None  # a thread id that is not an integer, a domain id that is not one nor NULL: the row-wise read
    dropped = int(ended.sum() - valid.sum())
    if dropped:
        reader.warn(f"{reader.path}: {dropped} NVTX ranges with a non-integer start/end were left out; fix: {REEXPORT}")
    rows = np.flatnonzero(valid)
    if not len(rows):
        return empty_nvtx()
    creates = np.flatnonzero((found["type"] == NVTX_DOMAIN_CREATE) & (found["type:kind"] == integer))
    if "domain" not in found:
        creates = creates[:0]
    held = [column for key, column in (("text", "text"), ("json", "jsonText"))
            if key in found and (found[f"{key}:kind"][rows].any() or (key == "text" and len(creates)))]  # fmt: skip
    # Where the pages gave no texts, a second walk would not either: SQLite fetches the rows that hold them.
    every_text = {column: found[f"{key}:text"] for key, column in (("text", "text"), ("json", "jsonText"))
                  if column in held and f"{key}:text" in found}  # fmt: skip
    texts = {column: values[rows] for column, values in every_text.items()}
    text = _texts_from_pages(reader, table, found, rows, texts)
    if text is None:
        return None
    payload = np.full(len(rows), np.nan)
    for column in payloads:  # the first payload column holding a number, as _payload_sql's coalesce (NULL -> NaN)
        kind, values = found[f"payload {column}:kind"][rows], found[f"payload {column}"][rows]
        fill = np.isnan(payload) & ((kind == integer) | (kind == real))
        if fill.any():  # an INTEGER as float64, as np.asarray(..., float64) makes it; a REAL from its bits
            payload[fill] = np.where(kind[fill] == real, values[fill].view(np.float64), values[fill].astype(np.float64))
    json_text = np.full(len(rows), None, dtype=object)
    if "json" in found and (found["json:kind"][rows] != 0).any():
        if "jsonText" in texts:  # only a TEXT is JSON (the SQL reads keep str values only)
            is_text = found["json:kind"][rows] == text_kind
            json_text[is_text] = texts["jsonText"][is_text]
        else:
            holders = rows[found["json:kind"][rows] != 0]
            fetched = _fetch_by_rowid(reader, table, "e.jsonText", found["row"][holders])
            if fetched is None:
                return None
            at = np.searchsorted(found["row"][rows], found["row"][holders])
            json_text[at] = [j if j.__class__ is str else None for j in fetched]
    thread, start, end = found["thread"][rows], found["start"][rows], found["end"][rows]
    domain = np.full(len(rows), "", dtype=object)
    if "domain" in found:
        created = _created_domains(found, creates, every_text.get("text"))
        domain = _domain_names(reader, table, found["domain"][rows], thread, created)
        domain[found["domain:kind"][rows] == pagescan.KIND_CODES["null"]] = ""  # the row-wise join matches no NULL
    ranges = NvtxRanges(start, end, text, domain, thread, payload, json_text)
    if "blob" in found and (found["blob:kind"][rows] != 0).any():  # only an export with --include-blobs holds any
        paged = payloadblob.paged_blobs(reader, table, found["row"][rows])  # where they lie in the pages
        if paged is not None:
            ranges = _with_values(reader, ranges, *paged)
        else:  # (a value the pages cannot give): SQLite fetches the rows' blobs
            holders = rows[found["blob:kind"][rows] != 0]
            fetched = _fetch_by_rowid(reader, table, BLOB_SQL, found["row"][holders])
            if fetched is None:
                return None
            blobs = np.full(len(rows), None, dtype=object)
            blobs[np.searchsorted(found["row"][rows], found["row"][holders])] = fetched
            ranges = _with_blobs(reader, ranges, blobs)
    ranges = _with_tables(reader, ranges, found["row"][rows])
    backwards = end < start
    if backwards.any():
        reader.warn(
            f"{reader.path}: {int(backwards.sum())} NVTX ranges end before they start and were left out; fix: {REEXPORT}"
        )
        ranges = ranges.take(~backwards)
        start = ranges.start
    if (start[1:] >= start[:-1]).all():  # recorded in start order already
        return ranges
    return ranges.take(np.argsort(start, kind="stable"))


def _created_domains(found: dict[str, np.ndarray], creates: np.ndarray, text: np.ndarray | None) -> dict | None:
    """{(domainId, process): name} of the domain-create events at rows `creates`, as _domain_names' SQL groups them
    (max(text) per pair); None when only SQLite can say (a name that is not a UTF-8 TEXT, a thread id that is not
    an integer)."""
    if not len(creates):
        return {}
    integer, text_kind = pagescan.KIND_CODES["integer"], pagescan.KIND_CODES["text"]
    kinds = found["text:kind"][creates] if text is not None else None
    if kinds is None or ((kinds != 0) & (kinds != text_kind)).any() or (found["thread:kind"][creates] != integer).any():
        return None
    creates = creates[found["domain:kind"][creates] == integer]  # other ids never match a range's integer id
    created: dict = {}
    processes = (found["thread"][creates] >> PID_SHIFT).tolist()
    pairs = zip(found["domain"][creates].tolist(), processes, text[creates].tolist(), strict=True)
    for domain, process, name in pairs:
        if name is not None and "\ufffd" in name:
            return None  # bytes that are not UTF-8 (decoded with replacement): SQLite's max() compares the bytes
        known = created.get((domain, process))
        # max() skips NULLs; UTF-8 orders as the code points do, so str comparison is SQLite's BINARY one
        created[(domain, process)] = name if known is None or (name is not None and name > known) else known
    return created


def _texts_from_pages(
    reader: ExportFile, table: str, found: dict[str, np.ndarray], rows: np.ndarray, texts: dict[str, np.ndarray]
) -> np.ndarray | None:
    """Each range's text as the SQL reads' coalesce(text, StringIds value of textId, '<string N>') gives it; `texts`:
    the pages' texts of the held columns (else the inline texts are fetched through SQLite)."""
    text = np.full(len(rows), "", dtype=object)  # neither text nor textId: as_text(NULL)
    inline = (found["text:kind"][rows] != 0) if "text" in found else np.zeros(len(rows), dtype=bool)
    if "text" in texts:  # str for every kind but NULL (bytes decoded, numbers as str), as the SQL reads make them
        text[inline] = texts["text"][inline]
    elif inline.any():
        fetched = _fetch_by_rowid(reader, table, "e.text", found["row"][rows[inline]])
        if fetched is None:
            return None
        text[inline] = [t if t.__class__ is str else _text(t) for t in fetched]
    if "text_id" in found and "StringIds" in reader.tables:  # without StringIds the SQL reads take `text` alone
        by_id = ~inline & (found["text_id:kind"][rows] == pagescan.KIND_CODES["integer"])
        if by_id.any():
            ids = found["text_id"][rows[by_id]]
            distinct, codes = np.unique(ids, return_inverse=True)
            strings = reader.strings(distinct)
            names = [strings.get(i, f"<string {i}>") for i in distinct.tolist()]
            text[by_id] = np.asarray(names, dtype=object)[codes.reshape(-1)]
        if ((found["text_id:kind"][rows] != 0) & ~inline & ~by_id).any():
            return None  # a textId that is not an integer: SQLite's join decides
    return text


def _fetch_by_rowid(reader: ExportFile, table: str, column: str, rowids: np.ndarray) -> list | None:
    """`column` of the rows with these rowids (ascending), in that order; None when the count differs."""
    if len(rowids) * 4 > (rowids[-1] - rowids[0] + 1) or len(rowids) > 5000:  # dense: one scan of that rowid range
        fetched = reader.query(
            f"SELECT e.rowid, {column} FROM {table} AS e NOT INDEXED WHERE e.rowid BETWEEN {int(rowids[0])} AND "
            f"{int(rowids[-1])} AND {column} IS NOT NULL"
        )
        if len(fetched) < len(rowids):
            return None
        at = np.searchsorted(np.asarray([r for r, _ in fetched], dtype=np.int64), rowids)
        if (at >= len(fetched)).any():
            return None
        values = [fetched[i] for i in at.tolist()]
        if any(r != want for (r, _), want in zip(values, rowids.tolist(), strict=True)):
            return None
        return [v for _, v in values]
    fetched = []
    for chunk in range(0, len(rowids), 500):
        part = ",".join(str(int(r)) for r in rowids[chunk : chunk + 500])
        fetched += reader.query(f"SELECT e.rowid, {column} FROM {table} AS e WHERE e.rowid IN ({part}) ORDER BY e.rowid")
    if [r for r, _ in fetched] != rowids.tolist():
        return None
    return [v for _, v in fetched]


def _text_sql(reader: ExportFile, cols: set[str]) -> tuple[str, str]:
    """(the text of a range, the join it needs): inline `text`, else the StringIds value of `textId`."""
    if "textId" in cols and "StringIds" in reader.tables:
        return (
            "coalesce(e.text, s.value, CASE WHEN e.textId IS NOT NULL THEN '<string ' || e.textId || '>' END)",
            "LEFT JOIN StringIds AS s ON e.textId = s.id",
        )
    return "e.text", ""


def _payload_sql(cols: set[str]) -> str:
    """The range's numeric payload: the first payload column holding a number, else NULL."""
    payload_cols = [
        f"CASE WHEN typeof(e.{c}) IN ('integer', 'real') THEN e.{c} END" for c in PAYLOAD_COLUMNS if c in cols
    ]
    return f"coalesce({', '.join(payload_cols)}, NULL)" if payload_cols else "NULL"


def _read_columnar(reader: ExportFile, table: str, cols: set[str], where: str) -> NvtxRanges | None:
    """The ranges read in narrow scans: integers through int64s, texts as one column, payloads only where present.

    None when a thread or domain id is not an integer (the row-wise read handles those). Rows come in rowid order
    (NOT INDEXED scans), so the scans line up; then they are ordered by start as the row-wise read's ORDER BY does.
    """
    domains = "domainId" in cols
    numbers = {"row": "e.rowid", "start": "e.start", "end": "e.end", "thread": "e.globalTid"}
    if domains:
        numbers["domain"] = "e.domainId"
    found = packed_scan(reader.query, f"{table} AS e", numbers, where, blob=True, bound=reader.bound(table))
    if found is None:
        return None
    row = found["row"]  # ascending: the scan order of every query below
    if not len(row):
        return empty_nvtx()
    text_sql, join = _text_sql(reader, cols)
    texts = reader.query(f"SELECT {text_sql} FROM {table} AS e NOT INDEXED {join} WHERE {where}")
    if len(texts) != len(row):
        return None
    payload, json_text = np.full(len(row), np.nan), np.full(len(row), None, dtype=object)
    blobs = np.full(len(row), None, dtype=object)
    payload_sql, json_sql = _payload_sql(cols), "e.jsonText" if "jsonText" in cols else "NULL"
    blob_sql = BLOB_SQL if BLOB_COLUMN in cols else "NULL"
    if payload_sql != "NULL" or json_sql != "NULL" or blob_sql != "NULL":  # few ranges carry one: only those rows
        sparse = reader.query(
            f"SELECT e.rowid, {payload_sql} AS p, {json_sql} AS j, {blob_sql} AS b FROM {table} AS e NOT INDEXED "
            f"WHERE {where} AND (p IS NOT NULL OR j IS NOT NULL OR b IS NOT NULL)"
        )
        if sparse:
            ids, values, jsons, held = zip(*sparse, strict=True)
            at = np.searchsorted(row, np.asarray(ids, dtype=np.int64))
            payload[at] = np.asarray(values, dtype=np.float64)  # NULL -> NaN
            json_text[at] = [j if j.__class__ is str else None for j in jsons]
            blobs[at] = held
    text = np.asarray([t if t.__class__ is str else _text(t) for (t,) in texts], dtype=object)
    thread = found["thread"]
    domain = _domain_names(reader, table, found["domain"], thread) if domains else np.full(len(row), "", dtype=object)
    ranges = _with_blobs(reader, NvtxRanges(found["start"], found["end"], text, domain, thread, payload, json_text), blobs)
    ranges = _with_tables(reader, ranges, row)
    start = found["start"]
    if (start[1:] >= start[:-1]).all():  # recorded in start order already
        return ranges
    return ranges.take(np.argsort(start, kind="stable"))


def _domain_names(
    reader: ExportFile, table: str, domain: np.ndarray, thread: np.ndarray, created: dict | None = None
) -> np.ndarray:
    """The domain name of each range: its process's domain-create event's text, else `domain N` ('' for 0).
    `created`: {(domainId, process): name}, read from the pages; else SQLite groups the create events."""
    if created is None:
        created = {
            (d, p): name
            for d, p, name in reader.query(
                f"SELECT domainId, globalTid >> {PID_SHIFT}, max(text) FROM {table} "
                f"WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY 1, 2"
            )
        }
    # A few domains and processes: their distinct pairs from the codes of each (a unique over pairs sorts them all).
    domains, domain_code = np.unique(domain, return_inverse=True)
    processes, process_code = np.unique(thread >> PID_SHIFT, return_inverse=True)
    pairs, codes = np.unique(domain_code.reshape(-1) * len(processes) + process_code.reshape(-1), return_inverse=True)
    names = []
    for pair in pairs.tolist():
        d, p = int(domains[pair // len(processes)]), int(processes[pair % len(processes)])
        name = created.get((d, p))
        names.append(_text(name) if name is not None else f"domain {d}" if d > 0 else "")
    return np.asarray(names, dtype=object)[codes.reshape(-1)]


def _read_rows(reader: ExportFile, table: str, cols: set[str], where: str) -> NvtxRanges:
    """The ranges in one row-wise query, text, domain and payload resolved by SQL joins."""
    text_sql, join = _text_sql(reader, cols)
    json_sql = "e.jsonText" if "jsonText" in cols else "NULL"
    blob_sql = BLOB_SQL if BLOB_COLUMN in cols else "NULL"
    domain_sql, domain_join = "''", ""
    if "domainId" in cols:
        # Domain names come from the domain-create events of the same process (globalTid >> 24 is the process).
        domain_join = (
            f"LEFT JOIN (SELECT domainId, globalTid >> {PID_SHIFT} AS proc, max(text) AS name FROM "
            f"{table} WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY 1, 2) AS d "
            f"ON e.domainId = d.domainId AND (e.globalTid >> {PID_SHIFT}) = d.proc"
        )
        # A domain whose create event a derived file cut off is still a domain: named by its id.
        domain_sql = "coalesce(d.name, CASE WHEN e.domainId > 0 THEN 'domain ' || e.domainId ELSE '' END)"
    rows = reader.query(
        f"SELECT e.start, e.end, {text_sql}, {domain_sql}, "
        f"CASE WHEN typeof(e.globalTid) = 'integer' THEN e.globalTid ELSE 0 END, {_payload_sql(cols)}, {json_sql}, "
        f"{blob_sql}, e.rowid "
        f"FROM {table} AS e {join} {domain_join} WHERE {where} ORDER BY e.start"
    )
    if not rows:
        return empty_nvtx()
    start, end, text, domain, thread, payload, json_text, blobs, rowids = zip(*rows, strict=True)
    ranges = NvtxRanges(
        np.asarray(start, dtype=np.int64),
        np.asarray(end, dtype=np.int64),
        np.asarray([t if t.__class__ is str else _text(t) for t in text], dtype=object),
        np.asarray([d if d.__class__ is str else _text(d) for d in domain], dtype=object),
        np.asarray(thread, dtype=np.int64),
        np.asarray(payload, dtype=np.float64),  # NULL -> NaN
        np.asarray([j if j.__class__ is str else None for j in json_text], dtype=object),
    )
    ranges = _with_blobs(reader, ranges, np.asarray(blobs, dtype=object))
    return _with_tables(reader, ranges, np.asarray(rowids, dtype=np.int64))
