/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "cgroup-path.h"
#include "tap.h"

static const char *unit_of(const char *path) {
        static char buf[256];

        return cgroup_path_unit(path, buf, sizeof(buf)) < 0 ? NULL : buf;
}

static const char *user_unit_of(const char *path) {
        static char buf[256];

        return cgroup_path_user_unit(path, buf, sizeof(buf)) < 0 ? NULL : buf;
}

static const char *session_of(const char *unit) {
        static char buf[64];

        return cgroup_unit_session(unit, buf, sizeof(buf)) < 0 ? NULL : buf;
}

static void test_systemd_path(void) {
        char unified[] = "0::/user.slice/user-1000.slice/session-3.scope\n";
        char hybrid[] = "12:pids:/\n1:name=systemd:/system.slice/ssh.service\n0::/system.slice/ssh.service\n";
        char legacy[] = "2:cpu,cpuacct:/\n1:name=systemd,other:/system.slice/cron.service\n0::/\n";
        char legacy_as_unified[] = "1:name=systemd:/system.slice/cron.service\n0::/\n";
        char none[] = "3:cpu:/\n";
        char bad[] = "1:name=systemd:relative\n0\n::\n";
        const char *p = NULL;

        CHECK_INT(cgroup_systemd_path(unified, true, &p), 0, "cgroup v2: the 0:: line");
        CHECK_STR(p, "/user.slice/user-1000.slice/session-3.scope", "its path");
        CHECK_INT(cgroup_systemd_path(hybrid, false, &p), 0, "hybrid: the name=systemd line");
        CHECK_STR(p, "/system.slice/ssh.service", "its path");
        CHECK_INT(cgroup_systemd_path(legacy, false, &p), 0, "name=systemd among other controllers");
        CHECK_STR(p, "/system.slice/cron.service", "its path");
        CHECK_INT(cgroup_systemd_path(legacy_as_unified, true, &p), 0, "unified: the 0:: line, not name=systemd");
        CHECK_STR(p, "/", "its path");
        CHECK_INT(cgroup_systemd_path(none, false, &p), -ENOENT, "no systemd hierarchy");
        CHECK_INT(cgroup_systemd_path(bad, false, &p), -ENOENT, "malformed lines and a relative path skipped");
}

static void test_units(void) {
        char longer[300] = "/system.slice/";

        CHECK_STR(unit_of("/system.slice/cron.service"), "cron.service", "a service");
        CHECK_STR(unit_of("/system.slice/system-getty.slice/getty@tty1.service"), "getty@tty1.service",
                  "an instance below two slices");
        CHECK_STR(unit_of("/user.slice/user-1000.slice/session-3.scope"), "session-3.scope", "a session scope");
        CHECK_STR(unit_of("/user.slice/user-1000.slice/user@1000.service/app.slice/a.service"), "user@1000.service",
                  "the user manager, for a process of a user unit");
        CHECK_STR(unit_of("/system.slice/cron.service/sub/group"), "cron.service", "below the unit's own groups");
        CHECK_STR(unit_of("//system.slice//cron.service"), "cron.service", "doubled slashes");
        CHECK_STR(unit_of("/init.scope"), "init.scope", "PID 1's scope");
        CHECK_STR(unit_of("/system.slice/_cpu.service"), "cpu.service", "an escaped name");
        CHECK(!unit_of("/"), "the root: no unit");
        CHECK(!unit_of("/user.slice/user-1000.slice"), "slices only: no unit");
        CHECK(!unit_of("/system.slice/foo@.service"), "a template is no unit");
        CHECK(!unit_of("/system.slice/@foo.service"), "nothing before @");
        CHECK(!unit_of("/system.slice/foo bar.service"), "a space");
        CHECK(!unit_of("/system.slice/foo.nothing"), "an unknown type");
        CHECK(!unit_of("/system.slice/.service"), "no name before the type");
        CHECK(!unit_of("/lxc/payload"), "no type");
        memset(longer + 14, 'x', 256);
        strcpy(longer + 14 + 256, ".service");
        CHECK(!unit_of(longer), "longer than systemd's limit");
        {
                char small[8];

                CHECK_INT(cgroup_path_unit("/system.slice/cron.service", small, sizeof(small)), -ENOBUFS,
                          "a buffer too small");
        }
}

static void test_user_units(void) {
        CHECK_STR(user_unit_of("/user.slice/user-1000.slice/user@1000.service/app.slice/a.service"), "a.service",
                  "a user unit below the user's slices");
        CHECK_STR(user_unit_of("/user.slice/user-0.slice/user@0.service/b.scope/x"), "b.scope", "root's manager");
        CHECK(!user_unit_of("/user.slice/user-1000.slice/user@1000.service"), "the manager itself");
        CHECK(!user_unit_of("/user.slice/user-1000.slice/user@x.service/a.service"), "a manager that names no uid");
        CHECK(!user_unit_of("/system.slice/cron.service"), "not in a user manager");
}

static void test_sessions(void) {
        CHECK_STR(session_of("session-3.scope"), "3", "a session");
        CHECK_STR(session_of("session-c12.scope"), "c12", "a session id with letters");
        CHECK(!session_of("session-.scope"), "an empty id");
        CHECK(!session_of("session-a_b.scope"), "an id with _");
        CHECK(!session_of("session-3.service"), "not a scope");
        CHECK(!session_of("user@1000.service"), "not a session");
}

static void test_root(void) {
        char lxc[] = "/lxc/c1/init.scope", init[] = "/init.scope", old[] = "/machine/system", top[] = "/";

        cgroup_root_of_init(lxc);
        CHECK_STR(lxc, "/lxc/c1", "a container's init.scope left out");
        cgroup_root_of_init(init);
        CHECK_STR(init, "", "the host's init.scope: the root");
        cgroup_root_of_init(old);
        CHECK_STR(old, "/machine", "the older /system");
        cgroup_root_of_init(top);
        CHECK_STR(top, "/", "PID 1 at the top");

        CHECK_STR(cgroup_below_root("/lxc/c1/system.slice/a.service", "/lxc/c1"), "/system.slice/a.service",
                  "below the container's root");
        CHECK_STR(cgroup_below_root("/lxc/c10/system.slice/a.service", "/lxc/c1"), "/lxc/c10/system.slice/a.service",
                  "another group whose name begins alike: not below");
        CHECK_STR(cgroup_below_root("/lxc/c1", "/lxc/c1"), "/", "the root itself");
        CHECK_STR(cgroup_below_root("/system.slice/a.service", ""), "/system.slice/a.service", "an empty root");
        CHECK_STR(cgroup_below_root("/system.slice/a.service", "/"), "/system.slice/a.service", "the top as root");
}

int main(void) {
        test_systemd_path();
        test_units();
        test_user_units();
        test_sessions();
        test_root();
        return tap_done();
}
