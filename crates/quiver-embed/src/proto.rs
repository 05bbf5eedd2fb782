//! A minimal protocol-buffers reader: walks the fields of one message, enough for
//! SentencePiece's `ModelProto` (no schema, no allocation).

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: bytes, a string or an embedded message.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

impl Value<'_> {
    /// A `float` field.
    pub fn as_f32(self) -> Option<f32> {
        match self {
            Value::Fixed32(bits) => Some(f32::from_bits(bits)),
            _ => None,
        }
    }

    /// A `bool`, `int32` or enum field.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Value::Varint(v) => Some(v),
            _ => None,
        }
    }
}

/// The fields of one message, in order: `(field number, value)`, or an error message when the
/// bytes are not a well-formed message.
pub struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
}

/// Iterates over the fields of the message `data`.
pub fn fields(data: &[u8]) -> Fields<'_> {
    Fields { data, pos: 0 }
}

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.data.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.data.len())
            .ok_or("field runs past the end of its message")?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn next_field(&mut self) -> Result<(u32, Value<'a>), String> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| "field number too large")?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            wire => return Err(format!("unsupported wire type {wire}")),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let item = self.next_field();
        if item.is_err() {
            // Stop after the first error.
            self.pos = self.data.len();
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_wire_type() {
        // field 1 varint 300, field 2 bytes "hi", field 3 fixed32 1.5f, field 4 fixed64 7.
        let mut msg = vec![0x08, 0xac, 0x02, 0x12, 0x02, b'h', b'i', 0x1d];
        msg.extend_from_slice(&1.5f32.to_le_bytes());
        msg.push(0x21);
        msg.extend_from_slice(&7u64.to_le_bytes());
        let got: Vec<_> = fields(&msg).collect::<Result<_, _>>().unwrap_or_default();
        assert_eq!(
            got,
            [
                (1, Value::Varint(300)),
                (2, Value::Bytes(b"hi")),
                (3, Value::Fixed32(1.5f32.to_bits())),
                (4, Value::Fixed64(7)),
            ]
        );
        assert_eq!(got[2].1.as_f32(), Some(1.5));
        assert_eq!(got[0].1.as_u64(), Some(300));
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            &[0x12, 0x05, b'a'][..],
            &[0x08, 0xff][..],
            &[0x0b][..],
            &[0x1d, 0, 0][..],
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
        ] {
            let last = fields(bad).last();
            assert!(matches!(last, Some(Err(_))), "{bad:?}: {last:?}");
        }
    }
}
