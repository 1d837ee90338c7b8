/* SPDX-License-Identifier: MIT */
/* What the agent reads from a client: bytes through the LineReader, each
 * line through request_parse(). An accepted request holds only valid
 * fields and survives request_format() → request_parse() unchanged; a
 * refused one comes with a reason. */

#include "fuzz.h"
#include "names.h"
#include "protocol.h"

static void check_request(const Request *r) {
        char line[PROTO_REQUEST_MAX + 1];
        const char *why = NULL;
        Request again;
        int n;

        switch (r->verb) {
        case REQUEST_ACQUIRE:
                fuzz_assert(name_is_valid(r->name) && lease_id_is_valid(r->lease));
                fuzz_assert(r->slots <= SLOTS_MAX);  /* 0: the fleet limit's */
                fuzz_assert(r->weight >= 1 && r->weight <= SLOTS_MAX && (r->slots == 0 || r->weight <= r->slots));
                fuzz_assert(!r->stop_on_lost || r->unit);
                fuzz_assert(!(r->unit && r->host_held));
                fuzz_assert(!r->reason[0] || (r->host_held && drain_reason_is_valid(r->reason)));
                break;
        case REQUEST_RELEASE:
                fuzz_assert(!(r->unit && r->host_held));
                fuzz_assert(r->unit || r->host_held ? name_is_valid(r->name) && !r->lease[0]
                                                    : lease_id_is_valid(r->lease) && !r->name[0]);
                break;
        case REQUEST_STATUS:
                fuzz_assert(!r->name[0] || name_is_valid(r->name));
                break;
        case REQUEST_METRICS:
        case REQUEST_WATCH:
                fuzz_assert(!r->name[0] && !r->lease[0] && !r->host[0]);
                break;
        case REQUEST_DRAIN:
                fuzz_assert(name_is_valid(r->name) && !r->lease[0] && !r->host[0] && (r->drain || !r->reason[0]));
                fuzz_assert(!r->reason[0] || drain_reason_is_valid(r->reason));
                break;
        case REQUEST_REVOKE:
                fuzz_assert(r->host[0] ? ident_is_valid(r->host) && !r->lease[0] && (!r->name[0] || name_is_valid(r->name))
                                       : lease_id_is_valid(r->lease) && name_is_valid(r->name));
                fuzz_assert(!r->reason[0] || drain_reason_is_valid(r->reason));
                break;
        case REQUEST_LIMIT:
                fuzz_assert(name_is_valid(r->name) && !r->lease[0] && !r->host[0] && r->slots <= SLOTS_MAX);
                fuzz_assert(!r->reason[0] || drain_reason_is_valid(r->reason));
                break;
        default:
                fuzz_assert(!"unknown verb");
        }

        n = request_format(r, line, sizeof(line));
        fuzz_assert(n > 0 && n <= PROTO_REQUEST_MAX);
        fuzz_assert(request_parse(line, (size_t) n, &again, &why) == 0);
        fuzz_assert(again.verb == r->verb && again.slots == r->slots && again.wait == r->wait && again.weight == r->weight);
        fuzz_assert(again.unit == r->unit && again.stop_on_lost == r->stop_on_lost && again.host_held == r->host_held);
        fuzz_assert(strcmp(again.name, r->name) == 0 && strcmp(again.lease, r->lease) == 0);
        fuzz_assert(strcmp(again.host, r->host) == 0 && strcmp(again.reason, r->reason) == 0 && again.drain == r->drain);
}

static void on_line(char *line, size_t len) {
        const char *why = NULL;
        Request req;
        int r;

        r = request_parse(line, len, &req, &why);
        if (r < 0)
                fuzz_assert(why && (r == -EINVAL || r == -EBADMSG || r == -E2BIG));
        else
                check_request(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_lines(data, size, PROTO_REQUEST_MAX, on_line);
        return 0;
}
