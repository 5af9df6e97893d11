/*
 * The Apache ZooKeeper C client (libzookeeper_mt, <zookeeper/zookeeper.h>) against a server.
 *
 * Usage: zk_client host:port
 *
 * Runs a fixed list of checks through the C API and prints `PASS name` or `FAIL name: reason`
 * for each, then `N passed, N failed` as the last line (tests/tests/clients/c_client.rs parses it).
 * Covered:
 *   - synchronous calls: zoo_create (persistent, ephemeral, sequential, ephemeral sequential),
 *     zoo_get/zoo_set/zoo_set2 with versions and the Stat fields they return, zoo_exists,
 *     zoo_get_children2, zoo_delete, and the errors NODEEXISTS, NONODE, BADVERSION, NOTEMPTY;
 *   - asynchronous calls: zoo_acreate and zoo_aget with completions, answered in order;
 *   - watches: an exists watch (global watcher) firing CREATED, a zoo_wget data watch firing
 *     CHANGED then DELETED, a zoo_wget_children child watch firing CHILD;
 *   - zoo_multi: create + setData + check committed together; a multi whose check fails,
 *     with its per-op errors and nothing applied;
 *   - ACLs with digest auth: zoo_add_auth("digest", "user:pw"), a node created with a digest
 *     ACL and with ZOO_CREATOR_ALL_ACL, read back (data and zoo_get_acl) by that session,
 *     NOAUTH for a session without auth or with the wrong password, INVALIDACL for
 *     CREATOR_ALL_ACL without auth;
 *   - zoo_async (sync) and a read after it seeing another session's write;
 *   - ephemerals removed when their session closes.
 * Every wait is bounded (WAIT_MS); the program exits by itself.
 */
#include <zookeeper/zookeeper.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_MS 5000
#define SESSION_TIMEOUT_MS 10000
#define MAX_EVENTS 64

/* "user:pw" as the digest scheme stores it: user:base64(sha1("user:pw")). */
#define DIGEST_ID "user:2Om+GBbT2q/tS6pdvACZbbm7/1A="

static int passed, failed;

static void pass(const char *name) {
    printf("PASS %s\n", name);
    fflush(stdout);
    passed++;
}

static void fail(const char *name, const char *fmt, ...) {
    va_list ap;
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    failed++;
}

/* Fails the current check (a function returning void) with a reason. */
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fail(check_name, __VA_ARGS__);                                                     \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Checks that a call answered `want`, naming both codes otherwise. */
#define CHECK_RC(call_rc, want, what)                                                          \
    do {                                                                                       \
        int rc_ = (call_rc);                                                                   \
        if (rc_ != (want)) {                                                                   \
            fail(check_name, "%s: got %d (%s), expected %d (%s)", (what), rc_, zerror(rc_),    \
                 (want), zerror(want));                                                        \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* ---- shared state between the client's threads and the checks ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* A watch event as delivered to a watcher function. */
struct event {
    zhandle_t *zh;
    const char *watcher; /* "global" or the context string of a zoo_w* watcher */
    int type;
    int state;
    char path[256];
};

static struct event events[MAX_EVENTS];
static int n_events;

static void record(zhandle_t *zh, const char *watcher, int type, int state, const char *path) {
    pthread_mutex_lock(&lock);
    if (n_events < MAX_EVENTS) {
        struct event *e = &events[n_events++];
        e->zh = zh;
        e->watcher = watcher;
        e->type = type;
        e->state = state;
        snprintf(e->path, sizeof e->path, "%s", path ? path : "");
    }
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)ctx;
    record(zh, "global", type, state, path);
}

static void named_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    record(zh, (const char *)ctx, type, state, path);
}

/* Waits up to WAIT_MS for an event of `type` on `path` for `watcher` of `zh` (from index
 * `from` on); returns its index or -1. */
static int wait_event(zhandle_t *zh, const char *watcher, int type, const char *path, int from) {
    struct timespec ts;
    deadline_in(&ts, WAIT_MS);
    pthread_mutex_lock(&lock);
    int found = -1;
    for (;;) {
        for (int i = from; i < n_events; i++) {
            struct event *e = &events[i];
            if (e->zh == zh && strcmp(e->watcher, watcher) == 0 && e->type == type &&
                strcmp(e->path, path) == 0) {
                found = i;
                break;
            }
        }
        if (found >= 0) break;
        if (pthread_cond_timedwait(&changed, &lock, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static int events_so_far(void) {
    pthread_mutex_lock(&lock);
    int n = n_events;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Counts events for `watcher` of `zh` from index `from` on. */
static int count_events(zhandle_t *zh, const char *watcher, int from) {
    pthread_mutex_lock(&lock);
    int n = 0;
    for (int i = from; i < n_events; i++)
        if (events[i].zh == zh && strcmp(events[i].watcher, watcher) == 0) n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Connects with the global watcher and waits for ZOO_CONNECTED_STATE. */
static zhandle_t *connect_to(const char *hosts) {
    zhandle_t *zh = zookeeper_init(hosts, global_watcher, SESSION_TIMEOUT_MS, 0, NULL, 0);
    if (!zh) return NULL;
    struct timespec ts;
    deadline_in(&ts, WAIT_MS * 2);
    pthread_mutex_lock(&lock);
    while (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        if (pthread_cond_timedwait(&changed, &lock, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&lock);
    if (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

/* ---- completions: each fills one of these and signals ---- */

struct completion {
    int done;
    int rc;
    int seq; /* order in which completions arrived */
    char value[256];
    int value_len;
    struct Stat stat;
};

static int completion_counter;

static void finish(struct completion *c, int rc) {
    c->rc = rc;
    c->seq = completion_counter++;
    c->done = 1;
    pthread_cond_broadcast(&changed);
}

static void string_done(int rc, const char *value, const void *data) {
    struct completion *c = (struct completion *)data;
    pthread_mutex_lock(&lock);
    snprintf(c->value, sizeof c->value, "%s", value ? value : "");
    finish(c, rc);
    pthread_mutex_unlock(&lock);
}

static void data_done(int rc, const char *value, int value_len, const struct Stat *stat,
                      const void *data) {
    struct completion *c = (struct completion *)data;
    pthread_mutex_lock(&lock);
    c->value_len = value_len;
    if (value && value_len > 0) {
        int n = value_len < (int)sizeof c->value - 1 ? value_len : (int)sizeof c->value - 1;
        memcpy(c->value, value, n);
        c->value[n] = 0;
    }
    if (stat) c->stat = *stat;
    finish(c, rc);
    pthread_mutex_unlock(&lock);
}

static void void_done(int rc, const void *data) {
    struct completion *c = (struct completion *)data;
    pthread_mutex_lock(&lock);
    finish(c, rc);
    pthread_mutex_unlock(&lock);
}

/* Waits up to WAIT_MS for all of `n` completions; returns how many finished. */
static int wait_completions(struct completion *c, int n) {
    struct timespec ts;
    deadline_in(&ts, WAIT_MS);
    pthread_mutex_lock(&lock);
    int done;
    for (;;) {
        done = 0;
        for (int i = 0; i < n; i++) done += c[i].done;
        if (done == n) break;
        if (pthread_cond_timedwait(&changed, &lock, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&lock);
    return done;
}

/* ---- the checks ---- */

static const char *hosts;
static zhandle_t *zh;    /* the main session */
static zhandle_t *other; /* a second session, no auth */

static int get_string(zhandle_t *h, const char *path, char *buf, int cap, struct Stat *stat) {
    int len = cap - 1;
    int rc = zoo_get(h, path, 0, buf, &len, stat);
    if (rc == ZOK) buf[len < 0 ? 0 : len] = 0;
    return rc;
}

static void check_create_persistent(void) {
    const char *check_name = "create_persistent";
    char path[64];
    CHECK_RC(zoo_create(zh, "/c", "root", 4, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, path,
                        sizeof path),
             ZOK, "create /c");
    CHECK(strcmp(path, "/c") == 0, "created path %s, expected /c", path);
    struct Stat st;
    CHECK_RC(zoo_exists(zh, "/c", 0, &st), ZOK, "exists /c");
    CHECK(st.ephemeralOwner == 0, "ephemeralOwner %lld on a persistent node",
          (long long)st.ephemeralOwner);
    CHECK(st.czxid > 0 && st.czxid == st.mzxid && st.czxid == st.pzxid,
          "czxid %lld mzxid %lld pzxid %lld", (long long)st.czxid, (long long)st.mzxid,
          (long long)st.pzxid);
    CHECK(st.ctime > 0 && st.ctime == st.mtime, "ctime %lld mtime %lld", (long long)st.ctime,
          (long long)st.mtime);
    CHECK(st.version == 0 && st.cversion == 0 && st.aversion == 0 && st.dataLength == 4 &&
              st.numChildren == 0,
          "version %d cversion %d aversion %d dataLength %d numChildren %d", st.version,
          st.cversion, st.aversion, st.dataLength, st.numChildren);
    pass(check_name);
}

static void check_create_ephemeral(void) {
    const char *check_name = "create_ephemeral";
    char path[64];
    CHECK_RC(zoo_create(zh, "/c/eph", "e", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, path,
                        sizeof path),
             ZOK, "create /c/eph");
    struct Stat st;
    CHECK_RC(zoo_exists(zh, "/c/eph", 0, &st), ZOK, "exists /c/eph");
    int64_t session = zoo_client_id(zh)->client_id;
    CHECK(st.ephemeralOwner == session, "ephemeralOwner 0x%llx, session 0x%llx",
          (long long)st.ephemeralOwner, (long long)session);
    /* An ephemeral cannot have children. */
    CHECK_RC(zoo_create(zh, "/c/eph/x", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZNOCHILDRENFOREPHEMERALS, "create under an ephemeral");
    pass(check_name);
}

static void check_create_sequential(void) {
    const char *check_name = "create_sequential";
    char p1[64], p2[64], p3[64];
    /* /c has had one child created (cversion 1), so the counter starts at 1. */
    CHECK_RC(zoo_create(zh, "/c/seq-", "1", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL,
                        p1, sizeof p1),
             ZOK, "create /c/seq- (1)");
    CHECK_RC(zoo_create(zh, "/c/seq-", "2", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL,
                        p2, sizeof p2),
             ZOK, "create /c/seq- (2)");
    CHECK_RC(zoo_create(zh, "/c/es-", "3", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, p3,
                        sizeof p3),
             ZOK, "create /c/es-");
    CHECK(strcmp(p1, "/c/seq-0000000001") == 0, "first sequential %s", p1);
    CHECK(strcmp(p2, "/c/seq-0000000002") == 0, "second sequential %s", p2);
    CHECK(strcmp(p3, "/c/es-0000000003") == 0, "ephemeral sequential %s", p3);
    struct Stat st;
    CHECK_RC(zoo_exists(zh, p3, 0, &st), ZOK, "exists ephemeral sequential");
    CHECK(st.ephemeralOwner == zoo_client_id(zh)->client_id, "ephemeral sequential owner 0x%llx",
          (long long)st.ephemeralOwner);
    /* A truncated path buffer gets the path cut to fit, NUL-terminated. */
    char small[8];
    CHECK_RC(zoo_create(zh, "/c/seq-", "4", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL,
                        small, sizeof small),
             ZOK, "create /c/seq- (4)");
    CHECK(strcmp(small, "/c/seq-") == 0, "truncated path %s", small);
    CHECK_RC(zoo_delete(zh, "/c/seq-0000000004", -1), ZOK, "delete /c/seq-0000000004");
    pass(check_name);
}

static void check_create_errors(void) {
    const char *check_name = "create_errors";
    CHECK_RC(zoo_create(zh, "/c", "again", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZNODEEXISTS, "create /c again");
    CHECK_RC(zoo_create(zh, "/missing/x", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZNONODE, "create without parent");
    CHECK_RC(zoo_create(zh, "no-slash", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZBADARGUMENTS, "create with a relative path");
    pass(check_name);
}

static void check_get_set_versions(void) {
    const char *check_name = "get_set_versions";
    char buf[64];
    struct Stat st0, st1, st2;
    CHECK_RC(get_string(zh, "/c", buf, sizeof buf, &st0), ZOK, "get /c");
    CHECK(strcmp(buf, "root") == 0, "data %s", buf);
    CHECK(st0.version == 0 && st0.dataLength == 4, "version %d dataLength %d", st0.version,
          st0.dataLength);
    CHECK_RC(zoo_set2(zh, "/c", "value-1", 7, 0, &st1), ZOK, "set /c version 0");
    CHECK(st1.version == 1 && st1.dataLength == 7, "after set: version %d dataLength %d",
          st1.version, st1.dataLength);
    CHECK(st1.mzxid > st0.mzxid && st1.czxid == st0.czxid, "after set: czxid %lld mzxid %lld",
          (long long)st1.czxid, (long long)st1.mzxid);
    CHECK(st1.mtime >= st0.mtime && st1.ctime == st0.ctime, "after set: ctime %lld mtime %lld",
          (long long)st1.ctime, (long long)st1.mtime);
    CHECK(st1.cversion == st0.cversion && st1.numChildren == st0.numChildren,
          "set changed children: cversion %d numChildren %d", st1.cversion, st1.numChildren);
    CHECK_RC(zoo_set(zh, "/c", "stale", 5, 0), ZBADVERSION, "set /c with stale version 0");
    CHECK_RC(zoo_set(zh, "/c", "value-2", 7, -1), ZOK, "set /c with version -1");
    CHECK_RC(get_string(zh, "/c", buf, sizeof buf, &st2), ZOK, "get /c again");
    CHECK(strcmp(buf, "value-2") == 0 && st2.version == 2, "data %s version %d", buf,
          st2.version);
    /* Empty data reads back as zero bytes. */
    CHECK_RC(zoo_create(zh, "/c/empty", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZOK, "create /c/empty");
    CHECK_RC(get_string(zh, "/c/empty", buf, sizeof buf, &st2), ZOK, "get /c/empty");
    CHECK(buf[0] == 0 && st2.dataLength == 0, "empty node: data '%s' dataLength %d", buf,
          st2.dataLength);
    CHECK_RC(zoo_set(zh, "/c/missing", "x", 1, -1), ZNONODE, "set a missing node");
    CHECK_RC(get_string(zh, "/c/missing", buf, sizeof buf, &st2), ZNONODE, "get a missing node");
    pass(check_name);
}

static void check_exists(void) {
    const char *check_name = "exists";
    struct Stat st;
    CHECK_RC(zoo_exists(zh, "/c/seq-0000000001", 0, &st), ZOK, "exists seq-1");
    CHECK(st.dataLength == 1 && st.version == 0, "dataLength %d version %d", st.dataLength,
          st.version);
    CHECK_RC(zoo_exists(zh, "/c/nothing", 0, &st), ZNONODE, "exists on a missing node");
    CHECK_RC(zoo_exists(zh, "/", 0, &st), ZOK, "exists /");
    pass(check_name);
}

static void check_get_children2(void) {
    const char *check_name = "get_children2";
    struct String_vector kids;
    struct Stat st;
    CHECK_RC(zoo_get_children2(zh, "/c", 0, &kids, &st), ZOK, "get_children2 /c");
    /* The server's order is not specified: compare as a set. */
    const char *want[] = {"eph", "seq-0000000001", "seq-0000000002", "es-0000000003", "empty"};
    int n_want = (int)(sizeof want / sizeof want[0]);
    int ok = kids.count == n_want;
    for (int i = 0; ok && i < n_want; i++) {
        int seen = 0;
        for (int j = 0; j < kids.count; j++) seen |= strcmp(kids.data[j], want[i]) == 0;
        ok = seen;
    }
    int count = kids.count;
    deallocate_String_vector(&kids);
    CHECK(ok, "%d children, not the 5 expected", count);
    /* cversion counts every child created and deleted: 6 creates, 1 delete. */
    CHECK(st.numChildren == 5 && st.cversion == 7, "numChildren %d cversion %d", st.numChildren,
          st.cversion);
    CHECK_RC(zoo_get_children2(zh, "/c/empty", 0, &kids, &st), ZOK, "children of a leaf");
    count = kids.count;
    deallocate_String_vector(&kids);
    CHECK(count == 0, "%d children of a leaf", count);
    CHECK_RC(zoo_get_children2(zh, "/c/nothing", 0, &kids, &st), ZNONODE,
             "children of a missing node");
    pass(check_name);
}

static void check_delete(void) {
    const char *check_name = "delete";
    CHECK_RC(zoo_delete(zh, "/c/empty", 5), ZBADVERSION, "delete with a wrong version");
    CHECK_RC(zoo_delete(zh, "/c/empty", 0), ZOK, "delete with the right version");
    CHECK_RC(zoo_delete(zh, "/c/empty", -1), ZNONODE, "delete again");
    CHECK_RC(zoo_delete(zh, "/c", -1), ZNOTEMPTY, "delete a node with children");
    struct Stat st;
    CHECK_RC(zoo_exists(zh, "/c/empty", 0, &st), ZNONODE, "exists after delete");
    pass(check_name);
}

#define N_ASYNC 5

static void check_async_create(void) {
    const char *check_name = "async_create";
    static struct completion c[N_ASYNC];
    static char data[N_ASYNC][8];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N_ASYNC; i++) {
        char path[32];
        snprintf(path, sizeof path, "/c/a%d", i);
        snprintf(data[i], sizeof data[i], "data-%d", i);
        CHECK_RC(zoo_acreate(zh, path, data[i], (int)strlen(data[i]), &ZOO_OPEN_ACL_UNSAFE,
                             ZOO_PERSISTENT, string_done, &c[i]),
                 ZOK, "zoo_acreate submit");
    }
    /* One more that fails, answered in its turn. */
    static struct completion dup;
    memset(&dup, 0, sizeof dup);
    CHECK_RC(zoo_acreate(zh, "/c/a0", "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, string_done,
                         &dup),
             ZOK, "zoo_acreate submit (duplicate)");
    int done = wait_completions(c, N_ASYNC) + wait_completions(&dup, 1);
    CHECK(done == N_ASYNC + 1, "%d of %d completions within %d ms", done, N_ASYNC + 1, WAIT_MS);
    for (int i = 0; i < N_ASYNC; i++) {
        char want[32];
        snprintf(want, sizeof want, "/c/a%d", i);
        CHECK(c[i].rc == ZOK, "create %s: %s", want, zerror(c[i].rc));
        CHECK(strcmp(c[i].value, want) == 0, "completion %d named %s", i, c[i].value);
        CHECK(c[i].seq < dup.seq && (i == 0 || c[i].seq > c[i - 1].seq),
              "completions out of order");
    }
    CHECK(dup.rc == ZNODEEXISTS, "duplicate async create: %s", zerror(dup.rc));
    pass(check_name);
}

static void check_async_get(void) {
    const char *check_name = "async_get";
    static struct completion c[N_ASYNC + 1];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N_ASYNC; i++) {
        char path[32];
        snprintf(path, sizeof path, "/c/a%d", i);
        CHECK_RC(zoo_aget(zh, path, 0, data_done, &c[i]), ZOK, "zoo_aget submit");
    }
    CHECK_RC(zoo_aget(zh, "/c/a-missing", 0, data_done, &c[N_ASYNC]), ZOK, "zoo_aget submit");
    int done = wait_completions(c, N_ASYNC + 1);
    CHECK(done == N_ASYNC + 1, "%d of %d completions within %d ms", done, N_ASYNC + 1, WAIT_MS);
    for (int i = 0; i < N_ASYNC; i++) {
        char want[16];
        snprintf(want, sizeof want, "data-%d", i);
        CHECK(c[i].rc == ZOK, "get /c/a%d: %s", i, zerror(c[i].rc));
        CHECK(strcmp(c[i].value, want) == 0 && c[i].value_len == 6, "/c/a%d data '%s' (%d)", i,
              c[i].value, c[i].value_len);
        CHECK(c[i].stat.dataLength == 6 && c[i].stat.version == 0, "/c/a%d stat", i);
        CHECK(i == 0 || c[i].seq > c[i - 1].seq, "completions out of order");
    }
    CHECK(c[N_ASYNC].rc == ZNONODE, "async get of a missing node: %s", zerror(c[N_ASYNC].rc));
    pass(check_name);
}

static void check_exists_watch(void) {
    const char *check_name = "exists_watch";
    struct Stat st;
    int from = events_so_far();
    /* watch=1: the global watcher gets the event. */
    CHECK_RC(zoo_exists(zh, "/c/w", 1, &st), ZNONODE, "exists /c/w with a watch");
    CHECK_RC(zoo_create(other, "/c/w", "w0", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZOK, "create /c/w from the other session");
    int i = wait_event(zh, "global", ZOO_CREATED_EVENT, "/c/w", from);
    CHECK(i >= 0, "no CREATED event for /c/w within %d ms", WAIT_MS);
    CHECK(events[i].state == ZOO_CONNECTED_STATE, "event state %d", events[i].state);
    pass(check_name);
}

static void check_data_watch(void) {
    const char *check_name = "data_watch";
    char buf[16];
    int len = sizeof buf;
    struct Stat st;
    int from = events_so_far();
    CHECK_RC(zoo_wget(zh, "/c/w", named_watcher, (void *)"data", buf, &len, &st), ZOK,
             "zoo_wget /c/w");
    CHECK(len == 2 && memcmp(buf, "w0", 2) == 0, "data read with the watch");
    CHECK_RC(zoo_set(other, "/c/w", "w1", 2, -1), ZOK, "set /c/w from the other session");
    int i = wait_event(zh, "data", ZOO_CHANGED_EVENT, "/c/w", from);
    CHECK(i >= 0, "no CHANGED event for /c/w within %d ms", WAIT_MS);
    /* A watch fires once: a second set is not reported (the client delivers events and
     * answers in the server's order, so the re-arming read below comes after any such
     * event). Then re-armed, the watch reports the delete. */
    CHECK_RC(zoo_set(other, "/c/w", "w2", 2, -1), ZOK, "second set /c/w");
    len = sizeof buf;
    CHECK_RC(zoo_wget(zh, "/c/w", named_watcher, (void *)"data", buf, &len, &st), ZOK,
             "zoo_wget /c/w again");
    CHECK(count_events(zh, "data", from) == 1, "%d data events after one change",
          count_events(zh, "data", from));
    CHECK_RC(zoo_delete(other, "/c/w", -1), ZOK, "delete /c/w from the other session");
    i = wait_event(zh, "data", ZOO_DELETED_EVENT, "/c/w", from);
    CHECK(i >= 0, "no DELETED event for /c/w within %d ms", WAIT_MS);
    /* The global watcher was not armed for these. */
    CHECK(count_events(zh, "global", from) == 0, "the global watcher got %d events",
          count_events(zh, "global", from));
    pass(check_name);
}

static void check_child_watch(void) {
    const char *check_name = "child_watch";
    struct String_vector kids;
    int from = events_so_far();
    CHECK_RC(zoo_wget_children(zh, "/c", named_watcher, (void *)"children", &kids), ZOK,
             "zoo_wget_children /c");
    deallocate_String_vector(&kids);
    /* A data change on the parent does not fire a child watch. */
    CHECK_RC(zoo_set(other, "/c", "value-3", 7, -1), ZOK, "set /c");
    CHECK_RC(zoo_create(other, "/c/kid", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
             ZOK, "create /c/kid from the other session");
    int i = wait_event(zh, "children", ZOO_CHILD_EVENT, "/c", from);
    CHECK(i >= 0, "no CHILD event for /c within %d ms", WAIT_MS);
    CHECK(count_events(zh, "children", from) == 1, "%d child-watch events",
          count_events(zh, "children", from));
    /* Deleting a child fires a re-armed child watch too. */
    CHECK_RC(zoo_wget_children(zh, "/c", named_watcher, (void *)"children", &kids), ZOK,
             "zoo_wget_children /c again");
    deallocate_String_vector(&kids);
    CHECK_RC(zoo_delete(other, "/c/kid", -1), ZOK, "delete /c/kid");
    i = wait_event(zh, "children", ZOO_CHILD_EVENT, "/c", i + 1);
    CHECK(i >= 0, "no CHILD event for the delete within %d ms", WAIT_MS);
    pass(check_name);
}

static void check_multi_commit(void) {
    const char *check_name = "multi_commit";
    struct Stat before, set_stat;
    CHECK_RC(zoo_create(zh, "/c/m", "m0", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZOK,
             "create /c/m");
    CHECK_RC(zoo_exists(zh, "/c/m", 0, &before), ZOK, "exists /c/m");
    zoo_op_t ops[3];
    zoo_op_result_t results[3];
    char created[64];
    memset(&set_stat, 0, sizeof set_stat);
    zoo_create_op_init(&ops[0], "/c/m-new", "n", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                       created, sizeof created);
    zoo_set_op_init(&ops[1], "/c/m", "m1", 2, 0, &set_stat);
    zoo_check_op_init(&ops[2], "/c/m", 1);
    CHECK_RC(zoo_multi(zh, 3, ops, results), ZOK, "multi create+set+check");
    for (int i = 0; i < 3; i++)
        CHECK(results[i].err == ZOK, "op %d: %s", i, zerror(results[i].err));
    CHECK(strcmp(created, "/c/m-new") == 0, "created path %s", created);
    CHECK(set_stat.version == 1 && set_stat.mzxid > before.mzxid, "setData stat version %d",
          set_stat.version);
    char buf[16];
    struct Stat st;
    CHECK_RC(get_string(zh, "/c/m", buf, sizeof buf, &st), ZOK, "get /c/m");
    CHECK(strcmp(buf, "m1") == 0, "/c/m data %s", buf);
    CHECK_RC(zoo_exists(zh, "/c/m-new", 0, &st), ZOK, "exists /c/m-new");
    /* One transaction: both writes have the same zxid. */
    CHECK(st.czxid == set_stat.mzxid, "create zxid %lld, setData zxid %lld", (long long)st.czxid,
          (long long)set_stat.mzxid);
    pass(check_name);
}

static void check_multi_rollback(void) {
    const char *check_name = "multi_rollback";
    zoo_op_t ops[3];
    zoo_op_result_t results[3];
    char created[64] = "untouched";
    struct Stat set_stat;
    zoo_create_op_init(&ops[0], "/c/m-rolled-back", "r", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                       created, sizeof created);
    zoo_set_op_init(&ops[1], "/c/m", "m2", 2, -1, &set_stat);
    zoo_check_op_init(&ops[2], "/c/m", 0); /* /c/m is at version 1 */
    CHECK_RC(zoo_multi(zh, 3, ops, results), ZBADVERSION, "multi with a failing check");
    /* ZooKeeper reports ops before the failing one as OK, the failing one's error, and
     * RUNTIMEINCONSISTENCY for the ops after it. */
    CHECK(results[0].err == ZOK && results[1].err == ZOK && results[2].err == ZBADVERSION,
          "per-op errors %d %d %d", results[0].err, results[1].err, results[2].err);
    struct Stat st;
    CHECK_RC(zoo_exists(zh, "/c/m-rolled-back", 0, &st), ZNONODE, "the create was rolled back");
    char buf[16];
    CHECK_RC(get_string(zh, "/c/m", buf, sizeof buf, &st), ZOK, "get /c/m");
    CHECK(strcmp(buf, "m1") == 0 && st.version == 1, "the setData was not rolled back: %s version %d", buf,
          st.version);
    /* A failing op in the middle: the ops after it report RUNTIMEINCONSISTENCY. */
    zoo_check_op_init(&ops[0], "/c/m", 1);
    zoo_delete_op_init(&ops[1], "/c/no-such-node", -1);
    zoo_set_op_init(&ops[2], "/c/m", "m3", 2, -1, &set_stat);
    CHECK_RC(zoo_multi(zh, 3, ops, results), ZNONODE, "multi with a failing delete");
    CHECK(results[0].err == ZOK && results[1].err == ZNONODE &&
              results[2].err == ZRUNTIMEINCONSISTENCY,
          "per-op errors %d %d %d", results[0].err, results[1].err, results[2].err);
    CHECK_RC(get_string(zh, "/c/m", buf, sizeof buf, &st), ZOK, "get /c/m");
    CHECK(strcmp(buf, "m1") == 0 && st.version == 1, "/c/m changed: %s version %d", buf,
          st.version);
    pass(check_name);
}

static int acl_is(const struct ACL_vector *acl, int perms, const char *scheme, const char *id) {
    return acl->count == 1 && acl->data[0].perms == perms &&
           strcmp(acl->data[0].id.scheme, scheme) == 0 && strcmp(acl->data[0].id.id, id) == 0;
}

static zhandle_t *authed; /* a session with digest user:pw */

static void check_add_auth(void) {
    const char *check_name = "add_auth_digest";
    authed = connect_to(hosts);
    CHECK(authed != NULL, "no session within %d ms", WAIT_MS * 2);
    static struct completion c;
    memset(&c, 0, sizeof c);
    CHECK_RC(zoo_add_auth(authed, "digest", "user:pw", 7, void_done, &c), ZOK,
             "zoo_add_auth submit");
    CHECK(wait_completions(&c, 1) == 1, "no auth completion within %d ms", WAIT_MS);
    CHECK(c.rc == ZOK, "auth completion: %s", zerror(c.rc));
    pass(check_name);
}

static void check_digest_acl(void) {
    const char *check_name = "digest_acl";
    CHECK(authed != NULL, "no authenticated session");
    struct ACL acl_entry = {ZOO_PERM_ALL, {"digest", DIGEST_ID}};
    struct ACL_vector acl = {1, &acl_entry};
    CHECK_RC(zoo_create(authed, "/c/secret", "s3cret", 6, &acl, ZOO_PERSISTENT, NULL, 0), ZOK,
             "create /c/secret with a digest ACL");
    char buf[16];
    struct Stat st;
    CHECK_RC(get_string(authed, "/c/secret", buf, sizeof buf, &st), ZOK,
             "get /c/secret with auth");
    CHECK(strcmp(buf, "s3cret") == 0, "data %s", buf);
    struct ACL_vector got;
    CHECK_RC(zoo_get_acl(authed, "/c/secret", &got, &st), ZOK, "get_acl /c/secret");
    int same = acl_is(&got, ZOO_PERM_ALL, "digest", DIGEST_ID);
    deallocate_ACL_vector(&got);
    CHECK(same, "ACL read back differs");
    CHECK(st.aversion == 0, "aversion %d", st.aversion);
    CHECK_RC(zoo_set(authed, "/c/secret", "s2", 2, -1), ZOK, "set /c/secret with auth");
    pass(check_name);
}

static void check_noauth(void) {
    const char *check_name = "noauth";
    char buf[16];
    struct Stat st;
    CHECK_RC(get_string(other, "/c/secret", buf, sizeof buf, &st), ZNOAUTH,
             "get /c/secret without auth");
    CHECK_RC(zoo_set(other, "/c/secret", "x", 1, -1), ZNOAUTH, "set /c/secret without auth");
    CHECK_RC(zoo_create(other, "/c/secret/x", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL,
                        0),
             ZNOAUTH, "create under /c/secret without auth");
    /* exists needs no permission; getACL needs READ or ADMIN (ZooKeeper 3.8). */
    CHECK_RC(zoo_exists(other, "/c/secret", 0, &st), ZOK, "exists /c/secret without auth");
    struct ACL_vector acl;
    CHECK_RC(zoo_get_acl(other, "/c/secret", &acl, &st), ZNOAUTH, "get_acl without auth");
    /* The wrong password is no better. */
    zhandle_t *wrong = connect_to(hosts);
    CHECK(wrong != NULL, "no session within %d ms", WAIT_MS * 2);
    static struct completion c;
    memset(&c, 0, sizeof c);
    int rc = zoo_add_auth(wrong, "digest", "user:wrong", 10, void_done, &c);
    if (rc == ZOK && wait_completions(&c, 1) == 1 && c.rc == ZOK)
        rc = get_string(wrong, "/c/secret", buf, sizeof buf, &st);
    else
        rc = 1000 + rc;
    zookeeper_close(wrong);
    CHECK(rc == ZNOAUTH, "get /c/secret with the wrong password: %d (%s)", rc,
          rc < 1000 ? zerror(rc) : "auth failed");
    pass(check_name);
}

static void check_creator_all_acl(void) {
    const char *check_name = "creator_all_acl";
    CHECK(authed != NULL, "no authenticated session");
    CHECK_RC(zoo_create(authed, "/c/mine", "m", 1, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT, NULL, 0),
             ZOK, "create with CREATOR_ALL_ACL");
    struct ACL_vector got;
    struct Stat st;
    CHECK_RC(zoo_get_acl(authed, "/c/mine", &got, &st), ZOK, "get_acl /c/mine");
    int same = acl_is(&got, ZOO_PERM_ALL, "digest", DIGEST_ID);
    deallocate_ACL_vector(&got);
    CHECK(same, "CREATOR_ALL_ACL not expanded to the session's digest id");
    char buf[16];
    CHECK_RC(get_string(other, "/c/mine", buf, sizeof buf, &st), ZNOAUTH,
             "get /c/mine without auth");
    CHECK_RC(zoo_create(other, "/c/not-mine", "", 0, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT, NULL,
                        0),
             ZINVALIDACL, "CREATOR_ALL_ACL without auth");
    pass(check_name);
}

static void check_sync(void) {
    const char *check_name = "sync";
    /* Another session writes; after zoo_async the main session reads that write. */
    CHECK_RC(zoo_set(other, "/c/m", "after-sync", 10, -1), ZOK, "set /c/m from the other session");
    static struct completion c;
    memset(&c, 0, sizeof c);
    CHECK_RC(zoo_async(zh, "/c/m", string_done, &c), ZOK, "zoo_async submit");
    CHECK(wait_completions(&c, 1) == 1, "no sync completion within %d ms", WAIT_MS);
    CHECK(c.rc == ZOK, "sync completion: %s", zerror(c.rc));
    CHECK(strcmp(c.value, "/c/m") == 0, "sync completion path %s", c.value);
    char buf[16];
    struct Stat st;
    CHECK_RC(get_string(zh, "/c/m", buf, sizeof buf, &st), ZOK, "get /c/m after sync");
    CHECK(strcmp(buf, "after-sync") == 0, "data %s", buf);
    /* sync of a missing path still answers OK (ZooKeeper does not check the path). */
    memset(&c, 0, sizeof c);
    CHECK_RC(zoo_async(zh, "/c/not-there", string_done, &c), ZOK, "zoo_async submit");
    CHECK(wait_completions(&c, 1) == 1, "no sync completion within %d ms", WAIT_MS);
    CHECK(c.rc == ZOK, "sync of a missing path: %s", zerror(c.rc));
    pass(check_name);
}

static void check_ephemerals_go(void) {
    const char *check_name = "ephemerals_removed_on_close";
    CHECK_RC(zookeeper_close(zh), ZOK, "zookeeper_close");
    zh = NULL;
    struct Stat st;
    CHECK_RC(zoo_exists(other, "/c/eph", 0, &st), ZNONODE, "exists /c/eph after close");
    CHECK_RC(zoo_exists(other, "/c/es-0000000003", 0, &st), ZNONODE,
             "exists /c/es-0000000003 after close");
    CHECK_RC(zoo_exists(other, "/c/seq-0000000001", 0, &st), ZOK, "persistent node kept");
    pass(check_name);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s host:port\n", argv[0]);
        return 2;
    }
    hosts = argv[1];
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    zh = connect_to(hosts);
    other = zh ? connect_to(hosts) : NULL;
    if (!zh || !other) {
        fail("connect", "no session with %s within %d ms", hosts, WAIT_MS * 2);
    } else {
        pass("connect");
        check_create_persistent();
        check_create_ephemeral();
        check_create_sequential();
        check_create_errors();
        check_get_set_versions();
        check_exists();
        check_get_children2();
        check_delete();
        check_async_create();
        check_async_get();
        check_exists_watch();
        check_data_watch();
        check_child_watch();
        check_multi_commit();
        check_multi_rollback();
        check_add_auth();
        check_digest_acl();
        check_noauth();
        check_creator_all_acl();
        check_sync();
        check_ephemerals_go();
    }
    if (authed) zookeeper_close(authed);
    if (other) zookeeper_close(other);
    if (zh) zookeeper_close(zh);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
