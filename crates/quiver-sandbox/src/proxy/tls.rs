//! The server name a TLS client asks for (SNI), read from its first handshake record, so a
//! tunnel to an allowed host cannot ask that server for another one. Pure; the proxy does the
//! I/O.

/// What the first bytes of a tunnel say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// More bytes are needed to see the whole first record.
    Incomplete,
    /// A ClientHello naming this server (`None`: without the extension).
    Server(Option<String>),
    /// Not a well-formed ClientHello.
    Malformed,
}

/// A cursor over bytes that fails instead of reading past the end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn int(&mut self, n: usize) -> Option<usize> {
        Some(
            self.take(n)?
                .iter()
                .fold(0, |v, b| (v << 8) | usize::from(*b)),
        )
    }

    /// A field with an `n`-byte length before it.
    fn field(&mut self, n: usize) -> Option<Cursor<'a>> {
        let len = self.int(n)?;
        self.take(len).map(Cursor)
    }
}

/// Reads the server name of the ClientHello at the start of `buf` (a TLS record).
pub fn client_hello(buf: &[u8]) -> Hello {
    if buf.len() < 5 {
        return Hello::Incomplete;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if buf[0] != 0x16 || buf[1] != 3 || len > 16 * 1024 + 256 {
        return Hello::Malformed;
    }
    let Some(record) = buf.get(5..5 + len) else {
        return Hello::Incomplete;
    };
    parse(record).map_or(Hello::Malformed, Hello::Server)
}

fn parse(record: &[u8]) -> Option<Option<String>> {
    let mut c = Cursor(record);
    if c.int(1)? != 1 {
        return None;
    }
    // The whole ClientHello must be in this first record.
    let mut hello = c.field(3)?;
    hello.take(2 + 32)?; // version, random
    hello.field(1)?; // session id
    hello.field(2)?; // cipher suites
    hello.field(1)?; // compression methods
    if hello.0.is_empty() {
        return Some(None);
    }
    let mut extensions = hello.field(2)?;
    let mut name = None;
    while !extensions.0.is_empty() {
        let kind = extensions.int(2)?;
        let mut data = extensions.field(2)?;
        if kind != 0 {
            continue;
        }
        if name.is_some() {
            return None; // two server_name extensions
        }
        let mut list = data.field(2)?;
        let mut found = None;
        while !list.0.is_empty() {
            let kind = list.int(1)?;
            let host = list.field(2)?;
            if kind == 0 {
                if found.is_some() {
                    return None; // two host names
                }
                found = Some(String::from_utf8(host.0.to_vec()).ok()?);
            }
        }
        name = Some(found?);
    }
    Some(name)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ClientHello record with `names` in one server_name extension each.
    pub(crate) fn hello(names: &[&[&str]]) -> Vec<u8> {
        let with_len = |n: usize, body: &[u8]| {
            let mut out = body.len().to_be_bytes()[8 - n..].to_vec();
            out.extend_from_slice(body);
            out
        };
        let mut extensions = Vec::new();
        extensions.extend_from_slice(&[0x00, 0x0a]); // supported_groups, first
        extensions.extend(with_len(2, &[0x00, 0x02, 0x00, 0x1d]));
        for list in names {
            let mut entries = Vec::new();
            for name in *list {
                entries.push(0);
                entries.extend(with_len(2, name.as_bytes()));
            }
            extensions.extend_from_slice(&[0, 0]);
            extensions.extend(with_len(2, &with_len(2, &entries)));
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend(with_len(1, &[]));
        body.extend(with_len(2, &[0x13, 0x01]));
        body.extend(with_len(1, &[0]));
        body.extend(with_len(2, &extensions));
        let mut handshake = vec![1];
        handshake.extend(with_len(3, &body));
        let mut record = vec![0x16, 3, 1];
        record.extend(with_len(2, &handshake));
        record
    }

    #[test]
    fn server_names() {
        let one = hello(&[&["api.example.com"]]);
        let cases: Vec<(Vec<u8>, Hello)> = vec![
            (one.clone(), Hello::Server(Some("api.example.com".into()))),
            (hello(&[]), Hello::Server(None)),
            (one[..3].to_vec(), Hello::Incomplete),
            (one[..one.len() - 1].to_vec(), Hello::Incomplete),
            (hello(&[&["a.test", "b.test"]]), Hello::Malformed),
            (hello(&[&["a.test"], &["b.test"]]), Hello::Malformed),
            (b"GET / HTTP/1.1\r\n\r\n".to_vec(), Hello::Malformed),
            (
                [&[0x16, 3, 1, 0, 4][..], &[1, 0, 0, 9]].concat(),
                Hello::Malformed,
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(client_hello(&bytes), want, "{bytes:?}");
        }
    }
}
