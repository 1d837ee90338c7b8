#!/usr/bin/env python3
# with-signals.py COMMAND...: runs COMMAND with SIGUSR1 and SIGINT ignored,
# SIGUSR2 blocked and SIGPIPE at its default: a caller with settings of its
# own, for checking that fleetsem run hands them on unchanged.
import os
import signal
import sys

signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.execvp(sys.argv[1], sys.argv[1:])
