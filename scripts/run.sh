#!/bin/sh
# make run: the agent in the foreground, on ./.tend, keeping examples/run/
# applied (a web server of three replicas). From the repository's root:
# the example's command is relative to it.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
mkdir -p .tend
cat <<MSG
tendd: state in ./.tend, API on ./.tend/tend.sock, manifests from examples/run/.
In another terminal:

  export TEND_SOCKET=$PWD/.tend/tend.sock
  $build/bin/tend get pods

Then try examples/tour.sh, or kill a pod's process and watch it come back.
Ctrl-C stops tendd; the pods keep running and the next start adopts them.

MSG
exec "$build/bin/tendd" --state-dir ./.tend --socket ./.tend/tend.sock --manifests examples/run
