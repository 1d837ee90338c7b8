/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* Writes path whole or not at all: write to the FILE that atomic_file_open()
 * returns (a new hidden file beside path; tmp holds its name, strlen(path)
 * + 9 bytes), then atomic_file_commit() syncs it and renames it into place
 * (mode 0644). */
FILE *atomic_file_open(const char *path, char *tmp, size_t tmp_size);
int atomic_file_commit(FILE *f, const char *tmp, const char *path);
