/* SPDX-License-Identifier: MIT */
#pragma once

/* The scripts of the Redis Functions library, as the agent (and the
 * tests that run them) name them. */

typedef enum Script {
        SCRIPT_ACQUIRE,
        SCRIPT_RELEASE,
        SCRIPT_RENEW,
        SCRIPT_REASSERT,
        SCRIPT_ADOPT,
        SCRIPT_STATUS,
        SCRIPT_EPOCH,
        SCRIPT_BATCH,
        SCRIPT_DRAIN,
        SCRIPT_REVOKE,
        SCRIPT_LIMIT,
        SCRIPT_FOLLOW,
        SCRIPT_COUNTS,
        SCRIPT_KEEP,            /* a batch of renewals and releases alone: runs when Redis is full */
        N_SCRIPTS,
} Script;

/* lua-scripts.c (generated): the Redis Functions library "fleetsem"
 * (FUNCTION LOAD), its version and each script's function (FCALL). */
#define LUA_LIBRARY_NAME "fleetsem"
#define LUA_VERSION_FUNCTION "fleetsem_version"     /* {version, wake command}: the same in every version */
extern const unsigned lua_library_version;
extern const char *const lua_library;
extern const char *const lua_function[N_SCRIPTS];
