#include <stdint.h>
#include <string.h>
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#ifndef SQLITE_DIRECTONLY
#error "SQLite 3.30 or newer is needed (SQLITE_DIRECTONLY)"
#endif

/* The values of `width` columns, column after column: column j of the rows so far at values[j * capacity]. */
typedef struct {
    sqlite3_int64 *values;
    sqlite3_int64 count, capacity;
    int width;
    int failed; /* 1: a value that is not an INTEGER; 2: out of memory */
} Columns;

static int grow(Columns *columns) {
    sqlite3_int64 grown = columns->capacity ? 2 * columns->capacity : 65536;
    sqlite3_int64 *values = (sqlite3_int64 *)sqlite3_realloc64(columns->values,
                                                               (sqlite3_uint64)grown * columns->width * 8);
    int j;
    if (values == 0) return 0;
    /* each column moves to its new place, the last first (the places overlap) */
    for (j = columns->width - 1; j > 0; j--)
        memmove(values + j * grown, values + j * columns->capacity, (size_t)columns->count * 8);
    columns->values = values;
    columns->capacity = grown;
    return 1;
}

static void int64s_step(sqlite3_context *context, int argc, sqlite3_value **argv) {
    Columns *columns = (Columns *)sqlite3_aggregate_context(context, sizeof(Columns));
    sqlite3_int64 *row;
    int j;
    if (columns == 0) {
        sqlite3_result_error_nomem(context);
        return;
    }
    if (columns->failed) return;
    if (columns->width == 0) columns->width = argc;
    if (columns->count == columns->capacity && !grow(columns)) {
        columns->failed = 2;
        return;
    }
    row = columns->values + columns->count;
    for (j = 0; j < argc; j++) {
        if (sqlite3_value_type(argv[j]) != SQLITE_INTEGER) {
            columns->failed = 1;
            return;
        }
        row[j * columns->capacity] = sqlite3_value_int64(argv[j]);
    }
    columns->count++;
}

static void int64s_final(sqlite3_context *context) {
    Columns *columns = (Columns *)sqlite3_aggregate_context(context, 0);
    int j;
    if (columns == 0 || (columns->count == 0 && !columns->failed)) {
        sqlite3_result_zeroblob(context, 0);
    } else if (columns->failed == 2) {
        sqlite3_result_error_nomem(context);
    } else if (columns->failed) {
        sqlite3_result_null(context);
    } else {
        /* the columns close up (column j at values[j * count]); SQLite takes the buffer and frees it */
        for (j = 1; j < columns->width; j++)
            memmove(columns->values + j * columns->count, columns->values + j * columns->capacity,
                    (size_t)columns->count * 8);
        sqlite3_result_blob64(context, columns->values,
                              (sqlite3_uint64)columns->count * columns->width * sizeof(sqlite3_int64), sqlite3_free);
        columns->values = 0;
    }
    sqlite3_free(columns ? columns->values : 0);
}

/* int64s_into(address, capacity, x1, ..., xk): the same columns written straight into the caller's buffer of k
   columns of `capacity` values (column j at address + j * capacity * 8); the result is the row count, NULL when a
   value is not an INTEGER or the rows do not fit. No copy in SQLite, none into a Python bytes object. */
typedef struct {
    sqlite3_int64 *values;
    sqlite3_int64 count, capacity;
    int failed;
} Into;

static void into_step(sqlite3_context *context, int argc, sqlite3_value **argv) {
    Into *into = (Into *)sqlite3_aggregate_context(context, sizeof(Into));
    sqlite3_int64 *row;
    int j;
    if (into == 0) {
        sqlite3_result_error_nomem(context);
        return;
    }
    if (into->failed) return;
    if (into->values == 0) {
        if (argc < 3 || sqlite3_value_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_type(argv[1]) != SQLITE_INTEGER
            || sqlite3_value_int64(argv[0]) == 0 || sqlite3_value_int64(argv[1]) < 0) {
            into->failed = 1;
            return;
        }
        into->values = (sqlite3_int64 *)(intptr_t)sqlite3_value_int64(argv[0]);
        into->capacity = sqlite3_value_int64(argv[1]);
    }
    if (into->count == into->capacity) {
        into->failed = 1;
        return;
    }
    row = into->values + into->count;
    for (j = 2; j < argc; j++) {
        if (sqlite3_value_type(argv[j]) != SQLITE_INTEGER) {
            into->failed = 1;
            return;
        }
        row[(j - 2) * into->capacity] = sqlite3_value_int64(argv[j]);
    }
    into->count++;
}

static void into_final(sqlite3_context *context) {
    Into *into = (Into *)sqlite3_aggregate_context(context, 0);
    if (into == 0) {
        sqlite3_result_int64(context, 0);
    } else if (into->failed) {
        sqlite3_result_null(context);
    } else {
        sqlite3_result_int64(context, into->count);
    }
}

int sqlite3_nsyskit_int64s_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
    int rc;
    SQLITE_EXTENSION_INIT2(api);
    (void)error;
    rc = sqlite3_create_function_v2(db, "int64s", -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, 0, 0, int64s_step,
                                    int64s_final, 0);
    if (rc != SQLITE_OK) return rc;
    /* DIRECTONLY: a view or trigger inside a file being read can never call it (it writes to an address) */
    return sqlite3_create_function_v2(db, "int64s_into", -1, SQLITE_UTF8 | SQLITE_DIRECTONLY, 0, 0, into_step,
                                      into_final, 0);
}
