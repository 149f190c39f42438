/* The part of <string.h> libsais uses on wasm32-unknown-unknown; see README.md.
 * Rust's compiler_builtins defines these symbols in every wasm32 module. */
#ifndef EDGEPATCH_WASM_LIBC_STRING_H
#define EDGEPATCH_WASM_LIBC_STRING_H

#include <stddef.h>

void *memset(void *dest, int byte, size_t count);
void *memcpy(void *restrict dest, const void *restrict src, size_t count);
void *memmove(void *dest, const void *src, size_t count);
int memcmp(const void *a, const void *b, size_t count);

#endif
