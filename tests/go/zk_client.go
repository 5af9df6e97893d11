// Command zk_client runs the Go ZooKeeper client (github.com/samuel/go-zookeeper/zk, Debian's
// golang-github-samuel-go-zookeeper-dev) against a server.
//
// Usage: zk_client host:port
//
// It runs a fixed list of checks and prints `PASS name` or `FAIL name: reason` for each, then
// `N passed, N failed` as the last line (tests/tests/clients/go_client.rs parses it). Covered:
//   - Create: persistent, ephemeral, sequential, ephemeral sequential, with the Stat fields read
//     back; ErrNodeExists and ErrNoNode;
//   - Get/Set with versions and ErrBadVersion, Exists (present and absent), Children;
//   - Delete with ErrNoNode, ErrNotEmpty and ErrBadVersion;
//   - watches: GetW firing EventNodeDataChanged then EventNodeDeleted, ChildrenW firing
//     EventNodeChildrenChanged, ExistsW firing EventNodeCreated;
//   - Multi: create + set + check committed together; a multi whose check fails, with its
//     per-op errors and nothing applied;
//   - digest auth: AddAuth, a DigestACL node readable (data and GetACL) by that session only,
//     ErrNoAuth for a session without auth and one with the wrong password;
//   - Sync, then a read seeing another session's write;
//   - ephemerals removed when their session closes;
//   - a dropped TCP connection: the library reconnects by itself and resumes the same session
//     (same session id, its ephemeral kept, a watch set before the drop re-registered and
//     firing after it). The library has no API to open a second connection on an existing
//     session id and password, so that form of resumption is not tested.
//
// Every check runs with a deadline (checkTimeout); the program exits by itself. The
// library's own log lines are printed prefixed with "# ".
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samuel/go-zookeeper/zk"
)

const (
	sessionTimeout = 10 * time.Second
	checkTimeout   = 20 * time.Second
	waitTimeout    = 5 * time.Second
	root           = "/go"
)

var (
	server         string
	passed, failed int
)

// logger prints the library's log lines as comments, so they cannot be taken for results.
type logger struct{}

func (logger) Printf(format string, args ...interface{}) {
	fmt.Printf("# "+format+"\n", args...)
}

// trackingDialer remembers the connections it made, so a check can cut them.
type trackingDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dials int
}

func (d *trackingDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.dials++
		d.mu.Unlock()
	}
	return c, err
}

func (d *trackingDialer) dialCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// cutAll closes every connection made so far (the client sees its socket fail).
func (d *trackingDialer) cutAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// session is a connected client with its session events.
type session struct {
	conn   *zk.Conn
	events <-chan zk.Event
	dialer *trackingDialer
}

// connect opens a session and waits until the server has granted it.
func connect() (*session, error) {
	d := &trackingDialer{}
	conn, events, err := zk.Connect([]string{server}, sessionTimeout,
		zk.WithLogger(logger{}), zk.WithDialer(d.dial))
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn, events: events, dialer: d}
	if err := s.waitState(zk.StateHasSession); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// waitState waits for a session event reaching `state`.
func (s *session) waitState(state zk.State) error {
	deadline := time.After(waitTimeout)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				return fmt.Errorf("event channel closed waiting for %v", state)
			}
			if e.Type == zk.EventSession && e.State == state {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no %v within %v (state %v)", state, waitTimeout, s.conn.State())
		}
	}
}

func (s *session) close() { s.conn.Close() }

// waitEvent waits for one event on a watch channel.
func waitEvent(ch <-chan zk.Event) (zk.Event, error) {
	select {
	case e, ok := <-ch:
		if !ok {
			return zk.Event{}, errors.New("watch channel closed without an event")
		}
		return e, nil
	case <-time.After(waitTimeout):
		return zk.Event{}, fmt.Errorf("no watch event within %v", waitTimeout)
	}
}

// expectEvent checks a watch delivers `typ` for `path`.
func expectEvent(ch <-chan zk.Event, typ zk.EventType, path string) error {
	e, err := waitEvent(ch)
	if err != nil {
		return fmt.Errorf("waiting for %v on %s: %v", typ, path, err)
	}
	if e.Type != typ || e.Path != path || e.Err != nil {
		return fmt.Errorf("expected %v on %s, got %+v", typ, path, e)
	}
	return nil
}

// noEvent checks a watch channel stays quiet for a short while.
func noEvent(ch <-chan zk.Event) error {
	select {
	case e := <-ch:
		return fmt.Errorf("unexpected event %+v", e)
	case <-time.After(300 * time.Millisecond):
		return nil
	}
}

func wantErr(what string, got, want error) error {
	if got != want {
		return fmt.Errorf("%s: got error %v, expected %v", what, got, want)
	}
	return nil
}

// run runs one check with a deadline and prints its result.
func run(name string, check func(s *session) error) {
	result := make(chan error, 1)
	go func() {
		s, err := connect()
		if err != nil {
			result <- fmt.Errorf("connect: %v", err)
			return
		}
		defer s.close()
		result <- check(s)
	}()
	var err error
	select {
	case err = <-result:
	case <-time.After(checkTimeout):
		err = fmt.Errorf("did not finish within %v", checkTimeout)
	}
	if err != nil {
		fmt.Printf("FAIL %s: %v\n", name, err)
		failed++
	} else {
		fmt.Printf("PASS %s\n", name)
		passed++
	}
}

var open = zk.WorldACL(zk.PermAll)

func checkCreatePersistent(s *session) error {
	p, err := s.conn.Create(root, []byte("v0"), 0, open)
	if err != nil || p != root {
		return fmt.Errorf("create %s: %q, %v", root, p, err)
	}
	data, st, err := s.conn.Get(root)
	if err != nil {
		return fmt.Errorf("get: %v", err)
	}
	if string(data) != "v0" {
		return fmt.Errorf("data %q, expected v0", data)
	}
	if st.Version != 0 || st.Cversion != 0 || st.Aversion != 0 || st.DataLength != 2 ||
		st.NumChildren != 0 || st.EphemeralOwner != 0 {
		return fmt.Errorf("unexpected stat %+v", *st)
	}
	if st.Czxid <= 0 || st.Mzxid != st.Czxid || st.Pzxid != st.Czxid {
		return fmt.Errorf("zxids of a new node: %+v", *st)
	}
	now := time.Now().UnixNano() / int64(time.Millisecond)
	if st.Ctime != st.Mtime || st.Ctime < now-60000 || st.Ctime > now+60000 {
		return fmt.Errorf("ctime/mtime %d/%d, now %d", st.Ctime, st.Mtime, now)
	}
	return nil
}

func checkCreateEphemeral(s *session) error {
	p, err := s.conn.Create(root+"/eph", nil, zk.FlagEphemeral, open)
	if err != nil || p != root+"/eph" {
		return fmt.Errorf("create: %q, %v", p, err)
	}
	_, st, err := s.conn.Get(p)
	if err != nil {
		return fmt.Errorf("get: %v", err)
	}
	if st.EphemeralOwner != s.conn.SessionID() || st.DataLength != 0 {
		return fmt.Errorf("ephemeralOwner %#x (session %#x), dataLength %d",
			st.EphemeralOwner, s.conn.SessionID(), st.DataLength)
	}
	if _, err := s.conn.Create(p+"/child", nil, 0, open); err != zk.ErrNoChildrenForEphemerals {
		return fmt.Errorf("child of an ephemeral: got %v, expected %v", err, zk.ErrNoChildrenForEphemerals)
	}
	return s.conn.Delete(p, -1)
}

// seqSuffix parses the 10-digit counter a sequential create appends to `prefix`.
func seqSuffix(p, prefix string) (int, error) {
	if !strings.HasPrefix(p, prefix) || len(p) != len(prefix)+10 {
		return 0, fmt.Errorf("%q is not %s + 10 digits", p, prefix)
	}
	var n int
	if _, err := fmt.Sscanf(p[len(prefix):], "%d", &n); err != nil {
		return 0, fmt.Errorf("%q: %v", p, err)
	}
	return n, nil
}

func checkCreateSequential(s *session) error {
	dir := root + "/seq"
	if _, err := s.conn.Create(dir, nil, 0, open); err != nil {
		return fmt.Errorf("create %s: %v", dir, err)
	}
	var got []int
	for i := 0; i < 3; i++ {
		p, err := s.conn.Create(dir+"/n-", []byte{byte(i)}, zk.FlagSequence, open)
		if err != nil {
			return fmt.Errorf("create sequential: %v", err)
		}
		n, err := seqSuffix(p, dir+"/n-")
		if err != nil {
			return err
		}
		got = append(got, n)
	}
	if want := []int{0, 1, 2}; !reflect.DeepEqual(got, want) {
		return fmt.Errorf("sequence numbers %v, expected %v", got, want)
	}
	_, st, err := s.conn.Get(dir + "/n-0000000001")
	if err != nil || st.EphemeralOwner != 0 {
		return fmt.Errorf("get n-0000000001: %v, %+v", err, st)
	}
	return nil
}

func checkCreateEphemeralSequential(s *session) error {
	dir := root + "/eseq"
	if _, err := s.conn.Create(dir, nil, 0, open); err != nil {
		return fmt.Errorf("create %s: %v", dir, err)
	}
	// The counter is the parent's cversion: one plain child first makes it 1.
	if _, err := s.conn.Create(dir+"/plain", nil, 0, open); err != nil {
		return fmt.Errorf("create plain: %v", err)
	}
	p, err := s.conn.Create(dir+"/e-", nil, zk.FlagEphemeral|zk.FlagSequence, open)
	if err != nil {
		return fmt.Errorf("create: %v", err)
	}
	n, err := seqSuffix(p, dir+"/e-")
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("sequence number %d, expected 1", n)
	}
	_, st, err := s.conn.Get(p)
	if err != nil || st.EphemeralOwner != s.conn.SessionID() {
		return fmt.Errorf("get %s: %v, %+v", p, err, st)
	}
	_, st, err = s.conn.Get(dir)
	if err != nil || st.Cversion != 2 || st.NumChildren != 2 {
		return fmt.Errorf("parent stat: %v, %+v", err, st)
	}
	return nil
}

func checkCreateErrors(s *session) error {
	if _, err := s.conn.Create(root, nil, 0, open); err != zk.ErrNodeExists {
		return wantErr("create existing", err, zk.ErrNodeExists)
	}
	if _, err := s.conn.Create(root+"/missing/x", nil, 0, open); err != zk.ErrNoNode {
		return wantErr("create under a missing parent", err, zk.ErrNoNode)
	}
	return nil
}

func checkGetSetVersions(s *session) error {
	p := root + "/ver"
	if _, err := s.conn.Create(p, []byte("a"), 0, open); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	_, st0, err := s.conn.Get(p)
	if err != nil {
		return fmt.Errorf("get: %v", err)
	}
	st, err := s.conn.Set(p, []byte("bb"), 0)
	if err != nil {
		return fmt.Errorf("set version 0: %v", err)
	}
	if st.Version != 1 || st.DataLength != 2 || st.Mzxid <= st0.Mzxid || st.Czxid != st0.Czxid {
		return fmt.Errorf("stat after set: %+v (before %+v)", *st, *st0)
	}
	if _, err := s.conn.Set(p, []byte("c"), 0); err != zk.ErrBadVersion {
		return wantErr("set stale version", err, zk.ErrBadVersion)
	}
	if st, err = s.conn.Set(p, []byte("ccc"), -1); err != nil || st.Version != 2 {
		return fmt.Errorf("set version -1: %v, %+v", err, st)
	}
	data, st, err := s.conn.Get(p)
	if err != nil || string(data) != "ccc" || st.Version != 2 || st.DataLength != 3 {
		return fmt.Errorf("get after sets: %q, %v, %+v", data, err, st)
	}
	if _, err := s.conn.Set(root+"/nope", nil, -1); err != zk.ErrNoNode {
		return wantErr("set a missing node", err, zk.ErrNoNode)
	}
	if _, _, err := s.conn.Get(root + "/nope"); err != zk.ErrNoNode {
		return wantErr("get a missing node", err, zk.ErrNoNode)
	}
	return nil
}

func checkExists(s *session) error {
	ok, st, err := s.conn.Exists(root + "/ver")
	if err != nil || !ok || st.Version != 2 {
		return fmt.Errorf("exists /go/ver: %v, %v, %+v", ok, err, st)
	}
	ok, _, err = s.conn.Exists(root + "/nope")
	if err != nil || ok {
		return fmt.Errorf("exists /go/nope: %v, %v", ok, err)
	}
	return nil
}

func checkChildren(s *session) error {
	dir := root + "/kids"
	if _, err := s.conn.Create(dir, nil, 0, open); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	want := []string{"a", "b", "c"}
	for _, k := range []string{"c", "a", "b"} {
		if _, err := s.conn.Create(dir+"/"+k, nil, 0, open); err != nil {
			return fmt.Errorf("create %s: %v", k, err)
		}
	}
	kids, st, err := s.conn.Children(dir)
	if err != nil {
		return fmt.Errorf("children: %v", err)
	}
	sort.Strings(kids)
	if !reflect.DeepEqual(kids, want) || st.NumChildren != 3 || st.Cversion != 3 {
		return fmt.Errorf("children %v, stat %+v", kids, *st)
	}
	kids, _, err = s.conn.Children(dir + "/a")
	if err != nil || len(kids) != 0 {
		return fmt.Errorf("children of a leaf: %v, %v", kids, err)
	}
	if _, _, err := s.conn.Children(root + "/nope"); err != zk.ErrNoNode {
		return wantErr("children of a missing node", err, zk.ErrNoNode)
	}
	return nil
}

func checkDelete(s *session) error {
	dir := root + "/kids"
	if err := s.conn.Delete(root+"/nope", -1); err != zk.ErrNoNode {
		return wantErr("delete a missing node", err, zk.ErrNoNode)
	}
	if err := s.conn.Delete(dir, -1); err != zk.ErrNotEmpty {
		return wantErr("delete a parent", err, zk.ErrNotEmpty)
	}
	if _, err := s.conn.Set(dir+"/a", []byte("x"), -1); err != nil {
		return fmt.Errorf("set: %v", err)
	}
	if err := s.conn.Delete(dir+"/a", 0); err != zk.ErrBadVersion {
		return wantErr("delete with a stale version", err, zk.ErrBadVersion)
	}
	if err := s.conn.Delete(dir+"/a", 1); err != nil {
		return fmt.Errorf("delete with version 1: %v", err)
	}
	for _, k := range []string{"b", "c"} {
		if err := s.conn.Delete(dir+"/"+k, -1); err != nil {
			return fmt.Errorf("delete %s: %v", k, err)
		}
	}
	if err := s.conn.Delete(dir, -1); err != nil {
		return fmt.Errorf("delete the emptied parent: %v", err)
	}
	if ok, _, err := s.conn.Exists(dir); err != nil || ok {
		return fmt.Errorf("exists after delete: %v, %v", ok, err)
	}
	return nil
}

// withOther runs f with a second session.
func withOther(f func(o *session) error) error {
	o, err := connect()
	if err != nil {
		return fmt.Errorf("second session: %v", err)
	}
	defer o.close()
	return f(o)
}

func checkDataWatch(s *session) error {
	p := root + "/dw"
	if _, err := s.conn.Create(p, []byte("1"), 0, open); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	data, _, ch, err := s.conn.GetW(p)
	if err != nil || string(data) != "1" {
		return fmt.Errorf("getw: %q, %v", data, err)
	}
	return withOther(func(o *session) error {
		if _, err := o.conn.Set(p, []byte("2"), -1); err != nil {
			return fmt.Errorf("set: %v", err)
		}
		if err := expectEvent(ch, zk.EventNodeDataChanged, p); err != nil {
			return err
		}
		// One-shot: the fired watch is gone; a new one reports the delete.
		data, _, ch2, err := s.conn.GetW(p)
		if err != nil || string(data) != "2" {
			return fmt.Errorf("second getw: %q, %v", data, err)
		}
		if err := o.conn.Delete(p, -1); err != nil {
			return fmt.Errorf("delete: %v", err)
		}
		if err := expectEvent(ch2, zk.EventNodeDeleted, p); err != nil {
			return err
		}
		return nil
	})
}

func checkChildWatch(s *session) error {
	dir := root + "/cw"
	if _, err := s.conn.Create(dir, nil, 0, open); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	_, _, ch, err := s.conn.ChildrenW(dir)
	if err != nil {
		return fmt.Errorf("childrenw: %v", err)
	}
	return withOther(func(o *session) error {
		// A data change of the parent does not fire a child watch.
		if _, err := o.conn.Set(dir, []byte("x"), -1); err != nil {
			return fmt.Errorf("set: %v", err)
		}
		if err := noEvent(ch); err != nil {
			return fmt.Errorf("child watch after a data change: %v", err)
		}
		if _, err := o.conn.Create(dir+"/k", nil, 0, open); err != nil {
			return fmt.Errorf("create child: %v", err)
		}
		if err := expectEvent(ch, zk.EventNodeChildrenChanged, dir); err != nil {
			return err
		}
		kids, _, ch2, err := s.conn.ChildrenW(dir)
		if err != nil || !reflect.DeepEqual(kids, []string{"k"}) {
			return fmt.Errorf("second childrenw: %v, %v", kids, err)
		}
		if err := o.conn.Delete(dir+"/k", -1); err != nil {
			return fmt.Errorf("delete child: %v", err)
		}
		return expectEvent(ch2, zk.EventNodeChildrenChanged, dir)
	})
}

func checkExistsWatch(s *session) error {
	p := root + "/ew"
	ok, _, ch, err := s.conn.ExistsW(p)
	if err != nil || ok {
		return fmt.Errorf("existsw on a missing node: %v, %v", ok, err)
	}
	return withOther(func(o *session) error {
		if _, err := o.conn.Create(p, nil, 0, open); err != nil {
			return fmt.Errorf("create: %v", err)
		}
		if err := expectEvent(ch, zk.EventNodeCreated, p); err != nil {
			return err
		}
		ok, _, ch2, err := s.conn.ExistsW(p)
		if err != nil || !ok {
			return fmt.Errorf("existsw on the node: %v, %v", ok, err)
		}
		if _, err := o.conn.Set(p, []byte("y"), -1); err != nil {
			return fmt.Errorf("set: %v", err)
		}
		return expectEvent(ch2, zk.EventNodeDataChanged, p)
	})
}

func checkMultiCommit(s *session) error {
	p := root + "/m"
	if _, err := s.conn.Create(p, []byte("0"), 0, open); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	res, err := s.conn.Multi(
		&zk.CreateRequest{Path: p + "/a", Data: []byte("A"), Acl: open},
		&zk.SetDataRequest{Path: p, Data: []byte("1"), Version: 0},
		&zk.CheckVersionRequest{Path: p, Version: 1},
		&zk.CreateRequest{Path: p + "/s-", Acl: open, Flags: zk.FlagSequence},
	)
	if err != nil {
		return fmt.Errorf("multi: %v (%+v)", err, res)
	}
	if len(res) != 4 {
		return fmt.Errorf("%d results, expected 4", len(res))
	}
	for i, r := range res {
		if r.Error != nil {
			return fmt.Errorf("result %d: %v", i, r.Error)
		}
	}
	if res[0].String != p+"/a" || res[3].String != p+"/s-0000000001" {
		return fmt.Errorf("created paths %q, %q", res[0].String, res[3].String)
	}
	if res[1].Stat == nil || res[1].Stat.Version != 1 {
		return fmt.Errorf("setData result stat %+v", res[1].Stat)
	}
	data, st, err := s.conn.Get(p)
	if err != nil || string(data) != "1" || st.NumChildren != 2 {
		return fmt.Errorf("after the multi: %q, %v, %+v", data, err, st)
	}
	return nil
}

func checkMultiRollback(s *session) error {
	p := root + "/m"
	res, err := s.conn.Multi(
		&zk.CreateRequest{Path: p + "/b", Data: []byte("B"), Acl: open},
		&zk.CheckVersionRequest{Path: p, Version: 7},
		&zk.SetDataRequest{Path: p, Data: []byte("2"), Version: -1},
	)
	if err != zk.ErrBadVersion {
		return wantErr("multi with a failing check", err, zk.ErrBadVersion)
	}
	if len(res) != 3 {
		return fmt.Errorf("%d results, expected 3: %+v", len(res), res)
	}
	// The ops before the failure report OK, the failing one its error, the ones after it
	// a runtime inconsistency (-2, which the library maps to ErrUnknown).
	if res[0].Error != nil || res[1].Error != zk.ErrBadVersion || res[2].Error != zk.ErrUnknown {
		return fmt.Errorf("per-op errors %v, %v, %v; expected nil, %v, %v",
			res[0].Error, res[1].Error, res[2].Error, zk.ErrBadVersion, zk.ErrUnknown)
	}
	if ok, _, err := s.conn.Exists(p + "/b"); err != nil || ok {
		return fmt.Errorf("/go/m/b after the failed multi: exists=%v, %v", ok, err)
	}
	data, st, err := s.conn.Get(p)
	if err != nil || string(data) != "1" || st.Version != 1 {
		return fmt.Errorf("/go/m after the failed multi: %q, %v, %+v", data, err, st)
	}
	return nil
}

func checkDigestAuth(s *session) error {
	p := root + "/secret"
	if err := s.conn.AddAuth("digest", []byte("user:pw")); err != nil {
		return fmt.Errorf("add auth: %v", err)
	}
	acl := zk.DigestACL(zk.PermAll, "user", "pw")
	if _, err := s.conn.Create(p, []byte("hidden"), 0, acl); err != nil {
		return fmt.Errorf("create: %v", err)
	}
	data, _, err := s.conn.Get(p)
	if err != nil || string(data) != "hidden" {
		return fmt.Errorf("get by the owner: %q, %v", data, err)
	}
	got, st, err := s.conn.GetACL(p)
	if err != nil || !reflect.DeepEqual(got, acl) || st.Aversion != 0 {
		return fmt.Errorf("getacl: %+v, %v (expected %+v)", got, err, acl)
	}
	if err := withOther(func(o *session) error {
		if _, _, err := o.conn.Get(p); err != zk.ErrNoAuth {
			return wantErr("get without auth", err, zk.ErrNoAuth)
		}
		if _, err := o.conn.Set(p, []byte("x"), -1); err != zk.ErrNoAuth {
			return wantErr("set without auth", err, zk.ErrNoAuth)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := withOther(func(o *session) error {
		if err := o.conn.AddAuth("digest", []byte("user:wrong")); err != nil {
			return fmt.Errorf("add auth with the wrong password: %v", err)
		}
		if _, _, err := o.conn.Get(p); err != zk.ErrNoAuth {
			return wantErr("get with the wrong password", err, zk.ErrNoAuth)
		}
		return nil
	}); err != nil {
		return err
	}
	return withOther(func(o *session) error {
		if err := o.conn.AddAuth("digest", []byte("user:pw")); err != nil {
			return fmt.Errorf("add auth: %v", err)
		}
		data, _, err := o.conn.Get(p)
		if err != nil || string(data) != "hidden" {
			return fmt.Errorf("get by another session with the right password: %q, %v", data, err)
		}
		return nil
	})
}

func checkSync(s *session) error {
	p := root + "/synced"
	return withOther(func(o *session) error {
		if _, err := o.conn.Create(p, []byte("w"), 0, open); err != nil {
			return fmt.Errorf("create by the other session: %v", err)
		}
		got, err := s.conn.Sync(p)
		if err != nil || got != p {
			return fmt.Errorf("sync: %q, %v", got, err)
		}
		data, _, err := s.conn.Get(p)
		if err != nil || string(data) != "w" {
			return fmt.Errorf("get after sync: %q, %v", data, err)
		}
		return nil
	})
}

func checkEphemeralsGoneAfterClose(s *session) error {
	p := root + "/owned"
	o, err := connect()
	if err != nil {
		return fmt.Errorf("second session: %v", err)
	}
	if _, err := o.conn.Create(p, nil, zk.FlagEphemeral, open); err != nil {
		o.close()
		return fmt.Errorf("create ephemeral: %v", err)
	}
	_, _, ch, err := s.conn.ExistsW(p)
	if err != nil {
		o.close()
		return fmt.Errorf("existsw: %v", err)
	}
	o.close()
	// Closing the session deletes its ephemerals, which fires the watch.
	if err := expectEvent(ch, zk.EventNodeDeleted, p); err != nil {
		return err
	}
	if ok, _, err := s.conn.Exists(p); err != nil || ok {
		return fmt.Errorf("exists after close: %v, %v", ok, err)
	}
	return nil
}

func checkSessionResumedAfterDrop(s *session) error {
	p := root + "/resumed"
	id := s.conn.SessionID()
	if _, err := s.conn.Create(p, []byte("0"), zk.FlagEphemeral, open); err != nil {
		return fmt.Errorf("create ephemeral: %v", err)
	}
	_, _, ch, err := s.conn.GetW(p)
	if err != nil {
		return fmt.Errorf("getw: %v", err)
	}
	dials := s.dialer.dialCount()
	s.dialer.cutAll()
	if err := s.waitState(zk.StateDisconnected); err != nil {
		return fmt.Errorf("after the cut: %v", err)
	}
	if err := s.waitState(zk.StateHasSession); err != nil {
		return fmt.Errorf("reconnecting: %v", err)
	}
	if s.dialer.dialCount() <= dials {
		return errors.New("the library did not dial again")
	}
	if s.conn.SessionID() != id {
		return fmt.Errorf("session %#x after the reconnect, was %#x", s.conn.SessionID(), id)
	}
	_, st, err := s.conn.Get(p)
	if err != nil || st.EphemeralOwner != id {
		return fmt.Errorf("ephemeral after the reconnect: %v, %+v", err, st)
	}
	// The watch was re-registered (SetWatches) on the new connection.
	return withOther(func(o *session) error {
		if _, err := o.conn.Set(p, []byte("1"), -1); err != nil {
			return fmt.Errorf("set: %v", err)
		}
		return expectEvent(ch, zk.EventNodeDataChanged, p)
	})
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: zk_client host:port")
		os.Exit(2)
	}
	server = os.Args[1]
	checks := []struct {
		name  string
		check func(*session) error
	}{
		{"create_persistent", checkCreatePersistent},
		{"create_ephemeral", checkCreateEphemeral},
		{"create_sequential", checkCreateSequential},
		{"create_ephemeral_sequential", checkCreateEphemeralSequential},
		{"create_errors", checkCreateErrors},
		{"get_set_versions", checkGetSetVersions},
		{"exists", checkExists},
		{"children", checkChildren},
		{"delete", checkDelete},
		{"data_watch", checkDataWatch},
		{"child_watch", checkChildWatch},
		{"exists_watch", checkExistsWatch},
		{"multi_commit", checkMultiCommit},
		{"multi_rollback", checkMultiRollback},
		{"digest_auth", checkDigestAuth},
		{"sync", checkSync},
		{"ephemerals_gone_after_close", checkEphemeralsGoneAfterClose},
		{"session_resumed_after_drop", checkSessionResumedAfterDrop},
	}
	for _, c := range checks {
		run(c.name, c.check)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
