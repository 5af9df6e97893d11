//! ZooKeeper path rules.
//!
//! The server applies the same checks as ZooKeeper's `PathUtils.validatePath`, and the same
//! cheaper parent-path derivations as its `PrepRequestProcessor`, because the *order* of
//! checks decides which error a malformed request gets (BADARGUMENTS or NONODE) and clients
//! depend on the exact code.

/// Why a path is invalid (the text of ZooKeeper's IllegalArgumentException).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPath(pub String);

/// ZooKeeper's `PathUtils.validatePath`, on Java's UTF-16 view of the string: a character
/// outside the Basic Multilingual Plane is a surrogate pair in Java, which falls in the
/// forbidden `\ud800-\uf8ff` range.
pub fn validate(path: &str) -> Result<(), InvalidPath> {
    if path.is_empty() {
        return Err(InvalidPath("Path length must be > 0".into()));
    }
    if !path.starts_with('/') {
        return Err(InvalidPath("Path must start with / character".into()));
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(InvalidPath("Path must not end with / character".into()));
    }
    // Every write and most reads validate a path: an ASCII one (the usual case) is checked
    // on its bytes, which are its characters, without collecting them first.
    if path.is_ascii() {
        check_chars(path.as_bytes())
    } else {
        check_chars(&path.chars().collect::<Vec<char>>())
    }
}

/// The character rules of [`validate`] on a path's characters (at least two, the first a
/// `/`); `i` in the messages is a character index, as in ZooKeeper.
fn check_chars<C: Copy + Into<u32>>(chars: &[C]) -> Result<(), InvalidPath> {
    const SLASH: u32 = '/' as u32;
    const DOT: u32 = '.' as u32;
    let at = |i: usize| chars[i].into();
    let mut last = SLASH;
    for i in 1..chars.len() {
        let c = at(i);
        let next_is_end_or_slash = i + 1 == chars.len() || at(i + 1) == SLASH;
        if c == 0 {
            return Err(InvalidPath(format!("null character not allowed @{i}")));
        } else if c == SLASH && last == SLASH {
            return Err(InvalidPath(format!("empty node name specified @{i}")));
        } else if c == DOT && last == DOT {
            if at(i - 2) == SLASH && next_is_end_or_slash {
                return Err(InvalidPath(format!("relative paths not allowed @{i}")));
            }
        } else if c == DOT {
            if at(i - 1) == SLASH && next_is_end_or_slash {
                return Err(InvalidPath(format!("relative paths not allowed @{i}")));
            }
        } else if is_forbidden_char(c) {
            return Err(InvalidPath(format!("invalid character @{i}")));
        }
        last = c;
    }
    Ok(())
}

fn is_forbidden_char(c: u32) -> bool {
    (0x01..=0x1f).contains(&c)
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

/// The parent part of `path` as ZooKeeper derives it for create (`validatePathForCreate`):
/// everything before the last `/`; `None` when there is no `/` or there is a NUL.
/// For `/a` the parent is `""`, which the tree resolves to the root.
pub fn parent_for_create(path: &str) -> Option<&str> {
    if path.contains('\0') {
        return None;
    }
    path.rfind('/').map(|i| &path[..i])
}

/// The last segment of a path (after its last `/`).
pub fn child_name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The parent of a valid, non-root path, in the form clients see it (`/` for top-level nodes).
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The ancestors of a path, nearest first, ending with `/` (not including the path itself).
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut current = Some(path);
    std::iter::from_fn(move || {
        let p = current?;
        if p == "/" || p.is_empty() {
            current = None;
            return None;
        }
        let parent = parent_of(p);
        current = Some(parent);
        Some(parent)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_zookeeper_accepts() {
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/..a",
            "/a..",
            "/.a",
            "/a/...",
            "/zookeeper",
        ] {
            assert_eq!(validate(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn rejects_what_zookeeper_rejects() {
        for p in [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/.",
            "/a/../b",
            "/a/./b",
            "/a\0b",
            "/a\u{1}",
            "/a\u{7f}",
            "/a\u{9f}",
            "/\u{e000}",
            "/\u{fff0}",
            "/\u{1f600}",
        ] {
            assert!(validate(p).is_err(), "{p:?} should be invalid");
        }
    }

    #[test]
    fn ascii_paths_get_the_same_verdicts_and_messages_on_bytes_as_on_chars() {
        for p in [
            "/a", "/a/b", "/..a", "/a/...", "//", "/a//b", "/.", "/a/../b", "/a/./b", "/a\0b",
            "/a\u{1}", "/a\u{7f}", "/x/..", "/ab/c.",
        ] {
            let on_chars = check_chars(&p.chars().collect::<Vec<char>>());
            assert_eq!(check_chars(p.as_bytes()), on_chars, "{p:?}");
        }
        assert_eq!(
            validate("/é//b"),
            Err(InvalidPath("empty node name specified @3".into()))
        );
    }

    #[test]
    fn parents_and_children() {
        assert_eq!(parent_for_create("/a"), Some(""));
        assert_eq!(parent_for_create("/a/b"), Some("/a"));
        assert_eq!(parent_for_create("a"), None);
        assert_eq!(parent_for_create("/a\0"), None);
        assert_eq!(parent_of("/a"), "/");
        assert_eq!(parent_of("/a/b"), "/a");
        assert_eq!(child_name("/a/b"), "b");
        assert_eq!(
            ancestors("/a/b/c").collect::<Vec<_>>(),
            vec!["/a/b", "/a", "/"]
        );
        assert_eq!(ancestors("/").count(), 0);
    }
}
