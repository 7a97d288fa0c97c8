#!/usr/bin/python3
"""The official Kubernetes Python client against tendd, as its users drive it.

Run by python.sh, which starts tendd and sets KUBECONFIG (from `tend
kubeconfig`), TESTPROG (tend-testprog) and TEST_MARKER (every pod's
environment carries it, so that the wrapper can stop what is left).

The typed APIs are used with the client's default client-side validation on:
every answer must decode into the models, which check the fields the
Kubernetes schema marks required. Each case is a function; every case runs,
prints `ok: <case>` or `FAIL: <case>: <reason>`, and the exit status is 1 if
any failed. `python_suite.py CASE...` runs only the named cases.

The client is Debian's python3-kubernetes 22.6. Where 22.6 itself cannot
express a request (not tendd's doing), the case does what a user of 22.6
does instead, and says so: see content_type() and self_subject_review.
"""

import datetime
import json
import os
import re
import sys
import threading
import time
import traceback

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

NS = "default"
TESTPROG = os.environ["TESTPROG"]
MARKER = os.environ["TEST_MARKER"]
LOGGER = ["/bin/sh", "-c", "i=0; while :; do echo line $i; i=$((i+1)); sleep 0.2; done"]

config.load_kube_config(os.environ["KUBECONFIG"])
api_client = client.ApiClient()
apps = client.AppsV1Api(api_client)
core = client.CoreV1Api(api_client)

# A request that hangs must not hang the suite: every call of a streaming
# kind passes its own _request_timeout; python.sh has a backstop timeout.
REQ_TIMEOUT = 30


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


# ---------------------------------------------------------------- helpers


def env_list(extra=None):
    env = [client.V1EnvVar(name="TEST_MARKER", value=MARKER)]
    for k, v in (extra or {}).items():
        env.append(client.V1EnvVar(name=k, value=v))
    return env


def deployment(name, replicas=2, command=None, env=None, labels=None):
    """A V1Deployment model: one container `main`, pods labelled app=NAME."""
    meta_labels = {"app": name}
    meta_labels.update(labels or {})
    return client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=name, labels=meta_labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels={"app": name}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": name}),
                spec=client.V1PodSpec(
                    termination_grace_period_seconds=2,
                    containers=[
                        client.V1Container(
                            name="main",
                            command=command or [TESTPROG, "sleep"],
                            env=env_list(env),
                        )
                    ],
                ),
            ),
        ),
    )


def apply_config(name, replicas=None, env=None):
    """A server-side apply configuration, as a plain dict."""
    cfg = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [
                        {
                            "name": "main",
                            "command": [TESTPROG, "sleep"],
                            "env": [{"name": "TEST_MARKER", "value": MARKER}]
                            + [{"name": k, "value": v} for k, v in (env or {}).items()],
                        }
                    ],
                },
            },
        },
    }
    if replicas is not None:
        cfg["spec"]["replicas"] = replicas
    return cfg


class content_type:
    """Sends the PATCHes made within it with this Content-Type.

    Client limitation (22.6): the typed patch_* methods take no
    `_content_type` (that keyword came in a later release; 22.6 raises
    ApiTypeError "Got an unexpected keyword argument '_content_type'"). They
    pick the first of their content types, application/json-patch+json, and
    rest.py then sends a dict body as strategic-merge-patch+json, a list as
    json-patch+json. So a merge patch, or a server-side apply, cannot be
    asked for. The usual workaround of 22.x users is to override
    ApiClient.select_header_content_type for the call, done here. For
    apply-patch+yaml the body must also be a str: rest.py passes a str
    through as it is for a content type without "json" in it, and refuses a
    dict (ApiException(status=0) "Cannot prepare a request message for
    provided arguments"), since it encodes only JSON."""

    def __init__(self, ct):
        self.ct = ct

    def __enter__(self):
        api_client.select_header_content_type = lambda _types: self.ct

    def __exit__(self, *exc):
        del api_client.select_header_content_type


def apply(name, cfg, manager="py-ssa", **kw):
    """Server-side apply of a deployment (see content_type for how 22.6 does it)."""
    with content_type("application/apply-patch+yaml"):
        return apps.patch_namespaced_deployment(
            name, NS, body=json.dumps(cfg), field_manager=manager, **kw
        )


def merge_patch(name, body, **kw):
    with content_type("application/merge-patch+json"):
        return apps.patch_namespaced_deployment(name, NS, body=body, **kw)


def cleanup(*names):
    """Deletes a case's deployments (in its `finally`: it must not hide the
    case's own failure, so it raises nothing)."""
    for n in names:
        try:
            apps.delete_namespaced_deployment(n, NS, _preload_content=False).release_conn()
        except Exception:
            pass


def api_error(e):
    body = e.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return "ApiException %s %s: %s" % (e.status, e.reason, (body or "").strip()[:400])


def expect_api_error(status, fn, *args, **kw):
    """Calls fn, which must raise ApiException with this status; returns the
    exception's body as text."""
    try:
        got = fn(*args, **kw)
    except ApiException as e:
        if e.status != status:
            raise Failure("expected ApiException %d, got %s" % (status, api_error(e)))
        body = e.body
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        return body or ""
    raise Failure("expected ApiException %d, got an answer: %s" % (status, short(got)))


def short(obj, n=300):
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    s = repr(obj)
    return s if len(s) <= n else s[:n] + "..."


def wait_until(what, fn, timeout=30, interval=0.2):
    """Polls fn until it returns something true; returns that. Exceptions
    from fn are not retried: they are the failure."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            raise Failure("timed out after %ss waiting for %s (last: %s)" % (timeout, what, short(last)))
        time.sleep(interval)


def holds(what, fn, seconds=1.5, interval=0.25):
    """fn must stay true for `seconds`: for 'nothing changed' checks."""
    deadline = time.monotonic() + seconds
    while True:
        r = fn()
        if r is not True:
            raise Failure("%s: %s" % (what, r))
        if time.monotonic() > deadline:
            return
        time.sleep(interval)


def pods_of(name):
    return core.list_namespaced_pod(NS, label_selector="app=%s" % name).items


def pod_ready(p):
    if p.metadata.deletion_timestamp or p.status.phase != "Running":
        return False
    cs = p.status.container_statuses or []
    return bool(cs) and cs[0].ready is True


def wait_pods(name, n, timeout=30):
    """Until the deployment's pods are exactly n, all Running and ready
    (none on its way out); returns them."""

    def ok():
        ps = pods_of(name)
        if len(ps) == n and all(pod_ready(p) for p in ps):
            return ps or True
        return False

    r = wait_until("%d ready pods of %s (have: %s)" % (n, name, pod_summary(name)), ok, timeout)
    return r if isinstance(r, list) else []


def pod_summary(name):
    try:
        return [
            (p.metadata.name, p.status.phase, bool(p.metadata.deletion_timestamp))
            for p in pods_of(name)
        ]
    except Exception as e:  # only for a message
        return "(%s)" % e


def wait_settled(name, n, timeout=30):
    """Until the deployment has rolled out n ready replicas and its status
    says so; returns the deployment as read then."""
    wait_pods(name, n, timeout)

    def ok():
        d = apps.read_namespaced_deployment(name, NS)
        s = d.status
        if (
            s.observed_generation == d.metadata.generation
            and (s.replicas or 0) == n
            and (s.ready_replicas or 0) == n
            and (s.updated_replicas or 0) == n
            and (s.available_replicas or 0) == n
        ):
            return d
        return None

    return wait_until("deployment %s settled at %d" % (name, n), ok, timeout)


def pid_of(pod):
    cid = pod.status.container_statuses[0].container_id or ""
    m = re.fullmatch(r"process://(\d+)", cid)
    check(m, "pod %s: container_id %r is not process://PID" % (pod.metadata.name, cid))
    return int(m.group(1))


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def snapshot(name):
    d = apps.read_namespaced_deployment(name, NS)
    pods = sorted(
        (p.metadata.name, p.status.container_statuses[0].container_id, bool(p.metadata.deletion_timestamp))
        for p in pods_of(name)
    )
    return {
        "resourceVersion": d.metadata.resource_version,
        "generation": d.metadata.generation,
        "replicas": d.spec.replicas,
        "env": [(e.name, e.value) for e in d.spec.template.spec.containers[0].env],
        "pods": pods,
    }


def assert_unchanged(name, before):
    """The deployment still exists, unchanged, with the same pods (names and
    pids), alive, for a while: a dry run must have changed nothing."""

    def same():
        try:
            now = snapshot(name)
        except ApiException as e:
            return "reading it back: " + api_error(e)
        if now != before:
            diff = {k: (before[k], now[k]) for k in before if before[k] != now[k]}
            return "changed (before, after): %s" % diff
        return True

    holds("after the dry run", same)
    for pod, cid, _ in before["pods"]:
        pid = int(cid.split("://")[1])
        check(alive(pid), "pod %s: its process %d is gone" % (pod, pid))


def env_of(d):
    return {e.name: e.value for e in d.spec.template.spec.containers[0].env or []}


def scale_to(name, n):
    apps.patch_namespaced_deployment(name, NS, body={"spec": {"replicas": n}})


# ---------------------------------------------------------------- cases

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def version():
    v = client.VersionApi(api_client).get_code()
    check(v.git_version.startswith("v1.32"), "git_version %r" % v.git_version)
    check(v.major == "1" and v.minor.startswith("32"), "major/minor %r/%r" % (v.major, v.minor))


@case
def api_versions():
    v = client.CoreApi(api_client).get_api_versions()
    check("v1" in v.versions, "versions %r" % v.versions)


@case
def discovery():
    groups = client.ApisApi(api_client).get_api_versions()
    by_name = {g.name: g for g in groups.groups}
    check("apps" in by_name, "no apps group in %r" % sorted(by_name))
    check(
        "apps/v1" in [v.group_version for v in by_name["apps"].versions],
        "apps versions %r" % by_name["apps"].versions,
    )
    res = apps.get_api_resources()
    check(res.group_version == "apps/v1", "group_version %r" % res.group_version)
    by_res = {r.name: r for r in res.resources}
    for want in ("deployments", "deployments/scale", "replicasets"):
        check(want in by_res, "no %s in %r" % (want, sorted(by_res)))
    d = by_res["deployments"]
    check(d.kind == "Deployment" and d.namespaced, "deployments: kind %r namespaced %r" % (d.kind, d.namespaced))
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        check(verb in d.verbs, "deployments verbs %r lack %s" % (d.verbs, verb))


@case
def list_read_deployments():
    name = "py-list-deploy"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        items = apps.list_namespaced_deployment(NS).items
        check(name in [d.metadata.name for d in items], "not listed")
        items = apps.list_deployment_for_all_namespaces().items
        check(name in [d.metadata.name for d in items], "not listed across namespaces")
        d = apps.read_namespaced_deployment(name, NS)
        check(d.spec.replicas == 1, "replicas %r" % d.spec.replicas)
        check(d.spec.template.spec.containers[0].command == [TESTPROG, "sleep"], "command")
        check(d.metadata.uid and d.metadata.resource_version, "no uid/resourceVersion")
    finally:
        cleanup(name)


@case
def list_read_replicasets():
    name = "py-list-rs"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        rss = apps.list_namespaced_replica_set(NS, label_selector="app=%s" % name).items
        check(len(rss) == 1, "%d replicasets" % len(rss))
        rs = apps.read_namespaced_replica_set(rss[0].metadata.name, NS)
        owner = (rs.metadata.owner_references or [None])[0]
        check(owner and owner.kind == "Deployment" and owner.name == name, "owner %s" % short(owner))
        check(rs.spec.replicas == 1, "rs replicas %r" % rs.spec.replicas)
        wait_until("rs ready 1", lambda: apps.read_namespaced_replica_set(rs.metadata.name, NS).status.ready_replicas == 1)
        check(rs.metadata.name in [r.metadata.name for r in apps.list_replica_set_for_all_namespaces().items],
              "not listed across namespaces")
    finally:
        cleanup(name)


@case
def list_read_pods():
    name = "py-list-pods"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        pods = core.list_namespaced_pod(NS, label_selector="app=%s" % name).items
        check(len(pods) == 1, "%d pods" % len(pods))
        p = core.read_namespaced_pod(pods[0].metadata.name, NS)
        cs = p.status.container_statuses[0]
        check(cs.name == "main", "container status name %r" % cs.name)
        check(isinstance(cs.image, str), "image %r" % cs.image)
        check(isinstance(cs.image_id, str), "image_id %r" % cs.image_id)
        check(cs.state.running is not None, "state %s" % short(cs.state))
        check(alive(pid_of(p)), "the pod's process is not alive")
        check(p.spec.containers[0].command == [TESTPROG, "sleep"], "command %r" % p.spec.containers[0].command)
        allp = core.list_pod_for_all_namespaces().items
        check(p.metadata.name in [x.metadata.name for x in allp], "not listed across namespaces")
    finally:
        cleanup(name)


@case
def leased_port_decodes():
    # tend's own addition: a port tendd leases per pod is named in the pod
    # template's annotation tend.io/lease-ports, so every port in the typed
    # model has its containerPort (Kubernetes requires one), and a user
    # writes it all with the typed models. The pod gets the port as
    # $PORT_HTTP, and its tend.io/ports annotation says which.
    name = "py-leased"
    body = deployment(name, replicas=1)
    body.spec.template.metadata.annotations = {"tend.io/lease-ports": "http"}
    body.spec.template.spec.containers[0].ports = [client.V1ContainerPort(name="metrics", container_port=45991)]
    try:
        d = apps.create_namespaced_deployment(NS, body)
        ports = d.spec.template.spec.containers[0].ports
        check(len(ports) == 1 and ports[0].container_port == 45991, "ports %s" % short(ports))
        check(d.spec.template.metadata.annotations.get("tend.io/lease-ports") == "http",
              "annotations %s" % short(d.spec.template.metadata.annotations))
        pods = wait_pods(name, 1)
        got = (pods[0].metadata.annotations or {}).get("tend.io/ports", "")
        check(re.match(r"^http=[0-9]+,metrics=45991$", got), "the pod's tend.io/ports %r" % got)
        check(name in [x.metadata.name for x in apps.list_namespaced_deployment(NS).items], "not listed")
        apps.read_namespaced_deployment(name, NS)
        check(apps.list_namespaced_replica_set(NS, label_selector="app=%s" % name).items, "no replicaset")
    finally:
        cleanup(name)


@case
def list_read_nodes():
    nodes = core.list_node().items
    check(len(nodes) >= 1, "no nodes")
    n = core.read_node(nodes[0].metadata.name)
    info = n.status.node_info
    check(info is not None, "no node_info")
    for f in ("boot_id", "machine_id", "system_uuid", "kernel_version", "operating_system", "architecture"):
        check(isinstance(getattr(info, f), str), "node_info.%s %r" % (f, getattr(info, f)))
    check(info.operating_system == "linux", "operating_system %r" % info.operating_system)
    check("cpu" in (n.status.capacity or {}), "capacity %r" % n.status.capacity)
    ready = [c for c in n.status.conditions or [] if c.type == "Ready"]
    check(ready and ready[0].status == "True", "Ready condition %s" % short(ready))


@case
def list_events():
    name = "py-list-events"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        ev = wait_until("an event in the namespace", lambda: core.list_namespaced_event(NS).items)
        check(all(isinstance(e.involved_object, client.V1ObjectReference) for e in ev), "involved_object")
        one = core.read_namespaced_event(ev[0].metadata.name, NS)
        check(one.metadata.name == ev[0].metadata.name and one.message == ev[0].message, "read %s" % short(one))
        allev = core.list_event_for_all_namespaces().items
        check(len(allev) >= len(ev), "fewer events across namespaces (%d < %d)" % (len(allev), len(ev)))
    finally:
        cleanup(name)


@case
def create_read_replace():
    name = "py-crud"
    try:
        d = apps.create_namespaced_deployment(NS, deployment(name, replicas=2, env={"A": "1"}))
        check(d.metadata.name == name and d.metadata.uid, "create answered %s" % short(d.metadata))
        pods = wait_pods(name, 2)
        check(all(env_of_pod(p).get("A") == "1" for p in pods), "pods' env")
        d = apps.read_namespaced_deployment(name, NS)
        check(d.spec.replicas == 2, "replicas %r" % d.spec.replicas)
        check(d.spec.template.spec.containers[0].command == [TESTPROG, "sleep"], "command")
        check(env_of(d) == {"TEST_MARKER": MARKER, "A": "1"}, "env %r" % env_of(d))

        old = wait_settled(name, 2)
        gen = old.metadata.generation
        new = apps.read_namespaced_deployment(name, NS)
        new.spec.template.spec.containers[0].env = env_list({"A": "2"})
        r = apps.replace_namespaced_deployment(name, NS, new)
        check(env_of(r) == {"TEST_MARKER": MARKER, "A": "2"}, "replace answered env %r" % env_of(r))
        check(r.metadata.generation == gen + 1, "generation %r after %r" % (r.metadata.generation, gen))
        check(r.metadata.resource_version != old.metadata.resource_version, "resourceVersion unchanged")
        wait_until("pods with A=2", lambda: (lambda ps: len(ps) == 2 and all(pod_ready(p) and env_of_pod(p).get("A") == "2" for p in ps))(pods_of(name)))

        # The object read before the replace: its resourceVersion is stale.
        old.spec.template.spec.containers[0].env = env_list({"A": "3"})
        expect_api_error(409, apps.replace_namespaced_deployment, name, NS, old)
        check(env_of(apps.read_namespaced_deployment(name, NS)).get("A") == "2", "the stale replace changed it")
    finally:
        cleanup(name)


def env_of_pod(p):
    return {e.name: e.value for e in p.spec.containers[0].env or []}


@case
def patch_strategic():
    name = "py-patch-smp"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1, env={"A": "1", "B": "2"}))
        # A dict body: 22.6's rest.py sends it as strategic-merge-patch+json.
        r = apps.patch_namespaced_deployment(
            name, NS, {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "patched"}]}]}}}}
        )
        want = {"TEST_MARKER": MARKER, "A": "patched", "B": "2"}
        check(env_of(r) == want, "answer env %r" % env_of(r))
        check(env_of(apps.read_namespaced_deployment(name, NS)) == want, "read back env differs")
        check(r.spec.template.spec.containers[0].command == [TESTPROG, "sleep"], "command lost")
    finally:
        cleanup(name)


@case
def patch_json():
    name = "py-patch-json"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=2, env={"A": "1"}))
        r = apps.patch_namespaced_deployment(
            name,
            NS,
            [
                {"op": "replace", "path": "/spec/replicas", "value": 1},
                {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "C", "value": "3"}},
                {"op": "add", "path": "/metadata/labels/extra", "value": "x"},
            ],
        )
        check(r.spec.replicas == 1, "replicas %r" % r.spec.replicas)
        check(env_of(r) == {"TEST_MARKER": MARKER, "A": "1", "C": "3"}, "env %r" % env_of(r))
        check(r.metadata.labels.get("extra") == "x", "labels %r" % r.metadata.labels)
        pods = wait_pods(name, 1)
        check(env_of_pod(pods[0]).get("C") == "3", "the pod's env %r" % env_of_pod(pods[0]))
    finally:
        cleanup(name)


@case
def patch_merge():
    name = "py-patch-merge"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1, env={"A": "1", "B": "2"}))
        # A merge patch replaces lists whole: B must go (a strategic merge
        # would keep it), which shows the content type got there.
        r = merge_patch(
            name,
            {
                "metadata": {"annotations": {"note": "merged"}},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "command": [TESTPROG, "sleep"],
                                    "env": [{"name": "TEST_MARKER", "value": MARKER}, {"name": "A", "value": "merged"}],
                                }
                            ]
                        }
                    }
                },
            },
        )
        check(env_of(r) == {"TEST_MARKER": MARKER, "A": "merged"}, "env %r (B must be gone)" % env_of(r))
        check((r.metadata.annotations or {}).get("note") == "merged", "annotations %r" % r.metadata.annotations)
        r = merge_patch(name, {"metadata": {"annotations": {"note": None}}})
        check("note" not in (r.metadata.annotations or {}), "null did not remove: %r" % r.metadata.annotations)
    finally:
        cleanup(name)


@case
def delete_deployment():
    name = "py-delete"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=2))
        pods = wait_pods(name, 2)
        pids = [pid_of(p) for p in pods]
        apps.delete_namespaced_deployment(name, NS)

        def gone():
            try:
                apps.read_namespaced_deployment(name, NS)
                return False
            except ApiException as e:
                if e.status != 404:
                    raise
            return not pods_of(name) and not apps.list_namespaced_replica_set(NS, label_selector="app=%s" % name).items

        wait_until("the deployment, its replicaset and pods gone", gone)
        wait_until("the pods' processes gone", lambda: not any(alive(p) for p in pids), timeout=10)
    finally:
        cleanup(name)


@case
def watch_pods():
    name = "py-watch"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        lst = core.list_namespaced_pod(NS, label_selector="app=%s" % name)
        rv = lst.metadata.resource_version
        before = {p.metadata.name for p in lst.items}
        errors = []

        def scale():
            try:
                time.sleep(0.5)
                scale_to(name, 3)
            except Exception as e:
                errors.append(e)

        t = threading.Thread(target=scale)
        t.start()
        events = []
        start = time.monotonic()
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod, NS, label_selector="app=%s" % name, resource_version=rv,
            timeout_seconds=5, _request_timeout=20,
        ):
            check(isinstance(ev["object"], client.V1Pod), "event object %r" % type(ev["object"]))
            events.append((ev["type"], ev["object"].metadata.name))
        took = time.monotonic() - start
        t.join()
        if errors:
            raise errors[0]
        added = {n for ty, n in events if ty == "ADDED"} - before
        check(len(added) == 2, "ADDED for new pods %r; events %r" % (added, events))
        check(any(ty == "MODIFIED" for ty, _ in events), "no MODIFIED in %r" % events)
        check(4 <= took <= 12, "the stream ended after %.1fs, not by its 5 s timeout" % took)
    finally:
        cleanup(name)


@case
def watch_expired_410():
    name = "py-watch-410"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        # tendd keeps the last 1000 changes for resumes (CHANGE_RING,
        # api/api-internal.h), as a cluster keeps what etcd has not compacted.
        # Make sure version 1 is older than that, whatever ran before.
        for i in range(1100):
            r = apps.patch_namespaced_deployment(name, NS, {"metadata": {"annotations": {"churn": str(i)}}},
                                                 _preload_content=False)
            r.read()
            r.release_conn()
        # 22.6's Watch: an ERROR event with code 410 becomes ApiException
        # (status 410) at once when timeout_seconds is given (without it, it
        # retries once from the same version, then raises the same).
        got = []
        try:
            for ev in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version="1",
                                           timeout_seconds=5, _request_timeout=20):
                got.append((ev["type"], ev["raw_object"].get("metadata", {}).get("name")))
                if len(got) > 20:
                    break
            raise Failure("no 410; the watch from version 1 gave %r" % got[:10])
        except ApiException as e:
            check(e.status == 410, "expected 410, got %s" % api_error(e))

        # Resume as a user does: a fresh list's version.
        lst = core.list_namespaced_pod(NS, label_selector="app=%s" % name)
        before = {p.metadata.name for p in lst.items}
        scale_to(name, 2)
        events = []
        for ev in watch.Watch().stream(core.list_namespaced_pod, NS, label_selector="app=%s" % name,
                                       resource_version=lst.metadata.resource_version,
                                       timeout_seconds=3, _request_timeout=20):
            events.append((ev["type"], ev["object"].metadata.name))
        added = {n for ty, n in events if ty == "ADDED"} - before
        check(len(added) == 1, "after the resume: ADDED %r; events %r" % (added, events))
    finally:
        cleanup(name)


@case
def ssa_create():
    name = "py-ssa-create"
    try:
        d = apply(name, apply_config(name, replicas=2, env={"A": "1"}))
        check(d.metadata.name == name and d.metadata.uid, "apply answered %s" % short(d.metadata))
        check(d.spec.replicas == 2 and env_of(d) == {"TEST_MARKER": MARKER, "A": "1"}, "spec %r %r" % (d.spec.replicas, env_of(d)))
        mf = [(m.manager, m.operation) for m in d.metadata.managed_fields or []]
        check(("py-ssa", "Apply") in mf, "managedFields %r" % mf)
        wait_pods(name, 2)
    finally:
        cleanup(name)


@case
def ssa_update():
    name = "py-ssa-update"
    try:
        apply(name, apply_config(name, replicas=1, env={"A": "1", "B": "2"}))
        wait_settled(name, 1)
        # B no longer applied: removed; A changed; C added; replicas 2.
        d = apply(name, apply_config(name, replicas=2, env={"A": "changed", "C": "3"}))
        check(env_of(d) == {"TEST_MARKER": MARKER, "A": "changed", "C": "3"}, "env %r" % env_of(d))
        check(d.spec.replicas == 2, "replicas %r" % d.spec.replicas)
        pods = wait_pods(name, 2)
        check(all(env_of_pod(p).get("A") == "changed" for p in pods), "pods' env")
    finally:
        cleanup(name)


@case
def ssa_conflict():
    name = "py-ssa-conflict"
    try:
        apply(name, apply_config(name, replicas=1))
        body = expect_api_error(
            409, apply, name, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 3}},
            manager="py-other",
        )
        check("py-ssa" in body and ".spec.replicas" in body, "409 body %r" % body[:300])
        check(apps.read_namespaced_deployment(name, NS).spec.replicas == 1, "the conflicting apply changed replicas")
    finally:
        cleanup(name)


@case
def ssa_force_conflicts():
    name = "py-ssa-force"
    try:
        apply(name, apply_config(name, replicas=1))
        wait_pods(name, 1)
        # force=True: the client sends force=True (Python's str(True)).
        d = apply(name, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 2}},
                  manager="py-other", force=True)
        check(d.spec.replicas == 2, "replicas %r" % d.spec.replicas)
        owners = {m.manager: json.dumps(m.fields_v1) for m in d.metadata.managed_fields or []}
        check("f:replicas" in owners.get("py-other", ""), "py-other does not own replicas: %r" % owners)
        check("f:replicas" not in owners.get("py-ssa", ""), "py-ssa still owns replicas: %r" % owners)
        wait_pods(name, 2)
    finally:
        cleanup(name)


@case
def scale_subresource():
    name = "py-scale"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_settled(name, 1)
        s = apps.read_namespaced_deployment_scale(name, NS)
        check(s.spec.replicas == 1, "scale spec %r" % s.spec.replicas)
        check(s.status.replicas == 1, "scale status %r" % s.status.replicas)
        check(s.status.selector == "app=%s" % name, "selector %r" % s.status.selector)
        s = apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 3}})
        check(s.spec.replicas == 3, "patch answered %r" % s.spec.replicas)
        wait_settled(name, 3)
        s = apps.read_namespaced_deployment_scale(name, NS)
        s.spec.replicas = 2
        s = apps.replace_namespaced_deployment_scale(name, NS, s)
        check(s.spec.replicas == 2, "replace answered %r" % s.spec.replicas)
        wait_settled(name, 2)
        check(apps.read_namespaced_deployment(name, NS).spec.replicas == 2, "deployment replicas")
    finally:
        cleanup(name)


def logger_pod(name):
    apps.create_namespaced_deployment(NS, deployment(name, replicas=1, command=LOGGER))
    pod = wait_pods(name, 1)[0].metadata.name
    wait_until("5 log lines", lambda: len(core.read_namespaced_pod_log(pod, NS).splitlines()) >= 5)
    return pod


LINE = re.compile(r"line (\d+)")


@case
def logs_tail():
    name = "py-logs-tail"
    try:
        pod = logger_pod(name)
        lines = core.read_namespaced_pod_log(pod, NS, tail_lines=2).splitlines()
        check(len(lines) == 2, "%d lines: %r" % (len(lines), lines))
        nums = [int(LINE.fullmatch(l).group(1)) if LINE.fullmatch(l) else None for l in lines]
        check(None not in nums and nums[1] == nums[0] + 1, "lines %r" % lines)
        check(nums[0] >= 3, "not the last lines: %r" % lines)
    finally:
        cleanup(name)


RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d) (line \d+)")


@case
def logs_timestamps():
    name = "py-logs-ts"
    try:
        pod = logger_pod(name)
        lines = core.read_namespaced_pod_log(pod, NS, tail_lines=3, timestamps=True).splitlines()
        check(len(lines) == 3, "%d lines: %r" % (len(lines), lines))
        now = datetime.datetime.now(datetime.timezone.utc)
        for l in lines:
            m = RFC3339.fullmatch(l)
            check(m, "no RFC3339 time first: %r" % l)
            frac = "." + ((m.group(2) or ".")[1:] + "000000")[:6]
            zone = "+00:00" if m.group(3) == "Z" else m.group(3)
            t = datetime.datetime.fromisoformat(m.group(1) + frac + zone)
            check(abs((now - t).total_seconds()) < 120, "time %s is not now (%s)" % (t, now))
    finally:
        cleanup(name)


@case
def logs_follow():
    name = "py-logs-follow"
    try:
        pod = logger_pod(name)
        resp = core.read_namespaced_pod_log(pod, NS, follow=True, tail_lines=1, _preload_content=False,
                                            _request_timeout=(5, 10))
        got = []
        try:
            for line in iter_resp_lines(resp):
                got.append(line)
                if len(got) == 4:
                    break
        finally:
            resp.close()
            resp.release_conn()
        check(len(got) == 4, "the stream ended after %r (tail 1, then 3 new lines wanted)" % got)
        nums = [int(LINE.fullmatch(l).group(1)) for l in got]
        check(nums == list(range(nums[0], nums[0] + 4)), "lines %r" % got)
    finally:
        cleanup(name)


@case
def logs_previous_none():
    name = "py-logs-prev"
    try:
        pod = logger_pod(name)
        body = expect_api_error(400, core.read_namespaced_pod_log, pod, NS, previous=True)
        check("previous" in body, "400 body %r" % body[:300])
    finally:
        cleanup(name)


@case
def events_core_field_selector():
    name = "py-events"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        pod = wait_pods(name, 1)[0].metadata.name
        evs = wait_until("events of the deployment", lambda: core.list_namespaced_event(
            NS, field_selector="involvedObject.name=%s" % name).items)
        for e in evs:
            check(e.involved_object.name == name and e.involved_object.kind == "Deployment",
                  "selected %s" % short(e.involved_object))
        check(any(e.reason == "ScalingReplicaSet" for e in evs), "reasons %r" % [e.reason for e in evs])
        pevs = wait_until("events of the pod", lambda: core.list_namespaced_event(
            NS, field_selector="involvedObject.name=%s" % pod).items)
        check(all(e.involved_object.name == pod for e in pevs), "pod events %r" % [e.involved_object.name for e in pevs])
    finally:
        cleanup(name)


@case
def events_v1():
    name = "py-events-v1"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        wait_pods(name, 1)
        ev1 = client.EventsV1Api(api_client)

        def mine():
            return [e for e in ev1.list_namespaced_event(NS).items if e.regarding and e.regarding.name == name]

        evs = wait_until("an events.k8s.io/v1 event regarding %s" % name, mine)
        for e in evs:
            check(isinstance(e.note, str) and e.note, "note %r" % e.note)
            check(e.regarding.kind == "Deployment", "regarding %s" % short(e.regarding))
            check(e.reason, "reason %r" % e.reason)
    finally:
        cleanup(name)


@case
def metrics_nodes():
    m = client.CustomObjectsApi(api_client).list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    items = m.get("items") or []
    check(items, "no node metrics: %s" % short(m))
    node = core.list_node(_preload_content=False)
    node_names = [n["metadata"]["name"] for n in json.loads(node.data)["items"]]
    for it in items:
        check(it["metadata"]["name"] in node_names, "metrics for %r, nodes %r" % (it["metadata"]["name"], node_names))
        check(re.fullmatch(r"\d+(n|u|m)?", it["usage"]["cpu"]), "cpu %r" % it["usage"]["cpu"])
        check(re.fullmatch(r"\d+(Ki|Mi|Gi)?", it["usage"]["memory"]), "memory %r" % it["usage"]["memory"])


@case
def metrics_pods():
    name = "py-metrics"
    try:
        apps.create_namespaced_deployment(NS, deployment(name, replicas=1))
        pod = wait_pods(name, 1)[0].metadata.name
        co = client.CustomObjectsApi(api_client)

        def mine():
            m = co.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", NS, "pods")
            return [it for it in m.get("items") or [] if it["metadata"]["name"] == pod]

        it = wait_until("metrics of pod %s" % pod, mine)[0]
        c = it["containers"][0]
        check(c["name"] == "main", "container %r" % c["name"])
        check(re.fullmatch(r"\d+(n|u|m)?", c["usage"]["cpu"]), "cpu %r" % c["usage"]["cpu"])
        check(re.fullmatch(r"\d+(Ki|Mi|Gi)?", c["usage"]["memory"]) and c["usage"]["memory"] != "0",
              "memory %r" % c["usage"]["memory"])
        one = co.get_namespaced_custom_object("metrics.k8s.io", "v1beta1", NS, "pods", pod)
        check(one["metadata"]["name"] == pod, "get answered %r" % one["metadata"])
    finally:
        cleanup(name)


# ---- dry runs: each must change nothing


def dry_run_subject(name, replicas=2, env=None):
    apps.create_namespaced_deployment(NS, deployment(name, replicas=replicas, env=env or {"A": "1", "B": "2"}))
    wait_settled(name, replicas)
    return snapshot(name)


@case
def dry_run_create():
    name = "py-dry-create"
    try:
        d = apps.create_namespaced_deployment(NS, deployment(name, replicas=2), dry_run="All")
        check(d.metadata.name == name and d.spec.replicas == 2, "answer %s" % short(d.metadata))

        def absent():
            try:
                apps.read_namespaced_deployment(name, NS)
                return "the deployment exists"
            except ApiException as e:
                if e.status != 404:
                    raise
            ps = pods_of(name)
            return True if not ps else "pods %r" % [p.metadata.name for p in ps]

        holds("after a dry-run create", absent)
    finally:
        cleanup(name)


@case
def dry_run_replace():
    name = "py-dry-replace"
    try:
        before = dry_run_subject(name)
        d = apps.read_namespaced_deployment(name, NS)
        d.spec.template.spec.containers[0].env = env_list({"A": "dry"})
        d.spec.replicas = 4
        r = apps.replace_namespaced_deployment(name, NS, d, dry_run="All")
        check(env_of(r).get("A") == "dry" and r.spec.replicas == 4, "answer %r %r" % (env_of(r), r.spec.replicas))
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_patch_strategic():
    name = "py-dry-smp"
    try:
        before = dry_run_subject(name)
        r = apps.patch_namespaced_deployment(
            name, NS, {"spec": {"replicas": 4, "template": {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "dry"}]}]}}}},
            dry_run="All",
        )
        check(env_of(r) == {"TEST_MARKER": MARKER, "A": "dry", "B": "2"} and r.spec.replicas == 4,
              "answer %r %r" % (env_of(r), r.spec.replicas))
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_patch_json():
    name = "py-dry-json"
    try:
        before = dry_run_subject(name)
        r = apps.patch_namespaced_deployment(
            name, NS, [{"op": "replace", "path": "/spec/replicas", "value": 4},
                       {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "C", "value": "dry"}}],
            dry_run="All",
        )
        check(r.spec.replicas == 4 and env_of(r).get("C") == "dry", "answer %r %r" % (env_of(r), r.spec.replicas))
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_patch_merge():
    name = "py-dry-merge"
    try:
        before = dry_run_subject(name)
        r = merge_patch(name, {"spec": {"replicas": 4}, "metadata": {"labels": {"dry": "yes"}}}, dry_run="All")
        check(r.spec.replicas == 4 and r.metadata.labels.get("dry") == "yes", "answer %r %r" % (r.spec.replicas, r.metadata.labels))
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_apply():
    name, fresh = "py-dry-apply", "py-dry-apply-new"
    try:
        apply(name, apply_config(name, replicas=2, env={"A": "1"}))
        wait_settled(name, 2)
        before = snapshot(name)
        r = apply(name, apply_config(name, replicas=4, env={"A": "dry"}), dry_run="All")
        check(r.spec.replicas == 4 and env_of(r).get("A") == "dry", "answer %r %r" % (env_of(r), r.spec.replicas))
        assert_unchanged(name, before)
        # An apply that would create: nothing is created.
        r = apply(fresh, apply_config(fresh, replicas=1), dry_run="All")
        check(r.metadata.name == fresh, "answer %s" % short(r.metadata))
        expect_api_error(404, apps.read_namespaced_deployment, fresh, NS)
        check(not pods_of(fresh), "pods of a dry-run apply")
    finally:
        cleanup(name, fresh)


@case
def dry_run_delete():
    name = "py-dry-delete"
    try:
        before = dry_run_subject(name)
        apps.delete_namespaced_deployment(name, NS, dry_run="All")
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_delete_options_body():
    name = "py-dry-delete-body"
    try:
        before = dry_run_subject(name)
        apps.delete_namespaced_deployment(name, NS, body=client.V1DeleteOptions(dry_run=["All"]))
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_scale_patch():
    name = "py-dry-scale-patch"
    try:
        before = dry_run_subject(name)
        s = apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 4}}, dry_run="All")
        check(s.spec.replicas == 4, "answer %r" % s.spec.replicas)
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_scale_replace():
    name = "py-dry-scale-replace"
    try:
        before = dry_run_subject(name)
        s = apps.read_namespaced_deployment_scale(name, NS)
        s.spec.replicas = 4
        s = apps.replace_namespaced_deployment_scale(name, NS, s, dry_run="All")
        check(s.spec.replicas == 4, "answer %r" % s.spec.replicas)
        assert_unchanged(name, before)
    finally:
        cleanup(name)


@case
def dry_run_delete_pod():
    name = "py-dry-delete-pod"
    try:
        before = dry_run_subject(name)
        pod = before["pods"][0][0]
        p = core.delete_namespaced_pod(pod, NS, dry_run="All")
        check(p.metadata.name == pod, "answer %s" % short(p.metadata))
        assert_unchanged(name, before)
        p = core.read_namespaced_pod(pod, NS)
        check(p.metadata.deletion_timestamp is None and pod_ready(p), "pod %s: %s" % (pod, short(p.status)))
    finally:
        cleanup(name)


@case
def dry_run_delete_collection():
    name = "py-dry-delete-coll"
    try:
        before = dry_run_subject(name)
        apps.delete_collection_namespaced_deployment(NS, dry_run="All", label_selector="app=%s" % name)
        assert_unchanged(name, before)
    finally:
        cleanup(name)


# ---- deletecollection


@case
def delete_collection_pods():
    a, b = "py-dcp-a", "py-dcp-b"
    try:
        apps.create_namespaced_deployment(NS, deployment(a, replicas=2))
        apps.create_namespaced_deployment(NS, deployment(b, replicas=1))
        old_a = {p.metadata.name for p in wait_pods(a, 2)}
        pb = wait_pods(b, 1)[0]
        keep = (pb.metadata.name, pb.status.container_statuses[0].container_id)
        core.delete_collection_namespaced_pod(NS, label_selector="app=%s" % a)

        def replaced():
            ps = pods_of(a)
            names = {p.metadata.name for p in ps}
            return not (names & old_a) and len(ps) == 2 and all(pod_ready(p) for p in ps)

        wait_until("%s's pods deleted and replaced" % a, replaced)
        pb = core.read_namespaced_pod(keep[0], NS)
        check(pb.metadata.deletion_timestamp is None, "%s's pod is being deleted" % b)
        check(pb.status.container_statuses[0].container_id == keep[1], "%s's pod restarted" % b)
        check([p.metadata.name for p in pods_of(b)] == [keep[0]], "%s's pods %r" % (b, pod_summary(b)))
    finally:
        cleanup(a, b)


@case
def delete_collection_deployments():
    x1, x2, y = "py-dcd-x1", "py-dcd-x2", "py-dcd-y"
    try:
        apps.create_namespaced_deployment(NS, deployment(x1, replicas=1, labels={"dcd": "drop"}))
        apps.create_namespaced_deployment(NS, deployment(x2, replicas=1, labels={"dcd": "drop"}))
        apps.create_namespaced_deployment(NS, deployment(y, replicas=1, labels={"dcd": "keep"}))
        for n in (x1, x2):
            wait_pods(n, 1)
        wait_settled(y, 1)
        keep = snapshot(y)
        apps.delete_collection_namespaced_deployment(NS, label_selector="dcd=drop")

        def gone():
            for n in (x1, x2):
                try:
                    apps.read_namespaced_deployment(n, NS)
                    return False
                except ApiException as e:
                    if e.status != 404:
                        raise
                if pods_of(n):
                    return False
            return True

        wait_until("%s and %s and their pods gone" % (x1, x2), gone)
        assert_unchanged(y, keep)
    finally:
        cleanup(x1, x2, y)


# ---- query parameters


@case
def bad_boolean():
    try:
        resp = api_client.call_api(
            "/api/v1/namespaces/{namespace}/pods", "GET", {"namespace": NS}, [("watch", "maybe")],
            {"Accept": "application/json"}, auth_settings=["BearerToken"], response_type="object",
            _preload_content=False, _request_timeout=10,
        )
    except ApiException as e:
        check(e.status == 400, "expected 400, got %s" % api_error(e))
        body = e.body.decode() if isinstance(e.body, bytes) else e.body
        check("watch" in body, "the 400 does not name watch: %r" % body[:300])
        return
    r = resp[0]
    r.close()
    r.release_conn()
    raise Failure("watch=maybe answered %d (%s)" % (r.status, r.getheader("Content-Type")))


@case
def list_paging():
    names = ["py-page-%d" % i for i in range(3)]
    try:
        for n in names:
            apps.create_namespaced_deployment(NS, deployment(n, replicas=0, labels={"page": "py"}))
        first = apps.list_namespaced_deployment(NS, label_selector="page=py", limit=1)
        check(len(first.items) == 1, "limit=1 gave %d items" % len(first.items))
        check(first.metadata._continue, "no continue token after the first page")
        seen = [first.items[0].metadata.name]
        token, pages = first.metadata._continue, 1
        while token:
            page = apps.list_namespaced_deployment(NS, label_selector="page=py", limit=1, _continue=token)
            pages += 1
            check(len(page.items) <= 1, "a page of %d" % len(page.items))
            seen += [d.metadata.name for d in page.items]
            token = page.metadata._continue
            check(pages <= 10, "more than 10 pages: %r" % seen)
        check(sorted(seen) == sorted(names), "the pages gave %r" % seen)
    finally:
        cleanup(*names)


@case
def field_selector_unsupported():
    body = expect_api_error(400, core.list_namespaced_pod, NS, field_selector="spec.foo=bar")
    check("spec.foo" in body, "400 body %r" % body[:300])


# ---- ConfigMaps and Secrets (issue 31)


@case
def config_map_and_secret():
    # typed models as a user fills them: no kind, no apiVersion
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-cm"), data={"a": "1"}, binary_data={"b": "AAEC"})
    made = core.create_namespaced_config_map(NS, cm, _request_timeout=REQ_TIMEOUT)
    try:
        check(made.metadata.uid and made.kind == "ConfigMap", "made %s" % short(made))
        got = core.read_namespaced_config_map("py-cm", NS, _request_timeout=REQ_TIMEOUT)
        check(got.data == {"a": "1"} and got.binary_data == {"b": "AAEC"}, "read %s" % short(got))
        core.patch_namespaced_config_map("py-cm", NS, {"data": {"c": "3"}}, _request_timeout=REQ_TIMEOUT)
        listed = [c for c in core.list_namespaced_config_map(NS, _request_timeout=REQ_TIMEOUT).items if c.metadata.name == "py-cm"]
        check(len(listed) == 1 and listed[0].data == {"a": "1", "c": "3"}, "listed %s" % short(listed))
        expect_api_error(
            422,
            core.create_namespaced_config_map,
            NS,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-bad"), data={"a b": "1"}),
            _request_timeout=REQ_TIMEOUT,
        )
        sec = client.V1Secret(metadata=client.V1ObjectMeta(name="py-sec"), string_data={"pw": "x"})
        s = core.create_namespaced_secret(NS, sec, _request_timeout=REQ_TIMEOUT)
        check(s.data == {"pw": "eA=="} and s.type == "Opaque" and not s.string_data, "secret %s" % short(s))
    finally:
        for fn, name in ((core.delete_namespaced_config_map, "py-cm"), (core.delete_namespaced_secret, "py-sec")):
            try:
                fn(name, NS, _request_timeout=REQ_TIMEOUT)
            except ApiException:
                pass
    check(not [c for c in core.list_namespaced_config_map(NS, _request_timeout=REQ_TIMEOUT).items if c.metadata.name == "py-cm"],
          "py-cm still there")


# ---- auth


@case
def self_subject_access_review():
    r = client.AuthorizationV1Api(api_client).create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(verb="delete", group="apps", resource="deployments", namespace=NS)
            )
        )
    )
    check(r.status.allowed is True, "status %s" % short(r.status))


@case
def self_subject_review():
    # Client limitation (22.6): no AuthenticationV1Api.create_self_subject_review
    # (SelfSubjectReview is Kubernetes 1.28; 22.x is generated from 1.22), nor
    # a V1SelfSubjectReview model. A 22.6 user posts it through call_api, as
    # here, and gets a dict.
    r = api_client.call_api(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews", "POST", {}, [], {"Accept": "application/json", "Content-Type": "application/json"},
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        auth_settings=["BearerToken"], response_type="object", _return_http_data_only=True, _request_timeout=REQ_TIMEOUT,
    )
    check(r.get("kind") == "SelfSubjectReview", "kind %r" % r.get("kind"))
    user = ((r.get("status") or {}).get("userInfo") or {}).get("username")
    check(isinstance(user, str) and user, "username %r in %s" % (user, short(r)))


# ---------------------------------------------------------------- main


def describe(e):
    if isinstance(e, Failure):
        return str(e)
    if isinstance(e, ApiException):
        return api_error(e)
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f"{f.name}:{f.lineno}" for f in reversed(tb) if f.filename == __file__), "?")
    return "%s: %s (at %s)" % (type(e).__name__, str(e).strip().replace("\n", " ")[:400], where)


def main(argv):
    wanted = set(argv[1:])
    unknown = wanted - {c.__name__ for c in CASES}
    if unknown:
        print("no such case: %s" % ", ".join(sorted(unknown)))
        return 2
    failed = 0
    for c in CASES:
        if wanted and c.__name__ not in wanted:
            continue
        t = time.monotonic()
        try:
            c()
            print("ok: %s (%.1fs)" % (c.__name__, time.monotonic() - t), flush=True)
        except Exception as e:  # every case runs, whatever the one before did
            failed += 1
            print("FAIL: %s: %s" % (c.__name__, describe(e)), flush=True)
    print("%d case(s) failed" % failed if failed else "all cases passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
