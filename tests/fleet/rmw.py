#!/usr/bin/python3
# Optimistic concurrency across the fleet (issue 29): clients, each through
# a node of its own, increment one counter (an annotation of a Deployment)
# by read-modify-write: GET, +1, PUT with the GET's resourceVersion, again
# on 409. Every PUT answered 200 is an acknowledged increment, so the
# counter etcd ends with must equal their number: one lower, and a write
# was lost (overwritten by one decided without it).
#
# rmw.py SOCKET... --name NAME --rounds N [--seconds S]
#   prints "acked N" and, per client, its 200s, 409s and other answers;
#   the caller reads the counter back and compares.
#
# rmw.py SOCKET... --name NAME --rounds N --blind ETCD_URL PREFIX
#   unconditional writes instead: each client writes values of its own
#   (a PUT without resourceVersion, and server-side apply with force, in
#   turn); then etcd's history of the object is read from ETCD_URL, and each
#   value answered 200 must be in it, each answered 409 must not (an
#   acknowledgement says what happened). Exits 1 if one is wrong.
import argparse
import http.client
import json
import socket
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("sockets", nargs="+")
ap.add_argument("--name", required=True)
ap.add_argument("--rounds", type=int, default=50)
ap.add_argument("--seconds", type=float, default=120)
ap.add_argument("--blind", nargs=2, metavar=("ETCD_URL", "PREFIX"))
ap.add_argument("--same", action="store_true",
                help="--blind with two clients per node that write the same value at once: "
                     "the second changes nothing there, and must not be acknowledged unless "
                     "the first is")
ap.add_argument("--tag", default="",
                help="--blind: a prefix of the values written, unique to each run on one object")
ap.add_argument("--list", action="store_true",
                help="--blind: the second client applies a List of two Deployments (tend "
                     "apply's all-or-nothing write) while the first writes one of them")
ap.add_argument("--template", action="store_true",
                help="--blind writes the value into the pod template (a rollout each)")
args = ap.parse_args()

KEY = "example.com/count"
PATH = "/apis/apps/v1/namespaces/default/deployments/" + args.name


class Conn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def call(sock, method, body=None, ctype="application/json", query=""):
    c = Conn(sock)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, PATH + query, body=data, headers={"Content-Type": ctype} if data else {})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


results = {}
log = []  # (time, client, the value acknowledged)


def client(i, sock):
    acked = conflicts = other = 0
    deadline = time.monotonic() + args.seconds
    while acked < args.rounds and time.monotonic() < deadline:
        status, out = call(sock, "GET")
        if status != 200:
            other += 1
            time.sleep(0.05)
            continue
        d = json.loads(out)
        ann = d["metadata"].setdefault("annotations", {})
        ann[KEY] = str(int(ann.get(KEY, "0")) + 1)
        d.pop("status", None)
        status, out = call(sock, "PUT", d)
        if status == 200:
            acked += 1
            log.append((time.time(), i, ann[KEY]))
        elif status == 409:
            conflicts += 1
        else:
            other += 1
            print("client %d: PUT answered %d: %s" % (i, status, out[:200].decode(errors="replace")),
                  file=sys.stderr)
    results[i] = (acked, conflicts, other)


answers = []  # (client, value, status) of the unconditional writes


def wait(barrier):
    """Each round of the clients sharing barrier begins at once."""
    try:
        barrier.wait(timeout=60)
    except threading.BrokenBarrierError:
        pass


def blind(i, sock, barrier=None, same=False):
    """Client i's unconditional writes, in step with barrier's others;
    same: the value of its node's pair (clients 2n and 2n+1), not its own."""
    for k in range(args.rounds):
        if barrier:
            wait(barrier)
        blind_one(i, sock, "%s%s%d-%d" % (args.tag, "n" if same else "c", i // 2 if same else i,
                                          k), k)


def blind_one(i, sock, value, k):
    """One unconditional write of value: a PUT without resourceVersion, or
    (odd rounds) a forced server-side apply."""
    if k % 2:
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": args.name, "annotations": {"example.com/last": value}}}
        if args.template:
            body = {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": args.name},
                    "spec": {"template": {"metadata": {"annotations": {
                        "example.com/last": value}}}}}
        status, out = call(sock, "PATCH", body, "application/apply-patch+yaml",
                           "?fieldManager=client%d&force=true" % i)
    else:
        status, out = call(sock, "GET")
        if status != 200:
            answers.append((i, value, status))
            return
        d = json.loads(out)
        where = d["spec"]["template"]["metadata"] if args.template else d["metadata"]
        where.setdefault("annotations", {})["example.com/last"] = value
        for f in ("resourceVersion", "managedFields"):
            d["metadata"].pop(f, None)
        d.pop("status", None)
        status, out = call(sock, "PUT", d)
    answers.append((i, value, status))
    if status not in (200, 409):
        print("client %d: %s answered %d: %s" % (i, value, status,
                                                out[:200].decode(errors="replace")),
              file=sys.stderr)


def apply_list(i, sock, barrier):
    """Applies {NAME, NAME2} with one value, as tend apply sends a file."""
    for k in range(args.rounds):
        value = "%sL%d-%d" % (args.tag, i, k)
        items = [{"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": n, "namespace": "default",
                               "annotations": {"example.com/last": value}},
                  "spec": {"replicas": 0, "selector": {"matchLabels": {"app": n}},
                           "template": {"metadata": {"labels": {"app": n}},
                                        "spec": {"containers": [{"name": "main",
                                                                 "command": ["/bin/true"]}]}}}}
                 for n in (args.name, args.name + "2")]
        wait(barrier)
        c = Conn(sock)
        c.request("POST", "/apis/tend.io/v1/apply",
                  body=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
        c.close()
        answers.append((i, value, r.status))
        if r.status not in (200, 201, 409):
            print("client %d: the List %s answered %d: %s" % (
                i, value, r.status, out[:200].decode(errors="replace")), file=sys.stderr)


def history(url, key):
    """Every value etcd held under key, from its first revision: a watch
    through etcd's JSON gateway, read up to the key's last change."""
    import base64
    import urllib.request
    b64 = base64.b64encode(key.encode()).decode()
    with urllib.request.urlopen(url + "/v3/kv/range", json.dumps({"key": b64}).encode(),
                                timeout=10) as r:
        kvs = json.load(r).get("kvs", [])
    last = int(kvs[0]["mod_revision"]) if kvs else 0
    values = []
    req = urllib.request.Request(url + "/v3/watch", json.dumps(
        {"create_request": {"key": b64, "start_revision": 1}}).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        for line in r:
            if not last:
                break
            res = json.loads(line).get("result", {})
            for ev in res.get("events", []):
                kv = ev["kv"]
                if ev.get("type") != "DELETE":
                    values.append(json.loads(base64.b64decode(kv["value"])))
                if int(kv["mod_revision"]) >= last:
                    return values
    return values


if args.blind and args.list:
    b = threading.Barrier(2)
    threads = [threading.Thread(target=blind, args=(0, args.sockets[0], b)),
               threading.Thread(target=apply_list, args=(1, args.sockets[1], b))]
elif args.blind and args.same:
    threads = []
    for i, s in enumerate(args.sockets):
        b = threading.Barrier(2)
        threads += [threading.Thread(target=blind, args=(2 * i + j, s, b, True))
                    for j in range(2)]
elif args.blind:
    threads = [threading.Thread(target=blind, args=(i, s)) for i, s in enumerate(args.sockets)]
if args.blind:
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    url, prefix = args.blind
    def held_in(name):
        return {(d["spec"]["template"]["metadata"] if args.template else d["metadata"])
                .get("annotations", {}).get("example.com/last")
                for d in history(url, prefix + "/v1/deployments/default/" + name)}
    held = held_in(args.name)
    if args.list:  # a List is all or nothing: held by both, or by neither
        held2 = held_in(args.name + "2")
        for i, value, status in answers:
            if value.startswith(args.tag + "L") and (value in held) != (value in held2):
                print("the List %s (answered %d) is in only one of its objects" % (value, status))
                sys.exit(1)
        answers[:] = [(i, v, 200 if st == 201 else st) for i, v, st in answers]
    # a value answered 200 (to any of its writers) was in etcd; one
    # answered only 409 never was
    by_value = {}
    for i, value, status in answers:
        by_value.setdefault(value, []).append((i, status))
    wrong = 0
    for value, got in sorted(by_value.items()):
        codes = {st for _, st in got}
        if (200 in codes and value not in held) or (codes == {409} and value in held):
            wrong += 1
            print("%s answered %s, but etcd %s it" % (
                value, ", ".join("%d to client %d" % (st, i) for i, st in got),
                "never held" if 200 in codes else "held"))
    print("unconditional writes: %d answered 200, %d answered 409, %d other; %d wrong" % (
        sum(a[2] == 200 for a in answers), sum(a[2] == 409 for a in answers),
        sum(a[2] not in (200, 409) for a in answers), wrong))
    sys.exit(1 if wrong else 0)

threads = [threading.Thread(target=client, args=(i, s)) for i, s in enumerate(args.sockets)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("acked", sum(r[0] for r in results.values()))
seen = {}
for t, i, v in sorted(log):
    if v in seen:  # two clients acknowledged the same value: one increment lost
        print("value %s acknowledged to client %d at %.3f and to client %d at %.3f" %
              (v, seen[v][1], seen[v][0], i, t))
    seen[v] = (t, i)
for i in sorted(results):
    print("client %d (%s): %d acknowledged, %d conflicts, %d other" % ((i, args.sockets[i]) + results[i]))
