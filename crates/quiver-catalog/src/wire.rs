//! Wire names: `<package>__<item>`, within `[A-Za-z0-9_-]{1,64}` as OpenAI and Anthropic require.

use sha2::{Digest, Sha256};

/// Longest wire name the model APIs accept.
pub const MAX_WIRE_LEN: usize = 64;

/// The wire name of item `item` of package `package`; names longer than 64 characters keep
/// their first 55 and end with `_` and 8 hex digits of the qualified name's sha256.
pub fn wire_name(package: &str, item: &str) -> String {
    let full = format!("{package}__{item}");
    if full.len() <= MAX_WIRE_LEN {
        return full;
    }
    let digest = Sha256::digest(format!("{package}.{item}").as_bytes());
    let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}_{hash}", &full[..MAX_WIRE_LEN - 9])
}

/// Splits a wire name that is not shortened back into `(package, item)`.
pub fn split_wire(wire: &str) -> Option<(&str, &str)> {
    wire.split_once("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long() {
        assert_eq!(wire_name("weather", "forecast"), "weather__forecast");
        let long = wire_name(&"p".repeat(40), &"i".repeat(40));
        assert_eq!(long.len(), 64);
        assert_eq!(long, wire_name(&"p".repeat(40), &"i".repeat(40)));
        assert_ne!(
            long,
            wire_name(&"p".repeat(40), &format!("{}j", "i".repeat(39)))
        );
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_eq!(
            split_wire("weather__forecast"),
            Some(("weather", "forecast"))
        );
    }
}
