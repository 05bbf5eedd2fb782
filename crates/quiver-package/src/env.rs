//! Folders named by environment variables (`HOME`, `XDG_DATA_HOME`, `QUIVER_HOME`, …), read
//! by one rule everywhere: the XDG Base Directory rule that an empty value means unset and a
//! relative one is ignored, so no variable can make Quiver keep its state, or read its
//! config, under whatever the current directory happens to be.

use std::ffi::OsString;
use std::path::PathBuf;

/// The absolute path the environment variable `name` holds; `None` when it is unset, empty,
/// or relative.
pub fn absolute_path(name: &str) -> Option<PathBuf> {
    absolute(std::env::var_os(name))
}

/// The home folder: `$HOME` when it is an absolute path.
pub fn home() -> Option<PathBuf> {
    absolute_path("HOME")
}

/// `value` as a path when it is an absolute one.
fn absolute(value: Option<OsString>) -> Option<PathBuf> {
    let path = PathBuf::from(value?);
    path.is_absolute().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_absolute_value_names_a_folder() {
        let cases: [(Option<&str>, Option<&str>); 7] = [
            (None, None),
            (Some(""), None),
            (Some("."), None),
            (Some("quiver"), None),
            (Some("./data"), None),
            (Some("/srv/quiver"), Some("/srv/quiver")),
            (Some("/"), Some("/")),
        ];
        for (value, expected) in cases {
            assert_eq!(
                absolute(value.map(OsString::from)),
                expected.map(PathBuf::from),
                "{value:?}"
            );
        }
    }
}
