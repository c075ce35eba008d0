#!/bin/sh
# Example setup script: runs once in a fresh sandbox, before anything else.
set -eu
echo "setting up in $(pwd) as $(id -un 2>/dev/null || id -u)"
mkdir -p /workspace/app
printf 'print("hello from the sandbox")\n' > /workspace/app/hello.py
echo "setup done"
