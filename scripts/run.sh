#!/bin/sh
# make run: start the agent in the foreground on ./.tend, and say what to
# type next. The manifest directory (tendd --manifests) arrives with #7;
# until then the examples are applied by hand.
set -eu
build=${1:-build}
mkdir -p .tend
cat <<MSG
tendd: state in ./.tend, API on ./.tend/tend.sock. In another terminal:

  export TEND_SOCKET=$PWD/.tend/tend.sock
  $build/bin/tend apply -f examples/
  $build/bin/tend get pods

Stop it with Ctrl-C: the pods keep running and the next start adopts them.
MSG
exec "$build/bin/tendd" --state-dir ./.tend --socket ./.tend/tend.sock
