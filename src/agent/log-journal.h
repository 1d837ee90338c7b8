/* SPDX-License-Identifier: MIT */
#pragma once

#include "log.h"

/* Native journal output with the FLEETSEM_* fields: pass to log_setup(). */
void log_journal_sink(int level, const LogFields *fields, const char *msg);
