// An independent check of Kubernetes objects against the upstream schema:
// each object is built with the class of the npm package kubernetes-models
// for its apiVersion and kind (Deployment from kubernetes-models/apps/v1,
// Pod from kubernetes-models/v1, ...) and that class's validate() is run
// (a validator compiled from Kubernetes' OpenAPI definitions: required
// fields, types, formats, enums).
//
//   node validate.mjs [--live KUBECONFIG] [--markdown FILE]... [FILE|DIR]...
//
// FILE: YAML (several documents) or JSON; a `kind: List` counts its items.
// DIR: every .yaml, .yml and .json under it. --markdown FILE: the ```yaml
// (or ```yml) fences of FILE that hold a `kind:`. --live KUBECONFIG: the
// deployments, replicasets, pods, nodes and events (core/v1 and
// events.k8s.io/v1) that the server of the kubeconfig's current context
// lists, every item. Prints each object as `ok:` or `INVALID:` with its
// errors; exits 1 if any object is invalid or could not be checked (a kind
// kubernetes-models has no class for is such an error, never a skip), 2 on a
// usage error.
//
// What this schema cannot see: Kubernetes' OpenAPI definitions do not forbid
// unknown fields (the API server's fieldValidation does), nor carry the
// API server's semantic rules (names, label syntax, selector matching).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { join, relative, resolve } from 'node:path';
import { createRequire } from 'node:module';
import YAML from 'yaml';

const require = createRequire(import.meta.url);
const modelsVersion = JSON.parse(readFileSync(require.resolve('kubernetes-models/package.json'), 'utf8')).version;
// The schema behind each release, from the package's CHANGELOG: 4.3.0–4.4.x
// Kubernetes 1.27.1, 4.5.0–4.5.1 Kubernetes 1.33.0, 5.0.0 Kubernetes 1.36.0.
const schemaOf = { '4.5.1': 'Kubernetes 1.33.0', '4.5.0': 'Kubernetes 1.33.0' };

let valid = 0;
let invalid = 0;
const notes = [];

function usage(msg) {
    if (msg) console.error(`validate.mjs: ${msg}`);
    console.error('usage: node validate.mjs [--live KUBECONFIG] [--markdown FILE]... [FILE|DIR]...');
    process.exit(2);
}

// ---- classes -----------------------------------------------------------------
const modules = new Map();
async function classFor(apiVersion, kind) {
    if (typeof apiVersion !== 'string' || !/^([a-z0-9][a-z0-9.-]*\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion))
        return { error: `apiVersion ${JSON.stringify(apiVersion)} is not a Kubernetes group/version` };
    if (typeof kind !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
        return { error: `kind ${JSON.stringify(kind)} is not a Kubernetes kind` };
    if (!modules.has(apiVersion)) {
        let mod = null;
        try {
            mod = await import(`kubernetes-models/${apiVersion}`);
        } catch { /* no such group/version in the package */ }
        modules.set(apiVersion, mod);
    }
    const mod = modules.get(apiVersion);
    if (!mod) return { error: `kubernetes-models ${modelsVersion} has no group/version ${apiVersion}` };
    const cls = mod[kind];
    if (typeof cls !== 'function' || cls.apiVersion !== apiVersion || cls.kind !== kind)
        return { error: `kubernetes-models ${modelsVersion} has no class for ${apiVersion} ${kind}` };
    return { cls };
}

function formatError(e) {
    const where = e.instancePath || '/';
    let extra = '';
    if (e.keyword === 'enum' && e.params?.allowedValues) extra = ` (${e.params.allowedValues.map((v) => JSON.stringify(v)).join(', ')})`;
    if (e.keyword === 'type' || e.keyword === 'format' || e.keyword === 'pattern') extra = '';
    return `${where}: ${e.message}${extra}`;
}

function report(label, obj, errors) {
    const what = obj && typeof obj === 'object'
        ? `${obj.apiVersion ?? '?'} ${obj.kind ?? '?'} ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name ?? '(no name)'}`
        : '';
    if (!errors.length) {
        valid++;
        console.log(`ok: ${label} ${what}`);
        return;
    }
    invalid++;
    console.log(`INVALID: ${label}${what ? ` ${what}` : ""}`);
    for (const e of errors) console.log(`  ${e}`);
}

async function check(label, obj) {
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
        report(label, null, [`not an object: ${JSON.stringify(obj)?.slice(0, 80)}`]);
        return;
    }
    if (obj.apiVersion === 'v1' && obj.kind === 'List') {
        const items = Array.isArray(obj.items) ? obj.items : null;
        if (!items) {
            report(label, obj, ['a List without items']);
            return;
        }
        for (let i = 0; i < items.length; i++) await check(`${label} item ${i + 1}`, items[i]);
        return;
    }
    const { cls, error } = await classFor(obj.apiVersion, obj.kind);
    if (error) {
        report(label, obj, [error]);
        return;
    }
    try {
        new cls(obj).validate();
        report(label, obj, []);
    } catch (e) {
        const errs = Array.isArray(e?.errors) ? e.errors.map(formatError) : [String(e?.message || e)];
        report(label, obj, errs);
    }
}

// ---- files ---------------------------------------------------------------------
async function checkYamlText(label, text) {
    // YAML 1.1, as kubectl (sigs.k8s.io/yaml) and tendd (libyaml) read it.
    const docs = YAML.parseAllDocuments(text, { version: '1.1' });
    let n = 0;
    for (const doc of docs) {
        n++;
        if (doc.errors?.length) {
            report(`${label}#${n}`, null, doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
            continue;
        }
        const obj = doc.toJS({ maxAliasCount: 100 });
        if (obj === null || obj === undefined) { n--; continue; } // an empty document (a trailing ---)
        await check(`${label}#${n}`, obj);
    }
    if (n === 0) notes.push(`${label}: no document`);
}

function filesUnder(dir) {
    const out = [];
    for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) out.push(...filesUnder(p));
        else if (/\.(ya?ml|json)$/.test(e.name)) out.push(p);
    }
    return out.sort();
}

const show = (p) => {
    const r = relative(process.cwd(), p);
    return r.startsWith('..') ? p : r;
};

async function checkPath(p) {
    let st;
    try { st = statSync(p); } catch (e) {
        report(p, null, [`cannot read: ${e.code || e.message}`]);
        return;
    }
    const files = st.isDirectory() ? filesUnder(p) : [p];
    if (st.isDirectory() && !files.length) notes.push(`${show(p)}: no .yaml, .yml or .json file`);
    for (const f of files) await checkYamlText(show(f), readFileSync(f, 'utf8'));
}

// The ```yaml / ```yml fences of a Markdown file that hold a `kind:`.
async function checkMarkdown(p) {
    let text;
    try { text = readFileSync(p, 'utf8'); } catch (e) {
        report(p, null, [`cannot read: ${e.code || e.message}`]);
        return;
    }
    const lines = text.split('\n');
    let found = 0;
    for (let i = 0; i < lines.length; i++) {
        const open = /^(\s*)(`{3,}|~{3,})\s*(ya?ml)\b/.exec(lines[i]);
        if (!open) continue;
        const fence = open[2];
        const indent = open[1].length;
        const body = [];
        let k = i + 1;
        for (; k < lines.length; k++) {
            const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[k]);
            if (close && close[1][0] === fence[0] && close[1].length >= fence.length) break;
            body.push(lines[k].slice(Math.min(indent, lines[k].length - lines[k].trimStart().length)));
        }
        const block = body.join('\n');
        if (/^\s*kind:/m.test(block)) {
            found++;
            await checkYamlText(`${show(p)}:${i + 1}`, block);
        }
        i = k;
    }
    if (!found) notes.push(`${show(p)}: no \`\`\`yaml block with a kind: (nothing checked)`);
}

// ---- a live server ------------------------------------------------------------------
function kubeconfigTarget(path) {
    const cfg = YAML.parse(readFileSync(path, 'utf8'));
    const ctxName = cfg['current-context'];
    const ctx = (cfg.contexts || []).find((c) => c.name === ctxName)?.context;
    if (!ctx) throw new Error(`${path}: no current context`);
    const cluster = (cfg.clusters || []).find((c) => c.name === ctx.cluster)?.cluster;
    const user = (cfg.users || []).find((u) => u.name === ctx.user)?.user || {};
    if (!cluster?.server) throw new Error(`${path}: the context's cluster has no server`);
    const fileOrData = (file, data) => (data ? Buffer.from(data, 'base64') : file ? readFileSync(resolve(path, '..', file)) : undefined);
    const headers = { Accept: 'application/json' };
    const token = user.token || (user.tokenFile ? readFileSync(user.tokenFile, 'utf8').trim() : undefined);
    if (token) headers.Authorization = `Bearer ${token}`;
    return {
        server: cluster.server.replace(/\/$/, ''),
        options: {
            headers,
            ca: fileOrData(cluster['certificate-authority'], cluster['certificate-authority-data']),
            cert: fileOrData(user['client-certificate'], user['client-certificate-data']),
            key: fileOrData(user['client-key'], user['client-key-data']),
            rejectUnauthorized: !cluster['insecure-skip-tls-verify'],
        },
    };
}

function get(target, path) {
    // Raw JSON, as the server wrote it: no client library in between.
    const url = new URL(target.server + path);
    const send = url.protocol === 'http:' ? httpRequest : request;
    return new Promise((resolveGet, reject) => {
        const req = send(url, { ...target.options, method: 'GET', timeout: 20_000 }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d) => { body += d; });
            res.on('end', () => resolveGet({ status: res.statusCode, body }));
        });
        req.on('timeout', () => req.destroy(new Error('no answer in 20 s')));
        req.on('error', reject);
        req.end();
    });
}

async function checkLive(kubeconfig) {
    const target = kubeconfigTarget(kubeconfig);
    const lists = [
        ['/apis/apps/v1/deployments', 'apps/v1', 'Deployment'],
        ['/apis/apps/v1/replicasets', 'apps/v1', 'ReplicaSet'],
        ['/api/v1/pods', 'v1', 'Pod'],
        ['/api/v1/nodes', 'v1', 'Node'],
        ['/api/v1/events', 'v1', 'Event'],
        ['/apis/events.k8s.io/v1/events', 'events.k8s.io/v1', 'Event'],
    ];
    for (const [path, apiVersion, kind] of lists) {
        const label = `live:${path}`;
        let r;
        try {
            r = await get(target, path);
        } catch (e) {
            report(label, null, [`GET ${path}: ${e.message}`]);
            continue;
        }
        if (r.status !== 200) {
            let msg = r.body.slice(0, 200);
            try { msg = JSON.parse(r.body).message || msg; } catch { /* not JSON */ }
            report(label, null, [`GET ${path}: ${r.status} ${msg}`]);
            continue;
        }
        let list;
        try { list = JSON.parse(r.body); } catch (e) {
            report(label, null, [`GET ${path}: not JSON: ${e.message}`]);
            continue;
        }
        if (list.kind !== `${kind}List` || list.apiVersion !== apiVersion || !Array.isArray(list.items)) {
            report(label, list, [`GET ${path}: expected a ${apiVersion} ${kind}List with items, got ${list.apiVersion} ${list.kind}`]);
            continue;
        }
        if (!list.items.length) notes.push(`${label}: no items`);
        // Items of a list may leave out apiVersion and kind (the API server
        // does): they are the list's.
        for (const item of list.items)
            await check(label, { apiVersion, kind, ...item });
    }
}

// ---- main ----------------------------------------------------------------------------
const args = process.argv.slice(2);
if (!args.length) usage('nothing to check');
const jobs = [];
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--live' || a === '--markdown') {
        const v = args[++i];
        if (!v) usage(`${a} needs a file`);
        jobs.push([a, v]);
    } else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else jobs.push(['path', a]);
}
console.log(`validate: kubernetes-models ${modelsVersion} (${schemaOf[modelsVersion] || 'schema version not recorded here'})`);
for (const [what, v] of jobs) {
    try {
        if (what === '--live') await checkLive(v);
        else if (what === '--markdown') await checkMarkdown(v);
        else await checkPath(v);
    } catch (e) {
        report(v, null, [e.message]);
    }
}
for (const n of notes) console.log(`note: ${n}`);
console.log(`validate: ${valid} valid, ${invalid} invalid`);
process.exit(invalid ? 1 : 0);
