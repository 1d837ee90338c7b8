#!/bin/bash
# fleetsem metrics --output as root, into directories a local user (nobody)
# may shape: a directory nobody owns, or a link nobody put where the
# directory was (nobody owns its parent, as Debian's prometheus user owns
# /var/lib/prometheus). Each is refused with exit 73 and nothing written
# anywhere; a directory of root's in nobody's parent gets the file, and a
# link planted at the file's name is replaced, never followed.
TTL=5s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a

# metrics_to PATH: root's fleetsem metrics --output PATH; its stderr in
# $T/err, its status in $rc.
metrics_to() { fs a metrics --output "$1" 2>"$T/err"; rc=$?; sed 's/^/# stderr: /' "$T/err"; }

# nobody's parent directory, as the collector's user owns its own.
mkdir -m 755 "$T/parent" "$T/elsewhere"
chown nobody:nogroup "$T/parent"

# 1. The directory is nobody's.
as_nobody mkdir -m 755 "$T/parent/node-exporter"
metrics_to "$T/parent/node-exporter/fleetsem.prom"
is "$rc" 73 "a directory nobody owns: exit 73"
like "$(cat "$T/err")" "Refusing to write .*node-exporter/fleetsem.prom: .*node-exporter belongs to uid $NOBODY_UID, not to root or to uid 0" \
        "... saying whose it is"
is "$(ls -A "$T/parent/node-exporter")" "" "... and nothing written"

# 2. nobody puts a link to a directory of root's in its place.
as_nobody rmdir "$T/parent/node-exporter"
as_nobody ln -s "$T/elsewhere" "$T/parent/node-exporter"
metrics_to "$T/parent/node-exporter/fleetsem.prom"
is "$rc" 73 "a link in the directory's place: exit 73"
like "$(cat "$T/err")" "Refusing to write .*: .*node-exporter is a symbolic link" "... saying so"
is "$(ls -A "$T/elsewhere")" "" "... and nothing written where it points"
metrics_to "$T/parent/node-exporter//fleetsem.prom"
is "$rc" 73 "... also with a doubled slash after it"

# 3. The directory as Debian ships it: root's, in nobody's parent.
as_nobody rm "$T/parent/node-exporter"
mkdir -m 755 "$T/parent/node-exporter"
umask 077
metrics_to "$T/parent/node-exporter/fleetsem.prom"
umask 022
is "$rc" 0 "root's directory in nobody's parent: exit 0"
like "$(cat "$T/parent/node-exporter/fleetsem.prom")" 'fleetsem_redis_up 1' "... the file holds the metrics"
is "$(stat -c '%a %U' "$T/parent/node-exporter/fleetsem.prom")" "644 root" "... 0644 whatever the umask, root's"
is "$(ls -A "$T/parent/node-exporter")" "fleetsem.prom" "... and no temporary file is left"

# 4. A directory others may write to: a link planted at the file's name is
# replaced by the file, what it pointed to is left alone.
mkdir -m 1777 "$T/shared"
echo precious >"$T/elsewhere/victim"
as_nobody ln -s "$T/elsewhere/victim" "$T/shared/fleetsem.prom"
metrics_to "$T/shared/fleetsem.prom"
is "$rc" 0 "a link at the file's name: exit 0"
check "... the file replaced the link" test -f "$T/shared/fleetsem.prom" -a ! -L "$T/shared/fleetsem.prom"
is "$(cat "$T/elsewhere/victim")" precious "... and what it pointed to is untouched"

# 5. nobody writes into its own directory; into root's it cannot.
as_nobody mkdir -m 755 "$T/parent/mine"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" metrics --output "$T/parent/mine/fleetsem.prom"
is "$?" 0 "nobody's metrics into its own directory: exit 0"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" metrics --output "$T/parent/node-exporter/x.prom" 2>"$T/err"
is "$?" 73 "nobody's into root's directory: exit 73"
like "$(cat "$T/err")" 'Cannot write .*x.prom: a temporary file beside it: Permission denied' "... saying why"

# 6. Usage.
metrics_to "$T/parent/node-exporter/"
is "$rc" 64 "a path that names no file: exit 64"
metrics_to "$T/no-such-dir/fleetsem.prom"
is "$rc" 73 "a directory that does not exist: exit 73"
done_testing
