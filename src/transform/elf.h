/*
 * elf.h - does a shared object define a symbol?  Answered from its bytes,
 * without loading it (internal to the plugin loader).
 *
 * `reverie plugins` lists every .so in the plugin folders; loading a file
 * runs its constructors, so a file is loaded only once its dynamic symbol
 * table says it defines rv_plugin_descriptor.  The file is untrusted input:
 * every offset and size is checked before use (fuzz_elf.c fuzzes this).
 */
#ifndef REVERIE_ELF_H
#define REVERIE_ELF_H

#include <glib.h>

/* TRUE if data is an ELF shared object (of this machine's class and byte
 * order) whose .dynsym defines symbol.  Otherwise FALSE, with *why (if not
 * NULL) set to a static phrase saying what the file is or lacks. */
gboolean rv_elf_defines_symbol(const guint8 *data, gsize length, const char *symbol, const char **why);

#endif
