/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include "log.h"
#include "sd-dl.h"

#define SD_DL_DEFINE(s) typeof(s) *sym_##s;
SD_DL_SYMBOLS(SD_DL_DEFINE)
#undef SD_DL_DEFINE

int sd_dl_open(void) {
        static void *lib;
        void *l;

        if (lib)
                return 0;
        l = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_NODELETE);
        if (!l)
                return log_error_errno(ENOPKG, "Cannot load libsystemd.so.0: %s", dlerror());
#define SD_DL_RESOLVE(s)                                                                        \
        if (!(sym_##s = (typeof(s) *) dlsym(l, #s)))                                            \
                return log_error_errno(ENOPKG, "libsystemd.so.0 lacks %s (too old?).", #s);
        SD_DL_SYMBOLS(SD_DL_RESOLVE)
#undef SD_DL_RESOLVE
        lib = l;
        return 0;
}

int sd_dl_bus_open(sd_bus **ret) {
        _cleanup_(sym_sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (geteuid() != 0)
                return sym_sd_bus_open_system(ret);
        r = sym_sd_bus_new(&bus);
        if (r < 0)
                return r;
        r = sym_sd_bus_set_address(bus, "unix:path=/run/systemd/private");
        if (r >= 0)
                r = sym_sd_bus_start(bus);
        if (r < 0)
                return sym_sd_bus_open_system(ret);
        *ret = TAKE_PTR(bus);
        return 0;
}
