/*
 * elf.c - find a defined symbol in the dynamic symbol table of an ELF file
 * held in memory (see elf.h).  Only section headers are read: .dynsym and
 * the string table it links to.  A stripped file without section headers
 * is reported as such and never loaded by the listing.
 */
#include "elf.h"
#include <elf.h>
#include <string.h>

#if GLIB_SIZEOF_VOID_P == 8
typedef Elf64_Ehdr elf_header;
typedef Elf64_Shdr elf_section;
typedef Elf64_Sym elf_symbol;
#define ELF_OWN_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr elf_header;
typedef Elf32_Shdr elf_section;
typedef Elf32_Sym elf_symbol;
#define ELF_OWN_CLASS ELFCLASS32
#endif

#if G_BYTE_ORDER == G_LITTLE_ENDIAN
#define ELF_OWN_DATA ELFDATA2LSB
#else
#define ELF_OWN_DATA ELFDATA2MSB
#endif

static gboolean refuse(const char **why, const char *reason)
{
    if (why) *why = reason;
    return FALSE;
}

/* [offset, offset + size) lies inside a buffer of length bytes. */
static gboolean inside(guint64 offset, guint64 size, gsize length)
{
    return offset <= length && size <= length - offset;
}

/* Section index's header, copied out (the buffer need not be aligned). */
static gboolean read_section(const guint8 *data, gsize length, const elf_header *header, guint index,
                             elf_section *section)
{
    guint64 offset = (guint64)header->e_shoff + (guint64)index * header->e_shentsize;
    if (index >= header->e_shnum || !inside(offset, sizeof *section, length)) return FALSE;
    memcpy(section, data + offset, sizeof *section);
    return TRUE;
}

static gboolean name_is(const guint8 *data, gsize length, const elf_section *strings, guint64 name,
                        const char *symbol)
{
    gsize wanted = strlen(symbol) + 1; /* with its NUL */
    if (name >= strings->sh_size || !inside(strings->sh_offset, strings->sh_size, length)) return FALSE;
    if (strings->sh_size - name < wanted) return FALSE;
    return memcmp(data + strings->sh_offset + name, symbol, wanted) == 0;
}

static gboolean table_defines(const guint8 *data, gsize length, const elf_header *header, const elf_section *table,
                              const char *symbol)
{
    elf_section strings;
    if (table->sh_entsize != sizeof(elf_symbol) || !inside(table->sh_offset, table->sh_size, length) ||
        !read_section(data, length, header, table->sh_link, &strings))
        return FALSE;
    guint64 count = table->sh_size / sizeof(elf_symbol);
    for (guint64 i = 0; i < count; i++) {
        elf_symbol entry;
        memcpy(&entry, data + table->sh_offset + i * sizeof entry, sizeof entry);
        if (entry.st_shndx != SHN_UNDEF && name_is(data, length, &strings, entry.st_name, symbol)) return TRUE;
    }
    return FALSE;
}

gboolean rv_elf_defines_symbol(const guint8 *data, gsize length, const char *symbol, const char **why)
{
    elf_header header;
    if (length < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0) return refuse(why, "not an ELF file");
    if (data[EI_CLASS] != ELF_OWN_CLASS || data[EI_DATA] != ELF_OWN_DATA)
        return refuse(why, "an ELF file for another kind of machine");
    if (length < sizeof header) return refuse(why, "a truncated ELF file");
    memcpy(&header, data, sizeof header);
    if (header.e_type != ET_DYN) return refuse(why, "not a shared object");
    if (header.e_shnum == 0 || header.e_shentsize != sizeof(elf_section))
        return refuse(why, "a shared object without section headers (stripped): cannot be checked");
    /* Keeps e_shoff + index * e_shentsize from wrapping in read_section. */
    if (header.e_shoff > length) return refuse(why, "a damaged ELF file");
    for (guint index = 0; index < header.e_shnum; index++) {
        elf_section section;
        if (!read_section(data, length, &header, index, &section)) return refuse(why, "a damaged ELF file");
        if (section.sh_type == SHT_DYNSYM && table_defines(data, length, &header, &section, symbol)) return TRUE;
    }
    return refuse(why, "a shared object that does not define rv_plugin_descriptor (not a reverie plugin)");
}
