/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "names.h"
#include "tap.h"

static void test_names(void) {
        char long_name[NAME_MAX_LEN + 2];

        CHECK(name_is_valid("backup"), "plain name");
        CHECK(name_is_valid("login:alice@web-3_x.y"), "every allowed punctuation");
        CHECK(!name_is_valid(""), "empty name refused");
        CHECK(!name_is_valid("a b"), "space refused");
        CHECK(!name_is_valid("a{b}"), "braces refused (they delimit the hash tag)");
        CHECK(!name_is_valid("a/b"), "slash refused");
        CHECK(!name_is_valid("a\nb"), "newline refused");
        CHECK(!name_is_valid("caf\xc3\xa9"), "non-ASCII refused");
        memset(long_name, 'x', NAME_MAX_LEN);
        long_name[NAME_MAX_LEN] = '\0';
        CHECK(name_is_valid(long_name), "200 characters allowed");
        long_name[NAME_MAX_LEN] = 'x';
        long_name[NAME_MAX_LEN + 1] = '\0';
        CHECK(!name_is_valid(long_name), "201 characters refused");
        CHECK(!name_is_valid(NULL), "NULL refused");
}

static void test_idents(void) {
        CHECK(ident_is_valid("fleetsem"), "namespace");
        CHECK(!ident_is_valid("a@b"), "@ not in identifiers");
        CHECK(!ident_is_valid("01234567890123456789012345678901234567890123456789012345678901234"), "65 characters refused");
}

static void test_leases(void) {
        char id[LEASE_ID_LEN + 1], other[LEASE_ID_LEN + 1];

        CHECK_INT(lease_id_new(id), 0, "lease_id_new");
        CHECK(lease_id_is_valid(id), "a new lease id is valid");
        CHECK_INT(lease_id_new(other), 0, "second lease id");
        CHECK(strcmp(id, other) != 0, "two lease ids differ");
        CHECK(!lease_id_is_valid("0123456789ABCDEF0123456789abcdef"), "upper case refused");
        CHECK(!lease_id_is_valid("0123456789abcdef"), "short refused");
        CHECK(!lease_id_is_valid("0123456789abcdef0123456789abcdeg"), "non-hex refused");
}

static void test_uint(void) {
        uint64_t v = 7;

        CHECK_INT(parse_uint64("42", 1, 100, &v), 0, "42 in range");
        CHECK_U64(v, 42, "value 42");
        CHECK_INT(parse_uint64("0", 1, 100, &v), -ERANGE, "below range");
        CHECK_INT(parse_uint64("101", 1, 100, &v), -ERANGE, "above range");
        CHECK_INT(parse_uint64("4x", 0, 100, &v), -EINVAL, "trailing garbage");
        CHECK_INT(parse_uint64("-1", 0, 100, &v), -EINVAL, "negative");
        CHECK_INT(parse_uint64(" 1", 0, 100, &v), -EINVAL, "leading space");
        CHECK_INT(parse_uint64("", 0, 100, &v), -EINVAL, "empty");
        CHECK_INT(parse_uint64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE, "overflow");
        CHECK_U64(v, 42, "failures leave the output untouched");
}

int main(void) {
        test_names();
        test_idents();
        test_leases();
        test_uint();
        return tap_done();
}
