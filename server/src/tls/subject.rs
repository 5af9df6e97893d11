//! A certificate's subject in RFC 2253 form, as Java's `X500Principal.getName()` writes it:
//! ZooKeeper's X509AuthenticationProvider uses that string as the `x509` id, so ACLs written
//! for ZooKeeper (`x509:CN=client1,O=Acme`) must match the same certificate here.
//!
//! RFC 2253 lists the relative names last-first, joins them with `,` (and the values of
//! one multi-valued name with `+`), uses the short keywords Java knows (CN, C, L, ST, O,
//! OU, STREET, DC, UID) and writes any other attribute as `OID=#<hex of its DER>`.

use der::{Decode, Encode, Tagged};
use x509_cert::Certificate;

fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A directory string's text: UTF8String, PrintableString, IA5String, NumericString,
/// BMPString; `None` for other types (written as `#hex`).
fn text(value: &der::Any) -> Option<String> {
    let bytes = value.value();
    use der::Tag;
    match value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::NumericString => {
            std::str::from_utf8(bytes).ok().map(str::to_string)
        }
        Tag::BmpString => {
            let chunks = bytes.chunks_exact(2);
            if !chunks.remainder().is_empty() {
                return None;
            }
            let units: Vec<u16> = chunks.map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// The subject of a DER certificate in RFC 2253 form; `None` if it cannot be parsed.
pub fn rfc2253(cert_der: &[u8]) -> Option<String> {
    let cert = Certificate::from_der(cert_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.tbs_certificate().subject().iter_rdn() {
        let mut avas = Vec::new();
        for ava in rdn.iter() {
            let oid = ava.oid.to_string();
            let item = match (keyword(&oid), text(&ava.value)) {
                (Some(k), Some(t)) => format!("{k}={}", escape(&t)),
                (k, _) => format!(
                    "{}=#{}",
                    k.map(str::to_string).unwrap_or(oid),
                    hex(&ava.value.to_der().ok()?)
                ),
            };
            avas.push(item);
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_rfc_2253() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("#1"), "\\#1");
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn directory_strings() {
        let utf8 = der::Any::new(der::Tag::Utf8String, "é".as_bytes()).unwrap();
        assert_eq!(text(&utf8).as_deref(), Some("é"));
        let bmp = der::Any::new(der::Tag::BmpString, [0u8, b'A']).unwrap();
        assert_eq!(text(&bmp).as_deref(), Some("A"));
        let other = der::Any::new(der::Tag::OctetString, [1u8]).unwrap();
        assert_eq!(text(&other), None);
        assert_eq!(hex(&other.to_der().unwrap()), "040101");
    }

    #[test]
    fn garbage_has_no_subject() {
        assert_eq!(rfc2253(b"not a certificate"), None);
        assert_eq!(rfc2253(&[]), None);
    }
}
