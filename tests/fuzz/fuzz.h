/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What every fuzz target shares: the libFuzzer entry point's prototype, a
 * property check that aborts (libFuzzer and the replay runner both take an
 * abort as a finding, with the input that caused it), and a UTF-8 check
 * for the messages tend shows to people.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tend/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property that must hold for every input. Not assert(): it must stay on
 * in every build type, and it names the property that failed. */
#define fuzz_check(cond, ...)                                                                  \
        do {                                                                                   \
                if (!(cond)) {                                                                 \
                        fprintf(stderr, "fuzz: %s:%d: property failed: ", __FILE__, __LINE__); \
                        fprintf(stderr, __VA_ARGS__);                                          \
                        fputc('\n', stderr);                                                   \
                        abort();                                                               \
                }                                                                              \
        } while (0)

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
 * U+10FFFF, no truncated sequence. NUL-terminated input. */
bool fuzz_utf8_valid(const char *s);

/* A copy of the input with a NUL after it (the parsers take C strings or
 * want one past the end); aborts on OOM, which is not a finding. */
char *fuzz_strndup(const uint8_t *data, size_t size);
