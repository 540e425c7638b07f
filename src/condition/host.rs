//! The host of a URL for `host(ref)`: scheme optional, userinfo and port dropped, lower-cased,
//! IDNA (punycode) normalized, one trailing dot dropped.
//!
//! The reading is strict where URL parsers are lenient: any character a host name cannot hold
//! (white space, a control character, `%`, ...) makes the value no host at all, so a rule on it
//! fires instead of trusting one parser's reading over another's. `\` ends the authority as
//! `/` does, as the WHATWG URL standard reads it for web schemes. IP addresses are compared as
//! written (`0x7f.1` is not `127.0.0.1`).

use std::borrow::Cow;

/// Longest authority (`user@host:port`) read, in bytes; a longer one is no host.
const MAX_AUTHORITY_BYTES: usize = 1024;

/// Longest run of scheme characters read at the start of a value, in bytes: a longer run is no
/// host (as a scheme it would hide the host; as a host it would be too long).
const MAX_SCHEME_BYTES: usize = MAX_AUTHORITY_BYTES;

/// The normalized host of `value`, a URL or a bare `host[:port][/path]`. Borrowed when the
/// host is already ASCII lower case; lower-casing allocates, and so does IDNA for a host that is
/// not ASCII.
///
/// # Errors
///
/// `Err(())` when `value` has no host this module can read (see the module docs).
pub(super) fn host_of(value: &str) -> Result<Cow<'_, str>, ()> {
    let mut rest = value;
    // A scheme is the leading run of scheme characters right before `://`; the run is read
    // up to `MAX_SCHEME_BYTES`, so the scan stops early in a long value.
    let scheme = rest
        .bytes()
        .take(MAX_SCHEME_BYTES + 1)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    if scheme <= MAX_SCHEME_BYTES && is_scheme(&rest[..scheme]) && rest[scheme..].starts_with("://")
    {
        rest = &rest[scheme + 3..];
    } else if let Some(r) = rest.strip_prefix("//") {
        rest = r;
    }
    // The authority ends at the first `/`, `\`, `?` or `#`; only its first bytes are read.
    let end = rest
        .bytes()
        .take(MAX_AUTHORITY_BYTES + 1)
        .position(|b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
        .unwrap_or(rest.len());
    if end > MAX_AUTHORITY_BYTES {
        return Err(());
    }
    let authority = &rest[..end];
    let hostport = authority.rsplit('@').next().unwrap_or(authority);
    let host = if hostport.starts_with('[') {
        let close = hostport.find(']').ok_or(())?;
        port_ok(&hostport[close + 1..])?;
        &hostport[..=close]
    } else {
        match hostport.rfind(':') {
            Some(i) => {
                port_ok(&hostport[i..])?;
                &hostport[..i]
            }
            None => hostport,
        }
    };
    normalize(host)
}

/// `Ok` for an empty port part or `:` followed by digits only.
fn port_ok(part: &str) -> Result<(), ()> {
    match part.strip_prefix(':') {
        None if part.is_empty() => Ok(()),
        Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(()),
    }
}

/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986).
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// A host name (or `[IPv6]`) in normalized form: one trailing dot dropped, lower-cased, IDNA
/// applied to one that is not ASCII. Used for the hosts a policy lists too.
///
/// # Errors
///
/// `Err(())` for an empty host, one with a character no host name holds, or one IDNA refuses.
pub(super) fn normalize(host: &str) -> Result<Cow<'_, str>, ()> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > MAX_AUTHORITY_BYTES {
        return Err(());
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(())?;
        let ok = !inner.is_empty()
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        return if !ok {
            Err(())
        } else if host.bytes().any(|b| b.is_ascii_uppercase()) {
            Ok(Cow::Owned(host.to_ascii_lowercase()))
        } else {
            Ok(Cow::Borrowed(host))
        };
    }
    if host.is_ascii() {
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        {
            return Err(());
        }
        if host.starts_with('.') || host.contains("..") {
            return Err(());
        }
        if host.bytes().any(|b| b.is_ascii_uppercase()) {
            return Ok(Cow::Owned(host.to_ascii_lowercase()));
        }
        return Ok(Cow::Borrowed(host));
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(());
    }
    let ascii = idna::domain_to_ascii(host).map_err(|_| ())?;
    match normalize(&ascii) {
        Ok(n) => Ok(Cow::Owned(n.into_owned())),
        Err(()) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Result<String, ()> {
        host_of(s).map(Cow::into_owned)
    }

    #[test]
    fn the_host_of_a_url() {
        assert_eq!(
            host("HTTPS://User:pw@GitHub.com:443/x"),
            Ok("github.com".into())
        );
        assert_eq!(
            host("https://github.com/acme/repo"),
            Ok("github.com".into())
        );
        assert_eq!(host("github.com"), Ok("github.com".into()));
        assert_eq!(host("github.com:8080/x?y#z"), Ok("github.com".into()));
        assert_eq!(host("//docs.rs/regex"), Ok("docs.rs".into()));
        assert_eq!(host("https://github.com./x"), Ok("github.com".into()));
        assert_eq!(
            host("https://github.com.evil.com/x"),
            Ok("github.com.evil.com".into())
        );
        assert_eq!(host("https://github.com@evil.com/"), Ok("evil.com".into()));
        assert_eq!(
            host("https://evil.com\\@github.com/"),
            Ok("evil.com".into())
        );
        assert_eq!(host("https://evil.com?@github.com/"), Ok("evil.com".into()));
        assert_eq!(host("https://[::1]:8080/x"), Ok("[::1]".into()));
        assert_eq!(host("https://[FE80::1]/"), Ok("[fe80::1]".into()));
        assert_eq!(
            host("github.com/r?u=https://evil.com"),
            Ok("github.com".into())
        );
    }

    #[test]
    fn idna_forms_are_one_host() {
        assert_eq!(host("https://bücher.de/"), Ok("xn--bcher-kva.de".into()));
        assert_eq!(
            host("https://XN--BCHER-KVA.de/"),
            Ok("xn--bcher-kva.de".into())
        );
        assert_eq!(host("https://BÜCHER.de/"), Ok("xn--bcher-kva.de".into()));
        assert_eq!(normalize("bücher.de").as_deref(), Ok("xn--bcher-kva.de"));
    }

    #[test]
    fn what_is_no_host() {
        for s in [
            "",
            "https://",
            "https:///x",
            "https://git hub.com/",
            "https://git\nhub.com/",
            "https://github.com%2eevil.com/",
            "https://github.com:44x/",
            "https://a..b/",
            "https://.a/",
            "https://[::1/",
            "https://[zz]/",
            "https://:443/",
            "https://user@/",
        ] {
            assert_eq!(host(s), Err(()), "{s:?}");
        }
        let long = format!("https://{}.com/", "a".repeat(2000));
        assert_eq!(host(&long), Err(()));
        let long_scheme = format!("{}://github.com/", "a".repeat(1025));
        assert_eq!(host(&long_scheme), Err(()));
        let scheme = format!("{}://github.com/", "a".repeat(1024));
        assert_eq!(host(&scheme), Ok("github.com".into()));
    }

    #[test]
    fn lower_case_ascii_hosts_are_borrowed() {
        assert!(matches!(
            host_of("https://github.com/x"),
            Ok(Cow::Borrowed("github.com"))
        ));
    }
}
