//! A reader for NumPy's `.npz` archives (a zip of `.npy` arrays), enough for the model's
//! weights: little-endian `float32`, `float64`, `uint8` and `int8` arrays in C order.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::EmbedError;

/// Element types this reader understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `<f4`.
    F32,
    /// `<f8`.
    F64,
    /// `|u1`.
    U8,
    /// `|i1`.
    I8,
}

impl Dtype {
    fn parse(descr: &str) -> Option<Dtype> {
        match descr {
            "<f4" => Some(Dtype::F32),
            "<f8" => Some(Dtype::F64),
            "|u1" | "<u1" | "u1" => Some(Dtype::U8),
            "|i1" | "<i1" | "i1" => Some(Dtype::I8),
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
            Dtype::U8 | Dtype::I8 => 1,
        }
    }
}

/// One array: its element type, shape and raw little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Element type.
    pub dtype: Dtype,
    /// Shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// The elements' bytes, C order.
    pub data: Vec<u8>,
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Parses one `.npy` file's bytes. The error is a message for [`EmbedError::Array`].
pub fn parse_npy(bytes: Vec<u8>) -> Result<Array, String> {
    let magic = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != magic {
        return Err("not a .npy array (bad magic)".into());
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            let b = bytes.get(8..12).ok_or("truncated header")?;
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (usize::try_from(len).map_err(|_| "header too long")?, 12)
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|_| "header is not text")?;
    let descr = dict_value(header, "descr").ok_or("header has no `descr`")?;
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let dtype = Dtype::parse(descr).ok_or_else(|| format!("unsupported dtype `{descr}`"))?;
    let fortran = dict_value(header, "fortran_order").ok_or("header has no `fortran_order`")?;
    if fortran.trim() != "False" {
        return Err("Fortran-ordered arrays are not supported".into());
    }
    let shape = parse_shape(header).ok_or("header has no readable `shape`")?;
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("shape too large")?;
    let data_start = start + header_len;
    let want = count.checked_mul(dtype.size()).ok_or("shape too large")?;
    if bytes.len() - data_start.min(bytes.len()) != want {
        return Err(format!(
            "holds {} data bytes, shape {shape:?} needs {want}",
            bytes.len().saturating_sub(data_start)
        ));
    }
    let mut data = bytes;
    data.drain(..data_start);
    Ok(Array { dtype, shape, data })
}

/// The text after `'key':` up to the next top-level comma or closing brace.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

fn parse_shape(header: &str) -> Option<Vec<usize>> {
    let value = dict_value(header, "shape")?.trim();
    let inner = value.strip_prefix('(')?.strip_suffix(')')?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

/// Every array of an `.npz` file, by name (without `.npy`).
pub fn read_npz(path: &Path) -> Result<HashMap<String, Array>, EmbedError> {
    let file = std::fs::File::open(path).map_err(EmbedError::io(path))?;
    let zip_error = |source| EmbedError::Zip {
        path: path.to_owned(),
        source,
    };
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_error)?;
    let mut arrays = HashMap::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_error)?;
        let name = entry.name().map_err(zip_error)?;
        let Some(name) = name.strip_suffix(".npy").map(str::to_owned) else {
            continue;
        };
        let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        entry
            .read_to_end(&mut bytes)
            .map_err(EmbedError::io(PathBuf::from(format!(
                "{}:{name}.npy",
                path.display()
            ))))?;
        let array = parse_npy(bytes).map_err(|message| EmbedError::Array {
            file: path.to_owned(),
            array: name.clone(),
            message,
        })?;
        arrays.insert(name, array);
    }
    Ok(arrays)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut h = header.to_owned();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&u16::try_from(h.len()).unwrap_or(0).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reads_float_and_scalar_arrays() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let a = parse_npy(npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
            &data,
        ))
        .unwrap();
        assert_eq!(
            (a.dtype, a.shape.clone(), a.len()),
            (Dtype::F32, vec![2, 3], 6)
        );
        assert_eq!(a.data, data);
        let s = parse_npy(npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            &1e-12f64.to_le_bytes(),
        ))
        .unwrap();
        assert_eq!((s.shape.len(), s.len()), (0, 1));
        let v = parse_npy(npy(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
            &[7, 8, 9],
        ))
        .unwrap();
        assert_eq!(v.shape, [3]);
    }

    #[test]
    fn rejects_bad_arrays_with_a_reason() {
        let cases = [
            (b"not numpy at all".to_vec(), "bad magic"),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                    &[0; 8],
                ),
                "needs 24",
            ),
            (
                npy(
                    "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }",
                    &[0; 16],
                ),
                "unsupported dtype",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
                    &[0; 4],
                ),
                "Fortran",
            ),
            (
                npy("{'descr': '<f4', 'fortran_order': False}", &[0; 4]),
                "shape",
            ),
            (b"\x93NUMPY\x01\x00\xff\xff".to_vec(), "truncated"),
        ];
        for (bytes, want) in cases {
            let err = parse_npy(bytes).err().unwrap_or_default();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }
}
