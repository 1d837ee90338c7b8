#!/bin/bash
# The Debian packages, as an admin meets them: built from this source tree
# with dpkg-buildpackage, checked by lintian, installed with dpkg -i into a
# booted Debian 12 container, used, upgraded in place while a slot is held,
# removed and purged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
require dpkg-buildpackage
require dh
require lintian

# --- build -----------------------------------------------------------------------
# dpkg-buildpackage writes the packages beside the tree: a copy of the tree
# (without version control and meson build directories) in $T/pkg.
mkdir -p "$T/pkg/src"
tar -C "$SRC" --exclude-vcs --exclude-tag-all=build.ninja --exclude=./debian/tmp -cf - . | tar -C "$T/pkg/src" -xf - ||
        bail "cannot copy the source tree"
(cd "$T/pkg/src" && dpkg-buildpackage -us -uc -b) >"$T/dpkg-buildpackage.log" 2>&1
is "$?" 0 "dpkg-buildpackage -us -uc -b builds" || bail "the package build failed (dpkg-buildpackage.log below)"
DEB_FS=$(ls "$T"/pkg/fleetsem_*.deb 2>/dev/null)
DEB_PAM=$(ls "$T"/pkg/libpam-fleetsem_*.deb 2>/dev/null)
check "it made fleetsem and libpam-fleetsem" test -f "$DEB_FS" -a -f "$DEB_PAM" || bail "no packages to test"
lintian --fail-on error,warning "$T"/pkg/*.changes >"$T/lintian.log" 2>&1
is "$?" 0 "lintian --fail-on error,warning: $(grep -c '^[EW]:' "$T/lintian.log") errors and warnings"
like "$(dpkg-deb -c "$DEB_FS")" '-rw-r----- root/root .* ./etc/fleetsem/fleetsem.conf' "fleetsem.conf is 0640, as meson installs it"
is "$(dpkg-deb -f "$DEB_FS" Package) $(dpkg-deb -f "$DEB_PAM" Package)" "fleetsem libpam-fleetsem" "the packages' names"

# --- install -----------------------------------------------------------------------
mkdir -p "$T/debs"
cp "$DEB_FS" "$DEB_PAM" "$T/debs/"
start_redis
ns_launch pkg --bind-ro="$T/debs:/run/fleetsem-debs"
ns_wait_booted pkg
pkg_status() { ns pkg dpkg-query -W -f='${Status}' "$1" 2>/dev/null; }
ns pkg env DEBIAN_FRONTEND=noninteractive dpkg -i /run/fleetsem-debs/"$(basename "$DEB_FS")" \
        /run/fleetsem-debs/"$(basename "$DEB_PAM")" >"$T/dpkg-install.log" 2>&1
is "$?" 0 "dpkg -i installs both into a booted Debian 12" || bail "cannot install the packages (dpkg-install.log below)"
is "$(pkg_status fleetsem) / $(pkg_status libpam-fleetsem)" "install ok installed / install ok installed" "both are installed"
is "$(ns pkg systemctl is-enabled fleetsem.socket)" enabled "fleetsem.socket is enabled"
is "$(ns pkg systemctl is-active fleetsem.socket)" active "... and listening"
is "$(ns pkg systemctl is-active fleetsemd.service)" inactive "the agent waits for its first request"
is "$(ns pkg dpkg-query -W -f='${Conffiles}' fleetsem | awk '{ print $1 }' | tr -d '\n')" /etc/fleetsem/fleetsem.conf \
        "/etc/fleetsem/fleetsem.conf is a conffile"
is "$(ns pkg stat -c '%U:%G %a' /etc/fleetsem/fleetsem.conf)" "root:root 640" "... root's, 0640"
pamdir=$(ns pkg dpkg -L libpam-modules | sed -n 's|/pam_unix\.so$||p')
check "pam_fleetsem.so is beside pam_unix.so ($pamdir)" ns pkg test -f "$pamdir/pam_fleetsem.so"
check "the bash completion is installed where bash-completion looks" ns pkg test -f /usr/share/bash-completion/completions/fleetsem
check "the man pages are installed" ns pkg sh -c 'man_ok=1; for m in man1/fleetsem.1 man5/fleetsem.conf.5 man8/fleetsemd.8 man8/pam_fleetsem.8; do [ -f /usr/share/man/$m.gz ] || man_ok=0; done; [ $man_ok = 1 ]'

# --- the PAM profile: off until the admin turns it on -----------------------------------
check "pam-auth-update knows the profile" ns pkg test -f /usr/share/pam-configs/fleetsem
ns pkg cat /etc/pam.d/common-session >"$T/common-session"
log_lacks "$T/common-session" pam_fleetsem 'pam_unix\.so' "it is off by default: not in common-session"
ns pkg env DEBIAN_FRONTEND=noninteractive pam-auth-update --enable fleetsem >"$T/pam-auth-update.log" 2>&1
like "$(ns pkg grep pam_fleetsem /etc/pam.d/common-session)" \
        '^session[[:space:]]+required[[:space:]]+pam_fleetsem\.so conf=/etc/security/pam_fleetsem\.conf' \
        "pam-auth-update --enable fleetsem: interactive sessions get it, options from /etc/security/pam_fleetsem.conf"
ns pkg cat /etc/pam.d/common-session-noninteractive >"$T/common-session-noninteractive"
log_lacks "$T/common-session-noninteractive" pam_fleetsem 'pam_unix\.so' "... not the non-interactive ones (cron)"

# --- the demo: 3 jobs, 1 slot -------------------------------------------------------------
ns pkg sed -i 's|^redis = .*|redis = unix:/run/fleetsem-test/redis.sock|' /etc/fleetsem/fleetsem.conf
like "$(ns pkg fleetsemd --check-config 2>&1)" '^Configuration OK: redis=unix:/run/fleetsem-test/redis\.sock ' \
        "fleetsemd --check-config, once redis = names the test's Redis"
EV=$T/shared/events
: >"$EV"
for i in 1 2 3; do
        demo_job='echo "start '$i' $FLEETSEM_TOKEN $(date +%s%N)" >>/run/fleetsem-test/events; sleep 0.3; echo "stop '$i' - $(date +%s%N)" >>/run/fleetsem-test/events'  # not synchronisation: the job's run time
        ns pkg fleetsem run --slots 1 demo -- sh -c "$demo_job" >"$T/job-$i.log" 2>&1 &
done
check "all 3 jobs ran" wait_for 30 sh -c "[ \$(grep -c '^stop' $EV) = 3 ]"
wait
max=$(sort -k4,4n "$EV" | awk '$1 == "start" { n++; if (n > m) m = n } $1 == "stop" { n-- } END { print m }')
is "$max" 1 "never 2 at once (from the jobs' own timestamps)"
tok=$(awk '$1 == "start" { print $3 }' "$EV")
is "$(echo "$tok" | sort -n | uniq | wc -l)" 3 "three grants, three different tokens"
is "$tok" "$(echo "$tok" | sort -n)" "rising in the order the jobs started"
is "$(ns pkg systemctl is-active fleetsemd.service)" active "the first request started the agent (socket activation)"
like "$(journal pkg -u fleetsemd.service)" 'Granted slot of demo' "the agent logs to the journal"
is "$(holders demo) $(waiters demo)" "0 0" "all slots back"

# --- upgrade in place while a slot is held ------------------------------------------------
mkfifo "$T/shared/go"
ns pkg fleetsem run --slots 1 hold -- sh -c 'read x </run/fleetsem-test/go' >"$T/hold.log" 2>&1 &
hold=$!
check "a job holds a slot" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{hold}:holders') = 1 ]"
lease=$(rcli ZRANGE 'fleetsem:{hold}:holders' 0 -1)
htoken=$(record hold "$lease" 4)
agent=$(ns_prop pkg fleetsemd.service MainPID)
ns pkg env DEBIAN_FRONTEND=noninteractive dpkg -i /run/fleetsem-debs/"$(basename "$DEB_FS")" >"$T/dpkg-upgrade.log" 2>&1
is "$?" 0 "dpkg -i of the same version again (the upgrade path)"
check "the agent was restarted" wait_for 10 sh -c "p=\$(nsenter -t $(ns_leader pkg) -a systemctl show -P MainPID fleetsemd.service); [ \"\$p\" != 0 ] && [ \"\$p\" != $agent ]"
is "$(ns pkg systemctl is-enabled fleetsem.socket) $(ns pkg systemctl is-active fleetsem.socket)" "enabled active" "the socket is still enabled and listening"
# The new agent takes the slot over, whichever comes first: its own scan of
# this host's leases, or the job asking again with the same lease.
agent=$(ns_prop pkg fleetsemd.service MainPID)
check "the new agent took the held slot over, same token" wait_for 10 sh -c \
        "nsenter -t $(ns_leader pkg) -a journalctl -q --no-pager _PID=$agent | grep -qE 'Re-adopted 1 held slot|Granted slot of hold .*\(token $htoken\)'"
is "$(rcli ZRANGE 'fleetsem:{hold}:holders' 0 -1)" "$lease" "the job kept its slot through the upgrade"
timeout 10 sh -c "echo >$T/shared/go"     # (a FIFO: this waits for its reader)
wait "$hold"
is "$?" 0 "the job ran to its end"
check "its slot is back" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{hold}:holders') = 0 ]"

# --- remove, then purge ----------------------------------------------------------------
ns pkg env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q fleetsem libpam-fleetsem >"$T/apt-remove.log" 2>&1
is "$?" 0 "apt-get remove fleetsem libpam-fleetsem"
is "$(pkg_status fleetsem) / $(pkg_status libpam-fleetsem)" "deinstall ok config-files / deinstall ok config-files" "only their conffiles are left"
is "$(ns pkg systemctl is-active fleetsem.socket fleetsemd.service | tr '\n' ' ')" "inactive inactive " "the socket and the agent are stopped"
check "the programs and units are gone" ns pkg sh -c '! ls /usr/bin/fleetsem /usr/sbin/fleetsemd /lib/systemd/system/fleetsem.socket /lib/systemd/system/fleetsemd.service 2>/dev/null | grep -q .'
ns pkg cat /etc/pam.d/common-session >"$T/common-session"
log_lacks "$T/common-session" pam_fleetsem 'pam_unix\.so' "the PAM profile is out of common-session"
leftovers() {
        ns pkg find / \( -path /proc -o -path /sys -o -path /run/fleetsem-test -o -path /run/fleetsem-debs \) -prune \
                -o -name '*fleetsem*' -print 2>/dev/null | sort | tr '\n' ' '
}
like "$(leftovers)" '/etc/fleetsem/fleetsem.conf ' "(before the purge, the search finds the conffile)"
ns pkg dpkg --purge fleetsem libpam-fleetsem >"$T/dpkg-purge.log" 2>&1
is "$?" 0 "dpkg --purge fleetsem libpam-fleetsem"
is "$(pkg_status fleetsem)$(pkg_status libpam-fleetsem)" "" "dpkg knows them no more"
check "/etc/fleetsem is gone" ns pkg test ! -e /etc/fleetsem
check "/etc/security/pam_fleetsem.conf is gone" ns pkg test ! -e /etc/security/pam_fleetsem.conf
is "$(leftovers)" "" "no file named *fleetsem* is left anywhere (units, symlinks, systemd's and dpkg's state)"
like "$(ns pkg systemctl is-enabled fleetsem.socket 2>&1)" '^(not-found|.*No such file)' "fleetsem.socket is no more"

ns_done_testing
