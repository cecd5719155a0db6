#!/usr/bin/env bash
# need-debs.sh COMMAND:PACKAGE...
#
# Makes sure each COMMAND is on PATH (or, given as an absolute path, that the file exists:
# a font, say), installing its Debian PACKAGE where it is missing
# (as root, with apt-get). Installing never starts a service: the prometheus package, for
# one, would otherwise start a server on :9090. Not root and something missing: print the
# command to run and exit 2.
set -euo pipefail

readonly PROG=need-debs.sh
readonly POLICY_RC=/usr/sbin/policy-rc.d

missing=()
for pair in "$@"; do
	cmd=${pair%%:*}
	pkg=${pair#*:}
	if [[ $cmd == /* ]]; then
		[ -e "$cmd" ] || missing+=("$pkg")
	else
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
	fi
done
[ "${#missing[@]}" -gt 0 ] || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	printf '%s: missing %s: sudo apt-get install -y --no-install-recommends %s\n' "$PROG" "${missing[*]}" "${missing[*]}" >&2
	exit 2
fi

# A policy-rc.d that denies everything keeps invoke-rc.d from starting what is installed;
# one already there is put back afterwards.
backup=''
if [ -e "$POLICY_RC" ]; then
	backup=$(mktemp)
	cp -p "$POLICY_RC" "$backup"
fi
restore() {
	if [ -n "$backup" ]; then
		cp -p "$backup" "$POLICY_RC"
		rm -f "$backup"
	else
		rm -f "$POLICY_RC"
	fi
}
trap restore EXIT
printf '#!/bin/sh\n# temporary, from %s: no service starts during its apt-get install\nexit 101\n' "$PROG" >"$POLICY_RC"
chmod 755 "$POLICY_RC"

log=$(mktemp)
echo "$PROG: installing ${missing[*]} (no service is started)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
	apt-get update -q >>"$log" 2>&1 || true
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		rm -f "$log"
		echo "$PROG: installing ${missing[*]} failed" >&2
		exit 2
	fi
fi
rm -f "$log"
