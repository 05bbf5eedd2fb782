//! The head of a request the proxy reads, parsed strictly so that what the proxy checks is what
//! the server behind it will see: anything ambiguous (a bare LF or CR, obs-fold, a second
//! `Host`, a `Host` naming another host than the target, conflicting body lengths, userinfo in
//! the URL) is refused. Pure functions; the proxy does the I/O.

/// The longest head the proxy reads.
pub const MAX_HEAD: usize = 16 * 1024;

/// Why a request was not forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The request is malformed or ambiguous (answered `400`).
    Malformed(&'static str),
    /// A `Host` header names another host than the request's target: refused as that host.
    Forged(String),
}

/// A request line and its headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The method (`GET`, `CONNECT`).
    pub method: String,
    /// The request target as written.
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    /// The header fields in order, names as written, values without surrounding whitespace.
    pub headers: Vec<(String, String)>,
}

/// How a forwarded request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`, relayed until the client closes.
    Chunked,
}

/// What a request asks the proxy to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect {
        /// The host as named.
        host: String,
        /// The port.
        port: u16,
    },
    /// `METHOD http://host[:port]/path`: one request forwarded in origin form.
    Forward {
        /// The host as named.
        host: String,
        /// The port.
        port: u16,
        /// The path and query (`/` when absent).
        path: String,
        /// How its body is delimited.
        body: Body,
    },
}

/// Where the head in `buf` ends (the index past its blank line), `None` while incomplete.
/// Lines end with CRLF only: a bare LF or CR anywhere, or a head past [`MAX_HEAD`], is refused.
pub fn head_end(buf: &[u8]) -> Result<Option<usize>, Refused> {
    let mut i = 0;
    while i < buf.len() {
        match buf[i] {
            b'\n' => return Err(Refused::Malformed("a line ends with a bare LF")),
            b'\r' => match buf.get(i + 1) {
                None => break,
                Some(b'\n') => {
                    if buf[i + 2..].starts_with(b"\r\n") {
                        return Ok(Some(i + 4));
                    }
                    i += 2;
                    continue;
                }
                Some(_) => return Err(Refused::Malformed("a bare CR in the request head")),
            },
            _ => {}
        }
        i += 1;
    }
    if buf.len() > MAX_HEAD {
        return Err(Refused::Malformed("the request head is too long"));
    }
    Ok(None)
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a complete head (as delimited by [`head_end`]).
pub fn parse_head(bytes: &[u8]) -> Result<Head, Refused> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| Refused::Malformed("the head is not UTF-8"))?;
    let text = text.strip_suffix("\r\n\r\n").ok_or(Refused::Malformed(
        "the head does not end with a blank line",
    ))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(Refused::Malformed(
            "the request line is not METHOD TARGET VERSION",
        ));
    };
    if !is_token(method) || target.is_empty() || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(Refused::Malformed(
            "the request line is not METHOD TARGET VERSION",
        ));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Refused::Malformed("only HTTP/1.0 and HTTP/1.1 are proxied"));
    }
    let mut headers = Vec::new();
    for line in lines {
        if line.starts_with([' ', '\t']) {
            return Err(Refused::Malformed("a folded header line (obs-fold)"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(Refused::Malformed("a header line without a colon"))?;
        if !is_token(name) {
            return Err(Refused::Malformed("a header name is not a token"));
        }
        let value = value.trim_matches([' ', '\t']);
        if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(Refused::Malformed("a control character in a header value"));
        }
        headers.push((name.to_owned(), value.to_owned()));
    }
    Ok(Head {
        method: method.to_owned(),
        target: target.to_owned(),
        version: version.to_owned(),
        headers,
    })
}

impl Head {
    /// The values of header `name`, in order.
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The single value of `name`: `None` when absent, refused when repeated.
    fn single<'a>(&'a self, name: &'a str, why: &'static str) -> Result<Option<&'a str>, Refused> {
        let mut values = self.values(name);
        let first = values.next();
        match values.next() {
            Some(_) => Err(Refused::Malformed(why)),
            None => Ok(first),
        }
    }

    /// How the body is delimited; conflicting or repeated lengths are refused.
    pub fn body(&self) -> Result<Body, Refused> {
        let length = self.single("content-length", "more than one Content-Length")?;
        let encoding = self.single("transfer-encoding", "more than one Transfer-Encoding")?;
        match (length, encoding) {
            (Some(_), Some(_)) => Err(Refused::Malformed(
                "both Content-Length and Transfer-Encoding",
            )),
            (Some(n), None) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n
                .parse()
                .map(Body::Length)
                .map_err(|_| Refused::Malformed("a bad Content-Length")),
            (Some(_), None) => Err(Refused::Malformed("a bad Content-Length")),
            (None, Some(te))
                if te.eq_ignore_ascii_case("chunked") && self.version == "HTTP/1.1" =>
            {
                Ok(Body::Chunked)
            }
            (None, Some(_)) => Err(Refused::Malformed("a Transfer-Encoding other than chunked")),
            (None, None) => Ok(Body::Empty),
        }
    }

    /// Checks that the `Host` header (if any; at most one) names `host` at `port`, the port
    /// defaulting to `default`.
    pub fn check_host(&self, host: &str, port: u16, default: u16) -> Result<(), Refused> {
        let Some(value) = self.single("host", "more than one Host header")? else {
            return Ok(());
        };
        let (named, named_port) =
            split_authority(value, default).ok_or(Refused::Malformed("a bad Host header"))?;
        if !named.eq_ignore_ascii_case(host) {
            return Err(Refused::Forged(named));
        }
        if named_port != port {
            return Err(Refused::Malformed("the Host header names another port"));
        }
        Ok(())
    }

    /// What the request asks for.
    pub fn request(&self) -> Result<Request, Refused> {
        if self.method == "CONNECT" {
            let (host, port) = split_authority(&self.target, 443)
                .ok_or(Refused::Malformed("a bad CONNECT target"))?;
            self.check_host(&host, port, 443)?;
            return Ok(Request::Connect { host, port });
        }
        let scheme = self
            .target
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"));
        if scheme.is_none() {
            return Err(Refused::Malformed(
                "only absolute http:// requests and CONNECT are proxied",
            ));
        }
        let after = &self.target[7..];
        let split = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(split);
        if rest.contains('#') {
            return Err(Refused::Malformed("a fragment in the request target"));
        }
        let (host, port) =
            split_authority(authority, 80).ok_or(Refused::Malformed("a bad request target"))?;
        self.check_host(&host, port, 80)?;
        let path = match rest {
            "" => "/".to_owned(),
            r if r.starts_with('?') => format!("/{r}"),
            r => r.to_owned(),
        };
        Ok(Request::Forward {
            host,
            port,
            path,
            body: self.body()?,
        })
    }

    /// The checks on a plain request sent inside a tunnel to `host:port`: origin form, a `Host`
    /// naming that host, a delimited body.
    pub fn tunneled(&self, host: &str, port: u16) -> Result<Body, Refused> {
        if !self.target.starts_with('/') || self.method == "CONNECT" {
            return Err(Refused::Malformed(
                "a tunneled request must be in origin form",
            ));
        }
        if self.values("host").next().is_none() {
            return Err(Refused::Malformed(
                "a tunneled request without a Host header",
            ));
        }
        self.check_host(host, port, port)?;
        self.body()
    }
}

/// Splits `host[:port]` (`[v6]:port` too) with `default` as the port. The host is a name
/// (letters, digits, `-`, `_`, `.`) or a bracketed IPv6 literal; userinfo, spaces and
/// anything else are refused.
pub fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    let port = |p: &str| {
        (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u16>().ok())
            .flatten()
            .filter(|p| *p != 0)
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, tail) = v6.split_once(']')?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match tail {
            "" => default,
            t => port(t.strip_prefix(':')?)?,
        };
        return Some((host.to_owned(), port));
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, p)) => (host, port(p)?),
        None => (authority, default),
    };
    let name = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    name.then(|| (host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Request, Refused> {
        let bytes = text.as_bytes();
        let end = head_end(bytes)?.ok_or(Refused::Malformed("incomplete"))?;
        parse_head(&bytes[..end])?.request()
    }

    fn bad(why: &'static str) -> Result<Request, Refused> {
        Err(Refused::Malformed(why))
    }

    fn forward(host: &str, port: u16, path: &str, body: Body) -> Result<Request, Refused> {
        Ok(Request::Forward {
            host: host.into(),
            port,
            path: path.into(),
            body,
        })
    }

    #[test]
    fn requests() {
        let connect = |host: &str, port| {
            Ok(Request::Connect {
                host: host.into(),
                port,
            })
        };
        let cases: Vec<(&str, Result<Request, Refused>)> = vec![
            (
                "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
                connect("api.example.com", 443),
            ),
            ("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", connect("::1", 8443)),
            (
                "CONNECT a.test HTTP/1.1\r\nHost: b.test\r\n\r\n",
                Err(Refused::Forged("b.test".into())),
            ),
            (
                "GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\n\r\n",
                forward("a.test", 80, "/x?y", Body::Empty),
            ),
            (
                "GET http://a.test HTTP/1.1\r\n\r\n",
                forward("a.test", 80, "/", Body::Empty),
            ),
            (
                "GET HTTP://A.test:8080?q HTTP/1.0\r\nHost: a.TEST:8080\r\n\r\n",
                forward("A.test", 8080, "/?q", Body::Empty),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\n",
                forward("a.test", 80, "/", Body::Length(5)),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                forward("a.test", 80, "/", Body::Chunked),
            ),
            // Ambiguous or malformed: refused.
            (
                "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: evil.test\r\n\r\n",
                bad("more than one Host header"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                Err(Refused::Forged("evil.test".into())),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n",
                bad("the Host header names another port"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nX: y\nHost: evil.test\r\n\r\n",
                bad("a line ends with a bare LF"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nX: y\rHost: evil.test\r\n\r\n",
                bad("a bare CR in the request head"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nX: y\r\n Host: evil.test\r\n\r\n",
                bad("a folded header line (obs-fold)"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n",
                bad("a header name is not a token"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
                bad("a control character in a header value"),
            ),
            (
                "GET http://a.test/ HTTP/1.1\r\nnocolon\r\n\r\n",
                bad("a header line without a colon"),
            ),
            (
                "GET  http://a.test/ HTTP/1.1\r\n\r\n",
                bad("the request line is not METHOD TARGET VERSION"),
            ),
            (
                "GET http://a.test/ HTTP/2\r\n\r\n",
                bad("only HTTP/1.0 and HTTP/1.1 are proxied"),
            ),
            (
                "GET http://a.test@evil.test/ HTTP/1.1\r\n\r\n",
                bad("a bad request target"),
            ),
            (
                "GET http://a.test/#frag HTTP/1.1\r\n\r\n",
                bad("a fragment in the request target"),
            ),
            (
                "GET /relative HTTP/1.1\r\nHost: a.test\r\n\r\n",
                bad("only absolute http:// requests and CONNECT are proxied"),
            ),
            (
                "GET https://a.test/ HTTP/1.1\r\n\r\n",
                bad("only absolute http:// requests and CONNECT are proxied"),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                bad("more than one Content-Length"),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                bad("both Content-Length and Transfer-Encoding"),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
                bad("a bad Content-Length"),
            ),
            (
                "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                bad("a Transfer-Encoding other than chunked"),
            ),
            (
                "CONNECT a.test:0 HTTP/1.1\r\n\r\n",
                bad("a bad CONNECT target"),
            ),
            (
                "CONNECT a.test:+443 HTTP/1.1\r\n\r\n",
                bad("a bad CONNECT target"),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), want, "{text:?}");
        }
    }

    #[test]
    fn head_boundaries() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), Ok(None));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r"), Ok(None));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Ok(Some(18)));
        assert_eq!(
            head_end(&[b'a'; MAX_HEAD + 1]),
            Err(Refused::Malformed("the request head is too long"))
        );
    }

    #[test]
    fn tunneled_requests() {
        let head = |text: &str| parse_head(text.as_bytes()).unwrap();
        let cases = [
            ("GET / HTTP/1.1\r\nHost: a.test:80\r\n\r\n", Ok(Body::Empty)),
            ("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", Ok(Body::Empty)),
            (
                "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                Err(Refused::Forged("127.0.0.1".into())),
            ),
            (
                "GET / HTTP/1.1\r\n\r\n",
                Err(Refused::Malformed(
                    "a tunneled request without a Host header",
                )),
            ),
            (
                "GET http://b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
                Err(Refused::Malformed(
                    "a tunneled request must be in origin form",
                )),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(head(text).tunneled("a.test", 80), want, "{text:?}");
        }
    }

    #[test]
    fn authorities() {
        let cases = [
            ("example.com", Some(("example.com", 443))),
            ("example.com:8443", Some(("example.com", 8443))),
            ("[::1]:80", Some(("::1", 80))),
            ("[::1]", Some(("::1", 443))),
            ("host:notaport", None),
            ("user@host", None),
            ("", None),
            ("a b", None),
            ("[not-v6]:80", None),
            ("host:99999", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                split_authority(text, 443),
                want.map(|(h, p)| (h.to_owned(), p)),
                "{text}"
            );
        }
    }
}
