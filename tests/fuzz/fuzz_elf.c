/*
 * fuzz_elf.c - libFuzzer harness for the ELF reader behind `reverie
 * plugins` (src/transform/elf.c), which reads untrusted .so files before
 * deciding whether to load them.
 *
 * The harness aborts on any sanitizer report, and when a file is refused
 * without a reason (the listing prints it).  Seeds: the built plugins.
 * Build and run: tests/fuzz/run_all.sh (see its header).
 */
#include "../../src/transform/elf.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    if (!rv_elf_defines_symbol(data, size, "rv_plugin_descriptor", &why) && why == NULL) {
        fprintf(stderr, "fuzz_elf: refused without a reason\n");
        abort();
    }
    return 0;
}
