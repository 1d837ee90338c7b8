#!/bin/bash
# TLS to Redis. On a build without it (hiredis 0.14): a TLS URL is refused
# with the reason and the way out. On a build with it (hiredis_ssl): the
# agent speaks TLS itself, against a real redis-server --tls-port with
# certificates made here, with a client certificate Redis asks for, and a
# server whose certificate does not verify (another CA, another name) is
# refused before it receives a byte. On both, the stunnel4 recipe of
# fleetsem.conf(5) works, and refuses such servers too.
. "$(dirname "$0")/lib.sh"
require openssl
require stunnel4

# ---- The build says what it can do ---------------------------------------------
ver=$("$FLEETSEMD" --version)
if [[ $ver == *"TLS to Redis: yes"* ]]; then TLS=yes; else TLS=no; fi
like "$ver" 'hiredis [0-9]+\.[0-9]+\.[0-9]+; TLS to Redis: (no \(through a local TLS client|yes, OpenSSL [0-9])' \
        "fleetsemd --version names hiredis and says whether TLS is in ($TLS)"
if [ "$TLS" = no ]; then
        for url in rediss://redis.example.net:6380 sentinel+tls://s1:26379/m cluster+tls://c1:7000; do
                out=$("$FLEETSEMD" --redis "$url" --check-config 2>&1); rc=$?
                is "$rc" 1 "--check-config refuses ${url%%:*}://"
                like "$out" 'TLS to Redis needs hiredis 1\.0 or later .*stunnel4 .*fleetsem\.conf\(5\), TLS' \
                        "... saying why, and where the alternative is"
        done
fi

# ---- Certificates: a CA, Redis' server certificate, a client's; another CA ------
make_cert ca "fleetsem test CA" && make_cert server localhost ca && make_cert client fleetsem-agent ca &&
        make_cert other "another CA" && make_cert impostor localhost other || bail "openssl could not make the certificates"
chmod 600 "$T"/*.key

# ---- Redis on TLS only, asking for client certificates --------------------------
PW="tls-$$-pw"
printf '%s\n' "$PW" >"$T/pw"
chmod 600 "$T/pw"
TLS_PORT=$(free_port)
REDIS_AUTH=$PW
start_redis --requirepass "$PW" --tls-port "$TLS_PORT" --tls-cert-file "$T/server.crt" --tls-key-file "$T/server.key" \
        --tls-ca-cert-file "$T/ca.crt" --tls-auth-clients yes
tcli() { redis-cli --tls --cacert "$T/ca.crt" --cert "$T/client.crt" --key "$T/client.key" -p "$TLS_PORT" \
        -a "$PW" --no-auth-warning "$@"; }
is "$(tcli PING)" PONG "redis-server answers on its TLS port"
out=$(redis-cli --tls --cacert "$T/ca.crt" -p "$TLS_PORT" -a "$PW" --no-auth-warning PING 2>&1)
is "$?" 1 "... and only to a client with a certificate: one without fails"
like "$out" 'I/O error|Server closed the connection' "... its connection closed by the server"

port_open() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1" 2>/dev/null; }

# ---- The agent's own TLS (builds with hiredis_ssl) -------------------------------
# tls_conf NAME KEY=VALUE...: a configuration file with those tls_* keys.
tls_conf() { local f=$T/$1.conf; shift; printf '%s\n' "$@" | sed 's/=/ = /' >"$f"; echo "$f"; }
# server_sees NAME CERT: an openssl s_server with CERT.crt on a port of its
# own ($IMP_PORT) that records what it receives in $T/NAME.out.
server_sees() {
        IMP_PORT=$(free_port)
        openssl s_server -accept "$IMP_PORT" -cert "$T/$2.crt" -key "$T/$2.key" -quiet \
                >"$T/$1.out" 2>"$T/$1.err" </dev/null &
        wait_for 10 port_open "$IMP_PORT" || bail "openssl s_server ($1) did not start"
}
if [ "$TLS" = yes ]; then
        CLIENT=(tls_ca_file="$T/ca.crt" tls_cert_file="$T/client.crt" tls_key_file="$T/client.key")
        conf=$(tls_conf good "${CLIENT[@]}")
        out=$("$FLEETSEMD" --config "$conf" --redis "rediss://localhost:$TLS_PORT" --check-config 2>&1)
        like "$out" "^Configuration OK: redis=rediss://localhost:$TLS_PORT/0" "--check-config takes rediss:// with tls_* keys"
        out=$("$FLEETSEMD" --config "$conf" --redis "redis://localhost:$TLS_PORT" --check-config 2>&1)
        like "$out" 'tls_\* is set, but redis is not a TLS URL' "... and refuses tls_* with a plain URL"
        cp "$T/client.key" "$T/open.key" && chmod 644 "$T/open.key"
        out=$("$FLEETSEMD" --config "$(tls_conf open "${CLIENT[@]:0:2}" tls_key_file="$T/open.key")" \
                --redis "rediss://localhost:$TLS_PORT" --check-config 2>&1)
        like "$out" 'tls_key_file .*open.key is readable by others than its owner \(mode 0644\); chmod 600 it' \
                "... and a client key others can read"
        out=$("$FLEETSEMD" --config "$(tls_conf badca tls_ca_file="$T/pw")" --redis "rediss://localhost:$TLS_PORT" \
                --check-config 2>&1)
        like "$out" "TLS to Redis: Cannot load tls_ca_file $T/pw" "... and a CA file that holds no certificate"

        run_agent d --config "$conf" --redis "rediss://localhost:$TLS_PORT" --redis-password-file "$T/pw"
        check "native: the agent reaches Redis over TLS, with its client certificate" wait_for 10 redis_state_is d up
        fs d run --slots 1 --no-wait native-tls -- true
        is "$?" 0 "native: a slot is granted over TLS"
        is "$(tcli EXISTS 'fleetsem:{native-tls}:clock')" 1 "native: ... Redis has the name's keys"
        run_agent e --config "$(tls_conf named "${CLIENT[@]}" tls_server_name=localhost)" \
                --redis "rediss://127.0.0.1:$TLS_PORT" --redis-password-file "$T/pw"
        check "native: by address, with tls_server_name the name to check" wait_for 10 redis_state_is e up
        run_agent f --config "$conf" --redis "rediss://127.0.0.1:$TLS_PORT" --redis-password-file "$T/pw"
        check "native: by address without it, a certificate for 'localhost' is refused, and the log says why" \
                wait_for 10 grep -q "TLS: the server's certificate does not verify: IP address mismatch" "$T/agent-f.log"
        is "$(redis_state_is f down && echo down)" down "native: ... Redis is down for that agent"
        sed 's/^/# agent f: /' "$T/agent-f.log" | head -n 5
        run_agent g --config "$(tls_conf nocert tls_ca_file="$T/ca.crt")" --redis "rediss://localhost:$TLS_PORT" \
                --redis-password-file "$T/pw"
        check "native: without a client certificate, which Redis asks for, no connection" \
                wait_for 10 redis_state_is g down
        fs g run --slots 1 --no-wait native-tls -- true 2>/dev/null
        is "$?" 69 "native: ... a request there is refused (exit 69)"
        # Servers whose certificate does not verify hear nothing: not the
        # password, not a command.
        server_sees native-other-ca impostor
        run_agent h --config "$conf" --redis "rediss://localhost:$IMP_PORT" --redis-password-file "$T/pw"
        check "native, another CA: the agent takes Redis for down" wait_for 10 redis_state_is h down
        is "$(wc -c <"$T/native-other-ca.out")" 0 \
                "native, another CA: the server received nothing (neither the password nor a command)"
        make_cert elsewhere2 elsewhere.example.net ca || bail "openssl could not make the certificate"
        server_sees native-other-name elsewhere2
        run_agent i --config "$conf" --redis "rediss://localhost:$IMP_PORT" --redis-password-file "$T/pw"
        check "native, another name: the agent takes Redis for down" wait_for 10 redis_state_is i down
        is "$(wc -c <"$T/native-other-name.out")" 0 \
                "native, another name: the server received nothing (neither the password nor a command)"
        check "native, another name: the server did see the agent try (a handshake)" \
                grep -qiE 'alert|error|shutdown|certificate' "$T/native-other-name.err"
fi


# stunnel_up NAME PORT: the recipe, to 127.0.0.1:PORT, accepting on a port
# of its own ($LOCAL_PORT), logging to $T/stunnel-NAME.log.
stunnel_up() {
        local name=$1 port=$2
        LOCAL_PORT=$(free_port)
        {
                printf 'foreground = yes\npid =\nsyslog = no\ndebug = info\noutput = %s\n' "$T/stunnel-$name.log"
                printf '[fleetsem-redis]\nclient = yes\naccept = 127.0.0.1:%s\nconnect = 127.0.0.1:%s\n' \
                        "$LOCAL_PORT" "$port"
                printf 'CAfile = %s\nverifyChain = yes\ncheckHost = localhost\n' "$T/ca.crt"
                printf 'cert = %s\nkey = %s\n' "$T/client.crt" "$T/client.key"
        } >"$T/stunnel-$name.conf"
        stunnel4 "$T/stunnel-$name.conf" &
        wait_for 10 port_open "$LOCAL_PORT" || bail "stunnel ($name) did not start"
}

stunnel_up good "$TLS_PORT"
run_agent a --redis "redis://127.0.0.1:$LOCAL_PORT" --redis-password-file "$T/pw"
check "the agent reaches Redis through stunnel" wait_for 10 redis_state_is a up
fs a run --slots 1 --no-wait over-tls -- true
is "$?" 0 "a slot is granted over TLS"
check "... Redis has the name's keys" sh -c "[ \"\$(redis-cli --tls --cacert '$T/ca.crt' --cert '$T/client.crt' \
        --key '$T/client.key' -p $TLS_PORT -a '$PW' --no-auth-warning EXISTS 'fleetsem:{over-tls}:clock')\" = 1 ]"
like "$(cat "$T/stunnel-good.log")" 'Certificate accepted' "stunnel checked Redis' certificate"

# ---- Servers whose certificate does not verify: another CA, another name -------
# impostor NAME CERT HOST: an openssl s_server with CERT.crt, stunnel to it,
# an agent HOST through that; nothing the agent sends may reach it.
impostor() {
        local name=$1 crt=$2 host=$3 port
        port=$(free_port)
        openssl s_server -accept "$port" -cert "$T/$crt.crt" -key "$T/$crt.key" -quiet \
                >"$T/$name.out" 2>"$T/$name.err" </dev/null &
        wait_for 10 port_open "$port" || bail "openssl s_server ($name) did not start"
        stunnel_up "$name" "$port"
        run_agent "$host" --redis "redis://127.0.0.1:$LOCAL_PORT" --redis-password-file "$T/pw"
        check "$name: stunnel reached the server" \
                wait_for 10 grep -q "s_connect: connected 127.0.0.1:$port" "$T/stunnel-$name.log"
        check "$name: ... and refused its certificate" \
                wait_for 10 grep -q 'certificate verify failed' "$T/stunnel-$name.log"
        check "$name: the agent takes Redis for down" wait_for 10 redis_state_is "$host" down
        fs "$host" run --slots 1 --no-wait over-tls -- true 2>/dev/null
        is "$?" 69 "$name: a request on that agent is refused (Redis unavailable: exit 69)"
        log_lacks "$T/stunnel-$name.log" '[1-9][0-9]* byte\(s\) sent to TLS' '(^|[^0-9])0 byte\(s\) sent to TLS' \
                "$name: stunnel forwarded none of the agent's bytes"
        is "$(wc -c <"$T/$name.out")" 0 "$name: the server received nothing (neither the password nor a command)"
}
impostor other-ca impostor b
make_cert elsewhere elsewhere.example.net ca || bail "openssl could not make the certificate"
impostor other-name elsewhere c
for h in "${AGENT_HOSTS[@]}"; do agent_lacks "$h" "$PW" "the password is not in agent $h's log"; done
for f in "$T"/stunnel-*.log; do
        log_lacks "$f" "$PW" 'LOG[0-9]\[' "the password is not in $(basename "$f")"
done
done_testing
