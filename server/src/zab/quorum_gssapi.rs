//! Quorum SASL with Kerberos (GSSAPI, RFC 4752), the learner's side: what ZooKeeper's
//! learners speak when their JAAS section (`QuorumLearner`) logs in with Krb5LoginModule.
//!
//! * **Who:** the section's `principal`, its keys from the section's `keyTab`. The library
//!   gets the tickets from the keytab into a credential cache in this process's memory
//!   (`gss_acquire_cred_from` with a `client_keytab` cred store): no ticket cache on disk,
//!   no `kinit`, and no environment variable set in a running process. The realm and KDCs
//!   come from the krb5.conf MIT's library reads: `KRB5_CONFIG` in the server's
//!   environment at start, else `/etc/krb5.conf` (ZooKeeper's JVM has
//!   `-Djava.security.krb5.conf` for it).
//! * **To whom:** `quorum.auth.kerberos.servicePrincipal` (default `zkquorum/localhost`),
//!   `service/_HOST` taking the leader's host from its `server.N` line, as ZooKeeper's
//!   `SecurityUtils.getServerPrincipal`. As ZooKeeper's learner, only its service and host
//!   are used (a realm in it is ignored): the target is the host-based service
//!   `service@host`.
//! * **The exchange,** in `QuorumAuthPacket`s (all the learner's are IN_PROGRESS): the
//!   learner's first token is the Kerberos AP-REQ; the leader answers IN_PROGRESS with the
//!   AP-REP (mutual authentication, which zooraft asks for), which the learner answers
//!   with an empty token; the leader's next IN_PROGRESS is its security-layer offer, a
//!   wrapped 4-byte token (layer bit mask, 3-byte maximum buffer); the learner unwraps it
//!   and answers a wrapped `[0x01, 0, 0, 0]` (no security layer, no buffer) followed by its
//!   authorization id, its own principal. The leader then sends SUCCESS, or ERROR (any
//!   failure on its side: e.g. a principal whose host is not one of its `server.N`
//!   lines' hosts, `SaslQuorumServerCallbackHandler`).
//!
//! Every read is bounded in length (`wire.rs`) and in time (the link's read timeout,
//! `initLimit` ticks), and the exchange in rounds.

use std::io::{Read, Write};

use jute::quorum::QuorumAuthPacket;

use super::wire::{receive_auth, send_auth};
use crate::sasl::gss_ffi::{Context, Credentials, GssError, Initiated, Target};

/// The credential cache the learner's tickets are kept in: this process's memory, so a
/// reconnect reuses the ticket-granting ticket until it expires (the library then gets a
/// new one from the keytab).
const CCACHE: &str = "MEMORY:zooraft-quorum-learner";
/// RFC 4752's security layer bit for "no security layer" (SASL QOP `auth`): the one
/// ZooKeeper's leader offers, and the one chosen.
const NO_SECURITY_LAYER: u8 = 0x01;
/// The leader's answers taken in one exchange (ZooKeeper's leader gives up after 5).
const MAX_ROUNDS: usize = 8;

/// A Kerberos login for quorum SASL (see the module docs).
pub struct Kerberos {
    principal: String,
    keytab: String,
    service_principal: String,
}

impl Kerberos {
    pub fn new(principal: String, keytab: String, service_principal: &str) -> Kerberos {
        Kerberos {
            principal,
            keytab,
            service_principal: service_principal.to_string(),
        }
    }

    /// Authenticates to the leader at `host` over a connection just opened.
    pub fn authenticate(
        &self,
        r: &mut impl Read,
        w: &mut impl Write,
        host: &str,
    ) -> Result<(), String> {
        let me = &self.principal;
        if let Err(e) = std::fs::File::open(&self.keytab) {
            return Err(format!("Kerberos: cannot read keyTab {}: {e}", self.keytab));
        }
        let (service, service_host) = service_of(&self.service_principal, host)?;
        let target = Target::host_based(&service, &service_host)
            .map_err(|e| format!("Kerberos: the service {service}@{service_host}: {e}"))?;
        let cred = Credentials::initiate(me, &self.keytab, CCACHE).map_err(|e| {
            format!(
                "Kerberos: no ticket for {me} from keyTab {} (it needs a key for that principal, \
                 and a KDC of its realm that answers): {e}",
                self.keytab
            )
        })?;
        let mut gss = Gss {
            ctx: Context::default(),
            cred,
            target,
        };
        exchange(r, w, &mut gss).map_err(|e| {
            format!(
                "Kerberos as {me} to {service}/{service_host} (keyTab {}): {e}",
                self.keytab
            )
        })
    }
}

/// The service and host of `quorum.auth.kerberos.servicePrincipal` for the leader at
/// `host`, as ZooKeeper's learner reads it: `service/_HOST` becomes `service/<host in
/// lower case>` (only when `_HOST` is the whole second part, as `getServerPrincipal`
/// splits it), then the principal is `service/host[@REALM]`.
fn service_of(config: &str, host: &str) -> Result<(String, String), String> {
    let principal = match config.split_once('/') {
        Some((service, "_HOST")) => format!("{service}/{}", host.to_lowercase()),
        _ => config.to_string(),
    };
    let name = principal.split('@').next().unwrap_or_default();
    match name.split_once('/') {
        Some((service, host)) if !service.is_empty() && !host.is_empty() && !host.contains('/') => {
            Ok((service.to_string(), host.to_string()))
        }
        _ => Err(format!(
            "quorum.auth.kerberos.servicePrincipal={config}: expected service/host (e.g. \
             zkquorum/localhost or zkquorum/_HOST)"
        )),
    }
}

/// What the exchange needs of a GSSAPI initiator (the library's, or a stand-in in tests).
trait Initiator {
    /// One context step with the acceptor's token (empty at first).
    fn step(&mut self, token: &[u8]) -> Result<Initiated, GssError>;
    fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, GssError>;
    fn wrap(&self, data: &[u8]) -> Result<Vec<u8>, GssError>;
    /// Who this side authenticated as (the established context's initiator).
    fn me(&self) -> Result<String, GssError>;
}

struct Gss {
    ctx: Context,
    cred: Credentials,
    target: Target,
}

impl Initiator for Gss {
    fn step(&mut self, token: &[u8]) -> Result<Initiated, GssError> {
        self.ctx.initiate(&self.cred, &self.target, token)
    }
    fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, GssError> {
        self.ctx.unwrap(token)
    }
    fn wrap(&self, data: &[u8]) -> Result<Vec<u8>, GssError> {
        self.ctx.wrap(data)
    }
    fn me(&self) -> Result<String, GssError> {
        self.ctx.initiator()
    }
}

/// Where the learner is in the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Context tokens until the Kerberos context is established.
    Context,
    /// Established: the next token is the leader's security-layer offer.
    Offer,
    /// The choice is sent: only SUCCESS (or ERROR) may follow.
    Chosen,
}

/// RFC 4752 §3.1, the client's last step: the leader's unwrapped offer (a layer bit mask
/// and a 3-byte maximum buffer) must offer "no security layer"; the answer, to be wrapped,
/// chooses it with a maximum buffer of 0 (no layer, no buffer), followed by `authzid`.
fn choose_layer(offer: &[u8], authzid: &str) -> Result<Vec<u8>, String> {
    if offer.len() != 4 {
        return Err(format!(
            "the leader's security layer offer is {} bytes long (4 expected)",
            offer.len()
        ));
    }
    if offer[0] & NO_SECURITY_LAYER == 0 {
        return Err(format!(
            "the leader offers security layers {:#04x}, without 'no security layer' (0x01), the one \
             ZooKeeper's quorum uses",
            offer[0]
        ));
    }
    let mut choice = vec![NO_SECURITY_LAYER, 0, 0, 0];
    choice.extend_from_slice(authzid.as_bytes());
    Ok(choice)
}

/// The exchange over a connection (see the module docs).
fn exchange(r: &mut impl Read, w: &mut impl Write, gss: &mut impl Initiator) -> Result<(), String> {
    let io = |e: std::io::Error| format!("sending to the leader: {e}");
    let gss_err = |e: GssError| e.to_string();
    let first = gss.step(&[]).map_err(gss_err)?;
    let mut stage = if first.established {
        Stage::Offer
    } else {
        Stage::Context
    };
    send_auth(w, &first.token).map_err(io)?;
    for _ in 0..MAX_ROUNDS {
        let (status, token) = receive_auth(r)?;
        match (status, stage) {
            (QuorumAuthPacket::SUCCESS, Stage::Chosen) => return Ok(()),
            (QuorumAuthPacket::SUCCESS, _) => {
                return Err(
                    "the leader said SUCCESS before the exchange was complete (is it a ZooKeeper leader?)"
                        .into(),
                )
            }
            (QuorumAuthPacket::ERROR, _) => {
                return Err(
                    "the leader refused this learner: is the principal in its realm, and is its host part \
                     one of the hosts of the server.N lines? (ZooKeeper accepts learners named \
                     name/host@REALM with such a host; the leader's log says why)"
                        .into(),
                )
            }
            (QuorumAuthPacket::IN_PROGRESS, Stage::Context) => {
                let next = gss
                    .step(&token)
                    .map_err(|e| format!("the leader's context token: {e}"))?;
                if next.established {
                    stage = Stage::Offer;
                }
                // Established by the leader's AP-REP: the empty answer asks for the offer.
                send_auth(w, &next.token).map_err(io)?;
            }
            (QuorumAuthPacket::IN_PROGRESS, Stage::Offer) => {
                let offer = gss
                    .unwrap(&token)
                    .map_err(|e| format!("the leader's security layer offer: {e}"))?;
                let choice = choose_layer(&offer, &gss.me().map_err(gss_err)?)?;
                let wrapped = gss.wrap(&choice).map_err(gss_err)?;
                stage = Stage::Chosen;
                send_auth(w, &wrapped).map_err(io)?;
            }
            (QuorumAuthPacket::IN_PROGRESS, Stage::Chosen) => {
                return Err("the leader goes on after the exchange was complete".into())
            }
            (other, _) => return Err(format!("unknown status {other} from the leader")),
        }
    }
    Err(format!(
        "the leader did not finish the exchange in {MAX_ROUNDS} rounds"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_principal_is_read_as_zookeeper_reads_it() {
        let s = |c: &str| service_of(c, "ZK1.Example.COM");
        assert_eq!(
            s("zkquorum/localhost"),
            Ok(("zkquorum".into(), "localhost".into()))
        );
        assert_eq!(
            s("zkquorum/_HOST"),
            Ok(("zkquorum".into(), "zk1.example.com".into()))
        );
        // A realm is ignored; with one, `_HOST` is not the whole second part, so it stays.
        assert_eq!(
            s("zkquorum/localhost@OTHER.ORG"),
            Ok(("zkquorum".into(), "localhost".into()))
        );
        assert_eq!(
            s("zkquorum/_HOST@R"),
            Ok(("zkquorum".into(), "_HOST".into()))
        );
        for bad in ["zkquorum", "zkquorum@R", "/h", "zkquorum/", "a/b/c"] {
            let e = s(bad).unwrap_err();
            assert!(e.contains("expected service/host"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_layer_choice_is_no_security_layer_and_the_authzid() {
        // ZooKeeper's leader (the JDK's GssKrb5Server) offers `auth` with a 64 KiB buffer.
        let offer = [0x01, 0x01, 0x00, 0x00];
        let choice = choose_layer(&offer, "learner/h@R").unwrap();
        assert_eq!(&choice[..4], &[0x01, 0, 0, 0]);
        assert_eq!(&choice[4..], b"learner/h@R");
        // Every layer offered (auth, auth-int, auth-conf): still no layer.
        assert_eq!(
            &choose_layer(&[0x07, 0, 0x10, 0], "").unwrap()[..],
            &[1, 0, 0, 0]
        );
        let e = choose_layer(&[0x04, 1, 0, 0], "x").unwrap_err();
        assert!(e.contains("0x04"), "{e}");
        for bad in [&b""[..], b"\x01", b"\x01\x00\x00", b"\x01\x00\x00\x00\x00"] {
            let e = choose_layer(bad, "x").unwrap_err();
            assert!(e.contains("4 expected"), "{e}");
        }
    }

    /// A stand-in mechanism: step `i` sends `tokens[i]`, and the context is established
    /// by step `tokens.len()`; every step after the first takes only the leader's `rep-`
    /// tokens; wrap = prefix `W:`, unwrap = strip it.
    struct Fake {
        tokens: &'static [&'static [u8]],
        steps: usize,
    }

    /// As MIT's initiator with mutual authentication: the AP-REQ, then nothing to send once
    /// the AP-REP established the context.
    const MUTUAL: &[&[u8]] = &[b"ctx-1", b""];
    /// Without: established by the AP-REQ.
    const AT_ONCE: &[&[u8]] = &[b"ctx-1"];
    /// A context that takes longer than any leader may.
    const ENDLESS: &[&[u8]] = &[b"ctx".as_slice(); 2 * MAX_ROUNDS];

    fn fake(tokens: &'static [&'static [u8]]) -> Fake {
        Fake { tokens, steps: 0 }
    }

    fn gss(message: &str) -> GssError {
        GssError {
            call: "fake",
            message: message.into(),
        }
    }

    impl Initiator for Fake {
        fn step(&mut self, token: &[u8]) -> Result<Initiated, GssError> {
            if self.steps > 0 && !token.starts_with(b"rep-") {
                return Err(gss("defective token"));
            }
            let token = self.tokens.get(self.steps).ok_or_else(|| gss("no more"))?;
            self.steps += 1;
            Ok(Initiated {
                token: token.to_vec(),
                established: self.steps == self.tokens.len(),
            })
        }
        fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, GssError> {
            token
                .strip_prefix(b"W:")
                .map(<[u8]>::to_vec)
                .ok_or_else(|| gss("bad wrap token"))
        }
        fn wrap(&self, data: &[u8]) -> Result<Vec<u8>, GssError> {
            Ok([b"W:", data].concat())
        }
        fn me(&self) -> Result<String, GssError> {
            Ok("learner/h@R".into())
        }
    }

    fn packet(status: i32, token: Option<&[u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&QuorumAuthPacket::MAGIC.to_be_bytes());
        out.extend_from_slice(&status.to_be_bytes());
        match token {
            Some(t) => {
                out.extend_from_slice(&(t.len() as i32).to_be_bytes());
                out.extend_from_slice(t);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        out
    }

    /// The learner's packets: each must be an IN_PROGRESS with a token.
    fn tokens(mut sent: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !sent.is_empty() {
            let (status, token) = receive_auth(&mut sent).expect("a learner packet");
            assert_eq!(status, QuorumAuthPacket::IN_PROGRESS);
            out.push(token);
        }
        out
    }

    const OFFER: &[u8] = b"W:\x01\x01\x00\x00";

    #[test]
    fn the_exchange_with_mutual_authentication() {
        let leader = [
            packet(QuorumAuthPacket::IN_PROGRESS, Some(b"rep-1")),
            packet(QuorumAuthPacket::IN_PROGRESS, Some(OFFER)),
            // ZooKeeper's SUCCESS carries a null token.
            packet(QuorumAuthPacket::SUCCESS, None),
        ]
        .concat();
        let mut sent = Vec::new();
        exchange(&mut &leader[..], &mut sent, &mut fake(MUTUAL)).unwrap();
        // The empty token answers the AP-REP and asks for the offer.
        assert_eq!(
            tokens(&sent),
            [
                b"ctx-1".to_vec(),
                Vec::new(),
                b"W:\x01\x00\x00\x00learner/h@R".to_vec()
            ]
        );
    }

    #[test]
    fn the_exchange_established_at_once() {
        // As a leader answers an initiator that asked for no AP-REP: the offer at once.
        let leader = [
            packet(QuorumAuthPacket::IN_PROGRESS, Some(OFFER)),
            packet(QuorumAuthPacket::SUCCESS, Some(b"")),
        ]
        .concat();
        let mut sent = Vec::new();
        exchange(&mut &leader[..], &mut sent, &mut fake(AT_ONCE)).unwrap();
        assert_eq!(
            tokens(&sent),
            [b"ctx-1".to_vec(), b"W:\x01\x00\x00\x00learner/h@R".to_vec()]
        );
    }

    fn fails(leader: &[Vec<u8>], tokens: &'static [&'static [u8]]) -> String {
        let leader = leader.concat();
        exchange(&mut &leader[..], &mut Vec::new(), &mut fake(tokens)).unwrap_err()
    }

    #[test]
    fn refusals_and_garbage_are_clear_errors() {
        let e = fails(&[packet(QuorumAuthPacket::ERROR, Some(b""))], MUTUAL);
        assert!(e.contains("the leader refused this learner"), "{e}");
        let e = fails(&[packet(QuorumAuthPacket::SUCCESS, None)], MUTUAL);
        assert!(e.contains("before the exchange was complete"), "{e}");
        let e = fails(&[packet(7, None)], MUTUAL);
        assert!(e.contains("unknown status 7"), "{e}");
        let e = fails(
            &[packet(QuorumAuthPacket::IN_PROGRESS, Some(b"junk"))],
            MUTUAL,
        );
        assert!(
            e.contains("the leader's context token: fake: defective token"),
            "{e}"
        );
        let offer = |t: &[u8]| {
            fails(
                &[
                    packet(QuorumAuthPacket::IN_PROGRESS, Some(b"rep-1")),
                    packet(QuorumAuthPacket::IN_PROGRESS, Some(t)),
                ],
                MUTUAL,
            )
        };
        let e = offer(b"junk");
        assert!(
            e.contains("security layer offer: fake: bad wrap token"),
            "{e}"
        );
        let e = offer(b"W:\x02\x00\x00\x00");
        assert!(e.contains("without 'no security layer'"), "{e}");
        let e = offer(b"W:\x01");
        assert!(e.contains("4 expected"), "{e}");
        let e = fails(
            &[
                packet(QuorumAuthPacket::IN_PROGRESS, Some(OFFER)),
                packet(QuorumAuthPacket::IN_PROGRESS, Some(b"more")),
            ],
            AT_ONCE,
        );
        assert!(e.contains("after the exchange was complete"), "{e}");
        // The connection ends, or the leader talks forever, or too much.
        let e = fails(&[], MUTUAL);
        assert!(e.contains("reading the leader's answer"), "{e}");
        let e = fails(
            &[packet(QuorumAuthPacket::IN_PROGRESS, Some(b"rep-1"))],
            MUTUAL,
        );
        assert!(e.contains("reading the leader's answer"), "{e}");
        let forever: Vec<_> = (0..MAX_ROUNDS + 1)
            .map(|_| packet(QuorumAuthPacket::IN_PROGRESS, Some(b"rep-x")))
            .collect();
        let e = fails(&forever, ENDLESS);
        assert!(e.contains("did not finish the exchange"), "{e}");
        let mut huge = packet(QuorumAuthPacket::IN_PROGRESS, None);
        huge.truncate(12);
        huge.extend_from_slice(&(1i32 << 20).to_be_bytes());
        let e = fails(&[huge], MUTUAL);
        assert!(e.contains("a length of 1048576"), "{e}");
        let e = fails(&[vec![0u8; 16]], MUTUAL);
        assert!(e.contains("magic"), "{e}");
    }
}
