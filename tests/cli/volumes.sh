#!/bin/sh
# Volumes (issue 31): configMap, secret and emptyDir volumes of process
# pods, through stock kubectl. The process reads its files at their
# mountPath (a mount namespace of its own), a secret's on a tmpfs with the
# mode asked for; an edit of the ConfigMap or the Secret reaches the files
# without a restart, in one step (the ..data link), subPath mounts keeping
# theirs as on a cluster — also for a pod adopted after kill -9 of tendd.
# A missing ConfigMap holds the pod in ContainerCreating (FailedMount)
# until it is made. The host's own view is unchanged, and a pod's volumes
# go with it. Bad volumes are refused with their path, changing nothing.
#
# Mounts need root; the test runs in a mount namespace of its own (unshare),
# so that nothing it mounts can outlive it on the machine.
ns_why="volumes need root (tendd mounts them)"
. "$(dirname "$0")/mount-ns.sh"
. "$(dirname "$0")/lib.sh"

command -v kubectl >/dev/null || {
    echo "kubectl is not on the PATH: install kubectl (1.30 or later) to run this test"
    exit 77
}
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

port=29651 # outside the leased range and the ephemeral one; configs.sh has 29650
start_tendd --listen "127.0.0.1:$port"
tend kubeconfig >"$tmp/kubeconfig" || { fail "tend kubeconfig"; finish; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }
mnt="$tmp/mnt" # every mountPath is under it: nothing is made elsewhere on the host
chmod 0711 "$tmp" # (the pod's user must get through to them, as to /etc)
pid_of() { k get pod -l "app=$1" -o jsonpath='{.items[0].status.containerStatuses[0].containerID}' | sed 's|process://||'; }
running() { [ "$(k get pod -l "app=$1" -o jsonpath='{.items[0].status.phase}')" = Running ]; }
# what the process itself printed last for NAME ("NAME: content")
said() { k logs "deploy/$1" 2>/dev/null | grep "^$2: " | tail -1 | sed "s/^$2: //"; }

printf 'port=8080\n' >"$tmp/app.conf"
expect_exit 0 "create configmap --from-file" \
    k create configmap web-config --from-file="$tmp/app.conf" --from-literal=mode=blue
expect_exit 0 "create secret generic" k create secret generic web-tls --from-literal=key=s3cr3t-v4lue-1

# The process prints each file when it changes: the files are read by it.
cat >"$tmp/web.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      securityContext:
        runAsUser: 65534
        runAsGroup: 65534
      containers:
      - name: web
        command:
        - /bin/sh
        - -c
        - |
          show() { c=\$(cat "\$2" 2>&1 | tr '\n' ' '); [ "\$c" = "\$(cat $mnt/scratch/.last-\$1 2>/dev/null)" ] || { echo "\$1: \$c"; printf %s "\$c" >$mnt/scratch/.last-\$1; }; }
          echo scratch >$mnt/scratch/written && echo "wrote: yes"
          while :; do
            show conf $mnt/etc/web/app.conf; show mode $mnt/etc/web/mode
            show single $mnt/single.conf; show nested $mnt/items/conf.d/app.conf
            show key $mnt/tls/key; sleep 0.1
          done
        readinessProbe: # sees what the pod sees (the host's mount point is empty)
          exec: {command: [/bin/grep, -q, port=, $mnt/etc/web/app.conf]}
          periodSeconds: 1
        volumeMounts:
        - {name: config, mountPath: $mnt/etc/web}
        - {name: config, mountPath: $mnt/single.conf, subPath: app.conf}
        - {name: items, mountPath: $mnt/items}
        - {name: tls, mountPath: $mnt/tls, readOnly: true}
        - {name: scratch, mountPath: $mnt/scratch}
      volumes:
      - name: config
        configMap: {name: web-config}
      - name: items
        configMap:
          name: web-config
          items: [{key: app.conf, path: conf.d/app.conf, mode: 0604}]
      - name: tls
        secret: {secretName: web-tls, defaultMode: 0444}
      - name: scratch
        emptyDir: {medium: Memory, sizeLimit: 8Mi}
YAML

echo "== bad volumes: refused with their path, nothing changed"
sed 's/subPath: app.conf/subPath: ..\/..\/etc\/passwd/; s/sizeLimit: 8Mi/sizeLimit: 0/' "$tmp/web.yaml" >"$tmp/bad.yaml"
expect_exit 1 "apply a bad manifest" k apply -f "$tmp/bad.yaml"
expect_grep "spec.template.spec.containers\[0\].volumeMounts\[1\].subPath: Invalid value: \"../../etc/passwd\": must not contain '..'" \
    "$tmp/err" "a subPath out of the volume, with its path"
expect_grep "spec.template.spec.volumes\[3\].emptyDir.sizeLimit: Invalid value: \"0\": must be greater than 0" \
    "$tmp/err" "a zero sizeLimit, with its path"
sed 's/emptyDir: {medium: Memory, sizeLimit: 8Mi}/hostPath: {path: \/srv}/' "$tmp/web.yaml" >"$tmp/bad2.yaml"
expect_exit 1 "apply a hostPath volume" k apply -f "$tmp/bad2.yaml"
expect_grep "spec.template.spec.volumes\[3\].hostPath: .*use the host's path itself" "$tmp/err" \
    "hostPath refused with the reason"
expect_exit 0 "apply --dry-run=server" k apply -f "$tmp/web.yaml" --dry-run=server
[ -z "$(k get deploy -o name)" ] && [ ! -e "$mnt" ] && [ ! -e "$state/volumes" ] &&
    ok "refusals and a dry run made nothing: no deployment, no mount point, no volume" ||
    fail "something was made: $(k get deploy -o name) $(ls -d "$mnt" "$state/volumes" 2>&1)"

echo "== the process reads its files"
expect_exit 0 "apply" k apply -f "$tmp/web.yaml"
wait_for 20 running web || fail "web not running: $(k get pods -o wide)"
wait_for 10 sh -c "[ \"\$(kubectl logs deploy/web 2>/dev/null | grep -c '^key: ')\" -ge 1 ]"
pid=$(pid_of web)
[ "$(said web conf)" = "port=8080 " ] && [ "$(said web mode)" = blue ] &&
    ok "the ConfigMap's keys, as files at mountPath" || fail "conf: $(said web conf) mode: $(said web mode)"
[ "$(said web single)" = "port=8080 " ] && ok "a subPath: one key at a file's path" ||
    fail "single: $(said web single)"
[ "$(said web nested)" = "port=8080 " ] && ok "items: a key at a nested path" ||
    fail "nested: $(said web nested)"
[ "$(said web key)" = s3cr3t-v4lue-1 ] && ok "the Secret's key, decoded" || fail "key: $(said web key)"
ready() { [ "$(k get pod -l "app=$1" -o jsonpath='{.items[0].status.containerStatuses[0].ready}')" = true ]; }
wait_for 10 ready web && ok "an exec probe runs in the pod's mount namespace: it sees its files" ||
    fail "not ready: $(k describe pod -l app=web | tail -5)"
[ "$(said web wrote)" = "yes" ] && ok "the emptyDir: written by the pod's user (65534)" ||
    fail "wrote: $(said web wrote)"
root="/proc/$pid/root"
[ "$(stat -c %a "$root$mnt/tls/..data/key")" = 444 ] &&
    [ "$(stat -c %a "$root$mnt/items/..data/conf.d/app.conf")" = 604 ] &&
    [ "$(stat -c %a "$root$mnt/etc/web/..data/mode")" = 644 ] &&
    ok "modes: defaultMode 0444 (octal, as kubectl reads it), an item's 0604, the default 0644" ||
    fail "modes: $(stat -c '%n %a' "$root$mnt/tls/..data/key" "$root$mnt/items/..data/conf.d/app.conf" "$root$mnt/etc/web/..data/mode")"
mi="/proc/$pid/mountinfo"
grep -q " $mnt/tls ro,.* - tmpfs " "$mi" && ok "the secret is on a tmpfs, read-only" ||
    fail "tls: $(grep " $mnt/tls " "$mi")"
grep -q " $mnt/scratch rw,.* - tmpfs .*size=8192k" "$mi" && ok "emptyDir medium Memory: a tmpfs of its sizeLimit" ||
    fail "scratch: $(grep " $mnt/scratch " "$mi")"
grep -q " $mnt/etc/web ro," "$mi" && ok "a configMap volume is read-only" || fail "config: $(grep " $mnt/etc/web " "$mi")"
if grep -q " $mnt/" /proc/self/mountinfo; then
    fail "the pod's mounts reached the host's view: $(grep " $mnt/" /proc/self/mountinfo)"
elif [ -n "$(ls -A "$mnt/etc/web")" ] || [ -s "$mnt/single.conf" ]; then
    fail "the host's mount points are not empty: $(ls -A "$mnt/etc/web")"
else
    ok "the host's view is unchanged: empty mount points, no mount"
fi

echo "== an edit reaches the files, in place, without a restart"
printf 'port=9090\n' >"$tmp/app.conf"
k create configmap web-config --from-file="$tmp/app.conf" --from-literal=mode=green \
    --dry-run=client -o yaml | k replace -f - >/dev/null || fail "replace the ConfigMap"
wait_for 10 sh -c "kubectl logs deploy/web | grep -qx 'conf: port=9090 '" &&
    ok "the process sees the edit" || fail "conf: $(said web conf)"
[ "$(said web mode)" = green ] && [ "$(said web nested)" = "port=9090 " ] &&
    ok "every key and item of it" || fail "mode: $(said web mode) nested: $(said web nested)"
[ "$(said web single)" = "port=8080 " ] && ok "a subPath keeps what it had (as on a cluster)" ||
    fail "single: $(said web single)"
[ "$(pid_of web)" = "$pid" ] && [ "$(k get pod -l app=web -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}')" = 0 ] &&
    ok "the same process (pid $pid)" || fail "restarted: $(pid_of web) != $pid"
# every line the process printed of the file is a whole version, never a mix
k logs deploy/web | grep '^conf: ' | grep -v -x -e 'conf: port=8080 ' -e 'conf: port=9090 ' >"$tmp/torn"
[ ! -s "$tmp/torn" ] && ok "no torn read" || fail "torn: $(cat "$tmp/torn")"
[ "$(ls -d "$root$mnt/etc/web"/..20* | wc -l)" = 1 ] && ok "the old version is gone" ||
    fail "versions: $(ls -a "$root$mnt/etc/web")"

echo "== after kill -9 of tendd, an adopted pod's files still follow"
stop_tendd KILL
start_tendd --listen "127.0.0.1:$port"
k create secret generic web-tls --from-literal=key=s3cr3t-v4lue-2 --dry-run=client -o yaml |
    k replace -f - >/dev/null || fail "replace the Secret"
wait_for 10 sh -c "kubectl logs deploy/web | grep -qx 'key: s3cr3t-v4lue-2'" &&
    ok "the Secret's edit reaches the adopted pod" || fail "key: $(said web key)"
[ "$(pid_of web)" = "$pid" ] && ok "still the same process" || fail "pid $(pid_of web) != $pid"
grep -q "s3cr3t-v4lue" "$tmp/tendd.log" && fail "a secret value in tendd's log"
k get events -o json | grep -q "s3cr3t-v4lue" && fail "a secret value in an event"
k describe pod -l app=web | grep -q "s3cr3t-v4lue" && fail "a secret value in describe"

echo "== a missing ConfigMap: ContainerCreating, then it starts once made"
sed 's/name: web$/name: late/; s/app: web/app: late/g; s/web-config/late-config/; s|/etc/web|/etc/late|; s|/single.conf|/late.conf|; s|/items|/late-items|; s|/tls|/late-tls|; s|/scratch|/late-scratch|g;
    s/secretName: web-tls,/secretName: late-missing, optional: true,/; s/emptyDir: {medium: Memory, sizeLimit: 8Mi}/emptyDir: {}/' \
    "$tmp/web.yaml" >"$tmp/late.yaml"
expect_exit 0 "apply late" k apply -f "$tmp/late.yaml"
wait_for 10 sh -c "kubectl get pod -l app=late -o jsonpath='{.items[0].status.containerStatuses[0].state.waiting.reason}' | grep -qx ContainerCreating" &&
    ok "ContainerCreating" || fail "late: $(k get pod -l app=late -o yaml)"
wait_for 10 sh -c "kubectl get events --field-selector reason=FailedMount -o jsonpath='{.items[*].message}' | grep -q 'configmap \"late-config\" not found'" &&
    ok "a FailedMount event, in the kubelet's words" || fail "events: $(k get events)"
expect_exit 0 "create late-config" k create configmap late-config --from-literal=app.conf=late --from-literal=mode=red
wait_for 20 running late && ok "made, the pod starts" || fail "late: $(k get pod -l app=late)"
lp=$(pid_of late)
wait_for 10 sh -c "kubectl logs deploy/late | grep -qx 'wrote: yes'" &&
    grep -q " $mnt/late-scratch rw," "/proc/$lp/mountinfo" &&
    ! grep -q " $mnt/late-scratch rw,.* - tmpfs " "/proc/$lp/mountinfo" &&
    ok "an emptyDir on disk (not a tmpfs), written by the pod's user" ||
    fail "late-scratch: $(grep " $mnt/late-scratch " "/proc/$lp/mountinfo"; k logs deploy/late | head -3)"
[ -d "/proc/$lp/root$mnt/late-tls/..data" ] && [ -z "$(ls "/proc/$lp/root$mnt/late-tls")" ] &&
    ok "an optional Secret that is missing: an empty volume, and the pod runs" ||
    fail "late-tls: $(ls -a "/proc/$lp/root$mnt/late-tls")"

echo "== tend.io/config-rollout: an edit is a rollout; a bad one rolled back; undo brings the old file"
cat >"$tmp/roll.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: roll
  annotations: {tend.io/config-rollout: "true", tend.io/auto-rollback: "true"}
spec:
  replicas: 3
  progressDeadlineSeconds: 30
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector:
    matchLabels: {app: roll}
  template:
    metadata:
      labels: {app: roll}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command:
        - /bin/sh
        - -c
        - 'm=\$(cat $mnt/roll/mode); [ "\$m" = bad ] && { echo "refusing mode bad"; exit 1; }; echo "mode \$m"; exec sleep 1000'
        readinessProbe: {exec: {command: [/bin/true]}, periodSeconds: 1}
        volumeMounts: [{name: config, mountPath: $mnt/roll}]
      volumes: [{name: config, configMap: {name: roll-config}}]
YAML
expect_exit 0 "create roll-config" k create configmap roll-config --from-literal=mode=v1
expect_exit 0 "apply roll" k apply -f "$tmp/roll.yaml"
expect_exit 0 "rollout status" k rollout status deploy/roll --timeout=60s
# modes ROLL: what each running pod of roll read at its start, sorted
modes() { for p in $(k get pods -l app=roll --field-selector=status.phase=Running -o name); do
    k logs "$p" 2>/dev/null | tail -1; done | sort | uniq -c | awk '{ print $1 "x" $2 $3 }' | tr '\n' ' '; }
[ "$(modes)" = "3xmodev1 " ] && ok "three pods, each read v1" || fail "modes: $(modes)"
v1_pods=$(k get pods -l app=roll -o name | sort)
set_mode() {
    k create configmap roll-config --from-literal=mode="$1" --dry-run=client -o yaml | k replace -f - >/dev/null ||
        fail "replace roll-config with mode $1"
}
set_mode v2
wait_for 30 sh -c "kubectl get deploy roll -o jsonpath='{.metadata.annotations.deployment\.kubernetes\.io/revision}' | grep -qx 2" &&
    ok "an edit of the ConfigMap is revision 2" || fail "revision: $(k get deploy roll -o yaml | grep revision)"
expect_exit 0 "rollout status after the edit" k rollout status deploy/roll --timeout=60s
[ "$(modes)" = "3xmodev2 " ] && ok "three new pods, each started with v2" || fail "modes: $(modes)"
[ -z "$(comm -12 "$(printf '%s\n' $v1_pods >"$tmp/a"; echo "$tmp/a")" \
    "$(k get pods -l app=roll -o name | sort >"$tmp/b"; echo "$tmp/b")")" ] &&
    ok "every v1 pod replaced" || fail "still there: $(comm -12 "$tmp/a" "$tmp/b")"
k get events --field-selector involvedObject.name=roll -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' >"$tmp/events"
grep -q "Scaled up replica set roll-[a-z0-9]* from 0 to 1$" "$tmp/events" &&
    grep -q "Scaled up replica set roll-[a-z0-9]* from 2 to 3$" "$tmp/events" &&
    ok "replica by replica (maxSurge 1)" || fail "events: $(cat "$tmp/events")"
k rollout history deploy/roll --revision=1 >"$tmp/h1" 2>&1
k rollout history deploy/roll --revision=2 >"$tmp/h2" 2>&1
snap1=$(grep -o 'roll-config-[a-z0-9]*' "$tmp/h1" | head -1)
snap2=$(grep -o 'roll-config-[a-z0-9]*' "$tmp/h2" | head -1)
[ -n "$snap1" ] && [ -n "$snap2" ] && [ "$snap1" != "$snap2" ] &&
    ok "rollout history shows each revision's config ($snap1, $snap2)" || fail "history: $(cat "$tmp/h1" "$tmp/h2")"
tend rollout history deploy/roll >"$tmp/hist"
grep -q "^1 .*configmap/$snap1\$" "$tmp/hist" && grep -q "^2 .*configmap/$snap2\$" "$tmp/hist" &&
    ok "tend rollout history: a CONFIG column" || fail "$(cat "$tmp/hist")"
[ "$(k get cm "$snap1" -o jsonpath='{.data.mode}/{.immutable}')" = "v1/true" ] &&
    ok "$snap1 holds v1, immutable" || fail "$snap1: $(k get cm "$snap1" -o yaml)"

set_mode bad
rolled_back() { [ "$(kubectl get deploy roll -o jsonpath='{.status.conditions[?(@.type=="RolledBack")].status}')" = True ]; }
wait_for 60 rolled_back && ok "a config the program refuses is rolled back automatically" ||
    fail "not rolled back: $(k describe deploy roll | tail -12)"
expect_exit 0 "rollout status after the rollback" k rollout status deploy/roll --timeout=60s
[ "$(modes)" = "3xmodev2 " ] && ok "the pods run v2 still" || fail "modes: $(modes)"

expect_exit 0 "rollout undo to revision 1" k rollout undo deploy/roll --to-revision=1
expect_exit 0 "rollout status after undo" k rollout status deploy/roll --timeout=60s
[ "$(modes)" = "3xmodev1 " ] && ok "undo: the pods run with v1 again" || fail "modes: $(modes)"
p=$(k get pods -l app=roll -o jsonpath='{.items[0].status.containerStatuses[0].containerID}' | sed 's|process://||')
[ "$(cat "/proc/$p/root$mnt/roll/mode")" = v1 ] && ok "undo brought the old file content back" ||
    fail "file: $(cat "/proc/$p/root$mnt/roll/mode")"
[ "$(k get cm roll-config -o jsonpath='{.data.mode}')" = bad ] && ok "roll-config itself untouched" ||
    fail "roll-config: $(k get cm roll-config -o yaml)"
expect_exit 0 "delete roll" k delete deployment roll
wait_for 20 sh -c "[ -z \"\$(kubectl get cm -o name | grep 'roll-config-')\" ]" &&
    ok "its snapshots go with it" || fail "left: $(k get cm)"

echo "== a pod's volumes go with it"
expect_exit 0 "delete the deployments" k delete deployment web late
wait_for 20 sh -c "[ -z \"\$(kubectl get pods -o name)\" ]" || fail "pods left: $(k get pods)"
wait_for 10 sh -c "[ -z \"\$(ls -A '$state/volumes' 2>/dev/null)\" ]" && ok "their files removed" ||
    fail "left: $(ls -R "$state/volumes")"
grep -q "$state/volumes" /proc/self/mountinfo && fail "a tmpfs left: $(grep "$state/volumes" /proc/self/mountinfo)" ||
    ok "their tmpfs unmounted"

echo "== at start-up, the volumes of pods that are no more go"
mkdir -p "$state/volumes/00000000-dead-4000-8000-000000000000/cfg" &&
    mount -t tmpfs tmpfs "$state/volumes/00000000-dead-4000-8000-000000000000/cfg"
stop_tendd
start_tendd --listen "127.0.0.1:$port"
[ ! -e "$state/volumes/00000000-dead-4000-8000-000000000000" ] &&
    ! grep -q "$state/volumes" /proc/self/mountinfo && ok "swept, tmpfs and all" ||
    fail "left: $(ls -R "$state/volumes"; grep "$state/volumes" /proc/self/mountinfo)"

finish
