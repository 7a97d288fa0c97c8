#!/usr/bin/python3
# A write whose object changes while it is made (its pure part runs off the
# loop, api/prep.c) is made again against the new object, as kube-apiserver
# makes an update again (GuaranteedUpdate): an unconditional patch keeps
# the change made meanwhile, one conditional on the old resourceVersion is
# refused (409), and neither loses what the other write was acknowledged
# for. The change meanwhile is a scale (answered on the loop at once)
# while a large patch is made; or a pod killed, so that the controllers
# write the deployment's status alone: then the patch is not made again,
# only given the new status. A List applied (tend apply), which leaves
# replicas out, is made again on top of a scale too: the scale's replicas
# kept.
#
# again.py SOCKET TESTPROG [--items N] [--rounds N]
import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("socket")
ap.add_argument("testprog")
ap.add_argument("--items", type=int, default=4000)
ap.add_argument("--rounds", type=int, default=8)
args = ap.parse_args()

D = "/apis/apps/v1/namespaces/default/deployments"


class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=120)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(args.socket)


def call(method, path, body=None, ctype="application/json"):
    c = Conn()
    data = None if body is None else json.dumps(body).encode()
    c.request(method, path, body=data, headers={"Content-Type": ctype} if data else {})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, (json.loads(out) if out.strip() else None)


def metric(name):
    c = Conn()
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise SystemExit("FAIL: no metric %s" % name)


failures = 0


def check(cond, what):
    global failures
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    failures += not cond


status, _ = call("POST", D, {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "again"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "again"}},
             "template": {"metadata": {"labels": {"app": "again"}},
                          "spec": {"containers": [{"name": "main",
                                                   "command": [args.testprog, "sleep"]}]}}}})
check(status == 201, "created: %d" % status)

def pods():
    status, out = call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dagain")
    return [p for p in out["items"] if p.get("status", {}).get("phase") == "Running" and
            not p["metadata"].get("deletionTimestamp")]


def wait_for(what, cond, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    check(False, "waited for " + what)
    return False


def env_patch(rnd, rv=None):
    patch = {"metadata": {"labels": {"round": str(rnd)}},
             "spec": {"template": {"spec": {"containers": [{
                 "name": "main", "command": [args.testprog, "sleep"],
                 "env": [{"name": "R%d_%05d" % (rnd, i), "value": "v"}
                         for i in range(args.items)]}]}}}}
    if rv:
        patch["metadata"]["resourceVersion"] = rv
    return patch


def during(patch, meanwhile, method="PATCH", path=D + "/again",
           ctype="application/merge-patch+json"):
    """The patch, and meanwhile() while it is made (once it is sent: then
    tendd has it, and makes it for a second or so); both answers."""
    got = {}
    sent = threading.Event()

    def big():
        c = Conn()
        c.request(method, path, body=json.dumps(patch).encode(), headers={"Content-Type": ctype})
        sent.set()
        r = c.getresponse()
        r.read()
        c.close()
        got["big"] = r.status

    t = threading.Thread(target=big)
    t.start()
    sent.wait()
    time.sleep(0.1)
    got["meanwhile"] = meanwhile()
    t.join()
    return got["big"], got["meanwhile"]


again0 = metric("tend_api_writes_made_again_total")
rebased0 = metric("tend_api_writes_rebased_total")
def env_list(rnd):
    """The deployment as `tend apply` sends it, without replicas."""
    return {"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "again", "labels": {"round": str(rnd)}},
        "spec": {"selector": {"matchLabels": {"app": "again"}},
                 "template": {"metadata": {"labels": {"app": "again"}},
                              "spec": {"containers": [{
                                  "name": "main", "command": [args.testprog, "sleep"],
                                  "env": [{"name": "R%d_%05d" % (rnd, i), "value": "v"}
                                          for i in range(args.items)]}]}}}}]}


for rnd in range(args.rounds):
    kind = ("scale", "conditional", "status", "list")[rnd % 4]
    status, cur = call("GET", D + "/again")
    rv = cur["metadata"]["resourceVersion"]
    if kind == "status":
        # a pod killed while the patch is made: the controllers write the
        # deployment's status, nothing else of it
        pid = int(pods()[0]["status"]["containerStatuses"][0]["containerID"].split("//")[1])
        code, _ = during(env_patch(rnd), lambda: os.kill(pid, signal.SIGKILL))
        status, now = call("GET", D + "/again")
        env = now["spec"]["template"]["spec"]["containers"][0].get("env", [])
        check(code == 200 and now["metadata"]["labels"].get("round") == str(rnd) and
              len(env) == args.items and env[0]["name"] == "R%d_00000" % rnd,
              "round %d: a patch while the status changed is made (%d; %d env)" %
              (rnd, code, len(env)))
    else:
        scaled_to = cur["spec"]["replicas"] + 1
        scale = lambda: call("PATCH", D + "/again/scale", {"spec": {"replicas": scaled_to}},
                             "application/merge-patch+json")
        if kind == "list":
            code, scaled = during(env_list(rnd), scale, "POST", "/apis/tend.io/v1/apply",
                                  "application/json")
        else:
            code, scaled = during(env_patch(rnd, rv if kind == "conditional" else None), scale)
        status, now = call("GET", D + "/again")
        kept = scaled[0] == 200 and now["spec"]["replicas"] == scaled_to
        labels = now["metadata"].get("labels", {})
        env = now["spec"]["template"]["spec"]["containers"][0].get("env", [])
        if kind == "conditional":
            check(kept and code == 409 and labels.get("round") != str(rnd),
                  "round %d: a patch conditional on the old version is refused (%d), the "
                  "scale kept (replicas %d, want %d)" % (rnd, code, now["spec"]["replicas"],
                                                         scaled_to))
        else:
            check(kept and code == 200 and labels.get("round") == str(rnd) and
                  len(env) == args.items,
                  "round %d: %s is made on top of the scale (%d; replicas %d, want %d; %d "
                  "env)" % (rnd, "a List applied without replicas" if kind == "list"
                            else "an unconditional patch", code, now["spec"]["replicas"],
                            scaled_to, len(env)))
    wait_for("a Running pod", lambda: len(pods()) > 0)
again = metric("tend_api_writes_made_again_total") - again0
rebased = metric("tend_api_writes_rebased_total") - rebased0
# (each round is checked whatever the timing; these say the timing was
# as meant in some rounds at least)
check(again >= 1, "writes made again: %d (the scale came while the patch was made)" % again)
check(rebased >= 1, "writes rebased on a new status: %d" % rebased)
# Its pods carry no TEST_MARKER (the rounds replace the env), so the
# caller's sweep would not find them, and tendd leaves pods running when it
# stops: they go with the deployment, here.
status, _ = call("DELETE", D + "/again")
check(status == 200, "deleted: %d" % status)


def none_left():
    status, out = call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dagain")
    return not out["items"]


wait_for("its pods gone", none_left)
sys.exit(1 if failures else 0)
