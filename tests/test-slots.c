/* SPDX-License-Identifier: MIT */
/* The slot engine alone: a fake clock and an effects log stand in for the
 * agent's I/O, so each interleaving that integration tests only hit by
 * chance is played here on purpose, step by step (test-slots.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "test-slots.h"

int main(void) {
        log_setup("test-slots", LOG_TARGET_STDERR, NULL);
        log_set_max_level(LOG_EMERG);
        test_grant_and_limit();
        test_weight_and_fleet_limit();
        test_wait_deadline_and_no_wait();
        test_huge_wait();
        test_fail_waiters();
        test_drained();
        test_grants_in_token_order();
        test_wake_is_a_hint();
        test_foreign_grant_asks_nothing();
        test_wake_grant_with_proof();
        test_wake_grant_behind_earlier();
        test_stale_pending_grant();
        test_gate_survives_outage();
        test_requeue_in_order();
        test_each_grant_waits_for_its_answer();
        test_lost_when_not_renewed();
        test_forgotten();
        test_revoke_heard();
        test_host_held();
        test_reset();
        test_refused_and_pending_release();
        test_unconfirmed_grant();
        test_counters();
        test_name_counters_bounded();
        test_illegal_transition();
        calls_free();
        return tap_done();
}
