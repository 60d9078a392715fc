/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: every allocation of dlock goes through the allocator hook. */
#ifndef DLOCK_CORE_ALLOC_H
#define DLOCK_CORE_ALLOC_H

#include <stddef.h>

void *dlock__malloc(size_t size);
void *dlock__calloc(size_t n, size_t size);
void *dlock__realloc(void *ptr, size_t size);
void dlock__free(void *ptr);
char *dlock__strdup(const char *s);
char *dlock__strndup(const char *s, size_t n);

#endif
