/*
 * columns.c - large arrays with their pages handed over at once (columns.h).
 *
 * Each column starts with a 64-byte header that says how it was obtained,
 * so that one free function serves both kinds; the values follow it, 64-byte
 * aligned.
 */
#include "columns.h"
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* Below this a column comes from g_malloc: its few faults cost less than
 * a system call. */
#define COLUMN_MAPPED_MIN_BYTES ((gsize)4 << 20)

typedef struct {
    gsize mapped;      /* bytes mapped, header included; 0: from g_malloc */
    gsize unused[7];   /* keeps the values 64-byte aligned */
} column_header;
G_STATIC_ASSERT(sizeof(column_header) == 64);

void *rv_column_new(gsize count, gsize size)
{
    gsize bytes = (count + 1) * size;
    if (size != 0 && bytes / size != count + 1) g_error("a column of %" G_GSIZE_FORMAT " values is too large", count);
    gsize total = bytes + sizeof(column_header);
    column_header *header = NULL;
#if defined(__linux__) && defined(MAP_POPULATE)
    if (bytes >= COLUMN_MAPPED_MIN_BYTES) {
        void *mapped = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (mapped != MAP_FAILED) {
            header = mapped;
            header->mapped = total;
        }
    }
#endif
    if (header == NULL) {
        header = g_malloc(total);
        header->mapped = 0;
    }
    return header + 1;
}

void *rv_column_copy(const void *values, gsize count, gsize size)
{
    void *column = rv_column_new(count, size);
    if (count > 0) memcpy(column, values, count * size);
    return column;
}

void rv_column_free(void *column)
{
    if (column == NULL) return;
    column_header *header = (column_header *)column - 1;
#ifdef __linux__
    if (header->mapped != 0) {
        munmap(header, header->mapped);
        return;
    }
#endif
    g_free(header);
}
