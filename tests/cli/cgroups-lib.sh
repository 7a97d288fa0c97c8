#!/bin/sh
# Shared by cgroups.sh and cgroups-v2.sh (after lib.sh): a deployment of one
# pod running a shell command, and what the API says of its running pod.

# deploy NAME LIMITS COMMAND: LIMITS as in `limits: {LIMITS}` ("" for
# none); the manifest is $tmp/NAME.yaml; tend apply's output on stdout
deploy() {
    cat >"$tmp/$1.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      containers:
      - name: $1
        command: [/bin/sh, -c, "$3"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        $([ -n "$2" ] && echo "resources: {limits: {$2}}")
YAML
    tend apply -f "$tmp/$1.yaml" 2>&1
}
pod_json() { api GET "/api/v1/namespaces/default/pods?labelSelector=app%3D$1" >/dev/null; cat "$tmp/body"; }
pid_of() { pod_json "$1" | jq -r '.items[] | select(.status.phase == "Running") | .status.containerStatuses[0].containerID' | sed 's|process://||' | head -1; }
uid_of() { pod_json "$1" | jq -r '.items[] | select(.status.phase == "Running") | .metadata.uid' | head -1; }
running() { [ -n "$(pid_of "$1")" ]; }
