#!/bin/sh
# ANSIBLE_BECOME_PASSWORD_FILE for the `ansible` commands testinfra runs (--force-ansible) when
# sudo on the host needs a password: Ansible runs an executable password file and reads the
# password from its stdout. The verify role hands the password to pytest on stdin, which keeps it
# in SPECBENCH_BECOME_PASSWORD (its environment only: never in a file, an argv or a log).
if [ -z "${SPECBENCH_BECOME_PASSWORD:-}" ]; then
    echo "SPECBENCH_BECOME_PASSWORD is not set (the verify role sets it)" >&2
    exit 1
fi
printf '%s\n' "$SPECBENCH_BECOME_PASSWORD"
