# The Debian 12 packages fleetsem builds and tests with, in one place.
# Sourced by tests/run.sh, tests/demo.sh and .ci/run.
FLEETSEM_DEPS=(
        meson ninja-build pkg-config gcc
        libsystemd-dev libhiredis-dev libssl-dev libpam0g-dev
        redis-server redis-tools redis-sentinel
        python3 procps util-linux systemd
        systemd-container debootstrap
        libpam-wrapper libnss-wrapper pamtester openssh-client
        bash-completion
        prometheus
        openssl stunnel4
        debhelper dpkg-dev lintian
        spin
        strace
        nftables iproute2
)
# The fuzz targets (tests/fuzz/run.sh), on top: clang and its libFuzzer.
FLEETSEM_FUZZ_DEPS=(clang libfuzzer-14-dev)
# The fault harness (tests/chaos/run.sh), on top: namespaces, nftables,
# and a C compiler for the shim that steps Redis' clock.
FLEETSEM_CHAOS_DEPS=(iproute2 nftables gcc libc6-dev)
# The benchmark's peers, on top.
FLEETSEM_BENCH_DEPS=(etcd-server etcd-client)
# The protocol model's checker (model/run.sh; the lua suite's
# model-replay runs the model too, so spin is in FLEETSEM_DEPS as well).
FLEETSEM_MODEL_DEPS=(spin gcc)

# Installs what is missing (as root; others are told what to install):
# ensure_deps [EXTRA_PACKAGE...]
ensure_deps() {
        local missing=() p
        for p in "${FLEETSEM_DEPS[@]}" "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
        done
        [ ${#missing[@]} -eq 0 ] && return 0
        if [ "$(id -u)" -ne 0 ]; then
                echo "Missing packages: ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
                return 1
        fi
        echo "Installing ${missing[*]} ..." >&2
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
}
