//! The console's request checks, free of I/O: the `Host` allowlist (against DNS rebinding),
//! the `Origin` of a state change, and comparisons of secrets and digests in constant time.

/// Whether the `Host` header `host` names this console: one of `allowed` (`name:port`,
/// compared without case). A missing `Host` is refused.
pub fn host_allowed(host: Option<&str>, allowed: &[String]) -> bool {
    host.is_some_and(|host| allowed.iter().any(|a| a.eq_ignore_ascii_case(host.trim())))
}

/// The `name:port` values a console listening on `local` answers to: `localhost`,
/// `127.0.0.1`, `[::1]` and the address it is bound to (unless unspecified), with its port,
/// plus any `extra` the operator configured.
pub fn allowed_hosts(local: std::net::SocketAddr, extra: &[String]) -> Vec<String> {
    let port = local.port();
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    if !local.ip().is_unspecified() {
        let own = local.to_string();
        if !hosts.contains(&own) {
            hosts.push(own);
        }
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

/// Whether a state change's `Origin` is this console's own, `http://<host>` for the
/// request's (already allowed) `host`. A missing or `null` origin is refused: browsers send
/// one with every form and `fetch` POST.
pub fn origin_matches(origin: Option<&str>, host: &str) -> bool {
    origin.is_some_and(|origin| {
        origin
            .strip_prefix("http://")
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
    })
}

/// `a == b` in time that depends only on their lengths (tokens, CSRF tokens, digests).
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let allowed = allowed_hosts(
            "127.0.0.1:8932".parse().unwrap_or_else(|_| unreachable!()),
            &[],
        );
        let cases = [
            (Some("127.0.0.1:8932"), true),
            (Some("localhost:8932"), true),
            (Some("LOCALHOST:8932"), true),
            (Some("[::1]:8932"), true),
            (Some("127.0.0.1"), false),
            (Some("localhost:8931"), false),
            (Some("evil.example:8932"), false),
            (Some("127.0.0.1.nip.io:8932"), false),
            (Some(""), false),
            (None, false),
        ];
        for (host, want) in cases {
            assert_eq!(host_allowed(host, &allowed), want, "{host:?}");
        }
        let wide = allowed_hosts(
            "0.0.0.0:80".parse().unwrap_or_else(|_| unreachable!()),
            &["box.lan:80".into()],
        );
        assert_eq!(
            wide,
            ["localhost:80", "127.0.0.1:80", "[::1]:80", "box.lan:80"]
        );
        let lan = allowed_hosts(
            "10.0.0.5:80".parse().unwrap_or_else(|_| unreachable!()),
            &[],
        );
        assert!(lan.contains(&"10.0.0.5:80".to_owned()));
    }

    #[test]
    fn origins() {
        let cases = [
            (Some("http://127.0.0.1:8932"), "127.0.0.1:8932", true),
            (Some("http://LOCALHOST:8932"), "localhost:8932", true),
            (Some("https://127.0.0.1:8932"), "127.0.0.1:8932", false),
            (Some("http://evil.example"), "127.0.0.1:8932", false),
            (
                Some("http://127.0.0.1:8932.evil.example"),
                "127.0.0.1:8932",
                false,
            ),
            (Some("null"), "127.0.0.1:8932", false),
            (None, "127.0.0.1:8932", false),
        ];
        for (origin, host, want) in cases {
            assert_eq!(origin_matches(origin, host), want, "{origin:?} {host}");
        }
    }

    #[test]
    fn secrets() {
        let cases = [
            ("abc", "abc", true),
            ("abc", "abd", false),
            ("abc", "ab", false),
            ("", "", true),
        ];
        for (a, b, want) in cases {
            assert_eq!(same_secret(a, b), want, "{a} {b}");
        }
    }
}
