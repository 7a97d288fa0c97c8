#!/bin/sh
# make run: start the agent in the foreground with the examples.
set -eu
build=${1:-build}
if [ -x "$build/bin/tendd" ]; then
    mkdir -p .tend
    echo "tendd: state in ./.tend, socket ./.tend/tend.sock. In another terminal:"
    echo "  export TEND_SOCKET=$PWD/.tend/tend.sock"
    echo "  $build/bin/tend get pods"
    exec "$build/bin/tendd" --state-dir ./.tend --socket ./.tend/tend.sock --manifests examples
fi
cat <<MSG
The agent (tendd) is not built yet: it arrives with the store and controllers
(issue #4) and the API (issue #5). What works today is the manifest checker:

  $build/bin/tend validate -f examples/

MSG
exec "$build/bin/tend" validate -f examples/
