//! Where the proxy may connect: the allowlist match on the name a request names, and the check
//! of every address that name resolves to. Pure functions; the proxy does the I/O.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;

/// The message a refused connection is reported with, to the model and to the audit.
pub fn denial_message(host: &str) -> String {
    format!("network access to {host} denied: not in the package's permissions")
}

/// `host` as compared: lowercase, without a trailing dot or IPv6 brackets.
fn normalize(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(inner) => inner.to_owned(),
        None => host,
    }
}

/// An IP literal (`127.0.0.1`, `::1`, `[::1]`) as an address, IPv4-mapped IPv6 as IPv4.
fn literal(host: &str) -> Option<IpAddr> {
    normalize(host)
        .parse::<IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical())
}

/// Whether the name `host` matches one of `allow` (`api.example.com`, `*.example.com` for
/// subdomains, or `*`). Patterns never match an IP literal: a literal is admitted only by a
/// declaration of that same literal (or `*`, whose addresses are then checked like any other).
pub fn host_allowed(host: &str, allow: &[String]) -> bool {
    let host = normalize(host);
    if host.is_empty() {
        return false;
    }
    let ip = literal(&host);
    allow.iter().any(|pattern| {
        let pattern = normalize(pattern);
        if pattern == "*" {
            return true;
        }
        if let Some(ip) = ip {
            return literal(&pattern) == Some(ip);
        }
        pattern == host
            || pattern.strip_prefix("*.").is_some_and(|suffix| {
                host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}"))
            })
    })
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local, multicast,
/// unspecified, shared (CGNAT), reserved, documentation or benchmarking space, nor an IPv6 form
/// embedding such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || a >= 224
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| {
        is_public_v4(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        ))
    };
    if s[..6] == [0; 6] {
        // `::`, `::1` and the deprecated IPv4-compatible form.
        return ip != Ipv6Addr::UNSPECIFIED && ip != Ipv6Addr::LOCALHOST && embedded(s[6], s[7]);
    }
    match s[0] {
        0x0064 if s[1] == 0xff9b => embedded(s[6], s[7]), // NAT64
        0x2002 => embedded(s[1], s[2]),                   // 6to4
        0x2001 if s[1] == 0 || s[1] == 0x0db8 => false,   // Teredo, documentation
        0x0100 if s[1..4] == [0; 3] => false,             // discard
        first => {
            first & 0xff00 != 0xff00 // multicast
                && first & 0xfe00 != 0xfc00 // unique local
                && first & 0xffc0 != 0xfe80 // link-local
                && first & 0xffc0 != 0xfec0 // site-local
        }
    }
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The name is not in the allowlist.
    NotAllowed,
    /// The name resolved to a non-public address the allowlist does not name.
    NonPublic(IpAddr),
    /// The address is one the runtime itself listens on.
    OwnListener(SocketAddr),
    /// The name resolved to nothing.
    Unresolved,
}

/// Decides whether the proxy may connect to `host` (as the request named it) at the addresses
/// it resolved to. Every address must pass, or none is used: the runtime's own listeners
/// (`is_own`) are refused always; a non-public address only when a declaration names that
/// literal address, or when the request names `localhost`, `localhost` is declared and the
/// address is loopback.
pub fn decide(
    host: &str,
    allow: &[String],
    resolved: &[SocketAddr],
    is_own: impl Fn(SocketAddr) -> bool,
) -> Result<(), Refusal> {
    if !host_allowed(host, allow) {
        return Err(Refusal::NotAllowed);
    }
    if resolved.is_empty() {
        return Err(Refusal::Unresolved);
    }
    let named_literal = |ip: IpAddr| allow.iter().any(|p| literal(p) == Some(ip));
    let localhost =
        normalize(host) == "localhost" && allow.iter().any(|p| normalize(p) == "localhost");
    for addr in resolved {
        let ip = addr.ip().to_canonical();
        if is_own(*addr) {
            return Err(Refusal::OwnListener(*addr));
        }
        let admitted = is_public(ip) || named_literal(ip) || (localhost && ip.is_loopback());
        if !admitted {
            return Err(Refusal::NonPublic(ip));
        }
    }
    Ok(())
}

static OWN_LISTENERS: Mutex<Vec<SocketAddr>> = Mutex::new(Vec::new());

/// Registers an address the runtime itself listens on (`quiver serve --http`'s): the proxy
/// never connects a tool to it, whatever the tool declares. A listener on an unspecified
/// address (`0.0.0.0:8931`) covers that port on every address of this machine.
pub fn register_own_listener(addr: SocketAddr) {
    if let Ok(mut own) = OWN_LISTENERS.lock()
        && !own.contains(&addr)
    {
        own.push(addr);
    }
}

/// The addresses registered with [`register_own_listener`].
pub fn own_listeners() -> Vec<SocketAddr> {
    OWN_LISTENERS.lock().map(|o| o.clone()).unwrap_or_default()
}

/// Whether a connection to `dest` would reach one of `own`; `is_local` says whether an address
/// belongs to this machine (for listeners on an unspecified address).
pub fn reaches_own(
    dest: SocketAddr,
    own: &[SocketAddr],
    is_local: impl Fn(IpAddr) -> bool,
) -> bool {
    let ip = dest.ip().to_canonical();
    own.iter().any(|listener| {
        let at = listener.ip().to_canonical();
        listener.port() == dest.port()
            && (at == ip
                // Connecting to `0.0.0.0` or `::` reaches this machine's own addresses.
                || ip.is_unspecified()
                || (at.is_unspecified() && (ip.is_loopback() || is_local(ip))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn names_and_patterns() {
        let list = allow(&[
            "example.com",
            "*.wikipedia.org",
            "*.0.0.1",
            "10.1.2.3",
            "[::1]",
        ]);
        let cases = [
            ("example.com", true),
            ("EXAMPLE.com.", true),
            ("www.example.com", false),
            ("zh.wikipedia.org", true),
            ("wikipedia.org", false),
            ("evilwikipedia.org", false),
            ("127.0.0.1", false),
            ("10.1.2.3", true),
            ("::1", true),
            ("[::1]", true),
            ("::ffff:10.1.2.3", true),
            ("10.1.2.4", false),
            ("", false),
        ];
        for (host, want) in cases {
            assert_eq!(host_allowed(host, &list), want, "{host}");
        }
        assert!(host_allowed("anything", &allow(&["*"])));
        assert!(host_allowed("8.8.8.8", &allow(&["*"])));
    }

    #[test]
    fn public_addresses() {
        let cases = [
            ("8.8.8.8", true),
            ("93.184.216.34", true),
            ("127.0.0.1", false),
            ("127.1.2.3", false),
            ("0.0.0.0", false),
            ("10.0.0.1", false),
            ("172.16.0.1", false),
            ("172.32.0.1", true),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("224.0.0.1", false),
            ("255.255.255.255", false),
            ("192.0.2.1", false),
            ("2606:4700::1111", true),
            ("::", false),
            ("::1", false),
            ("::ffff:127.0.0.1", false),
            ("::127.0.0.1", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("64:ff9b::808:808", true),
            ("2002:7f00:1::", false),
            ("2002:808:808::", true),
            ("fe80::1", false),
            ("fd00::1", false),
            ("ff02::1", false),
            ("2001:db8::1", false),
        ];
        for (ip, want) in cases {
            assert_eq!(is_public(ip.parse().unwrap()), want, "{ip}");
        }
    }

    #[test]
    fn decisions_after_resolution() {
        let at =
            |s: &str| -> Vec<SocketAddr> { s.split(',').map(|a| a.parse().unwrap()).collect() };
        let none = |_| false;
        type Case<'a> = (&'a str, &'a [&'a str], &'a str, Result<(), Refusal>);
        let cases: &[Case] = &[
            (
                "api.example.com",
                &["api.example.com"],
                "93.184.216.34:443",
                Ok(()),
            ),
            (
                "evil.test",
                &["evil.test"],
                "127.0.0.1:80",
                Err(Refusal::NonPublic("127.0.0.1".parse().unwrap())),
            ),
            (
                "evil.test",
                &["evil.test", "localhost"],
                "127.0.0.1:80",
                Err(Refusal::NonPublic("127.0.0.1".parse().unwrap())),
            ),
            (
                "meta.test",
                &["*"],
                "169.254.169.254:80",
                Err(Refusal::NonPublic("169.254.169.254".parse().unwrap())),
            ),
            (
                "mixed.test",
                &["mixed.test"],
                "93.184.216.34:80,10.0.0.1:80",
                Err(Refusal::NonPublic("10.0.0.1".parse().unwrap())),
            ),
            ("localhost", &["localhost"], "127.0.0.1:80,[::1]:80", Ok(())),
            (
                "localhost",
                &["*"],
                "127.0.0.1:80",
                Err(Refusal::NonPublic("127.0.0.1".parse().unwrap())),
            ),
            (
                "127.0.0.1",
                &["*.0.0.1"],
                "127.0.0.1:80",
                Err(Refusal::NotAllowed),
            ),
            ("127.0.0.1", &["127.0.0.1"], "127.0.0.1:80", Ok(())),
            (
                "127.0.0.1",
                &["*"],
                "127.0.0.1:80",
                Err(Refusal::NonPublic("127.0.0.1".parse().unwrap())),
            ),
            (
                "inner.corp",
                &["inner.corp", "10.0.0.5"],
                "10.0.0.5:80",
                Ok(()),
            ),
            (
                "2130706433",
                &["*"],
                "127.0.0.1:80",
                Err(Refusal::NonPublic("127.0.0.1".parse().unwrap())),
            ),
            ("gone.test", &["gone.test"], "", Err(Refusal::Unresolved)),
            (
                "other.test",
                &["api.example.com"],
                "93.184.216.34:443",
                Err(Refusal::NotAllowed),
            ),
        ];
        for (host, list, resolved, want) in cases {
            let resolved = if resolved.is_empty() {
                Vec::new()
            } else {
                at(resolved)
            };
            assert_eq!(
                &decide(host, &allow(list), &resolved, none),
                want,
                "{host} {list:?} {resolved:?}"
            );
        }
    }

    #[test]
    fn own_listeners_are_refused_whatever_is_declared() {
        let own: Vec<SocketAddr> = vec![
            "127.0.0.1:8931".parse().unwrap(),
            "0.0.0.0:9000".parse().unwrap(),
        ];
        let local = |ip: IpAddr| ip == "192.0.2.7".parse::<IpAddr>().unwrap();
        let cases = [
            ("127.0.0.1:8931", true),
            ("[::ffff:127.0.0.1]:8931", true),
            ("127.0.0.1:8932", false),
            ("0.0.0.0:8931", true),
            ("127.0.0.1:9000", true),
            ("0.0.0.0:9000", true),
            ("[::1]:9000", true),
            ("192.0.2.7:9000", true),
            ("192.0.2.8:9000", false),
        ];
        for (dest, want) in cases {
            assert_eq!(
                reaches_own(dest.parse().unwrap(), &own, local),
                want,
                "{dest}"
            );
        }
        let dest: SocketAddr = "127.0.0.1:8931".parse().unwrap();
        let is_own = |a| reaches_own(a, &own, local);
        assert_eq!(
            decide("localhost", &allow(&["localhost"]), &[dest], is_own),
            Err(Refusal::OwnListener(dest))
        );
        assert_eq!(
            decide("127.0.0.1", &allow(&["127.0.0.1"]), &[dest], is_own),
            Err(Refusal::OwnListener(dest))
        );
    }
}
