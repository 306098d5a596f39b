#!/bin/sh
# Everything the backend tests need (tests/conformance, tests/unit/test_pool.py, bench):
#   - Debian packages: docker.io, busybox-static (test images and the apptainer
#     stand-in's root file system), openssh-server (a real sshd on 127.0.0.1),
#     bubblewrap + util-linux (nsenter) for tests/fakes/apptainer;
#   - the account sbx-ssh, which the test sshd logs sessions in as;
#   - a running Docker engine with the local test images (tests/services/docker.sh).
# Idempotent; needs root for the installs. Exits non-zero when something cannot be set up.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

missing=
command -v busybox >/dev/null 2>&1 || missing="$missing busybox-static"
[ -x /usr/sbin/sshd ] || missing="$missing openssh-server"
command -v ssh-keygen >/dev/null 2>&1 || missing="$missing openssh-client"
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v nsenter >/dev/null 2>&1 || missing="$missing util-linux"
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "backends.sh: missing packages:$missing (run as root or install them)" >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    sh "$here/../../deploy/apt_install.sh" $missing
fi

# The account the test sshd logs sessions in as (tests/sshd.py): a plain user, not locked
# (sshd without PAM refuses a locked account), with no password.
if ! id sbx-ssh >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "backends.sh: the account sbx-ssh is missing (run as root to create it)" >&2
        exit 1
    fi
    useradd --create-home --shell /bin/bash --user-group --password '*' sbx-ssh
fi

sh "$here/docker.sh"
