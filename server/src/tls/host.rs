//! Hostname verification between members (`ssl.quorum.hostnameVerification`, on by
//! default), as ZooKeeper 3.8's ZKTrustManager does it on both ends of a quorum
//! connection: the peer's certificate must name the address the connection comes from (or
//! goes to), first as an IP address (a subjectAltName `IP:` entry), then, failing that, as
//! the name a reverse lookup of that address gives (a `DNS:` entry, `*.` wildcards allowed
//! in the first label, or the subject's CN when the certificate has no `DNS:` entry).
//!
//! ZooKeeper does not check client certificates against the client's host on the client
//! port (its ClientX509Util turns that off), and neither does zooraft.

use std::net::IpAddr;

use der::Decode;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::Certificate;

/// The names a certificate is valid for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Names {
    ips: Vec<IpAddr>,
    dns: Vec<String>,
    /// The most specific CN of the subject.
    cn: Option<String>,
}

fn names(cert_der: &[u8]) -> Result<Names, String> {
    let cert =
        Certificate::from_der(cert_der).map_err(|e| format!("unreadable certificate: {e}"))?;
    let tbs = cert.tbs_certificate();
    let mut out = Names::default();
    if let Some((_, san)) = tbs
        .get_extension::<SubjectAltName>()
        .map_err(|e| format!("unreadable subjectAltName: {e}"))?
    {
        for name in san.0 {
            match name {
                GeneralName::DnsName(d) => out.dns.push(d.to_string()),
                GeneralName::IpAddress(o) => match o.as_bytes().len() {
                    4 => {
                        let b: [u8; 4] = o.as_bytes().try_into().unwrap_or_default();
                        out.ips.push(IpAddr::from(b));
                    }
                    16 => {
                        let b: [u8; 16] = o.as_bytes().try_into().unwrap_or_default();
                        out.ips.push(IpAddr::from(b));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }
    for rdn in tbs.subject().iter_rdn() {
        for ava in rdn.iter() {
            if ava.oid.to_string() == "2.5.4.3" {
                if let Ok(s) = std::str::from_utf8(ava.value.value()) {
                    out.cn = Some(s.to_string());
                }
            }
        }
    }
    Ok(out)
}

/// Whether certificate name `pattern` (`host.example` or `*.example`) matches `host`.
fn name_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    let host = host.trim_end_matches('.');
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    match (pattern.strip_prefix("*."), host.split_once('.')) {
        (Some(rest), Some((first, host_rest))) => {
            !first.is_empty() && rest.contains('.') && rest.eq_ignore_ascii_case(host_rest)
        }
        _ => false,
    }
}

impl Names {
    fn has_ip(&self, ip: IpAddr) -> bool {
        self.ips.contains(&ip)
    }

    fn has_name(&self, host: &str) -> bool {
        if self.dns.is_empty() {
            self.cn.as_deref().is_some_and(|cn| name_matches(cn, host))
        } else {
            self.dns.iter().any(|d| name_matches(d, host))
        }
    }
}

/// Checks that the leaf certificate `cert_der` names `ip` or the name `ip` reverse-resolves
/// to. Blocks on that lookup when the address alone does not match: call it off the
/// runtime's worker threads.
pub fn verify_peer_host(cert_der: &[u8], ip: IpAddr) -> Result<(), String> {
    let names = names(cert_der)?;
    if names.has_ip(ip) {
        return Ok(());
    }
    match dns_lookup::lookup_addr(&ip) {
        Ok(host) if names.has_name(&host) => Ok(()),
        Ok(host) => Err(format!(
            "the certificate names neither {ip} nor {host} (it names {:?}{})",
            names
                .ips
                .iter()
                .map(|i| i.to_string())
                .chain(names.dns.iter().cloned())
                .collect::<Vec<_>>(),
            names
                .cn
                .as_deref()
                .map(|c| format!(", CN={c}"))
                .unwrap_or_default()
        )),
        Err(e) => Err(format!(
            "the certificate does not name {ip}, and its reverse lookup failed: {e}"
        )),
    }
}

/// Runs blocking `f` (a reverse lookup) on this thread, first handing the tasks queued on
/// it to another worker (`block_in_place`) when it is a worker of a multi-threaded
/// runtime. For checks that must finish inside a synchronous rustls callback, where
/// `spawn_blocking` cannot be awaited.
pub(super) fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_one_label() {
        assert!(name_matches("localhost", "LOCALHOST"));
        assert!(name_matches("*.example.com", "zk1.example.com"));
        assert!(!name_matches("*.example.com", "a.zk1.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.com", "example.com"));
        assert!(!name_matches("other", "localhost"));
    }

    #[test]
    fn cn_only_without_dns_names() {
        let mut n = Names {
            cn: Some("localhost".into()),
            ..Names::default()
        };
        assert!(n.has_name("localhost"));
        n.dns.push("zk.example".into());
        assert!(!n.has_name("localhost"));
        assert!(n.has_name("zk.example"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(verify_peer_host(b"junk", IpAddr::from([127, 0, 0, 1])).is_err());
    }

    #[test]
    fn blocking_work_runs_on_any_runtime() {
        let threads = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            threads.block_on(async { tokio::spawn(async { off_worker(|| 7) }).await.unwrap() }),
            7
        );
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(single.block_on(async { off_worker(|| 8) }), 8);
        assert_eq!(off_worker(|| 9), 9);
    }
}
