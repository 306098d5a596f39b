#!/bin/sh
# Installs Debian packages as root: apt_install.sh [apt-get install options] PACKAGE...
# Tries the install first and refreshes the package lists only when it fails, so a
# machine whose lists are current needs no network for packages it already has.
# Another apt or dpkg holding its locks (a fresh machine's daily apt run, a second
# install) is waited for, up to SBX_APT_LOCK_WAIT seconds (default 600), instead of
# failing at once. Quiet when it succeeds; on failure apt's own output goes to stderr
# and the exit status is non-zero.
set -eu

wait_limit=${SBX_APT_LOCK_WAIT:-600}
case $wait_limit in
    '' | *[!0-9]*)
        echo "apt_install.sh: SBX_APT_LOCK_WAIT must be a whole number of seconds, not '$wait_limit'" >&2
        exit 2 ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
trap 'exit 130' INT TERM

# apt-get with its arguments, run again while the only trouble is a lock another
# process holds (apt-get update does not wait for the lists' lock by itself).
apt_run() {
    waited=0
    while :; do
        # LC_ALL=C: the lock's message is matched below, so it must not be translated.
        if LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get -q "$@" >"$log" 2>&1; then
            return 0
        fi
        grep -q "Could not get lock" "$log" || return 1
        if [ "$waited" -ge "$wait_limit" ]; then
            echo "apt_install.sh: apt's lock is still held after ${waited} s: $*" >&2
            exit 1
        fi
        if [ "$waited" = 0 ]; then
            echo "apt_install.sh: another apt or dpkg holds apt's lock; waiting for it" \
                "(up to ${wait_limit} s)" >&2
        fi
        sleep 2
        waited=$((waited + 2))
    done
}

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "apt_install.sh: installing packages needs root and apt-get: $*" >&2
    exit 1
fi
if apt_run install -y "$@" || { apt_run update && apt_run install -y "$@"; }; then
    exit 0
fi
cat "$log" >&2
echo "apt_install.sh: could not install: $*" >&2
exit 1
