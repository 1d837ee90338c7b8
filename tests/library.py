# The agent's Lua library as the tests that call its scripts directly make
# and call it (lua-batch-diff.py, model-replay.py): what
# src/agent/library/embed-lua.py says of keys.list and scripts.list.
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "agent", "library")
KEYS_LIST, SCRIPTS_LIST, REPLIES_LIST, VERSION, PRELUDE = (
    os.path.join(SRC, f) for f in ("keys.list", "scripts.list", "replies.list", "lua/library.version", "lua/prelude"))
FLEET_CLOCK = "fleetsem:clock"
CENSUS = "fleetsem:census"


def embed(*args):
    return subprocess.run([sys.executable, os.path.join(SRC, "embed-lua.py")] + list(args), check=True,
                          capture_output=True, text=True).stdout


SUFFIXES = embed("--keys", KEYS_LIST).split()


def keys_of(name):
    """A name's KEYS, in keys.list's order, then the fleet's clock and the census."""
    return ["fleetsem:{%s}:%s" % (name, s) for s in SUFFIXES] + [FLEET_CLOCK, CENSUS]


def library():
    """The agent's library: every script, each a function fleetsem_SCRIPT_vN."""
    return embed("--library", KEYS_LIST, SCRIPTS_LIST, REPLIES_LIST, VERSION, PRELUDE)


class Args:
    """The ARGV of the scripts given, in scripts.list's order: args(SCRIPT,
    NAME=VALUE...), a list value filling a rest argument; a name scripts.list
    does not have, or a required one missing, raises ValueError."""

    def __init__(self, scripts):
        self.spec = {s: embed("--args", SCRIPTS_LIST, s).split() for s in scripts}

    def __call__(self, script, **kv):
        out = []
        for spec in self.spec[script]:
            name = spec.rstrip("?.")
            if spec.endswith("..."):
                out += [str(v) for v in kv.pop(name, [])]
            elif name in kv:
                out.append(str(kv.pop(name)))
            elif not spec.endswith("?"):
                raise ValueError("args %s: %s is required" % (script, name))
        if kv:
            raise ValueError("scripts.list: %s has no %s" % (script, ", ".join(kv)))
        return out
