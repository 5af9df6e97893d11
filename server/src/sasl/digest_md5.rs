//! The server side of SASL DIGEST-MD5 (RFC 2831), as the JDK's provider answers
//! ZooKeeper's clients: quality of protection `auth` only, realm = the server name
//! ZooKeeper uses (`zk-sasl-md5`), `md5-sess`.
//!
//! Two steps: the first token (empty from every client) gets the challenge (realm, nonce); the client's digest
//! response is checked against the user's password and answered with `rspauth`, after which
//! the exchange is complete and the identity is the authorization id (or the user name).

use std::collections::BTreeMap;

use md5::{Digest, Md5};

/// The longest client token accepted (a digest response is a few hundred bytes).
const MAX_TOKEN: usize = 4096;

/// Why an exchange failed (logged; the client gets AUTHFAILED).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestError {
    #[error("DIGEST-MD5: token of {0} bytes is too long")]
    TooLong(usize),
    #[error("DIGEST-MD5: malformed response: {0}")]
    Malformed(String),
    #[error("DIGEST-MD5: missing directive {0}")]
    Missing(&'static str),
    #[error("DIGEST-MD5: {0}")]
    Refused(String),
    #[error("DIGEST-MD5: unknown user {0}")]
    UnknownUser(String),
    #[error("DIGEST-MD5: wrong password for {0}")]
    WrongPassword(String),
    #[error("DIGEST-MD5: the exchange is already complete")]
    Complete,
}

/// What the server answers a token with.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// More to come: send this challenge.
    Challenge(Vec<u8>),
    /// Authenticated as `id`; send `final_token` (rspauth).
    Done { id: String, final_token: Vec<u8> },
}

enum State {
    Start,
    Challenged,
    Complete,
}

/// One connection's DIGEST-MD5 exchange.
pub struct DigestMd5 {
    realm: String,
    nonce: String,
    state: State,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// Splits `a="x",b=y` into directives (quoted values may hold escaped quotes and commas).
fn directives(text: &str) -> Result<BTreeMap<String, String>, DigestError> {
    let mut out = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(c) if c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        loop {
            match chars.next() {
                Some('=') => break,
                Some(c) if c.is_ascii_alphanumeric() || c == '-' || c == '_' => {
                    key.push(c.to_ascii_lowercase())
                }
                Some(c) => return Err(DigestError::Malformed(format!("unexpected {c:?}"))),
                None => return Err(DigestError::Malformed(format!("{key} has no value"))),
            }
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(DigestError::Malformed("unterminated value".into())),
                    },
                    Some(c) => value.push(c),
                    None => return Err(DigestError::Malformed("unterminated value".into())),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        if out.insert(key.clone(), value.trim().to_string()).is_some() {
            return Err(DigestError::Malformed(format!("{key} given twice")));
        }
    }
}

/// What both sides hash (RFC 2831 2.1.2.1): the response is `digest("AUTHENTICATE:")`,
/// the server's `rspauth` is `digest(":")`.
struct Exchange<'a> {
    user: &'a str,
    realm: &'a str,
    password: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    nc: &'a str,
    qop: &'a str,
    uri: &'a str,
    authzid: Option<&'a str>,
}

impl Exchange<'_> {
    fn digest(&self, a2_prefix: &[u8]) -> String {
        let e = self;
        let inner = md5(&[
            e.user.as_bytes(),
            b":",
            e.realm.as_bytes(),
            b":",
            e.password.as_bytes(),
        ]);
        let mut a1: Vec<&[u8]> = vec![&inner, b":", e.nonce.as_bytes(), b":", e.cnonce.as_bytes()];
        if let Some(z) = e.authzid {
            a1.extend([b":".as_slice(), z.as_bytes()]);
        }
        let ha1 = hex(&md5(&a1));
        let ha2 = hex(&md5(&[a2_prefix, e.uri.as_bytes()]));
        hex(&md5(&[
            ha1.as_bytes(),
            b":",
            e.nonce.as_bytes(),
            b":",
            e.nc.as_bytes(),
            b":",
            e.cnonce.as_bytes(),
            b":",
            e.qop.as_bytes(),
            b":",
            ha2.as_bytes(),
        ]))
    }
}

/// The client side: the response to a server's challenge for `user` (with `password`)
/// and the service `digest_uri` (`protocol/server-name`), and the `rspauth` value the
/// server's final token must carry.
pub fn client_response(
    challenge: &[u8],
    user: &str,
    password: &str,
    digest_uri: &str,
) -> Result<(Vec<u8>, String), DigestError> {
    if challenge.len() > MAX_TOKEN {
        return Err(DigestError::TooLong(challenge.len()));
    }
    let text =
        std::str::from_utf8(challenge).map_err(|_| DigestError::Malformed("not UTF-8".into()))?;
    let d = directives(text)?;
    let nonce = d.get("nonce").ok_or(DigestError::Missing("nonce"))?;
    let realm = d.get("realm").map(String::as_str).unwrap_or("");
    let qops = d.get("qop").map(String::as_str).unwrap_or("auth");
    if !qops.split(',').any(|q| q.trim() == "auth") {
        return Err(DigestError::Refused(format!(
            "qop {qops}: auth is not offered"
        )));
    }
    let cnonce: [u8; 24] = rand::random();
    let cnonce = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, cnonce);
    let exchange = Exchange {
        user,
        realm,
        password,
        nonce,
        cnonce: &cnonce,
        nc: "00000001",
        qop: "auth",
        uri: digest_uri,
        authzid: None,
    };
    let response = exchange.digest(b"AUTHENTICATE:");
    let token = format!(
        "charset=utf-8,username=\"{user}\",realm=\"{realm}\",nonce=\"{nonce}\",nc=00000001,\
         cnonce=\"{cnonce}\",digest-uri=\"{digest_uri}\",maxbuf=65536,response={response},qop=auth"
    );
    Ok((token.into_bytes(), exchange.digest(b":")))
}

impl DigestMd5 {
    /// A new exchange for `realm` (ZooKeeper's server name, `zk-sasl-md5`) with a fresh
    /// random nonce.
    pub fn new(realm: &str) -> DigestMd5 {
        let nonce: [u8; 24] = rand::random();
        DigestMd5 {
            realm: realm.to_string(),
            nonce: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, nonce),
            state: State::Start,
        }
    }

    #[cfg(test)]
    fn with_nonce(realm: &str, nonce: &str) -> DigestMd5 {
        DigestMd5 {
            realm: realm.into(),
            nonce: nonce.into(),
            state: State::Start,
        }
    }

    /// Answers one client token; `password` gives a user's password.
    pub fn step(
        &mut self,
        token: &[u8],
        password: impl Fn(&str) -> Option<String>,
    ) -> Result<Step, DigestError> {
        if token.len() > MAX_TOKEN {
            return Err(DigestError::TooLong(token.len()));
        }
        match self.state {
            State::Start => {
                // The JDK's server ignores what a client sends first (clients send nothing).
                self.state = State::Challenged;
                Ok(Step::Challenge(
                    format!(
                        "realm=\"{}\",nonce=\"{}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess",
                        self.realm, self.nonce
                    )
                    .into_bytes(),
                ))
            }
            State::Challenged => {
                let step = self.check(token, password);
                // One response per exchange, right or wrong.
                self.state = State::Complete;
                step
            }
            State::Complete => Err(DigestError::Complete),
        }
    }

    fn check(
        &self,
        token: &[u8],
        password: impl Fn(&str) -> Option<String>,
    ) -> Result<Step, DigestError> {
        let text =
            std::str::from_utf8(token).map_err(|_| DigestError::Malformed("not UTF-8".into()))?;
        let d = directives(text)?;
        let get = |k: &'static str| d.get(k).map(String::as_str).ok_or(DigestError::Missing(k));
        let user = get("username")?;
        let nonce = get("nonce")?;
        let cnonce = get("cnonce")?;
        let nc = get("nc")?;
        let uri = get("digest-uri")?;
        let response = get("response")?;
        let qop = d.get("qop").map(String::as_str).unwrap_or("auth");
        let realm = d.get("realm").map(String::as_str).unwrap_or("");
        if nonce != self.nonce {
            return Err(DigestError::Refused("nonce mismatch".into()));
        }
        if qop != "auth" {
            return Err(DigestError::Refused(format!("qop {qop} is not offered")));
        }
        if !uri.starts_with("zookeeper/") {
            return Err(DigestError::Refused(format!(
                "digest-uri {uri} is not zookeeper/..."
            )));
        }
        let pw = password(user).ok_or_else(|| DigestError::UnknownUser(user.to_string()))?;
        let authzid = d.get("authzid").filter(|a| !a.is_empty());
        let exchange = Exchange {
            user,
            realm,
            password: &pw,
            nonce,
            cnonce,
            nc,
            qop,
            uri,
            authzid: authzid.map(String::as_str),
        };
        let expected = exchange.digest(b"AUTHENTICATE:");
        if !expected.eq_ignore_ascii_case(response) {
            return Err(DigestError::WrongPassword(user.to_string()));
        }
        let rspauth = exchange.digest(b":");
        Ok(Step::Done {
            id: authzid.cloned().unwrap_or_else(|| user.to_string()),
            final_token: format!("rspauth={rspauth}").into_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's side of RFC 2831, written from the RFC for the test.
    fn client_response(user: &str, pw: &str, nonce: &str, cnonce: &str) -> String {
        let uri = "zookeeper/zk-sasl-md5";
        let inner = md5(&[format!("{user}:zk-sasl-md5:{pw}").as_bytes()]);
        let ha1 = hex(&md5(&[&inner, format!(":{nonce}:{cnonce}").as_bytes()]));
        let ha2 = hex(&md5(&[format!("AUTHENTICATE:{uri}").as_bytes()]));
        let resp = hex(&md5(&[format!(
            "{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}"
        )
        .as_bytes()]));
        format!(
            "charset=utf-8,username=\"{user}\",realm=\"zk-sasl-md5\",nonce=\"{nonce}\",nc=00000001,\
             cnonce=\"{cnonce}\",digest-uri=\"{uri}\",maxbuf=65536,response={resp},qop=auth"
        )
    }

    #[test]
    fn the_client_side_answers_the_server_side() {
        let mut server = DigestMd5::new("zk-quorum-sasl-md5");
        let Ok(Step::Challenge(c)) = server.step(b"", users) else {
            panic!("a challenge")
        };
        // (The server checks the uri's protocol is ZooKeeper's own client one.)
        let (token, rspauth) =
            super::client_response(&c, "bob", "bobsecret", "zookeeper/zk-quorum-sasl-md5").unwrap();
        match server.step(&token, users) {
            Ok(Step::Done { id, final_token }) => {
                assert_eq!(id, "bob");
                assert_eq!(final_token, format!("rspauth={rspauth}").into_bytes());
            }
            other => panic!("{other:?}"),
        }
        let mut server = DigestMd5::new("r");
        let Ok(Step::Challenge(c)) = server.step(b"", users) else {
            panic!("a challenge")
        };
        let (token, _) = super::client_response(&c, "bob", "wrong", "zookeeper/r").unwrap();
        assert!(matches!(
            server.step(&token, users),
            Err(DigestError::WrongPassword(_))
        ));
        assert!(
            super::client_response(b"realm=\"x\"", "bob", "pw", "u").is_err(),
            "no nonce"
        );
    }

    fn users(u: &str) -> Option<String> {
        (u == "bob").then(|| "bobsecret".to_string())
    }

    #[test]
    fn md5_of_known_text() {
        assert_eq!(hex(&md5(&[b"abc"])), "900150983cd24fb0d6963f7d28e17f72");
    }

    #[test]
    fn a_right_password_completes() {
        let mut s = DigestMd5::with_nonce("zk-sasl-md5", "N0nce");
        let Step::Challenge(c) = s.step(b"", users).unwrap() else {
            panic!("no challenge")
        };
        let c = String::from_utf8(c).unwrap();
        assert!(
            c.contains("realm=\"zk-sasl-md5\"") && c.contains("nonce=\"N0nce\""),
            "{c}"
        );
        let r = client_response("bob", "bobsecret", "N0nce", "cn");
        match s.step(r.as_bytes(), users).unwrap() {
            Step::Done { id, final_token } => {
                assert_eq!(id, "bob");
                assert!(final_token.starts_with(b"rspauth="));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.step(b"", users), Err(DigestError::Complete));
    }

    #[test]
    fn wrong_password_unknown_user_and_garbage_are_refused() {
        let mut s = DigestMd5::with_nonce("zk-sasl-md5", "N");
        s.step(b"", users).unwrap();
        let r = client_response("bob", "nope", "N", "cn");
        assert_eq!(
            s.step(r.as_bytes(), users),
            Err(DigestError::WrongPassword("bob".into()))
        );
        let mut s = DigestMd5::with_nonce("zk-sasl-md5", "N");
        s.step(b"", users).unwrap();
        let r = client_response("eve", "x", "N", "cn");
        assert!(matches!(
            s.step(r.as_bytes(), users),
            Err(DigestError::UnknownUser(_))
        ));
        for garbage in [&b"\xff\xfe"[..], b"username", b"a=\"open", b"username=bob"] {
            let mut s = DigestMd5::with_nonce("zk-sasl-md5", "N");
            s.step(b"", users).unwrap();
            assert!(s.step(garbage, users).is_err());
        }
        let mut s = DigestMd5::new("zk-sasl-md5");
        assert!(matches!(s.step(b"x", users), Ok(Step::Challenge(_))));
        assert_eq!(
            DigestMd5::new("r").step(&vec![b'a'; 1 << 20], users),
            Err(DigestError::TooLong(1 << 20))
        );
    }
}
