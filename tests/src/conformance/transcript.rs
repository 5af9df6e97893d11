//! Transcripts: what a scenario observed, and how it is normalized so that two different
//! servers (or two runs of one) can be compared line by line.
//!
//! Values that legitimately differ between servers travel as typed tokens instead of text:
//! zxids, times and session ids. [`Transcript::normalize`] replaces every zxid by its rank
//! among the distinct zxids of the transcript (0 and -1 stay, they mean "none"), every
//! time by its rank among the distinct times (0 stays), and every session id by the label
//! of the session that received it in a handshake. Everything else is plain text and is
//! compared exactly. Lines marked as not compared document allowed differences.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use jute::{Acl, ClientInfo, ErrorCode, MultiResult, Response, Stat};

/// One piece of a transcript line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Text(String),
    Zxid(i64),
    Time(i64),
    Session(i64),
}

/// One observation or action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub toks: Vec<Tok>,
    /// False for allowed differences: shown, never compared.
    pub compared: bool,
}

/// A builder for a [`Line`].
#[derive(Debug, Default, Clone)]
pub struct LineBuf {
    toks: Vec<Tok>,
}

impl LineBuf {
    pub fn new(text: impl Into<String>) -> LineBuf {
        let mut l = LineBuf::default();
        l.t(text);
        l
    }

    pub fn t(&mut self, text: impl Into<String>) -> &mut Self {
        let text = text.into();
        if let Some(Tok::Text(last)) = self.toks.last_mut() {
            last.push_str(&text);
        } else {
            self.toks.push(Tok::Text(text));
        }
        self
    }

    pub fn zxid(&mut self, z: i64) -> &mut Self {
        self.toks.push(Tok::Zxid(z));
        self
    }

    pub fn time(&mut self, t: i64) -> &mut Self {
        self.toks.push(Tok::Time(t));
        self
    }

    pub fn session(&mut self, s: i64) -> &mut Self {
        self.toks.push(Tok::Session(s));
        self
    }

    pub fn stat(&mut self, s: &Stat) -> &mut Self {
        self.t("stat{czxid=")
            .zxid(s.czxid)
            .t(" mzxid=")
            .zxid(s.mzxid)
            .t(" pzxid=")
            .zxid(s.pzxid)
            .t(" ctime=")
            .time(s.ctime)
            .t(" mtime=")
            .time(s.mtime)
            .t(format!(
                " version={} cversion={} aversion={} ephemeralOwner=",
                s.version, s.cversion, s.aversion
            ))
            .session(s.ephemeral_owner)
            .t(format!(
                " dataLength={} numChildren={}}}",
                s.data_length, s.num_children
            ))
    }

    pub fn err(&mut self, err: i32) -> &mut Self {
        self.t(fmt_err(err))
    }

    pub fn response(&mut self, r: &Response) -> &mut Self {
        match r {
            Response::Empty => self.t("(empty)"),
            Response::Create(p) => self.t(format!("path={p:?}")),
            Response::Create2(p, s) => self.t(format!("path={p:?} ")).stat(s),
            Response::Stat(s) => self.stat(s),
            Response::GetData(d, s) => self.t(format!("data={} ", fmt_data(d.as_ref()))).stat(s),
            Response::GetChildren(c) => self.t(format!("children={}", fmt_sorted(c))),
            Response::GetChildren2(c, s) => self.t(format!("children={} ", fmt_sorted(c))).stat(s),
            Response::GetAcl(a, s) => self.t(format!("acl={} ", fmt_acls(a))).stat(s),
            Response::Sync(p) => self.t(format!("path={p:?}")),
            Response::Multi(results) => {
                self.t(format!("multi[{}]", results.len()));
                for (i, res) in results.iter().enumerate() {
                    self.t(format!(" #{i}:"));
                    self.multi_result(res);
                }
                self
            }
            Response::AllChildrenNumber(n) => self.t(format!("totalNumber={n}")),
            Response::Ephemerals(e) => self.t(format!("ephemerals={}", fmt_sorted(e))),
            Response::WhoAmI(c) => self.t(format!("clientInfo={}", fmt_client_info(c))),
        }
    }

    pub fn multi_result(&mut self, r: &MultiResult) -> &mut Self {
        match r {
            MultiResult::Create(p) => self.t(format!("create path={p:?}")),
            MultiResult::Create2(p, s) => self.t(format!("create2 path={p:?} ")).stat(s),
            MultiResult::Delete => self.t("delete"),
            MultiResult::SetData(s) => self.t("setData ").stat(s),
            MultiResult::Check => self.t("check"),
            MultiResult::GetChildren(c) => self.t(format!("getChildren {}", fmt_sorted(c))),
            MultiResult::GetData(d, s) => self
                .t(format!("getData data={} ", fmt_data(d.as_ref())))
                .stat(s),
            MultiResult::Error(e) => self.t(format!("error {}", fmt_err(*e))),
        }
    }

    pub fn build(&self, compared: bool) -> Line {
        Line {
            toks: self.toks.clone(),
            compared,
        }
    }
}

/// An error code with its name: `-101(NoNode)`.
pub fn fmt_err(err: i32) -> String {
    match ErrorCode::from_code(err) {
        Some(ErrorCode::Ok) => "0(Ok)".into(),
        Some(e) => format!("{err}({e:?})"),
        None => format!("{err}(?)"),
    }
}

/// Data as text when printable and short, else its length and a stable digest.
pub fn fmt_data(d: Option<&Bytes>) -> String {
    match d {
        None => "null".into(),
        Some(b) if b.len() <= 64 && b.iter().all(|c| (0x20..0x7f).contains(c)) => {
            format!("{:?}", String::from_utf8_lossy(b))
        }
        Some(b) if b.len() <= 32 => format!("hex:{}", hex(b)),
        Some(b) => format!("<{} bytes fnv={:016x}>", b.len(), fnv1a(b)),
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// FNV-1a: a stable digest for comparing large payloads.
pub fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= *x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A list in sorted order (ZooKeeper gives children in no particular order).
pub fn fmt_sorted(items: &[String]) -> String {
    let mut v: Vec<&String> = items.iter().collect();
    v.sort();
    format!("{v:?}")
}

pub fn fmt_acls(a: &[Acl]) -> String {
    let parts: Vec<String> = a
        .iter()
        .map(|x| format!("{}:{}:{}", x.perms, x.id.scheme, x.id.id))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// whoAmI's list, sorted: ZooKeeper keeps a connection's identities in a hash set, so
/// their order carries no meaning.
pub fn fmt_client_info(c: &[ClientInfo]) -> String {
    let mut parts: Vec<String> = c
        .iter()
        .map(|x| format!("{}:{}", x.auth_scheme, x.user))
        .collect();
    parts.sort();
    format!("[{}]", parts.join(", "))
}

/// A normalized line: text ready to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormLine {
    pub text: String,
    pub compared: bool,
}

/// Everything one scenario observed on one server.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    pub lines: Vec<Line>,
    /// Session id -> label of the session that was given it.
    pub labels: HashMap<i64, String>,
    /// Replace every time by `T` (scenarios whose writes may share a millisecond).
    pub mask_times: bool,
}

impl Transcript {
    pub fn push(&mut self, line: Line) {
        self.lines.push(line);
    }

    /// Ranks zxids and times, names sessions, and renders every line.
    pub fn normalize(&self) -> Vec<NormLine> {
        let mut zxids = BTreeSet::new();
        let mut times = BTreeSet::new();
        // Only compared lines decide the ranks: what an allowed difference shows must not
        // shift the numbering of what is compared.
        for l in self.lines.iter().filter(|l| l.compared) {
            for t in &l.toks {
                match t {
                    Tok::Zxid(z) if *z != 0 && *z != -1 => {
                        zxids.insert(*z);
                    }
                    Tok::Time(t) if *t != 0 => {
                        times.insert(*t);
                    }
                    _ => {}
                }
            }
        }
        let zrank: HashMap<i64, usize> =
            zxids.iter().enumerate().map(|(i, z)| (*z, i + 1)).collect();
        let trank: HashMap<i64, usize> =
            times.iter().enumerate().map(|(i, t)| (*t, i + 1)).collect();
        self.lines
            .iter()
            .map(|l| {
                let mut text = String::new();
                for t in &l.toks {
                    match t {
                        Tok::Text(s) => text.push_str(s),
                        Tok::Zxid(z) => match zrank.get(z) {
                            Some(r) => text.push_str(&format!("Z{r}")),
                            None => text.push_str(&z.to_string()),
                        },
                        Tok::Time(t) => match trank.get(t) {
                            Some(_) if self.mask_times => text.push('T'),
                            Some(r) => text.push_str(&format!("T{r}")),
                            None => text.push_str(&t.to_string()),
                        },
                        Tok::Session(s) => match self.labels.get(s) {
                            Some(label) => text.push_str(&format!("<{label}>")),
                            None if *s == 0 => text.push('0'),
                            None => text.push_str(&format!("{s:#x}")),
                        },
                    }
                }
                NormLine {
                    text,
                    compared: l.compared,
                }
            })
            .collect()
    }
}

/// The compared lines of a normalized transcript.
pub fn compared(lines: &[NormLine]) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l.compared)
        .map(|l| l.text.as_str())
        .collect()
}

/// A line diff (longest common subsequence): ` ` same, `-` only in `a`, `+` only in `b`.
pub fn diff(a: &[&str], b: &[&str]) -> Vec<String> {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!("   {}", a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!(" - {}", a[i]));
            i += 1;
        } else {
            out.push(format!(" + {}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zxids_and_times_become_ranks() {
        let mut t = Transcript::default();
        t.labels.insert(77, "s1".into());
        let mut l = LineBuf::new("a ");
        l.zxid(500)
            .t(" ")
            .zxid(0)
            .t(" ")
            .zxid(-1)
            .t(" ")
            .zxid(20)
            .t(" ")
            .time(9)
            .t(" ")
            .session(77)
            .t(" ")
            .session(0);
        t.push(l.build(true));
        let mut l = LineBuf::new("b ");
        l.zxid(20).t(" ").time(3).t(" ").time(0);
        t.push(l.build(true));
        let mut l = LineBuf::new("c ");
        l.zxid(7).t(" ").zxid(20);
        t.push(l.build(false));
        let n = t.normalize();
        assert_eq!(n[0].text, "a Z2 0 -1 Z1 T2 <s1> 0");
        assert_eq!(n[1].text, "b Z1 T1 0");
        // An uncompared line does not take part in the ranking.
        assert_eq!(n[2].text, "c 7 Z1");
        assert!(!n[2].compared);
    }

    #[test]
    fn diff_marks_changes() {
        let d = diff(&["a", "b", "c"], &["a", "x", "c"]);
        assert_eq!(d, vec!["   a", " - b", " + x", "   c"]);
    }
}
