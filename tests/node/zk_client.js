/*
 * The Node.js ZooKeeper client (`node-zookeeper-client` from npm, pinned in package.json)
 * against a server.
 *
 * Usage: node zk_client.js host:port
 *
 * Runs a fixed list of checks through the client's API and prints `PASS name` or
 * `FAIL name: reason` for each, then `N passed, N failed` as the last line
 * (tests/tests/clients/node_client.rs parses it). Covered:
 *   - create in the four modes (persistent, ephemeral, persistent sequential, ephemeral
 *     sequential) with the Stat fields read back by exists (versions, zxids, dataLength,
 *     ephemeralOwner = the session id), NODE_EXISTS and NO_NODE;
 *   - getData/setData with versions, the Stat setData returns, BAD_VERSION;
 *   - exists on a present and an absent node, getChildren with its Stat;
 *   - remove with NO_NODE, NOT_EMPTY, BAD_VERSION and the right version;
 *   - watches: a data watch (getData) firing NODE_DATA_CHANGED then, re-armed, NODE_DELETED;
 *     a child watch (getChildren) firing NODE_CHILDREN_CHANGED; an exists watch on an absent
 *     node firing NODE_CREATED; each firing once only;
 *   - transactions: create + setData + check committed together; one whose check fails
 *     answers BAD_VERSION and applies nothing;
 *   - digest auth: addAuthInfo('digest', 'user:pw'), a node with an ACL for that digest id
 *     and one with CREATOR_ALL_ACL, readable (data and getACL) by that session, NO_AUTH for
 *     a session without auth and for one with the wrong password;
 *   - mkdirp creating a path of several levels, and again over existing nodes;
 *   - ephemerals (plain and sequential) removed when their session is closed, seen by
 *     another session's exists watch.
 * Every check is bounded in time (CHECK_MS) and the program exits by itself, with status 1
 * when a check failed.
 */
'use strict';

const crypto = require('crypto');
const zookeeper = require('node-zookeeper-client');

const { ACL, Id, Permission, CreateMode, Event, Exception } = zookeeper;

/** How long one check may take in all. */
const CHECK_MS = 15000;
/** How long to wait for a session, and for a watch event. */
const WAIT_MS = 5000;
/** How long to wait to be sure a fired watch does not fire again. */
const QUIET_MS = 300;
const SESSION_TIMEOUT_MS = 10000;

const server = process.argv[2];
if (!server) {
    console.error('usage: node zk_client.js host:port');
    process.exit(2);
}

let passed = 0;
let failed = 0;
/** Every client opened, closed at the end. */
const clients = [];

/** Fails the current check with a reason. */
class CheckFailed extends Error {}

function check(cond, reason) {
    if (!cond) {
        throw new CheckFailed(reason);
    }
}

/** A value for a failure message (JSON, BigInts as numbers). */
function show(value) {
    return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
}

function eq(got, want, what) {
    if (got !== want) {
        throw new CheckFailed(`${what}: got ${show(got)}, expected ${show(want)}`);
    }
}

/** A long (an 8-byte big-endian Buffer in this client) as a BigInt. */
function long(buf) {
    return buf.readBigInt64BE(0);
}

/** Resolves after `ms`, or rejects with `what` when `reject` is set. */
function delay(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function withTimeout(promise, ms, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new CheckFailed(`${what}: no answer within ${ms} ms`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A connected client (bounded by WAIT_MS). */
async function connect() {
    const client = zookeeper.createClient(server, {
        sessionTimeout: SESSION_TIMEOUT_MS,
        spinDelay: 200,
        retries: 0,
    });
    clients.push(client);
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await withTimeout(connected, WAIT_MS, 'connect');
    return client;
}

/** Calls `client[method](...args, callback)`, resolving with the callback's results. */
function call(client, method, ...args) {
    return withTimeout(
        new Promise((resolve, reject) => {
            client[method](...args, (error, ...results) => {
                if (error) {
                    reject(error);
                } else {
                    resolve(results);
                }
            });
        }),
        WAIT_MS,
        method
    );
}

/** Expects the call to fail with the exception `code` (Exception.NO_NODE, ...). */
async function expectError(code, what, client, method, ...args) {
    let results;
    try {
        results = await call(client, method, ...args);
    } catch (error) {
        if (error instanceof Exception) {
            eq(error.getCode(), code, `${what}: error code (${error.getName()})`);
            return error;
        }
        throw error;
    }
    throw new CheckFailed(`${what}: succeeded (${show(results)}), expected error ${code}`);
}

/** Commits a transaction, resolving with [error, results] (a failed multi has both). */
function commit(transaction) {
    return withTimeout(
        new Promise((resolve) => transaction.commit((error, results) => resolve([error, results]))),
        WAIT_MS,
        'commit'
    );
}

/** A one-shot watcher: `fired` resolves with the first event; `count()` tells how many came. */
function watcher() {
    let events = 0;
    let resolveFirst;
    const first = new Promise((resolve) => {
        resolveFirst = resolve;
    });
    const fn = (event) => {
        events += 1;
        resolveFirst(event);
    };
    return {
        fn,
        fired: () => withTimeout(first, WAIT_MS, 'watch event'),
        count: () => events,
    };
}

async function expectEvent(w, type, path, what) {
    const event = await w.fired();
    eq(event.getType(), type, `${what}: event type (${event.getName()})`);
    eq(event.getPath(), path, `${what}: event path`);
    await delay(QUIET_MS);
    eq(w.count(), 1, `${what}: times the watcher was called`);
}

async function run(name, fn) {
    try {
        await withTimeout(fn(), CHECK_MS, name);
        console.log(`PASS ${name}`);
        passed += 1;
    } catch (error) {
        const reason = error instanceof CheckFailed ? error.message : String(error && error.stack || error);
        console.log(`FAIL ${name}: ${reason}`);
        failed += 1;
    }
}

const ROOT = '/node-client';
const DIGEST_USER = 'user';
const DIGEST_PASSWORD = 'pw';
/** The digest scheme's id for user:pw: user:base64(sha1("user:pw")). */
const DIGEST_ID =
    DIGEST_USER +
    ':' +
    crypto.createHash('sha1').update(`${DIGEST_USER}:${DIGEST_PASSWORD}`).digest('base64');

async function main() {
    let a; // the main session
    let b; // a second session, making changes the first one's watches see

    await run('connect', async () => {
        a = await connect();
        b = await connect();
        check(long(a.getSessionId()) !== 0n, 'session id is 0');
        check(long(a.getSessionId()) !== long(b.getSessionId()), 'two sessions share an id');
        const timeout = a.getSessionTimeout();
        check(timeout > 0 && timeout <= SESSION_TIMEOUT_MS, `negotiated session timeout ${timeout}`);
    });
    if (!a || !b) {
        return;
    }
    const session = long(a.getSessionId());

    await run('create_persistent', async () => {
        const [path] = await call(a, 'create', ROOT, Buffer.from('hello'), CreateMode.PERSISTENT);
        eq(path, ROOT, 'created path');
        const [stat] = await call(a, 'exists', ROOT);
        check(stat, 'exists found nothing');
        eq(stat.version, 0, 'version');
        eq(stat.cversion, 0, 'cversion');
        eq(stat.aversion, 0, 'aversion');
        eq(stat.dataLength, 5, 'dataLength');
        eq(stat.numChildren, 0, 'numChildren');
        eq(long(stat.ephemeralOwner), 0n, 'ephemeralOwner');
        check(long(stat.czxid) > 0n, 'czxid is 0');
        eq(long(stat.mzxid), long(stat.czxid), 'mzxid (= czxid)');
        eq(long(stat.pzxid), long(stat.czxid), 'pzxid (= czxid)');
        eq(long(stat.mtime), long(stat.ctime), 'mtime (= ctime)');
        const ctime = Number(long(stat.ctime));
        check(Math.abs(ctime - Date.now()) < 60000, `ctime ${ctime} is not about now`);
    });

    await run('create_ephemeral', async () => {
        const [path] = await call(a, 'create', `${ROOT}/eph`, CreateMode.EPHEMERAL);
        eq(path, `${ROOT}/eph`, 'created path');
        const [stat] = await call(b, 'exists', `${ROOT}/eph`);
        check(stat, 'exists found nothing');
        eq(long(stat.ephemeralOwner), session, 'ephemeralOwner (the creating session)');
        eq(stat.dataLength, 0, 'dataLength');
        await expectError(
            Exception.NO_CHILDREN_FOR_EPHEMERALS,
            'child of an ephemeral',
            a,
            'create',
            `${ROOT}/eph/child`
        );
        const [parent] = await call(a, 'exists', ROOT);
        eq(parent.numChildren, 1, 'parent numChildren');
        eq(parent.cversion, 1, 'parent cversion');
        eq(long(parent.pzxid), long(stat.czxid), 'parent pzxid (= the child czxid)');
    });

    await run('create_sequential', async () => {
        await call(a, 'create', `${ROOT}/seq`);
        const [first] = await call(a, 'create', `${ROOT}/seq/s-`, CreateMode.PERSISTENT_SEQUENTIAL);
        const [second] = await call(a, 'create', `${ROOT}/seq/s-`, CreateMode.PERSISTENT_SEQUENTIAL);
        eq(first, `${ROOT}/seq/s-0000000000`, 'first sequential name');
        eq(second, `${ROOT}/seq/s-0000000001`, 'second sequential name');
        const [stat] = await call(a, 'exists', second);
        eq(long(stat.ephemeralOwner), 0n, 'ephemeralOwner');
    });

    await run('create_ephemeral_sequential', async () => {
        const [path] = await call(
            a,
            'create',
            `${ROOT}/seq/e-`,
            Buffer.from('x'),
            CreateMode.EPHEMERAL_SEQUENTIAL
        );
        // The counter is the parent's cversion: two children were created before.
        eq(path, `${ROOT}/seq/e-0000000002`, 'ephemeral sequential name');
        const [stat] = await call(a, 'exists', path);
        eq(long(stat.ephemeralOwner), session, 'ephemeralOwner');
        eq(stat.dataLength, 1, 'dataLength');
    });

    await run('create_errors', async () => {
        await expectError(Exception.NODE_EXISTS, 'create an existing node', a, 'create', ROOT);
        await expectError(Exception.NO_NODE, 'create under a missing parent', a, 'create', '/missing-parent/x');
    });

    await run('get_set_data', async () => {
        const [data, stat] = await call(a, 'getData', ROOT);
        eq(data.toString(), 'hello', 'data');
        eq(stat.version, 0, 'version');
        const [set] = await call(a, 'setData', ROOT, Buffer.from('world!'), 0);
        eq(set.version, 1, 'version after setData');
        eq(set.dataLength, 6, 'dataLength after setData');
        eq(long(set.czxid), long(stat.czxid), 'czxid after setData');
        check(long(set.mzxid) > long(stat.mzxid), 'mzxid did not grow');
        await expectError(Exception.BAD_VERSION, 'setData with a stale version', a, 'setData', ROOT, Buffer.from('no'), 0);
        const [again] = await call(a, 'setData', ROOT, Buffer.from('again'), -1);
        eq(again.version, 2, 'version after setData -1');
        const [data2, stat2] = await call(b, 'getData', ROOT);
        eq(data2.toString(), 'again', 'data read by another session');
        eq(stat2.version, 2, 'version read by another session');
        await expectError(Exception.NO_NODE, 'getData of a missing node', a, 'getData', `${ROOT}/none`);
        await expectError(Exception.NO_NODE, 'setData of a missing node', a, 'setData', `${ROOT}/none`, Buffer.from('x'), -1);
    });

    await run('exists', async () => {
        const [stat] = await call(a, 'exists', ROOT);
        check(stat, 'exists found nothing for an existing node');
        eq(stat.numChildren, 2, 'numChildren');
        const [none] = await call(a, 'exists', `${ROOT}/none`);
        eq(none, null, 'exists of a missing node');
    });

    await run('get_children', async () => {
        const [children, stat] = await call(a, 'getChildren', `${ROOT}/seq`);
        eq(JSON.stringify(children.slice().sort()), JSON.stringify(['e-0000000002', 's-0000000000', 's-0000000001']), 'children');
        eq(stat.numChildren, 3, 'numChildren');
        eq(stat.cversion, 3, 'cversion');
        const [rootChildren] = await call(a, 'getChildren', '/');
        check(rootChildren.includes('node-client'), `root children ${JSON.stringify(rootChildren)}`);
        check(rootChildren.includes('zookeeper'), `root children ${JSON.stringify(rootChildren)} lack zookeeper`);
        await expectError(Exception.NO_NODE, 'getChildren of a missing node', a, 'getChildren', `${ROOT}/none`);
    });

    await run('remove', async () => {
        await expectError(Exception.NO_NODE, 'remove a missing node', a, 'remove', `${ROOT}/none`, -1);
        await expectError(Exception.NOT_EMPTY, 'remove a node with children', a, 'remove', `${ROOT}/seq`, -1);
        await call(a, 'create', `${ROOT}/rm`, Buffer.from('1'));
        await call(a, 'setData', `${ROOT}/rm`, Buffer.from('2'), -1);
        await expectError(Exception.BAD_VERSION, 'remove with a stale version', a, 'remove', `${ROOT}/rm`, 0);
        await call(a, 'remove', `${ROOT}/rm`, 1);
        const [gone] = await call(a, 'exists', `${ROOT}/rm`);
        eq(gone, null, 'exists after remove');
        await call(a, 'remove', `${ROOT}/seq/s-0000000000`, -1);
        const [children] = await call(a, 'getChildren', `${ROOT}/seq`);
        eq(children.length, 2, 'children left');
    });

    await run('data_watch', async () => {
        const path = `${ROOT}/watched`;
        await call(a, 'create', path, Buffer.from('0'));
        const changed = watcher();
        await call(a, 'getData', path, changed.fn);
        await call(b, 'setData', path, Buffer.from('1'), -1);
        await expectEvent(changed, Event.NODE_DATA_CHANGED, path, 'setData');
        // The watch fired once: another change is not reported to it.
        await call(b, 'setData', path, Buffer.from('2'), -1);
        await delay(QUIET_MS);
        eq(changed.count(), 1, 'events after a second change without re-arming');
        const deleted = watcher();
        const [data] = await call(a, 'getData', path, deleted.fn);
        eq(data.toString(), '2', 'data seen when re-arming');
        await call(b, 'remove', path, -1);
        await expectEvent(deleted, Event.NODE_DELETED, path, 'remove');
    });

    await run('child_watch', async () => {
        const path = `${ROOT}/parent`;
        await call(a, 'create', path);
        const w = watcher();
        const [children] = await call(a, 'getChildren', path, w.fn);
        eq(children.length, 0, 'children');
        // A data change of the parent does not fire a child watch.
        await call(b, 'setData', path, Buffer.from('x'), -1);
        await call(b, 'create', `${path}/kid`);
        await expectEvent(w, Event.NODE_CHILDREN_CHANGED, path, 'create a child');
        const removed = watcher();
        await call(a, 'getChildren', path, removed.fn);
        await call(b, 'remove', `${path}/kid`, -1);
        await expectEvent(removed, Event.NODE_CHILDREN_CHANGED, path, 'remove a child');
    });

    await run('exists_watch', async () => {
        const path = `${ROOT}/later`;
        const created = watcher();
        const [stat] = await call(a, 'exists', path, created.fn);
        eq(stat, null, 'exists before create');
        await call(b, 'create', path, Buffer.from('now'));
        await expectEvent(created, Event.NODE_CREATED, path, 'create');
        // An exists watch on an existing node is a data watch.
        const changed = watcher();
        const [present] = await call(a, 'exists', path, changed.fn);
        check(present, 'exists after create found nothing');
        await call(b, 'setData', path, Buffer.from('then'), -1);
        await expectEvent(changed, Event.NODE_DATA_CHANGED, path, 'setData');
        const deleted = watcher();
        await call(a, 'exists', path, deleted.fn);
        await call(b, 'remove', path, -1);
        await expectEvent(deleted, Event.NODE_DELETED, path, 'remove');
    });

    await run('transaction_commit', async () => {
        await call(a, 'create', `${ROOT}/tx`, Buffer.from('v0'));
        const [error, results] = await commit(
            a
                .transaction()
                .create(`${ROOT}/tx/child`, Buffer.from('c'))
                .setData(`${ROOT}/tx`, Buffer.from('v1'), -1)
                .check(`${ROOT}/tx`, 1)
                .create(`${ROOT}/tx/seq-`, null, ACL.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL)
        );
        check(!error, `commit failed: ${error}`);
        eq(results.length, 4, 'results');
        eq(results[0].path, `${ROOT}/tx/child`, 'create result path');
        eq(results[1].stat.version, 1, 'setData result version');
        eq(results[3].path, `${ROOT}/tx/seq-0000000001`, 'sequential create result path');
        const [data, stat] = await call(b, 'getData', `${ROOT}/tx`);
        eq(data.toString(), 'v1', 'data after commit');
        eq(stat.numChildren, 2, 'numChildren after commit');
        const [child] = await call(b, 'getData', `${ROOT}/tx/child`);
        eq(child.toString(), 'c', 'created child data');
    });

    await run('transaction_rollback', async () => {
        // The node is at version 1. (This client sends version 0 in a transaction as -1,
        // "any version", so the failing check names a version other than 0.)
        const [error] = await commit(
            a
                .transaction()
                .create(`${ROOT}/tx/never`)
                .setData(`${ROOT}/tx`, Buffer.from('v2'), -1)
                .check(`${ROOT}/tx`, 7)
        );
        check(error instanceof Exception, `commit of a failing check: ${error}`);
        eq(error.getCode(), Exception.BAD_VERSION, `failing op's code (${error.getName()})`);
        const [never] = await call(b, 'exists', `${ROOT}/tx/never`);
        eq(never, null, 'node created by the failed transaction');
        const [data, stat] = await call(b, 'getData', `${ROOT}/tx`);
        eq(data.toString(), 'v1', 'data after the failed transaction');
        eq(stat.version, 1, 'version after the failed transaction');
        const [error2] = await commit(a.transaction().remove(`${ROOT}/tx/child`).remove(`${ROOT}/tx/none`));
        check(error2 instanceof Exception, `commit removing a missing node: ${error2}`);
        eq(error2.getCode(), Exception.NO_NODE, `failing op's code (${error2.getName()})`);
        const [child] = await call(b, 'exists', `${ROOT}/tx/child`);
        check(child, 'a remove of the failed transaction was applied');
    });

    await run('digest_auth', async () => {
        const authed = await connect();
        authed.addAuthInfo('digest', Buffer.from(`${DIGEST_USER}:${DIGEST_PASSWORD}`));
        const secret = `${ROOT}/secret`;
        const acl = [new ACL(Permission.ALL, new Id('digest', DIGEST_ID))];
        await call(authed, 'create', secret, Buffer.from('s3cret'), acl, CreateMode.PERSISTENT);
        const [data] = await call(authed, 'getData', secret);
        eq(data.toString(), 's3cret', 'data read by the authenticated session');
        const [acls, stat] = await call(authed, 'getACL', secret);
        eq(acls.length, 1, 'ACL entries');
        eq(acls[0].id.scheme, 'digest', 'ACL scheme');
        eq(acls[0].id.id, DIGEST_ID, 'ACL id');
        eq(acls[0].permission, Permission.ALL, 'ACL permissions');
        eq(stat.aversion, 0, 'aversion');
        // CREATOR_ALL_ACL: the auth scheme, standing for the session's authenticated ids.
        const mine = `${ROOT}/mine`;
        await call(authed, 'create', mine, Buffer.from('m'), ACL.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
        const [mineAcls] = await call(authed, 'getACL', mine);
        eq(mineAcls.length, 1, 'CREATOR_ALL_ACL entries');
        eq(`${mineAcls[0].id.scheme}:${mineAcls[0].id.id}`, `digest:${DIGEST_ID}`, 'CREATOR_ALL_ACL id');
        // A session without auth, and one with the wrong password.
        await expectError(Exception.NO_AUTH, 'getData without auth', b, 'getData', secret);
        await expectError(Exception.NO_AUTH, 'setData without auth', b, 'setData', secret, Buffer.from('x'), -1);
        await expectError(Exception.NO_AUTH, 'getData of CREATOR_ALL_ACL without auth', b, 'getData', mine);
        await expectError(Exception.INVALID_ACL, 'CREATOR_ALL_ACL without auth', b, 'create', `${ROOT}/nobody`, ACL.CREATOR_ALL_ACL);
        const wrong = await connect();
        wrong.addAuthInfo('digest', Buffer.from(`${DIGEST_USER}:wrong`));
        await expectError(Exception.NO_AUTH, 'getData with the wrong password', wrong, 'getData', secret);
        // The node is still there for everyone (exists needs no permission).
        const [seen] = await call(b, 'exists', secret);
        check(seen, 'exists without auth found nothing');
        eq(seen.dataLength, 6, 'dataLength seen without auth');
        await call(authed, 'setData', secret, Buffer.from('changed'), 0);
        await call(authed, 'remove', secret, -1);
        await call(authed, 'remove', mine, -1);
        authed.close();
        wrong.close();
    });

    await run('mkdirp', async () => {
        const path = `${ROOT}/deep/er/est`;
        const [made] = await call(a, 'mkdirp', path, Buffer.from('d'));
        eq(made, path, 'mkdirp path');
        for (const p of [`${ROOT}/deep`, `${ROOT}/deep/er`, path]) {
            const [stat] = await call(b, 'exists', p);
            check(stat, `${p} missing after mkdirp`);
        }
        const [data] = await call(b, 'getData', path);
        eq(data.toString(), 'd', 'leaf data');
        // Again, over existing nodes, and one level deeper.
        const [again] = await call(a, 'mkdirp', `${path}/x`);
        eq(again, `${path}/x`, 'mkdirp over existing nodes');
        const [children] = await call(b, 'getChildren', path);
        eq(JSON.stringify(children), JSON.stringify(['x']), 'children of the leaf');
    });

    await run('ephemerals_gone_after_close', async () => {
        const owner = await connect();
        await call(owner, 'create', `${ROOT}/mortal`, CreateMode.EPHEMERAL);
        const [seqPath] = await call(owner, 'create', `${ROOT}/mortal-`, CreateMode.EPHEMERAL_SEQUENTIAL);
        const w1 = watcher();
        const w2 = watcher();
        const [s1] = await call(b, 'exists', `${ROOT}/mortal`, w1.fn);
        const [s2] = await call(b, 'exists', seqPath, w2.fn);
        check(s1 && s2, 'ephemerals not seen by another session');
        eq(long(s1.ephemeralOwner), long(owner.getSessionId()), 'ephemeralOwner');
        owner.close();
        await expectEvent(w1, Event.NODE_DELETED, `${ROOT}/mortal`, 'close (plain ephemeral)');
        await expectEvent(w2, Event.NODE_DELETED, seqPath, 'close (sequential ephemeral)');
        const [gone1] = await call(b, 'exists', `${ROOT}/mortal`);
        const [gone2] = await call(b, 'exists', seqPath);
        check(!gone1 && !gone2, 'an ephemeral outlived its session');
        // The main session's ephemerals are still there.
        const [kept] = await call(b, 'exists', `${ROOT}/eph`);
        check(kept, `${ROOT}/eph of a live session is gone`);
    });
}

main()
    .catch((error) => {
        console.log(`FAIL main: ${error && error.stack || error}`);
        failed += 1;
    })
    .finally(() => {
        console.log(`${passed} passed, ${failed} failed`);
        for (const client of clients) {
            client.close();
        }
        // Give the close requests a moment to leave, then exit whatever is left open.
        setTimeout(() => process.exit(failed === 0 ? 0 : 1), 200);
    });
