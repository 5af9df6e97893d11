//! Test certificates made with the `openssl` command, as an operator makes them: a CA, and
//! certificates it signs for servers and clients (valid for 127.0.0.1 and localhost), in
//! the store formats ZooKeeper 3.8 reads (PEM key store = key + chain in one file, PEM trust
//! store = CA file, PKCS12 with a password, PKCS12 trust store without MAC).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a certificate or a store could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("openssl {args}: {message} (install Debian's openssl)")]
    Openssl { args: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, text: impl AsRef<[u8]>) -> Result<(), PkiError> {
    std::fs::write(path, text).map_err(io_at(path))
}

fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(io_at(path))
}

/// The password of every PKCS12 key store made here.
pub const P12_PASSWORD: &str = "secret";

/// A certificate authority in its own folder.
pub struct Ca {
    pub dir: PathBuf,
    pub name: String,
    /// The CA certificate (a PEM trust store).
    pub cert: PathBuf,
    serial: std::cell::Cell<u32>,
}

/// One issued certificate and its stores.
#[derive(Debug, Clone)]
pub struct Issued {
    pub key: PathBuf,
    pub cert: PathBuf,
    /// PEM key store: the PKCS#8 key, then the certificate and the CA's.
    pub pem_store: PathBuf,
    /// PKCS12 key store, password [`P12_PASSWORD`].
    pub p12_store: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), PkiError> {
    let failed = |message: String| PkiError::Openssl {
        args: args.join(" "),
        message,
    };
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(())
}

const EXTENSIONS: &str = "basicConstraints=CA:FALSE\n\
    keyUsage=digitalSignature,keyEncipherment\n\
    extendedKeyUsage=serverAuth,clientAuth\n\
    subjectAltName=IP:127.0.0.1,DNS:localhost\n";

impl Ca {
    /// A new CA (`CN=<name>`) under `dir/<name>`; panics with the reason if it cannot be made.
    pub fn new(dir: &Path, name: &str) -> Ca {
        Self::try_new(dir, name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A new CA (`CN=<name>`) under `dir/<name>`.
    pub fn try_new(dir: &Path, name: &str) -> Result<Ca, PkiError> {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        openssl(
            &dir,
            &[
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                "ca.pem", "-days", "3650", "-subj",
            ]
            .into_iter()
            .chain([format!("/CN={name}").as_str()])
            .collect::<Vec<_>>(),
        )?;
        write(&dir.join("ext.cnf"), EXTENSIONS)?;
        Ok(Ca {
            cert: dir.join("ca.pem"),
            dir,
            name: name.into(),
            serial: std::cell::Cell::new(1),
        })
    }

    /// A certificate for `subject` (openssl form, `/CN=client1/O=Acme`) valid for a year;
    /// panics with the reason if it cannot be made.
    pub fn issue(&self, file: &str, subject: &str) -> Issued {
        self.try_issue(file, subject)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A certificate for `subject` (openssl form, `/CN=client1/O=Acme`) valid for a year.
    pub fn try_issue(&self, file: &str, subject: &str) -> Result<Issued, PkiError> {
        self.issue_with(file, subject, None, "ext.cnf")
    }

    /// Like [`issue`](Self::issue), valid for the hosts `san` names (openssl form,
    /// `DNS:zk1.example,IP:10.0.0.1`) instead of 127.0.0.1 and localhost.
    pub fn issue_for_hosts(&self, file: &str, subject: &str, san: &str) -> Issued {
        let ext = EXTENSIONS.replace("IP:127.0.0.1,DNS:localhost", san);
        let ext_file = format!("{file}-ext.cnf");
        write(&self.dir.join(&ext_file), ext)
            .and_then(|()| self.issue_with(file, subject, None, &ext_file))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A certificate whose validity ended in 2021 (expired).
    pub fn issue_expired(&self, file: &str, subject: &str) -> Issued {
        let dates = Some(("20200101000000Z", "20210101000000Z"));
        self.issue_with(file, subject, dates, "ext.cnf")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn issue_with(
        &self,
        file: &str,
        subject: &str,
        dates: Option<(&str, &str)>,
        ext_file: &str,
    ) -> Result<Issued, PkiError> {
        let d = &self.dir;
        let key = format!("{file}.key");
        let csr = format!("{file}.csr");
        let cert = format!("{file}.pem");
        openssl(
            d,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                subject,
            ],
        )?;
        let serial = self.serial.get() + 1;
        self.serial.set(serial);
        match dates {
            None => openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-set_serial",
                    &serial.to_string(),
                    "-out",
                    &cert,
                    "-days",
                    "365",
                    "-extfile",
                    ext_file,
                ],
            )?,
            Some((start, end)) => {
                // `openssl ca` is the one that takes explicit dates.
                write(&d.join("index.txt"), "")?;
                write(&d.join("serial.txt"), format!("{serial:04X}\n"))?;
                let conf = format!(
                    "[ca]\ndefault_ca=test\n[test]\ndatabase=index.txt\nserial=serial.txt\nnew_certs_dir=.\n\
                     default_md=sha256\npolicy=any\nunique_subject=no\ncopy_extensions=none\n\
                     [any]\ncommonName=supplied\norganizationName=optional\n[ext]\n{EXTENSIONS}"
                );
                write(&d.join("ca.cnf"), conf)?;
                openssl(
                    d,
                    &[
                        "ca",
                        "-batch",
                        "-config",
                        "ca.cnf",
                        "-extensions",
                        "ext",
                        "-cert",
                        "ca.pem",
                        "-keyfile",
                        "ca.key",
                        "-in",
                        &csr,
                        "-out",
                        &cert,
                        "-notext",
                        "-startdate",
                        start,
                        "-enddate",
                        end,
                    ],
                )?;
            }
        }
        let pem_store = d.join(format!("{file}-store.pem"));
        let mut text = read(&d.join(&key))?;
        text.push_str(&read(&d.join(&cert))?);
        text.push_str(&read(&self.cert)?);
        write(&pem_store, text)?;
        let p12 = format!("{file}.p12");
        openssl(
            d,
            &[
                "pkcs12",
                "-export",
                "-inkey",
                &key,
                "-in",
                &cert,
                "-certfile",
                "ca.pem",
                "-name",
                file,
                "-out",
                &p12,
                "-passout",
                &format!("pass:{P12_PASSWORD}"),
            ],
        )?;
        Ok(Issued {
            key: d.join(key),
            cert: d.join(cert),
            pem_store,
            p12_store: d.join(p12),
        })
    }

    /// The CA as a PKCS12 trust store with no password and no MAC.
    pub fn p12_trust_store(&self) -> PathBuf {
        openssl(
            &self.dir,
            &[
                "pkcs12",
                "-export",
                "-nokeys",
                "-in",
                "ca.pem",
                "-out",
                "trust.p12",
                "-passout",
                "pass:",
                "-nomac",
                "-certpbe",
                "NONE",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.dir.join("trust.p12")
    }
}

/// zoo.cfg lines for TLS on a secure client port with PEM stores.
pub fn server_tls_config(
    secure_port: u16,
    store: &Issued,
    trust: &Path,
    client_auth: &str,
) -> Vec<(String, String)> {
    [
        ("secureClientPort", secure_port.to_string()),
        (
            "ssl.keyStore.location",
            store.pem_store.display().to_string(),
        ),
        ("ssl.keyStore.type", "PEM".into()),
        ("ssl.trustStore.location", trust.display().to_string()),
        ("ssl.trustStore.type", "PEM".into()),
        ("ssl.clientAuth", client_auth.into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The zoo.cfg keys of quorum TLS (`sslQuorum`) with PEM stores: `store`'s key and
/// certificate, and `ca` as the trust store. Both kinds of server read them.
pub fn quorum_keys(store: &Issued, ca: &Ca) -> Vec<(String, String)> {
    [
        ("sslQuorum", "true".to_string()),
        (
            "ssl.quorum.keyStore.location",
            store.pem_store.display().to_string(),
        ),
        ("ssl.quorum.keyStore.type", "PEM".into()),
        (
            "ssl.quorum.trustStore.location",
            ca.cert.display().to_string(),
        ),
        ("ssl.quorum.trustStore.type", "PEM".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The JVM flags that make a Java client (zkCli.sh, Curator) talk TLS through Netty with
/// `store` (PKCS12) as its identity (if any) and `trust` (PEM) as its CA.
pub fn java_client_flags(store: Option<&Issued>, trust: &Path) -> String {
    let mut f = format!(
        "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty \
         -Dzookeeper.client.secure=true -Dzookeeper.ssl.trustStore.location={} \
         -Dzookeeper.ssl.trustStore.type=PEM",
        trust.display()
    );
    if let Some(s) = store {
        f.push_str(&format!(
            " -Dzookeeper.ssl.keyStore.location={} -Dzookeeper.ssl.keyStore.password={P12_PASSWORD} \
             -Dzookeeper.ssl.keyStore.type=PKCS12",
            s.p12_store.display()
        ));
    }
    f
}
