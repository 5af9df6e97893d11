//! Every jute record the client protocol uses, in ZooKeeper's field order.
//!
//! A record is declared once with [`record!`]; the macro derives its encoder, its decoder and
//! the smallest size it can have on the wire (which bounds vector counts while decoding).

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Reader, Record, WriteExt};

/// The smallest number of bytes one value of a type takes on the wire.
pub trait MinSize {
    const MIN_SIZE: usize;
}

/// Field codecs for the primitive jute types.
mod field {
    use super::*;
    use bytes::BufMut;

    pub trait Field: Sized + MinSize {
        fn put(&self, out: &mut BytesMut);
        fn get(r: &mut Reader) -> Result<Self, DecodeError>;
    }

    impl MinSize for i32 {
        const MIN_SIZE: usize = 4;
    }
    impl Field for i32 {
        fn put(&self, out: &mut BytesMut) {
            out.put_i32(*self)
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_i32()
        }
    }
    impl MinSize for i64 {
        const MIN_SIZE: usize = 8;
    }
    impl Field for i64 {
        fn put(&self, out: &mut BytesMut) {
            out.put_i64(*self)
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_i64()
        }
    }
    impl MinSize for bool {
        const MIN_SIZE: usize = 1;
    }
    impl Field for bool {
        fn put(&self, out: &mut BytesMut) {
            out.put_bool_jute(*self)
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_bool()
        }
    }
    impl MinSize for String {
        const MIN_SIZE: usize = 4;
    }
    impl Field for String {
        fn put(&self, out: &mut BytesMut) {
            out.put_ustring(self)
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_ustring()
        }
    }
    impl MinSize for Option<Bytes> {
        const MIN_SIZE: usize = 4;
    }
    impl Field for Option<Bytes> {
        fn put(&self, out: &mut BytesMut) {
            out.put_buffer(self.as_deref())
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_buffer()
        }
    }
    /// A string ZooKeeper allows to be null (sync's path, getEphemerals' prefix).
    impl MinSize for Option<String> {
        const MIN_SIZE: usize = 4;
    }
    impl Field for Option<String> {
        fn put(&self, out: &mut BytesMut) {
            match self {
                Some(s) => out.put_ustring(s),
                None => out.put_i32(-1),
            }
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_ustring_opt()
        }
    }
    impl<T: Field> MinSize for Vec<T> {
        const MIN_SIZE: usize = 4;
    }
    impl<T: Field> Field for Vec<T> {
        fn put(&self, out: &mut BytesMut) {
            out.put_i32(self.len() as i32);
            for v in self {
                v.put(out);
            }
        }
        fn get(r: &mut Reader) -> Result<Self, DecodeError> {
            r.read_vec(T::MIN_SIZE, T::get)
        }
    }
}

pub use field::Field;

/// Declares a jute record: the struct, its `Record` impl and its minimum wire size. A field
/// written `name: Type as reader` is decoded by `reader` instead of its type's own decoder
/// (for strings ZooKeeper accepts as null where zooraft keeps a `String`).
macro_rules! record {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty $(as $reader:ident)?),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl MinSize for $name {
            const MIN_SIZE: usize = 0 $(+ <$ty as MinSize>::MIN_SIZE)*;
        }

        impl Field for $name {
            fn put(&self, out: &mut BytesMut) {
                $(Field::put(&self.$field, out);)*
            }
            #[allow(unused_variables)]
            fn get(r: &mut Reader) -> Result<Self, DecodeError> {
                Ok($name { $($field: record!(@get r, $ty $(, $reader)?),)* })
            }
        }

        impl Record for $name {
            fn encode(&self, out: &mut BytesMut) {
                Field::put(self, out)
            }
            fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
                <Self as Field>::get(r)
            }
        }
    };
    (@get $r:ident, $ty:ty) => { <$ty as Field>::get($r)? };
    (@get $r:ident, $ty:ty, $reader:ident) => { $reader($r)? };
}

/// A string ZooKeeper reads as null and then treats like an empty one (a path that then
/// fails validation with BADARGUMENTS, a watch path nothing matches): decoded as "".
fn null_as_empty(r: &mut Reader) -> Result<String, DecodeError> {
    Ok(r.read_ustring_opt()?.unwrap_or_default())
}

/// An ACL identity: scheme (`world`, `auth`, `digest`, `ip`, ...) and id.
///
/// Nulls as Apache ZooKeeper 3.8 treats them: a null scheme is no known scheme (the ACL is
/// then INVALIDACL, as for ""), a null id under `auth` is ignored like any id there (kazoo's
/// `CREATOR_ALL_ACL` is `Id("auth", "")`, sent as null), and a null id under any other
/// scheme fails the request with MARSHALLINGERROR (ZooKeeper's providers dereference it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Id {
    /// The authentication scheme (`world`, `auth`, `digest`, `ip`, `x509`, `sasl`, ...).
    pub scheme: String,
    /// The identity within the scheme (`anyone`, `user:base64(sha1)`, an address...).
    pub id: String,
}

impl MinSize for Id {
    const MIN_SIZE: usize = 8;
}

impl Field for Id {
    fn put(&self, out: &mut BytesMut) {
        out.put_ustring(&self.scheme);
        out.put_ustring(&self.id);
    }
    fn get(r: &mut Reader) -> Result<Self, DecodeError> {
        let scheme = null_as_empty(r)?;
        let id = match r.read_ustring_opt()? {
            Some(id) => id,
            None if scheme == "auth" => String::new(),
            None => return Err(DecodeError::UnexpectedNull("ACL id")),
        };
        Ok(Id { scheme, id })
    }
}

impl Record for Id {
    fn encode(&self, out: &mut BytesMut) {
        Field::put(self, out)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        <Self as Field>::get(r)
    }
}

record!(
    /// An ACL entry: permission bits and identity.
    Acl {
        /// The permission bits granted (see [`perms`]).
        perms: i32,
        /// Who they are granted to.
        id: Id,
    }
);
record!(
    /// A znode's metadata as clients see it.
    Stat {
        /// The zxid of the transaction that created the node.
        czxid: i64,
        /// The zxid of the transaction that last changed its data.
        mzxid: i64,
        /// When it was created (ms since the epoch, the leader's clock).
        ctime: i64,
        /// When its data last changed (ms since the epoch).
        mtime: i64,
        /// How many times its data changed.
        version: i32,
        /// How many times its children changed.
        cversion: i32,
        /// How many times its ACL changed.
        aversion: i32,
        /// The session that owns it if it is ephemeral, otherwise 0.
        ephemeral_owner: i64,
        /// The length of its data.
        data_length: i32,
        /// How many children it has.
        num_children: i32,
        /// The zxid of the transaction that last changed its children.
        pzxid: i64,
    }
);
record!(RequestHeader { xid: i32, op: i32 });
record!(ReplyHeader {
    xid: i32,
    zxid: i64,
    err: i32
});
record!(
    /// Precedes each op in a multi request and each result in a multi response.
    MultiHeader { op: i32, done: bool, err: i32 }
);
record!(AuthPacket { auth_type: i32, scheme: String, auth: Option<Bytes> });
record!(GetDataRequest {
    path: String,
    watch: bool
});
record!(SetDataRequest { path: String as null_as_empty, data: Option<Bytes>, version: i32 });
record!(ReconfigRequest {
    joining_servers: String,
    leaving_servers: String,
    new_members: String,
    cur_config_id: i64,
});
record!(SetDataResponse { stat: Stat });
record!(CreateRequest { path: String, data: Option<Bytes>, acl: Vec<Acl>, flags: i32 });
record!(CreateTtlRequest { path: String, data: Option<Bytes>, acl: Vec<Acl>, flags: i32, ttl: i64 });
record!(DeleteRequest {
    path: String,
    version: i32
});
record!(GetChildrenRequest {
    path: String,
    watch: bool
});
record!(GetAllChildrenNumberRequest { path: String });
record!(CheckVersionRequest {
    path: String,
    version: i32
});
record!(
    /// ZooKeeper echoes the path, null included.
    SyncRequest { path: Option<String> }
);
record!(SyncResponse { path: Option<String> });
record!(GetAclRequest { path: String });
record!(SetAclRequest { path: String as null_as_empty, acl: Vec<Acl>, version: i32 });
record!(SetAclResponse { stat: Stat });
record!(AddWatchRequest {
    path: String as null_as_empty,
    mode: i32
});
record!(
    /// The body of a watch notification (xid -1).
    WatcherEvent { event_type: i32, state: i32, path: String }
);
record!(ErrorResponse { err: i32 });
record!(CreateResponse { path: String });
record!(Create2Response {
    path: String,
    stat: Stat
});
record!(ExistsRequest {
    path: String,
    watch: bool
});
record!(ExistsResponse { stat: Stat });
record!(GetDataResponse { data: Option<Bytes>, stat: Stat });
record!(GetChildrenResponse { children: Vec<String> });
record!(GetAllChildrenNumberResponse { total_number: i32 });
record!(GetChildren2Response { children: Vec<String>, stat: Stat });
record!(GetAclResponse { acl: Vec<Acl>, stat: Stat });
record!(CheckWatchesRequest {
    path: String,
    watcher_type: i32
});
record!(RemoveWatchesRequest {
    path: String as null_as_empty,
    watcher_type: i32
});
record!(
    /// A null prefix means every ephemeral of the session.
    GetEphemeralsRequest { prefix_path: Option<String> }
);
record!(GetEphemeralsResponse { ephemerals: Vec<String> });
/// Reads a watch list whose entries may be null (as Java's jute reads them).
fn read_watch_list(r: &mut Reader) -> Result<Vec<Option<String>>, DecodeError> {
    r.read_vec(4, |r| r.read_ustring_opt())
}

/// Apache ZooKeeper 3.8 handles the lists of a setWatches in order (data, exist, child,
/// persistent, persistent-recursive) and fails at a null entry with MARSHALLINGERROR,
/// after handling (firing or re-arming) every entry before it. The lists are cut at the
/// first null, the later ones emptied, and `null_entry` set.
fn cut_at_first_null(lists: Vec<Vec<Option<String>>>) -> (Vec<Vec<String>>, bool) {
    let mut cut = false;
    let out = lists
        .into_iter()
        .map(|list| {
            let mut kept = Vec::with_capacity(list.len());
            if !cut {
                for entry in list {
                    match entry {
                        Some(path) => kept.push(path),
                        None => {
                            cut = true;
                            break;
                        }
                    }
                }
            }
            kept
        })
        .collect();
    (out, cut)
}

/// Reads `N` watch lists, cut at the first null entry.
fn read_watch_lists<const N: usize>(
    r: &mut Reader,
) -> Result<([Vec<String>; N], bool), DecodeError> {
    let lists = (0..N)
        .map(|_| read_watch_list(r))
        .collect::<Result<Vec<_>, _>>()?;
    let (lists, null_entry) = cut_at_first_null(lists);
    let mut lists = lists.into_iter();
    Ok((
        std::array::from_fn(|_| lists.next().unwrap_or_default()),
        null_entry,
    ))
}

/// setWatches (opcode 101): the watches a client re-registers after a reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
    /// A null entry ended the lists (not on the wire; see `cut_at_first_null`).
    pub null_entry: bool,
}

/// setWatches2 (opcode 105): setWatches with persistent and persistent-recursive watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SetWatches2 {
    pub relative_zxid: i64,
    pub data_watches: Vec<String>,
    pub exist_watches: Vec<String>,
    pub child_watches: Vec<String>,
    pub persistent_watches: Vec<String>,
    pub persistent_recursive_watches: Vec<String>,
    /// A null entry ended the lists (not on the wire; see `cut_at_first_null`).
    pub null_entry: bool,
}

impl MinSize for SetWatches {
    const MIN_SIZE: usize = 8 + 3 * 4;
}

impl MinSize for SetWatches2 {
    const MIN_SIZE: usize = 8 + 5 * 4;
}

impl Field for SetWatches {
    fn put(&self, out: &mut BytesMut) {
        self.relative_zxid.put(out);
        self.data_watches.put(out);
        self.exist_watches.put(out);
        self.child_watches.put(out);
    }
    fn get(r: &mut Reader) -> Result<Self, DecodeError> {
        let relative_zxid = r.read_i64()?;
        let ([data_watches, exist_watches, child_watches], null_entry) = read_watch_lists(r)?;
        Ok(SetWatches {
            relative_zxid,
            data_watches,
            exist_watches,
            child_watches,
            null_entry,
        })
    }
}

impl Field for SetWatches2 {
    fn put(&self, out: &mut BytesMut) {
        self.relative_zxid.put(out);
        self.data_watches.put(out);
        self.exist_watches.put(out);
        self.child_watches.put(out);
        self.persistent_watches.put(out);
        self.persistent_recursive_watches.put(out);
    }
    fn get(r: &mut Reader) -> Result<Self, DecodeError> {
        let relative_zxid = r.read_i64()?;
        let (
            [data_watches, exist_watches, child_watches, persistent_watches, persistent_recursive_watches],
            null_entry,
        ) = read_watch_lists(r)?;
        Ok(SetWatches2 {
            relative_zxid,
            data_watches,
            exist_watches,
            child_watches,
            persistent_watches,
            persistent_recursive_watches,
            null_entry,
        })
    }
}

impl Record for SetWatches {
    fn encode(&self, out: &mut BytesMut) {
        Field::put(self, out)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        <Self as Field>::get(r)
    }
}

impl Record for SetWatches2 {
    fn encode(&self, out: &mut BytesMut) {
        Field::put(self, out)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        <Self as Field>::get(r)
    }
}

record!(ClientInfo {
    auth_scheme: String,
    user: String
});
record!(WhoAmIResponse { client_info: Vec<ClientInfo> });

/// ACL permission bits (`ZooDefs.Perms`).
pub mod perms {
    /// Read the data and list the children.
    pub const READ: i32 = 1;
    /// Set the data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// Every permission.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

impl Acl {
    /// `world:anyone` with every permission (`ZooDefs.Ids.OPEN_ACL_UNSAFE`).
    pub fn open_unsafe() -> Acl {
        Acl {
            perms: perms::ALL,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }
    }

    /// `world:anyone` read-only (`ZooDefs.Ids.READ_ACL_UNSAFE`).
    pub fn read_unsafe() -> Acl {
        Acl {
            perms: perms::READ,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    fn id_from(scheme: Option<&str>, id: Option<&str>) -> Result<Id, DecodeError> {
        let mut b = BytesMut::new();
        for s in [scheme, id] {
            match s {
                Some(s) => b.put_ustring(s),
                None => b.put_i32(-1),
            }
        }
        Id::decode(&mut Reader::new(b.freeze()))
    }

    #[test]
    fn null_acl_strings_decode_as_zookeeper_treats_them() {
        let auth = id_from(Some("auth"), None).unwrap();
        assert_eq!((auth.scheme.as_str(), auth.id.as_str()), ("auth", ""));
        let no_scheme = id_from(None, Some("anyone")).unwrap();
        assert_eq!(no_scheme.scheme, "");
        for scheme in ["world", "digest", "ip", "x509"] {
            assert!(
                matches!(
                    id_from(Some(scheme), None),
                    Err(DecodeError::UnexpectedNull(_))
                ),
                "{scheme}"
            );
        }
    }

    #[test]
    fn null_paths_decode_as_empty_only_where_zookeeper_accepts_them() {
        let mut b = BytesMut::new();
        b.put_i32(-1);
        b.put_buffer(Some(b"x"));
        b.put_i32(-1);
        let set = SetDataRequest::decode(&mut Reader::new(b.clone().freeze())).unwrap();
        assert_eq!(set.path, "");
        let mut d = BytesMut::new();
        d.put_i32(-1);
        d.put_i32(-1);
        assert!(matches!(
            DeleteRequest::decode(&mut Reader::new(d.freeze())),
            Err(DecodeError::UnexpectedNull(_))
        ));
    }

    #[test]
    fn set_watches_lists_are_cut_at_the_first_null_entry() {
        let mut b = BytesMut::new();
        b.put_i64(7);
        b.put_i32(1);
        b.put_ustring("/a");
        b.put_i32(3);
        b.put_ustring("/b");
        b.put_i32(-1);
        b.put_ustring("/c");
        b.put_i32(1);
        b.put_ustring("/d");
        let sw = SetWatches::decode(&mut Reader::new(b.freeze())).unwrap();
        assert_eq!(sw.relative_zxid, 7);
        assert_eq!(sw.data_watches, vec!["/a"]);
        assert_eq!(sw.exist_watches, vec!["/b"]);
        assert!(sw.child_watches.is_empty());
        assert!(sw.null_entry);
        let whole = SetWatches {
            relative_zxid: 1,
            data_watches: vec!["/x".into()],
            ..SetWatches::default()
        };
        let back = SetWatches::decode(&mut Reader::new(whole.to_bytes())).unwrap();
        assert_eq!(back, whole);
    }

    #[test]
    fn stat_is_68_bytes() {
        assert_eq!(Stat::MIN_SIZE, 68);
        assert_eq!(Stat::default().to_bytes().len(), 68);
    }

    #[test]
    fn create_request_layout() {
        let req = CreateRequest {
            path: "/a".into(),
            data: Some(Bytes::from_static(b"x")),
            acl: vec![Acl::open_unsafe()],
            flags: 3,
        };
        let bytes = req.to_bytes();
        let expected: &[u8] = &[
            0, 0, 0, 2, b'/', b'a', // path
            0, 0, 0, 1, b'x', // data
            0, 0, 0, 1, // one acl
            0, 0, 0, 31, // perms
            0, 0, 0, 5, b'w', b'o', b'r', b'l', b'd', // scheme
            0, 0, 0, 6, b'a', b'n', b'y', b'o', b'n', b'e', // id
            0, 0, 0, 3, // flags
        ];
        assert_eq!(&bytes[..], expected);
        assert_eq!(CreateRequest::from_bytes(bytes).unwrap(), req);
    }
}
