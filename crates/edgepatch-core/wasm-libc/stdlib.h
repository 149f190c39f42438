/* The part of <stdlib.h> libsais uses on wasm32-unknown-unknown; see README.md. */
#ifndef EDGEPATCH_WASM_LIBC_STDLIB_H
#define EDGEPATCH_WASM_LIBC_STDLIB_H

#include <stddef.h>

/* Defined in Rust (crates/edgepatch-core/src/matcher.rs, wasm_libc) over its allocator. */
void *edgepatch_wasm_libc_malloc(size_t size);
void *edgepatch_wasm_libc_calloc(size_t count, size_t size);
void edgepatch_wasm_libc_free(void *ptr);

#define malloc(size) edgepatch_wasm_libc_malloc(size)
#define calloc(count, size) edgepatch_wasm_libc_calloc(count, size)
#define free(ptr) edgepatch_wasm_libc_free(ptr)

#endif
