/* Columns of an SQLite rowid table read straight from the file's B-tree pages (see pagescan.py): integers, REAL
   values as their IEEE-754 bits, and the bytes of TEXT and BLOB values copied into one buffer.

   The file is mapped read-only by the caller; every offset is checked against the page's usable size and the
   file's page count, the tree depth is limited and the number of pages visited is bounded by the page count, so a
   damaged file gives an error code, never a crash, a loop or a write past the output arrays. No globals: callers
   read several tables at once in threads.

   Results: >= 0 the row count; NSK_BAD: something unexpected (damaged or unsupported: read through SQLite);
   NSK_NOT_INTEGER: a value that is not an INTEGER in a column read without kinds; NSK_NO_MEMORY. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FROM_BIG_ENDIAN(x) (x)
#else
#define FROM_BIG_ENDIAN(x) __builtin_bswap64(x)
#endif

#define NSK_BAD (-1)
#define NSK_NOT_INTEGER (-2)
#define NSK_NO_MEMORY (-3)
#define NSK_NEED_MORE (-4) /* internal: the record's bytes needed lie past those at hand */
#define NSK_NOT_IN_PLACE (-5) /* a WANT_SPAN value spills to overflow pages: read it with WANT_TEXT */
#define MAX_DEPTH 40
#define MAX_SLOTS 64

/* flags of a requested column */
#define WANT_KINDS 1   /* write its storage class; non-INTEGER values are allowed (value 0) */
#define NULL_DEFAULT 2 /* missing from a short record (ALTER TABLE ADD COLUMN): NULL; else such a row is NSK_BAD */
#define REAL_AFFINITY 4 /* an integer on disk is read by SQLite as a REAL */
#define WANT_TEXT 8     /* with WANT_KINDS: a TEXT or BLOB value's bytes appended to the text buffer (see emit_text) */
#define WANT_SPAN 16    /* with WANT_KINDS: a TEXT or BLOB value's place in the file, not copied (see nsk_read_rows) */

enum { KIND_NULL = 0, KIND_INTEGER = 1, KIND_REAL = 2, KIND_TEXT = 3, KIND_BLOB = 4 };

typedef struct {
    const uint8_t *file;
    const uint8_t *file_end; /* past the mapped bytes: no read reaches it */
    int64_t pages;    /* page count of the database */
    int64_t size;     /* page size */
    int64_t usable;   /* usable bytes of a page */
    int64_t visited;  /* pages visited so far (bounded by `pages`) */
    int decode;       /* 0: count rows; 1: decode them */
    int64_t rows;     /* rows counted or written so far */
    int64_t last_rowid;
    /* decoding */
    int64_t slots;            /* requested columns */
    const int32_t *position;  /* per slot: record position, -1 = the rowid */
    const int32_t *flags;     /* per slot */
    const int32_t *kind_slot; /* per slot: its row in kinds, or -1 */
    const int32_t *slot_of;   /* per record position 0..max_position: the slot reading it, or -1 */
    int32_t max_position;     /* -1: only the rowid */
    uint8_t *kinds;           /* kind slots x capacity */
    int64_t capacity;
    int plain;                     /* no slot wants text or has REAL affinity: decode_plain may take a row */
    int64_t *columns[MAX_SLOTS];   /* per slot: its values, one per row */
    int32_t rowid_slot[MAX_SLOTS]; /* the slots reading the rowid */
    int64_t rowid_slots;
    /* per one-byte serial type (see fill_tables): its size (255: not one), flags (1 not an INTEGER, 2 not one),
       the right shift of 8 big-endian bytes that leaves its value */
    uint8_t short_sizes[256], short_flags[256], short_shifts[256];
    uint8_t *scratch; /* an overflowing payload's first bytes, gathered */
    int64_t scratch_size;
    /* texts: per (row, text slot) in that order, the value's bytes then a NUL */
    int32_t text_slot[MAX_SLOTS]; /* per slot: its row in text_ends, or -1 */
    int64_t text_slots;
    int64_t *text_ends;           /* text slots x capacity: where each value's bytes end in the buffer */
    uint8_t *text;                /* malloc'd, grown by doubling; handed to the caller (nsk_free) */
    int64_t text_size, text_capacity;
    int64_t text_nuls; /* NUL bytes inside the values (not the separators) */
    int64_t text_bytes; /* the values' bytes (without the separators) */
} Scan;

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* An SQLite varint at p (at most 9 bytes, none at or past `end`): its length, or 0 when it does not fit. */
static inline int varint(const uint8_t *p, const uint8_t *end, uint64_t *value) {
    uint64_t v = 0;
    int i;
    if (p < end && p[0] < 0x80) { /* the common case: one byte */
        *value = p[0];
        return 1;
    }
    for (i = 0; i < 8; i++) {
        if (p + i >= end) return 0;
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *value = v;
            return i + 1;
        }
    }
    if (p + 8 >= end) return 0;
    *value = (v << 8) | p[8];
    return 9;
}

/* Bytes of a value of serial type st, or -1 for the reserved types 10 and 11. */
static inline int64_t serial_size(uint64_t st) {
    static const int8_t fixed[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, -1, -1};
    if (st < 12) return fixed[st];
    return (int64_t)((st - 12) / 2);
}

static inline int serial_kind(uint64_t st) {
    static const uint8_t kinds[12] = {KIND_NULL, 1, 1, 1, 1, 1, 1, KIND_REAL, 1, 1, KIND_BLOB, KIND_TEXT};
    return st < 12 ? kinds[st] : (st & 1) ? KIND_TEXT : KIND_BLOB; /* 10 and 11 never get here (serial_size) */
}

/* The integer of serial type st (1 to 6: big-endian two's complement of 1, 2, 3, 4, 6, 8 bytes; 8 and 9: the
   constants 0 and 1) at p, where 8 bytes can be read: one load and a shift, no branch on the width. */
static inline int64_t int_value(uint64_t st, const uint8_t *p) {
    static const uint8_t shift[10] = {0, 56, 48, 40, 32, 16, 0, 0, 0, 0};
    uint64_t raw;
    int64_t loaded;
    memcpy(&raw, p, 8);
    loaded = (int64_t)FROM_BIG_ENDIAN(raw) >> shift[st]; /* an arithmetic shift (gcc, clang): the sign kept */
    return st >= 8 ? (int64_t)(st - 8) : loaded;
}

static const uint8_t *page_at(const Scan *s, int64_t number) {
    return s->file + (number - 1) * s->size;
}

/* Copy the first `want` bytes of a payload (local part at `local_bytes`, `local` long, then the overflow chain from
   page `overflow`) into the scratch buffer. */
static int gather(Scan *s, const uint8_t *local_bytes, int64_t local, uint32_t overflow, int64_t want) {
    int64_t copied, steps = 0;
    if (want > s->scratch_size) {
        uint8_t *grown = (uint8_t *)realloc(s->scratch, (size_t)want + 8); /* 8: int_value reads 8 bytes */
        if (!grown) return NSK_NO_MEMORY;
        s->scratch = grown;
        s->scratch_size = want;
    }
    copied = want < local ? want : local;
    memcpy(s->scratch, local_bytes, (size_t)copied);
    while (copied < want) {
        const uint8_t *page;
        int64_t n = s->usable - 4;
        if (overflow < 1 || overflow > s->pages || ++steps > s->pages) return NSK_BAD;
        page = page_at(s, overflow);
        if (n > want - copied) n = want - copied;
        memcpy(s->scratch + copied, page + 4, (size_t)n);
        copied += n;
        overflow = be32(page);
    }
    return 0;
}

/* The per-type tables of decode_plain: a serial type below 0x80 is a one-byte varint; 10 and 11 are reserved. */
static void fill_tables(Scan *s) {
    int type;
    for (type = 0; type < 256; type++) {
        int64_t size = type < 0x80 ? serial_size((uint64_t)type) : -1;
        int integer = (type >= 1 && type <= 6) || type == 8 || type == 9;
        s->short_sizes[type] = size < 0 ? 255 : (uint8_t)size;
        s->short_flags[type] = (uint8_t)((integer ? 0 : 1) | (size < 0 ? 2 : 0));
        s->short_shifts[type] = (uint8_t)(type >= 1 && type <= 5 ? 64 - 8 * size : 0);
    }
}

/* The plain case of decode_record in one pass (no text, no REAL affinity: s->plain): a one-byte header size,
   one-byte serial types up to the last column read, each value an INTEGER, or NULL in a column read with kinds.
   0 done, NSK_NOT_INTEGER, or 1: not this case (decode_record decides; values already written to the row are then
   overwritten, or the read fails). */
static inline int decode_plain(Scan *s, const uint8_t *rec, int64_t avail, int64_t total, const uint8_t *limit,
                               int64_t rowid, int64_t row) {
    int64_t header_size = rec[0], body = header_size, i, stop = avail < total ? avail : total;
    const int64_t last = s->max_position; /* locals: the stores below could alias the Scan's int64 fields */
    const int32_t *slot_of = s->slot_of, *kind_slot = s->kind_slot;
    int64_t *const *columns = s->columns;
    uint8_t *kinds = s->kinds;
    const int64_t capacity = s->capacity;
    const uint8_t *sizes = s->short_sizes, *type_flags_of = s->short_flags, *shifts = s->short_shifts;
    int flags = 0;
    if (header_size >= 0x80 || last + 1 >= header_size || header_size > stop) return 1;
    /* every value read lies below rec + header_size + 255 * (last + 1): 8 bytes there must be readable */
    if (limit - rec < header_size + 255 * (last + 1) + 8) return 1;
    for (i = 0; i <= last; i++) {
        uint8_t type = rec[1 + i];
        int32_t slot = slot_of[i];
        uint8_t type_flags = type_flags_of[type];
        if (slot >= 0) {
            uint64_t raw;
            int64_t value;
            memcpy(&raw, rec + body, 8);
            /* an arithmetic shift (gcc, clang) keeps the sign; the constants 0 and 1 (types 8, 9) have no bytes */
            value = (int64_t)FROM_BIG_ENDIAN(raw) >> shifts[type];
            if (kind_slot[slot] < 0) {
                columns[slot][row] = type < 8 ? value : type - 8;
                flags |= type_flags;
            } else { /* with kinds: NULL is 0 of kind NULL; a REAL, TEXT or BLOB takes the general path */
                if (type != 0 && (type_flags & 1)) return 1;
                columns[slot][row] = type == 0 ? 0 : type < 8 ? value : type - 8;
                kinds[(int64_t)kind_slot[slot] * capacity + row] = type == 0 ? KIND_NULL : KIND_INTEGER;
                flags |= type_flags & 2;
            }
        } else {
            flags |= type_flags & 2;
        }
        body += sizes[type];
    }
    if ((flags & 2) || body > stop) return 1;
    for (i = 0; i < s->rowid_slots; i++) {
        int32_t slot = s->rowid_slot[i];
        s->columns[slot][row] = rowid;
        if (kind_slot[slot] >= 0) kinds[(int64_t)kind_slot[slot] * capacity + row] = KIND_INTEGER;
    }
    return flags ? NSK_NOT_INTEGER : 0;
}

/* Append `size` bytes at `bytes` to the text buffer, or (bytes NULL) the NUL that ends a value. */
static int emit_text(Scan *s, const uint8_t *bytes, int64_t size) {
    int64_t need = s->text_size + (bytes ? size : 1);
    const uint8_t *nul;
    if (bytes && size == 0) return 0;
    /* a sound file stores each value's bytes once: more than the file holds is a damaged overflow chain */
    if (bytes && s->text_bytes + size > s->file_end - s->file) return NSK_BAD;
    if (need > s->text_capacity) {
        int64_t capacity = s->text_capacity ? s->text_capacity : 65536;
        uint8_t *grown;
        while (capacity < need) capacity *= 2;
        grown = (uint8_t *)realloc(s->text, (size_t)capacity);
        if (!grown) return NSK_NO_MEMORY;
        s->text = grown;
        s->text_capacity = capacity;
    }
    if (!bytes) {
        s->text[s->text_size++] = 0;
        return 0;
    }
    memcpy(s->text + s->text_size, bytes, (size_t)size);
    s->text_size += size;
    s->text_bytes += size;
    for (nul = memchr(bytes, 0, (size_t)size); nul; nul = memchr(nul + 1, 0, (size_t)(bytes + size - nul - 1)))
        s->text_nuls++; /* a value holding NULs: the caller splits the buffer by the ends instead */
    return 0;
}

/* Decode the requested columns of one record (`avail` of its `total` bytes at hand at `rec`) into row `row`.
   NSK_NEED_MORE with *need set when bytes past `avail` are needed. */
static int decode_record(Scan *s, const uint8_t *rec, int64_t avail, int64_t total, const uint8_t *limit,
                         int64_t rowid, int64_t row, int64_t *need) {
    uint64_t header_size, st;
    int64_t pos, body, i, slot, furthest = 0;
    uint64_t types[MAX_SLOTS];
    int64_t offsets[MAX_SLOTS];
    uint64_t present = 0; /* bit per slot: its column is in the record */
    int n;
    if (s->max_position >= 0) {
        const uint8_t *end = rec + (avail < total ? avail : total);
        n = varint(rec, end, &header_size);
        if (n == 0) {
            if (avail < total) {
                *need = total < 9 ? total : 9;
                return NSK_NEED_MORE;
            }
            return NSK_BAD;
        }
        if (header_size < (uint64_t)n || header_size > (uint64_t)total) return NSK_BAD;
        if ((int64_t)header_size > avail) {
            *need = (int64_t)header_size;
            return NSK_NEED_MORE;
        }
        pos = n;
        body = (int64_t)header_size;
        if (header_size < 0x80 && s->max_position + 1 < (int64_t)header_size) {
            /* the common case: a one-byte header size, serial types of one byte each (their bytes < 0x80) up to the
               last column read. Then the i-th type is byte 1 + i; offsets are sums over a size table. */
            int64_t at[128];
            for (i = 0; i <= s->max_position; i++) {
                uint8_t size = s->short_sizes[rec[1 + i]];
                if (size == 255) break;
                at[i] = body;
                body += size;
            }
            if (i > s->max_position && body <= total && body <= avail) {
                for (slot = 0; slot < s->slots; slot++) {
                    int32_t p = s->position[slot];
                    if (p >= 0) {
                        types[slot] = rec[1 + p];
                        offsets[slot] = at[p];
                        present |= (uint64_t)1 << slot;
                    }
                }
                goto emit;
            }
            body = (int64_t)header_size; /* not the common case after all: the general parse */
        }
        for (i = 0; i <= s->max_position && pos < (int64_t)header_size; i++) {
            int64_t size;
            n = varint(rec + pos, rec + header_size, &st);
            if (n == 0) return NSK_BAD;
            pos += n;
            size = serial_size(st);
            if (size < 0 || size > total) return NSK_BAD;
            slot = s->slot_of[i];
            if (slot >= 0) {
                if (body + size > total) return NSK_BAD;
                types[slot] = st;
                offsets[slot] = body;
                present |= (uint64_t)1 << slot;
                if (body + size > furthest) furthest = body + size;
            }
            body += size;
            if (body > total) body = total + 1; /* later columns are past the end: only a read of one fails */
        }
        if (furthest > avail) {
            *need = furthest;
            return NSK_NEED_MORE;
        }
    }
emit:
    for (slot = 0; slot < s->slots; slot++) {
        int kind;
        int64_t value = 0;
        int32_t flags = s->flags[slot];
        if (s->position[slot] < 0) {
            kind = KIND_INTEGER;
            value = rowid;
        } else if (!(present >> slot & 1)) { /* a short record: the column's default */
            if (!(flags & NULL_DEFAULT)) return NSK_BAD;
            kind = KIND_NULL;
        } else {
            const uint8_t *at = rec + offsets[slot];
            st = types[slot];
            kind = serial_kind(st);
            if (kind == KIND_INTEGER || kind == KIND_REAL) {
                /* serial type 7 is a big-endian double: int_value's 8-byte load (no shift) leaves its bits */
                if (at + 8 <= limit) {
                    value = int_value(st, at);
                } else { /* the last bytes of the file or of the gathered payload: a padded copy */
                    uint8_t padded[8] = {0};
                    memcpy(padded, at, (size_t)serial_size(st));
                    value = int_value(st, padded);
                }
                if (kind == KIND_REAL && (value & 0x7ff0000000000000LL) == 0x7ff0000000000000LL &&
                    (value & 0x000fffffffffffffLL) != 0) {
                    /* SQLite returns a NaN on disk as NULL (its typeof() says 'null', or 'real' when the value lies in
                       an overflow page: it then looks at the serial type only) */
                    kind = KIND_NULL;
                    value = 0;
                } else if (kind == KIND_INTEGER && (flags & REAL_AFFINITY)) { /* SQLite returns (double)value */
                    double real = (double)value;
                    memcpy(&value, &real, 8);
                    kind = KIND_REAL;
                }
            }
            if ((flags & WANT_TEXT) && (kind == KIND_TEXT || kind == KIND_BLOB)) {
                int done = emit_text(s, at, serial_size(st));
                if (done != 0) return done;
            } else if ((flags & WANT_SPAN) && (kind == KIND_TEXT || kind == KIND_BLOB)) {
                uintptr_t from = (uintptr_t)at, low = (uintptr_t)s->file, high = (uintptr_t)s->file_end;
                if (from < low || from > high || serial_size(st) > (int64_t)(high - from)) return NSK_NOT_IN_PLACE;
                value = (int64_t)(from - low); /* its bytes are [value, text end) of the mapped file */
                s->text_ends[(int64_t)s->text_slot[slot] * s->capacity + row] = value + serial_size(st);
            }
        }
        if ((flags & WANT_SPAN) && kind != KIND_TEXT && kind != KIND_BLOB) /* an empty span, at 0 */
            s->text_ends[(int64_t)s->text_slot[slot] * s->capacity + row] = 0;
        if (flags & WANT_TEXT) { /* every (row, text slot) ends with a NUL, an empty value for non-texts */
            int done = emit_text(s, NULL, 0);
            if (done != 0) return done;
            s->text_ends[(int64_t)s->text_slot[slot] * s->capacity + row] = s->text_size - 1;
        }
        if (kind != KIND_INTEGER && !(flags & WANT_KINDS)) return NSK_NOT_INTEGER;
        s->columns[slot][row] = value;
        if (s->kind_slot[slot] >= 0) s->kinds[(int64_t)s->kind_slot[slot] * s->capacity + row] = (uint8_t)kind;
    }
    return 0;
}

/* One leaf cell at `cell` (its page ends at `end`): decoded into the next row. */
static inline int leaf_cell(Scan *s, const uint8_t *cell, const uint8_t *end) {
    uint64_t payload, key;
    int64_t total, local, need = 0, x, row;
    uint32_t overflow = 0;
    int n, done, tries;
    n = varint(cell, end, &payload);
    if (n == 0) return NSK_BAD;
    cell += n;
    n = varint(cell, end, &key);
    if (n == 0) return NSK_BAD;
    cell += n;
    if ((int64_t)key <= s->last_rowid && s->rows > 0) return NSK_BAD; /* not in rowid order: damaged */
    s->last_rowid = (int64_t)key;
    x = s->usable - 35;
    if (payload > (uint64_t)s->pages * (uint64_t)s->usable) return NSK_BAD; /* more than the file holds */
    total = (int64_t)payload;
    if (total == 0) return NSK_BAD;
    if (total <= x) {
        local = total;
    } else {
        int64_t m = ((s->usable - 12) * 32 / 255) - 23;
        int64_t k = m + ((total - m) % (s->usable - 4));
        local = k <= x ? k : m;
    }
    if (local > end - cell || (local < total && local + 4 > end - cell)) return NSK_BAD;
    if (local < total) overflow = be32(cell + local);
    row = s->rows;
    if (row >= s->capacity) return NSK_BAD; /* more rows than counted: never write past the arrays */
    done = s->plain ? decode_plain(s, cell, local, total, s->file_end, (int64_t)key, row) : 1;
    if (done == 1) done = decode_record(s, cell, local, total, s->file_end, (int64_t)key, row, &need);
    for (tries = 0; done == NSK_NEED_MORE && tries < 4; tries++) {
        if (local >= total || need <= local || need > total) return NSK_BAD;
        done = gather(s, cell, local, overflow, need);
        if (done == 0) done = decode_record(s, s->scratch, need, total, s->scratch + need, (int64_t)key, row, &need);
    }
    if (done != 0) return done == NSK_NEED_MORE ? NSK_BAD : done;
    s->rows++;
    return 0;
}

/* Ask the memory for the line at `at` ahead of its use (a hint: it reads nothing and cannot fault). The processor's
   own look-ahead stops at each page's end, and the walk goes page by page: without this it waits on each page's
   header, then on each cell, one after the other. */
static inline void prefetch(const uint8_t *at) {
#if defined(__GNUC__)
    __builtin_prefetch(at);
#else
    (void)at;
#endif
}

/* Prefetch the header and cell pointers of page `number` (when it is one of the file's). */
static inline void prefetch_page(const Scan *s, int64_t number) {
    if (number >= 1 && number <= s->pages) prefetch(page_at(s, number) + (number == 1 ? 100 : 0));
}

static int walk(Scan *s, int64_t number, int depth) {
    const uint8_t *page, *header, *end;
    int64_t cells, i, header_size;
    int type, done;
    if (number < 1 || number > s->pages || depth > MAX_DEPTH || ++s->visited > s->pages) return NSK_BAD;
    page = page_at(s, number);
    header = page + (number == 1 ? 100 : 0);
    end = page + s->usable;
    type = header[0];
    if (type != 0x05 && type != 0x0D) return NSK_BAD;
    header_size = type == 0x05 ? 12 : 8;
    cells = ((int64_t)header[3] << 8) | header[4];
    if (header + header_size + 2 * cells > end) return NSK_BAD;
    if (type == 0x0D && !s->decode) {
        s->rows += cells;
        return 0;
    }
    for (i = 0; i < cells; i++) { /* a leaf's cells, an interior page's children's headers: all at once, first */
        const uint8_t *cell = page + (((int64_t)header[header_size + 2 * i] << 8) | header[header_size + 2 * i + 1]);
        if (type == 0x0D) prefetch(cell < end ? cell : page);
        else if (cell + 4 <= end) prefetch_page(s, be32(cell));
    }
    if (type == 0x05) prefetch_page(s, be32(header + 8));
    for (i = 0; i < cells; i++) {
        int64_t offset = ((int64_t)header[header_size + 2 * i] << 8) | header[header_size + 2 * i + 1];
        const uint8_t *cell = page + offset;
        if (cell < header + header_size + 2 * cells || cell >= end) return NSK_BAD;
        if (type == 0x0D) {
            done = leaf_cell(s, cell, end);
        } else {
            if (cell + 4 > end) return NSK_BAD;
            done = walk(s, be32(cell), depth + 1);
        }
        if (done != 0) return done;
    }
    if (type == 0x05) return walk(s, be32(header + 8), depth + 1);
    return 0;
}

/* The file's geometry from its header; 0 when it is not one this reader knows. */
static int open_scan(Scan *s, const uint8_t *file, int64_t file_size) {
    int64_t size, in_header;
    memset(s, 0, sizeof(*s));
    if (file_size < 512 || memcmp(file, "SQLite format 3", 16) != 0) return 0;
    size = ((int64_t)file[16] << 8) | file[17];
    if (size == 1) size = 65536;
    if (size < 512 || size > 65536 || (size & (size - 1))) return 0;
    if (file[18] < 1 || file[18] > 2 || file[19] < 1 || file[19] > 2) return 0;
    if (file[21] != 64 || file[22] != 32 || file[23] != 32) return 0;
    s->file = file;
    s->file_end = file + file_size;
    s->size = size;
    s->usable = size - file[20];
    if (s->usable < 480) return 0;
    s->pages = file_size / size;
    in_header = be32(file + 28);
    if (in_header > 0 && be32(file + 24) == be32(file + 92)) { /* the header's page count is valid: it rules */
        if (in_header > s->pages) return 0;
        s->pages = in_header;
    }
    return s->pages >= 1;
}

/* The number of rows of the table whose B-tree starts at page `root`, or NSK_BAD. */
int64_t nsk_count_rows(const uint8_t *file, int64_t file_size, int64_t root) {
    Scan s;
    int done;
    if (!open_scan(&s, file, file_size)) return NSK_BAD;
    done = walk(&s, root, 0);
    return done != 0 ? done : s.rows;
}

/* Decode `slots` columns of every row (exactly `capacity` rows, as counted) into columns[slot][row] (an array per
   slot: each small enough for malloc to reuse, where one block of every column would be mapped afresh) and,
   for slots with kind_slot >= 0, their storage classes into kinds[kind_slot * capacity + row]. A value is the
   INTEGER, or the IEEE-754 bits of a REAL (of (double)integer for an integer on disk in a REAL-affinity column), or 0.

   Slots flagged WANT_TEXT (the k-th of them: text slot k) also write, per row, the bytes of a TEXT or BLOB value (none
   for other kinds) then a NUL into one buffer, row by row, each row's text slots in order; text_ends[k * capacity +
   row] is where that value's bytes end (its NUL's offset). The buffer goes to *text (NULL when no slot wants text or
   on an error; free it with nsk_free), its size to *text_size, the count of NULs inside the values to *text_nuls.
   Slots flagged WANT_SPAN (text slots too, numbered with those of WANT_TEXT) copy nothing: a TEXT or BLOB value's
   bytes are [columns[...][...], text_ends[...]) of the mapped file (NSK_NOT_IN_PLACE where they spill to overflow pages);
   a value of another kind has the empty span [0, 0) (its value as usual). */
int64_t nsk_read_rows(const uint8_t *file, int64_t file_size, int64_t root, int64_t slots, const int32_t *position,
                      const int32_t *flags, const int32_t *kind_slot, const int32_t *slot_of, int32_t max_position,
                      int64_t *const *columns, uint8_t *kinds, int64_t capacity, int64_t *text_ends, uint8_t **text,
                      int64_t *text_size, int64_t *text_nuls) {
    Scan s;
    int done;
    int64_t i;
    *text = NULL;
    *text_size = *text_nuls = 0;
    if (!open_scan(&s, file, file_size) || slots < 1 || slots > MAX_SLOTS || capacity < 0) return NSK_BAD;
    for (i = 0; i < slots; i++)
        if (position[i] > max_position) return NSK_BAD;
    s.decode = 1;
    s.slots = slots;
    s.position = position;
    s.flags = flags;
    s.kind_slot = kind_slot;
    s.slot_of = slot_of;
    s.max_position = max_position;
    s.kinds = kinds;
    s.capacity = capacity;
    s.plain = 1;
    fill_tables(&s);
    for (i = 0; i < slots; i++) {
        s.columns[i] = columns[i];
        if (position[i] < 0) s.rowid_slot[s.rowid_slots++] = (int32_t)i;
        if (flags[i] & (REAL_AFFINITY | WANT_TEXT | WANT_SPAN)) s.plain = 0; /* (short records never take it) */
        s.text_slot[i] = (flags[i] & (WANT_TEXT | WANT_SPAN)) ? (int32_t)s.text_slots++ : -1;
    }
    s.text_ends = text_ends;
    done = walk(&s, root, 0);
    free(s.scratch);
    if (done == 0 && s.rows != capacity) done = NSK_BAD;
    if (done != 0) {
        free(s.text);
        return done;
    }
    *text = s.text;
    *text_size = s.text_size;
    *text_nuls = s.text_nuls;
    return s.rows;
}

/* Free a text buffer of nsk_read_rows. */
void nsk_free(void *buffer) { free(buffer); }
