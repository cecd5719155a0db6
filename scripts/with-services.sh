#!/usr/bin/env bash
# with-services.sh <command> [args...]
#
# Makes sure a PostgreSQL, a Redis and a NATS server (with JetStream) answer,
# exports RECONCILER_TEST_DATABASE_URL, RECONCILER_TEST_REDIS_URL and
# RECONCILER_TEST_NATS_URL pointing at them,
# runs <command>, stops whatever this script started and exits with the
# command's exit code.
#
# - A server that already answers at the configured URL (default: the standard
#   local ports) is used as is and never stopped, restarted or reconfigured.
# - Otherwise a private throwaway server is started on a free 127.0.0.1 port
#   with its data in a mktemp directory, and removed again on exit (also on
#   failure, Ctrl-C and SIGTERM).
# - When the server binaries are missing and the script runs as root, the
#   Debian packages are installed first, without letting them start a service
#   or create a system cluster.
#
# Environment:
#   RECONCILER_TEST_DATABASE_URL  default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
#   RECONCILER_TEST_REDIS_URL     default redis://127.0.0.1:6379/0
#   RECONCILER_TEST_NATS_URL      default nats://127.0.0.1:4222 (must have JetStream enabled)
#   WITH_SERVICES_PG_BIN_DIR      look for initdb/pg_ctl/postgres only in this directory
#   WITH_SERVICES_REDIS_BIN_DIR   look for redis-server only in this directory
#   WITH_SERVICES_NATS_BIN_DIR    look for nats-server only in this directory
#   WITH_SERVICES_NO_INSTALL=1    never install packages, even as root
#   WITH_SERVICES_START_TIMEOUT   seconds to wait for a private server (default 60)
#
# Exit status: the command's; 2 when the services cannot be provided.

set -euo pipefail

readonly DEFAULT_PG_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
readonly DEFAULT_REDIS_URL='redis://127.0.0.1:6379/0'
readonly DEFAULT_NATS_URL='nats://127.0.0.1:4222'
readonly PROG=with-services.sh

START_TIMEOUT=${WITH_SERVICES_START_TIMEOUT:-60}
case $START_TIMEOUT in '' | *[!0-9]*) START_TIMEOUT=60 ;; esac

# State used by cleanup. Empty means "nothing of ours to undo".
child_pid=''
pg_tmp=''
pg_started=''
pg_user=''
redis_tmp=''
redis_pid=''
nats_tmp=''
nats_pid=''
apt_log_dir=''
policy_rc_created=''
policy_rc_backup=''
createcluster_backup=''
createcluster_created=''

readonly POLICY_RC=/usr/sbin/policy-rc.d
readonly CREATECLUSTER_CONF=/etc/postgresql-common/createcluster.conf

say() { printf '%s\n' "$*" >&2; }

die() {
	# die <message> [more lines...]: print them and exit 2 (cleanup runs via the EXIT trap)
	printf '%s: %s\n' "$PROG" "$1" >&2
	shift
	[ "$#" -eq 0 ] || printf '%s\n' "$@" >&2
	exit 2
}

have() { command -v "$1" >/dev/null 2>&1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# with_timeout SECONDS cmd...: run cmd, bounded by coreutils timeout when present.
with_timeout() {
	local secs=$1
	shift
	if have timeout; then
		timeout "$secs" "$@"
	else
		"$@"
	fi
}

# alive PID: the process exists and is not a zombie.
alive() {
	local pid=$1 state
	kill -0 "$pid" 2>/dev/null || return 1
	if [ -r "/proc/$pid/stat" ]; then
		state=$(sed -e 's/^.*) //' -e 's/ .*//' "/proc/$pid/stat" 2>/dev/null) || state=''
		[ "$state" != Z ] || return 1
	fi
	return 0
}

# wait_gone PID SECONDS: wait until PID is gone; returns 1 if it is still there.
wait_gone() {
	local pid=$1 tenths=$(($2 * 10)) i=0
	while alive "$pid"; do
		[ "$i" -lt "$tenths" ] || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 0
}

# url_hostport URL DEFAULT_PORT: sets url_host and url_port (url_host is empty
# for a socket URL such as postgres:///db?host=/run/postgresql).
url_host=''
url_port=''
url_hostport() {
	local rest=$1
	rest=${rest#*://}
	rest=${rest%%[/?#]*}
	rest=${rest##*@}
	rest=${rest%%,*}
	case $rest in
	\[*\]:*)
		url_host=${rest%%]*}
		url_host=${url_host#[}
		url_port=${rest##*]:}
		;;
	\[*\])
		url_host=${rest#[}
		url_host=${url_host%]}
		url_port=''
		;;
	*:*)
		url_host=${rest%%:*}
		url_port=${rest##*:}
		;;
	*)
		url_host=$rest
		url_port=''
		;;
	esac
	case $url_port in '' | *[!0-9]*) url_port=$2 ;; esac
}

# url_display URL DEFAULT_PORT: host:port, without user, password or options.
url_display() {
	url_hostport "$1" "$2"
	case $url_host in
	'') printf 'local socket (port %s)\n' "$url_port" ;;
	*:*) printf '[%s]:%s\n' "$url_host" "$url_port" ;;
	*) printf '%s:%s\n' "$url_host" "$url_port" ;;
	esac
}

# pg_version_dirs: /usr/lib/postgresql/*/bin, newest version first.
pg_version_dirs() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		if [ -d "$d" ]; then
			printf '%s\n' "$d"
		fi
	done | sort -rV
}

# tcp_open HOST PORT: something accepts TCP connections there.
tcp_open() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	with_timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# ---------------------------------------------------------------------------
# Probes

find_pg_client() {
	# find_pg_client NAME: psql / pg_isready from PATH or a server bin dir
	local name=$1 d
	if have "$name"; then
		command -v "$name"
		return 0
	fi
	while IFS= read -r d; do
		if [ -n "$d" ] && [ -x "$d/$name" ]; then
			printf '%s\n' "$d/$name"
			return 0
		fi
	done < <(
		[ -z "$pg_bin" ] || printf '%s\n' "$pg_bin"
		pg_version_dirs
	)
	return 1
}

pg_answers() {
	local url=$1 psql isready out
	if psql=$(find_pg_client psql); then
		out=$(PGCONNECT_TIMEOUT=3 with_timeout 15 "$psql" -X -w -A -t -q -d "$url" -c 'select 1' 2>/dev/null) || return 1
		[ "$out" = 1 ]
		return
	fi
	if isready=$(find_pg_client pg_isready); then
		with_timeout 15 "$isready" -q -t 3 -d "$url" >/dev/null 2>&1
		return
	fi
	url_hostport "$url" 5432
	[ -n "$url_host" ] || return 1
	tcp_open "$url_host" "$url_port"
}

redis_cli() { have redis-cli; }

redis_answers() {
	local url=$1 out
	if redis_cli; then
		out=$(with_timeout 10 redis-cli -u "$url" ping 2>/dev/null) || return 1
		[ "$out" = PONG ]
		return
	fi
	# No redis-cli: speak the inline protocol over bash's /dev/tcp. A server
	# that wants a password answers -NOAUTH; the URL is trusted to carry it.
	url_hostport "$url" 6379
	[ -n "$url_host" ] || return 1
	# shellcheck disable=SC2016 # expanded by the inner bash
	with_timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf "PING\r\n" >&3
		IFS= read -r -t 3 line <&3 || exit 1
		case $line in "+PONG"* | "-NOAUTH"*) exit 0 ;; esac
		exit 1' _ "$url_host" "$url_port" 2>/dev/null
}

# nats_answers URL: a NATS server with JetStream answers there (its INFO line,
# sent unasked on connect, says "jetstream":true).
nats_answers() {
	url_hostport "$1" 4222
	[ -n "$url_host" ] || return 1
	# shellcheck disable=SC2016 # expanded by the inner bash
	with_timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		IFS= read -r -t 3 line <&3 || exit 1
		case $line in "INFO "*"\"jetstream\":true"*) exit 0 ;; esac
		exit 1' _ "$url_host" "$url_port" 2>/dev/null
}

# ---------------------------------------------------------------------------
# Finding binaries

pg_bin=''
find_pg_bin() {
	local d candidates=()
	pg_bin=''
	if [ -n "${WITH_SERVICES_PG_BIN_DIR:-}" ]; then
		candidates=("$WITH_SERVICES_PG_BIN_DIR")
	else
		if have pg_ctl; then
			candidates+=("$(dirname "$(command -v pg_ctl)")")
		fi
		if have initdb; then
			candidates+=("$(dirname "$(command -v initdb)")")
		fi
		while IFS= read -r d; do
			[ -n "$d" ] && candidates+=("$d")
		done < <(pg_version_dirs)
		candidates+=(/usr/local/pgsql/bin)
	fi
	for d in "${candidates[@]}"; do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			pg_bin=$d
			return 0
		fi
	done
	return 1
}

redis_server=''
find_redis_server() {
	local d
	redis_server=''
	if [ -n "${WITH_SERVICES_REDIS_BIN_DIR:-}" ]; then
		if [ -x "$WITH_SERVICES_REDIS_BIN_DIR/redis-server" ]; then
			redis_server=$WITH_SERVICES_REDIS_BIN_DIR/redis-server
			return 0
		fi
		return 1
	fi
	if have redis-server; then
		redis_server=$(command -v redis-server)
		return 0
	fi
	for d in /usr/bin /usr/sbin /usr/local/bin /usr/local/sbin; do
		if [ -x "$d/redis-server" ]; then
			redis_server=$d/redis-server
			return 0
		fi
	done
	return 1
}

nats_server=''
find_nats_server() {
	local d
	nats_server=''
	if [ -n "${WITH_SERVICES_NATS_BIN_DIR:-}" ]; then
		if [ -x "$WITH_SERVICES_NATS_BIN_DIR/nats-server" ]; then
			nats_server=$WITH_SERVICES_NATS_BIN_DIR/nats-server
			return 0
		fi
		return 1
	fi
	if have nats-server; then
		nats_server=$(command -v nats-server)
		return 0
	fi
	for d in /usr/sbin /usr/bin /usr/local/bin /usr/local/sbin; do
		if [ -x "$d/nats-server" ]; then
			nats_server=$d/nats-server
			return 0
		fi
	done
	return 1
}

# ---------------------------------------------------------------------------
# Installing (root only, Debian)

apt_updated=''
apt() {
	# apt <apt-get args...>: quiet, noninteractive, output kept for errors
	DEBIAN_FRONTEND=noninteractive apt-get -q -y "$@" >>"$apt_log_dir/apt.log" 2>&1
}

apt_failed() {
	say "$PROG: apt-get $* failed; last lines of its output:"
	tail -n 20 "$apt_log_dir/apt.log" >&2 || true
}

block_service_starts() {
	# A policy-rc.d that denies everything keeps invoke-rc.d and
	# deb-systemd-invoke from starting the freshly installed services.
	[ -z "$policy_rc_created" ] || return 0
	if [ -e "$POLICY_RC" ] || [ -L "$POLICY_RC" ]; then
		policy_rc_backup="$POLICY_RC.with-services.$$"
		mv -f "$POLICY_RC" "$policy_rc_backup"
	fi
	policy_rc_created=1
	printf '#!/bin/sh\n# temporary, from %s: no service starts during its apt-get install\nexit 101\n' "$PROG" >"$POLICY_RC"
	chmod 755 "$POLICY_RC"
}

restore_service_starts() {
	[ -n "$policy_rc_created" ] || return 0
	rm -f "$POLICY_RC"
	if [ -n "$policy_rc_backup" ]; then
		mv -f "$policy_rc_backup" "$POLICY_RC"
	fi
	policy_rc_created=''
	policy_rc_backup=''
}

disable_main_cluster() {
	# Until restored, postgresql-NN's postinst creates no "main" cluster.
	[ -z "$createcluster_backup$createcluster_created" ] || return 0
	mkdir -p "$(dirname "$CREATECLUSTER_CONF")"
	if [ -f "$CREATECLUSTER_CONF" ]; then
		createcluster_backup="$apt_log_dir/createcluster.conf.orig"
		cp -p "$CREATECLUSTER_CONF" "$createcluster_backup"
		{
			grep -v -E '^[[:space:]]*create_main_cluster[[:space:]]*=' "$createcluster_backup" || true
			printf 'create_main_cluster = false\n'
		} >"$CREATECLUSTER_CONF"
	else
		createcluster_created=1
		printf 'create_main_cluster = false\n' >"$CREATECLUSTER_CONF"
	fi
}

restore_main_cluster() {
	if [ -n "$createcluster_backup" ]; then
		# Write the original bytes back in place (keeps owner and mode).
		cat "$createcluster_backup" >"$CREATECLUSTER_CONF"
		createcluster_backup=''
	elif [ -n "$createcluster_created" ]; then
		rm -f "$CREATECLUSTER_CONF"
		createcluster_created=''
	fi
}

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# install_packages NEED_PG NEED_REDIS [NEED_NATS]: returns 1 on failure (message printed).
install_packages() {
	local need_pg=$1 need_redis=$2 need_nats=${3:-0} pkgs=()
	[ -n "$apt_log_dir" ] || apt_log_dir=$(mktemp -d "${TMPDIR:-/tmp}/with-services-apt.XXXXXX")
	block_service_starts
	if [ -z "$apt_updated" ]; then
		say "$PROG: apt-get update"
		# A failing update (say, one unreachable third-party source) need not
		# stop the install; a failing install reports the whole log tail.
		apt update || say "$PROG: warning: apt-get update failed; trying the install anyway"
		apt_updated=1
	fi
	if [ "$need_pg" = 1 ]; then
		if ! pkg_installed postgresql-common; then
			say "$PROG: installing postgresql-common"
			apt install --no-install-recommends --no-upgrade postgresql-common || {
				apt_failed install postgresql-common
				return 1
			}
		fi
		disable_main_cluster
	fi
	[ "$need_pg" != 1 ] || pkgs+=(postgresql)
	[ "$need_redis" != 1 ] || pkgs+=(redis-server)
	[ "$need_nats" != 1 ] || pkgs+=(nats-server)
	if [ "$need_pg" = 1 ]; then
		say "$PROG: installing ${pkgs[*]} (no service is started, no cluster is created)"
	else
		say "$PROG: installing ${pkgs[*]} (no service is started)"
	fi
	if ! apt install --no-install-recommends --no-upgrade "${pkgs[@]}"; then
		if [ "$need_pg" = 1 ]; then
			# The "postgresql" metapackage may be unavailable; bookworm's
			# version is 15.
			pkgs=(postgresql-15)
			[ "$need_redis" != 1 ] || pkgs+=(redis-server)
			[ "$need_nats" != 1 ] || pkgs+=(nats-server)
			say "$PROG: retrying with ${pkgs[*]}"
			apt install --no-install-recommends --no-upgrade "${pkgs[@]}" || {
				apt_failed install "${pkgs[@]}"
				return 1
			}
		else
			apt_failed install "${pkgs[@]}"
			return 1
		fi
	fi
	restore_main_cluster
	restore_service_starts
	return 0
}

# ---------------------------------------------------------------------------
# Private PostgreSQL

port_in_use() { tcp_open 127.0.0.1 "$1"; }

free_port() {
	local tries=0 p
	while [ "$tries" -lt 200 ]; do
		p=$((20000 + RANDOM % 30000))
		if ! port_in_use "$p"; then
			printf '%s\n' "$p"
			return 0
		fi
		tries=$((tries + 1))
	done
	return 1
}

# as_pg_user cmd...: run cmd as the unprivileged user owning the private cluster.
as_pg_user() {
	if [ -z "$pg_user" ]; then
		"$@"
	elif have runuser; then
		runuser -u "$pg_user" -- "$@"
	elif have setpriv; then
		setpriv --reuid="$(id -u "$pg_user")" --regid="$(id -g "$pg_user")" --init-groups -- "$@"
	else
		su -s /bin/sh "$pg_user" -c "$(printf '%q ' "$@")"
	fi
}

choose_pg_user() {
	# initdb and postgres refuse to run as root.
	pg_user=''
	is_root || return 0
	if id -u postgres >/dev/null 2>&1 && [ "$(id -u postgres)" -ne 0 ]; then
		pg_user=postgres
	elif id -u with-services-pg >/dev/null 2>&1; then
		pg_user=with-services-pg
	elif have useradd && useradd --system --user-group --no-create-home \
		--home-dir /nonexistent --shell /usr/sbin/nologin with-services-pg >/dev/null 2>&1; then
		pg_user=with-services-pg
	elif id -u nobody >/dev/null 2>&1; then
		pg_user=nobody
	else
		die "running as root and found no unprivileged user to run PostgreSQL as; create one (e.g. 'useradd --system postgres')"
	fi
}

# log_tail FILE: show the end of a server log (kept until exit).
log_tail() {
	if [ -s "$1" ]; then
		say "---- last lines of $1 ----"
		tail -n 25 "$1" >&2 || true
		say "----"
	fi
}

start_private_pg() {
	local reason=$1 port attempt=0 url
	choose_pg_user
	pg_tmp=$(mktemp -d "${TMPDIR:-/tmp}/with-services-pg.XXXXXX")
	chmod 755 "$pg_tmp"
	mkdir "$pg_tmp/data" "$pg_tmp/sock"
	chmod 700 "$pg_tmp/data"
	: >"$pg_tmp/log"
	: >"$pg_tmp/initdb.log"
	if [ -n "$pg_user" ]; then
		chown -R "$pg_user:$(id -gn "$pg_user")" "$pg_tmp"
		as_pg_user test -w "$pg_tmp/data" ||
			die "user $pg_user cannot write to $pg_tmp; point TMPDIR at a directory it can reach (e.g. TMPDIR=/tmp)"
	fi

	if ! (cd "$pg_tmp" && as_pg_user "$pg_bin/initdb" -D "$pg_tmp/data" -A trust -U postgres \
		-E UTF8 --no-locale --no-sync >>"$pg_tmp/initdb.log" 2>&1); then
		log_tail "$pg_tmp/initdb.log"
		die "initdb ($pg_bin/initdb) failed; see its output above"
	fi
	cat >>"$pg_tmp/data/postgresql.conf" <<EOF

# added by $PROG: private throwaway test server
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pg_tmp/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
EOF

	while :; do
		attempt=$((attempt + 1))
		port=$(free_port) || die "found no free TCP port on 127.0.0.1 for PostgreSQL"
		pg_started=1
		# pg_ctl -w waits until the server accepts connections (bounded by -t).
		if (cd "$pg_tmp" && as_pg_user "$pg_bin/pg_ctl" -D "$pg_tmp/data" -l "$pg_tmp/log" \
			-o "-p $port" -w -t "$START_TIMEOUT" start </dev/null >/dev/null 2>&1); then
			break
		fi
		stop_private_pg
		if [ "$attempt" -lt 3 ] && grep -q 'already in use' "$pg_tmp/log" 2>/dev/null; then
			continue
		fi
		log_tail "$pg_tmp/log"
		die "the private PostgreSQL server ($pg_bin/postgres) on 127.0.0.1:$port failed to start or was not ready within ${START_TIMEOUT}s; see its log above"
	done

	url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	if ! pg_answers "$url"; then
		log_tail "$pg_tmp/log"
		die "the private PostgreSQL server started on 127.0.0.1:$port but does not answer 'select 1'"
	fi
	RECONCILER_TEST_DATABASE_URL=$url
	say "postgres: started private server on 127.0.0.1:$port (data in $pg_tmp; $reason did not answer)"
}

stop_private_pg() {
	local pid=''
	[ -n "$pg_started" ] || return 0
	if [ -f "$pg_tmp/data/postmaster.pid" ]; then
		pid=$(head -n 1 "$pg_tmp/data/postmaster.pid" 2>/dev/null) || pid=''
		case $pid in '' | *[!0-9]*) pid='' ;; esac
	fi
	if [ -n "$pid" ] && alive "$pid"; then
		(cd "$pg_tmp" && as_pg_user "$pg_bin/pg_ctl" -D "$pg_tmp/data" -m fast -w -t 30 stop \
			</dev/null >/dev/null 2>&1) || true
		if alive "$pid"; then
			kill -s QUIT "$pid" 2>/dev/null || true # immediate shutdown
			wait_gone "$pid" 10 || kill -s KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 5 || say "$PROG: could not stop private postgres (pid $pid)"
		fi
	fi
	pg_started=''
}

# ---------------------------------------------------------------------------
# Private Redis

start_private_redis() {
	local reason=$1 port attempt=0 i url
	redis_tmp=$(mktemp -d "${TMPDIR:-/tmp}/with-services-redis.XXXXXX")
	while :; do
		attempt=$((attempt + 1))
		port=$(free_port) || die "found no free TCP port on 127.0.0.1 for Redis"
		"$redis_server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--daemonize no --dir "$redis_tmp" --logfile '' \
			</dev/null >"$redis_tmp/log" 2>&1 &
		redis_pid=$!
		url="redis://127.0.0.1:$port/0"
		i=0
		while [ "$i" -lt $((START_TIMEOUT * 10)) ]; do
			alive "$redis_pid" || break
			if redis_answers "$url"; then
				RECONCILER_TEST_REDIS_URL=$url
				say "redis: started private server on 127.0.0.1:$port (data in $redis_tmp; $reason did not answer)"
				return 0
			fi
			sleep 0.1
			i=$((i + 1))
		done
		stop_private_redis
		if [ "$attempt" -lt 3 ] && grep -q 'already in use' "$redis_tmp/log" 2>/dev/null; then
			continue
		fi
		log_tail "$redis_tmp/log"
		if [ "$i" -lt $((START_TIMEOUT * 10)) ]; then
			die "the private Redis server ($redis_server) on 127.0.0.1:$port exited at start; see its log above"
		fi
		die "the private Redis server ($redis_server) on 127.0.0.1:$port did not answer PING within ${START_TIMEOUT}s; see its log above"
	done
}

stop_private_redis() {
	[ -n "$redis_pid" ] || return 0
	if alive "$redis_pid"; then
		kill -s TERM "$redis_pid" 2>/dev/null || true
		wait_gone "$redis_pid" 10 || kill -s KILL "$redis_pid" 2>/dev/null || true
	fi
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=''
}

# ---------------------------------------------------------------------------
# Private NATS (with JetStream)

start_private_nats() {
	local reason=$1 port attempt=0 i url
	nats_tmp=$(mktemp -d "${TMPDIR:-/tmp}/with-services-nats.XXXXXX")
	while :; do
		attempt=$((attempt + 1))
		port=$(free_port) || die "found no free TCP port on 127.0.0.1 for NATS"
		"$nats_server" -a 127.0.0.1 -p "$port" -js -sd "$nats_tmp/js" \
			</dev/null >"$nats_tmp/log" 2>&1 &
		nats_pid=$!
		url="nats://127.0.0.1:$port"
		i=0
		while [ "$i" -lt $((START_TIMEOUT * 10)) ]; do
			alive "$nats_pid" || break
			if nats_answers "$url"; then
				RECONCILER_TEST_NATS_URL=$url
				say "nats: started private server with JetStream on 127.0.0.1:$port (data in $nats_tmp; $reason did not answer)"
				return 0
			fi
			sleep 0.1
			i=$((i + 1))
		done
		stop_private_nats
		if [ "$attempt" -lt 3 ] && grep -q 'address already in use' "$nats_tmp/log" 2>/dev/null; then
			continue
		fi
		log_tail "$nats_tmp/log"
		die "the private NATS server ($nats_server) on 127.0.0.1:$port did not answer with JetStream within ${START_TIMEOUT}s; see its log above"
	done
}

stop_private_nats() {
	[ -n "$nats_pid" ] || return 0
	if alive "$nats_pid"; then
		kill -s TERM "$nats_pid" 2>/dev/null || true
		wait_gone "$nats_pid" 10 || kill -s KILL "$nats_pid" 2>/dev/null || true
	fi
	wait "$nats_pid" 2>/dev/null || true
	nats_pid=''
}

# ---------------------------------------------------------------------------
# Cleanup and signals

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
	local rc=$?
	trap '' INT TERM HUP
	set +e
	if [ -n "$child_pid" ] && alive "$child_pid"; then
		kill -s TERM "$child_pid" 2>/dev/null
		wait_gone "$child_pid" 10 || kill -s KILL "$child_pid" 2>/dev/null
	fi
	stop_private_redis
	stop_private_nats
	stop_private_pg
	restore_main_cluster
	restore_service_starts
	[ -z "$pg_tmp" ] || rm -rf -- "$pg_tmp"
	[ -z "$redis_tmp" ] || rm -rf -- "$redis_tmp"
	[ -z "$nats_tmp" ] || rm -rf -- "$nats_tmp"
	[ -z "$apt_log_dir" ] || rm -rf -- "$apt_log_dir"
	exit "$rc"
}

# shellcheck disable=SC2317 # invoked by trap
on_signal() {
	local sig=$1 code=$2
	trap '' INT TERM HUP
	if [ -n "$child_pid" ] && alive "$child_pid"; then
		# Ctrl-C already reached the command through the terminal's process
		# group; a TERM sent to this script alone is passed on here.
		kill -s "$sig" "$child_pid" 2>/dev/null || true
		wait_gone "$child_pid" 15 || kill -s KILL "$child_pid" 2>/dev/null || true
	fi
	exit "$code"
}

trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# ---------------------------------------------------------------------------
# Main

if [ "$#" -eq 0 ]; then
	say "usage: $0 <command> [args...]"
	say "Runs <command> with RECONCILER_TEST_DATABASE_URL, RECONCILER_TEST_REDIS_URL and RECONCILER_TEST_NATS_URL pointing at answering servers."
	exit 2
fi

RECONCILER_TEST_DATABASE_URL=${RECONCILER_TEST_DATABASE_URL:-$DEFAULT_PG_URL}
RECONCILER_TEST_REDIS_URL=${RECONCILER_TEST_REDIS_URL:-$DEFAULT_REDIS_URL}
RECONCILER_TEST_NATS_URL=${RECONCILER_TEST_NATS_URL:-$DEFAULT_NATS_URL}
export RECONCILER_TEST_DATABASE_URL RECONCILER_TEST_REDIS_URL RECONCILER_TEST_NATS_URL

pg_where=$(url_display "$RECONCILER_TEST_DATABASE_URL" 5432)
redis_where=$(url_display "$RECONCILER_TEST_REDIS_URL" 6379)
nats_where=$(url_display "$RECONCILER_TEST_NATS_URL" 4222)

need_pg=0
need_redis=0
need_nats=0
if pg_answers "$RECONCILER_TEST_DATABASE_URL"; then
	say "postgres: using $pg_where"
else
	need_pg=1
fi
if redis_answers "$RECONCILER_TEST_REDIS_URL"; then
	say "redis: using $redis_where"
else
	need_redis=1
fi
if nats_answers "$RECONCILER_TEST_NATS_URL"; then
	say "nats: using $nats_where"
else
	need_nats=1
fi

missing_pg=0
missing_redis=0
missing_nats=0
[ "$need_pg" = 0 ] || find_pg_bin || missing_pg=1
[ "$need_redis" = 0 ] || find_redis_server || missing_redis=1
[ "$need_nats" = 0 ] || find_nats_server || missing_nats=1

if [ "$missing_pg" = 1 ] || [ "$missing_redis" = 1 ] || [ "$missing_nats" = 1 ]; then
	pkg_list=''
	[ "$missing_pg" = 0 ] || pkg_list='postgresql'
	[ "$missing_redis" = 0 ] || pkg_list="${pkg_list:+$pkg_list }redis-server"
	[ "$missing_nats" = 0 ] || pkg_list="${pkg_list:+$pkg_list }nats-server"
	what=''
	[ "$missing_pg" = 0 ] || what="no PostgreSQL answers at $pg_where and initdb/pg_ctl/postgres were not found${WITH_SERVICES_PG_BIN_DIR:+ in WITH_SERVICES_PG_BIN_DIR=$WITH_SERVICES_PG_BIN_DIR}"
	[ "$missing_redis" = 0 ] || what="${what:+$what; }no Redis answers at $redis_where and redis-server was not found${WITH_SERVICES_REDIS_BIN_DIR:+ in WITH_SERVICES_REDIS_BIN_DIR=$WITH_SERVICES_REDIS_BIN_DIR}"
	[ "$missing_nats" = 0 ] || what="${what:+$what; }no NATS with JetStream answers at $nats_where and nats-server was not found${WITH_SERVICES_NATS_BIN_DIR:+ in WITH_SERVICES_NATS_BIN_DIR=$WITH_SERVICES_NATS_BIN_DIR}"
	if is_root; then
		install_hint="apt-get install -y $pkg_list"
	else
		install_hint="sudo apt-get install -y $pkg_list   (or run this script as root: it then installs them itself, without starting any system service)"
	fi
	howto=(
		"Fix it in one of these ways:"
		"  - install the servers, so that this script can start private throwaway ones:"
		"      $install_hint"
		"  - or point it at servers that already run, e.g."
		"      export RECONCILER_TEST_DATABASE_URL='postgres://USER@HOST:5432/DB?sslmode=disable'"
		"      export RECONCILER_TEST_REDIS_URL='redis://HOST:6379/0'"
		"      export RECONCILER_TEST_NATS_URL='nats://HOST:4222'   (JetStream enabled)"
	)
	if ! is_root; then
		die "$what." "${howto[@]}"
	fi
	if [ -n "${WITH_SERVICES_NO_INSTALL:-}" ] && [ "${WITH_SERVICES_NO_INSTALL}" != 0 ]; then
		die "$what, and WITH_SERVICES_NO_INSTALL is set (unset it to let this script install them)." "${howto[@]}"
	fi
	if ! have apt-get || ! have dpkg-query; then
		die "$what, and apt-get is not available to install them." \
			"Install PostgreSQL (initdb, pg_ctl, postgres), redis-server and nats-server with the system's package manager, or point RECONCILER_TEST_DATABASE_URL / RECONCILER_TEST_REDIS_URL / RECONCILER_TEST_NATS_URL at running servers."
	fi
	say "$PROG: $what; installing with apt-get"
	install_packages "$missing_pg" "$missing_redis" "$missing_nats" || die "installing $pkg_list failed (see above)." "${howto[@]}"
	if [ "$missing_pg" = 1 ] && ! find_pg_bin; then
		die "installed postgresql, but initdb/pg_ctl/postgres are still not found${WITH_SERVICES_PG_BIN_DIR:+ in WITH_SERVICES_PG_BIN_DIR=$WITH_SERVICES_PG_BIN_DIR}." "${howto[@]}"
	fi
	if [ "$missing_redis" = 1 ] && ! find_redis_server; then
		die "installed redis-server, but redis-server is still not found${WITH_SERVICES_REDIS_BIN_DIR:+ in WITH_SERVICES_REDIS_BIN_DIR=$WITH_SERVICES_REDIS_BIN_DIR}." "${howto[@]}"
	fi
	if [ "$missing_nats" = 1 ] && ! find_nats_server; then
		die "installed nats-server, but nats-server is still not found${WITH_SERVICES_NATS_BIN_DIR:+ in WITH_SERVICES_NATS_BIN_DIR=$WITH_SERVICES_NATS_BIN_DIR}." "${howto[@]}"
	fi
fi

[ "$need_pg" = 0 ] || start_private_pg "$pg_where"
[ "$need_redis" = 0 ] || start_private_redis "$redis_where"
[ "$need_nats" = 0 ] || start_private_nats "$nats_where"

# Run the command in the background and wait for it, so that a TERM sent to
# this script is handled at once (a foreground child would delay the trap).
# Restore the default SIGINT/SIGQUIT (async commands get them ignored) and
# keep our stdin (async commands get /dev/null).
(
	trap - INT QUIT TERM HUP
	exec "$@"
) <&0 &
child_pid=$!
status=0
wait "$child_pid" || status=$?
child_pid=''
exit "$status"
