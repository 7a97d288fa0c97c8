#!/usr/bin/python3
# The loop-stall budget (issue 27): a request that an authorized client may
# send, at the manifest limits, holds tendd's loop for a moment only. For
# each hostile case, a thread asks for /healthz on the local socket, again
# and again, while the case's request runs; the longest gap between two
# answers is the case's stall. A case fails over --budget ms.
#
# stall.py SOCKET TESTPROG [--items N] [--budget MS] [--only NAME] [--sample SOCKET]
#          [--manifests DIR]
#   --items: the length of the lists the cases send (default 10000, the
#   manifest limit SPEC_MAX_ITEMS); --budget 0 only prints the figures
#   (bench/bench-stall.sh); --sample: whose /healthz is asked, once or more
#   (default: the tendd the requests go to; in a fleet, other nodes too,
#   which have the objects from etcd: then each node's gap is printed,
#   and each is watched for half a second after the answer); --manifests:
#   the tendd's --manifests directory, where a file at the limits is
#   written, changed and touched (its reading is off the loop).
import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("socket")
ap.add_argument("testprog")
ap.add_argument("--items", type=int, default=10000)
ap.add_argument("--budget", type=float, default=200)
ap.add_argument("--only")
ap.add_argument("--sample", action="append")
ap.add_argument("--manifests")
args = ap.parse_args()

D = "/apis/apps/v1/namespaces/default/deployments"
ITEMS = args.items
SAMPLED = args.sample or [args.socket]


class Conn(http.client.HTTPConnection):
    def __init__(self, timeout=120, path=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path or args.socket

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def call(method, path, body=None, ctype="application/json"):
    c = Conn()
    data = body if isinstance(body, (bytes, type(None))) else \
        json.dumps(body, separators=(",", ":")).encode()
    c.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


class Sampler(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.stop = threading.Event()
        self.gap = 0.0
        self.n = 0

    def run(self):
        c = Conn(timeout=30, path=self.path)
        last = time.monotonic()
        while not self.stop.is_set():
            c.request("GET", "/healthz")
            c.getresponse().read()
            now = time.monotonic()
            self.gap = max(self.gap, now - last)
            self.n += 1
            last = now
            time.sleep(0.002)
        c.close()


failures = 0


def case(name, method, path, body, ctype="application/json", want=None):
    """Runs one request with the sampler on; the request's status must be
    in want (None: any but 5xx)."""
    global failures
    if args.only and args.only != name:
        return
    data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
    samplers = [Sampler(p) for p in SAMPLED]
    for s in samplers:
        s.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    status, out = call(method, path, data, ctype)
    took = time.monotonic() - t0
    time.sleep(0.05 if SAMPLED == [args.socket] else 0.5)
    for s in samplers:
        s.stop.set()
        s.join()
    stall = max(s.gap for s in samplers) * 1000
    okay = (not args.budget or stall <= args.budget) and status < 500 and \
        (want is None or status in want)
    failures += not okay
    each = "" if len(samplers) == 1 else " (%s)" % ", ".join(
        "%s %.0f ms" % (os.path.basename(s.path), s.gap * 1000) for s in samplers)
    print("%s: %s: %d (%d KB) in %.0f ms; the loop's longest gap %.0f ms%s (%d samples)%s" %
          ("ok" if okay else "FAIL", name, status, len(data) // 1024, took * 1000, stall, each,
           sum(s.n for s in samplers), "" if okay else ": " + out[:300].decode(errors="replace")))


def deployment(name, env=(), args_=(), labels=None):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "main", "command": [args.testprog, "sleep"], "args": list(args_),
                    "env": list(env)}]},
            },
        },
    }


def env(n, prefix="E"):
    return [{"name": "%s%05d" % (prefix, i), "value": "v"} for i in range(n)]


SMP = "application/strategic-merge-patch+json"

# validation: a deployment with a list at its limit, created and replaced
case("validate-create", "POST", D, deployment("wide", env(ITEMS)), want=(201,))
case("validate-replace", "PUT", D + "/wide", deployment("wide", env(ITEMS, "F")), want=(200,))

# the other writes of a deployment at the limits: a List applied (what
# tend apply sends), created and changed; a rollback; a scale
APPLY = "/apis/tend.io/v1/apply"


def listof(*items):
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


case("list-apply-create", "POST", APPLY, listof(deployment("wide2", env(ITEMS))), want=(200,))
case("list-apply-update", "POST", APPLY, listof(deployment("wide2", env(ITEMS, "G"))),
     want=(200,))
case("rollback", "POST", D + "/wide/rollback", {"toRevision": 1}, want=(200,))
case("scale", "PATCH", D + "/wide/scale", {"spec": {"replicas": 0}},
     "application/merge-patch+json", want=(200,))

# strategic merge patch: keyed-list growth, and each directive against a
# list at its limit
call("POST", D, deployment("smp"))
case("smp-keyed-growth", "PATCH", D + "/smp",
     {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": env(ITEMS)}]}}}},
     SMP, want=(200,))
case("smp-set-element-order", "PATCH", D + "/smp",
     {"spec": {"template": {"spec": {"containers": [{
         "name": "main",
         "$setElementOrder/env": [{"name": e["name"]} for e in reversed(env(ITEMS))]}]}}}},
     SMP, want=(200,))
call("PATCH", D + "/smp", {"spec": {"template": {"spec": {"containers": [{
    "name": "main", "args": ["a%05d" % i for i in range(ITEMS)]}]}}}},
    "application/merge-patch+json")
case("smp-delete-from-primitive-list", "PATCH", D + "/smp",
     {"spec": {"template": {"spec": {"containers": [{
         "name": "main",
         "$deleteFromPrimitiveList/args": ["a%05d" % i for i in range(0, ITEMS, 2)]}]}}}},
     SMP, want=(200,))
case("smp-delete-elements", "PATCH", D + "/smp",
     {"spec": {"template": {"spec": {"containers": [{
         "name": "main",
         "env": [{"name": e["name"], "$patch": "delete"} for e in env(ITEMS)]}]}}}},
     SMP, want=(200,))
call("PATCH", D + "/smp", {"metadata": {"annotations": {"k%05d" % i: "v" for i in range(ITEMS)}}},
     "application/merge-patch+json")
case("smp-retain-keys", "PATCH", D + "/smp",
     {"metadata": {"annotations": {"$retainKeys": ["k%05d" % i for i in range(0, ITEMS, 2)],
                                   "k00000": "w"}}},
     SMP, want=(200,))

# JSON patch: many adds at the head of a list at its limit
call("PATCH", D + "/smp", [{"op": "remove", "path": "/metadata/annotations"}],
     "application/json-patch+json")
case("json-patch-head-inserts", "PATCH", D + "/smp",
     [{"op": "add", "path": "/spec/template/spec/containers/0/args/0", "value": "x"}] * (ITEMS // 2),
     "application/json-patch+json", want=(200, 422))

# server-side apply against as many managedFields entries (one manager
# each) as a request may store (a body is at most 1 MiB: 7500 at the
# limits), forced: every entry is tested against what changes
MANAGERS = min(ITEMS, 7500)
status, out = call("GET", D + "/smp")
obj = json.loads(out)
obj["metadata"]["labels"] = {"app": "smp", **{"l%05d" % i: "v" for i in range(ITEMS // 2)}}
obj["metadata"]["managedFields"] = [
    {"manager": "m%05d" % i, "operation": "Update", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:metadata": {"f:labels": {"f:l%05d" % (i % (ITEMS // 2)): {}}}}}
    for i in range(MANAGERS)]
status, out = call("PUT", D + "/smp", obj)
assert status == 200, out[:300]
apply = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
    "name": "smp", "labels": {"l%05d" % i: "w" for i in range(ITEMS // 2)}}}
case("ssa-%d-managers" % MANAGERS, "PATCH", D + "/smp?fieldManager=one&force=true", apply,
     "application/apply-patch+yaml", want=(200,))

# a watch that resumes from the oldest change kept: the whole history is
# read again
status, out = call("GET", D)
case("watch-resume", "GET", D + "?watch=true&resourceVersion=1&timeoutSeconds=1", b"",
     want=(200,))

# tendd --manifests: a file at the limits written, changed, touched (read
# again, unchanged); each case lasts until its deployment is as the file
# says (or 60 s)
def file_case(name, text, prefix):
    global failures
    if args.only and args.only != name:
        return
    samplers = [Sampler(p) for p in SAMPLED]
    for s in samplers:
        s.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    tmp = os.path.join(args.manifests, ".wide.yaml.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(args.manifests, "wide.yaml"))
    first = None
    while time.monotonic() - t0 < 60:
        status, out = call("GET", D + "/mfwide")
        if status == 200:
            first = json.loads(out)["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"]
            if first == prefix + "00000":
                break
        time.sleep(0.05)
    took = time.monotonic() - t0
    time.sleep(0.6)  # (a touch: its sync, which changes nothing, comes after)
    for s in samplers:
        s.stop.set()
        s.join()
    stall = max(s.gap for s in samplers) * 1000
    okay = (not args.budget or stall <= args.budget) and first == prefix + "00000"
    failures += not okay
    print("%s: %s: %s in %.0f ms; the loop's longest gap %.0f ms (%d samples)" %
          ("ok" if okay else "FAIL", name, "applied" if first == prefix + "00000" else
           "not applied (%s)" % first, took * 1000, stall, sum(s.n for s in samplers)))
    sys.stdout.flush()


if args.manifests:
    def manifest(prefix):
        return json.dumps(deployment("mfwide", env(ITEMS, prefix)), indent=1)
    file_case("manifest-create", manifest("M"), "M")
    file_case("manifest-change", manifest("N"), "N")
    file_case("manifest-touch", manifest("N"), "N")

sys.exit(1 if failures else 0)
