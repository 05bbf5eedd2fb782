//! The official SDKs' environment variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`), read as the OpenAI and Anthropic SDKs read
//! them: the base URL defaults to the vendor's API, the key is sent to that URL, and a
//! variable that is empty counts as unset.

use super::{ProviderConfig, ProviderKind};

/// One vendor's variables and defaults.
struct Vendor {
    kind: ProviderKind,
    base_var: &'static str,
    key_var: &'static str,
    url: &'static str,
    model: &'static str,
}

/// The vendors, in the order they are tried when no kind is asked for.
const VENDORS: [Vendor; 2] = [
    Vendor {
        kind: ProviderKind::Openai,
        base_var: "OPENAI_BASE_URL",
        key_var: "OPENAI_API_KEY",
        url: "https://api.openai.com/v1",
        model: "gpt-4.1-mini",
    },
    Vendor {
        kind: ProviderKind::Anthropic,
        base_var: "ANTHROPIC_BASE_URL",
        key_var: "ANTHROPIC_API_KEY",
        url: "https://api.anthropic.com",
        model: "claude-sonnet-4-5",
    },
];

/// The provider the SDKs' variables describe, for a configuration without providers: of
/// `kind` when one is asked for (`QUIVER_PROVIDER_KIND`), else the first vendor with either
/// variable set. `get` reads a variable and treats an empty value as unset. The key goes only
/// with its own vendor's URL (the SDK's pairing): `OPENAI_API_KEY` is never sent to an
/// Anthropic endpoint, nor the other way round.
pub(super) fn provider(
    kind: Option<ProviderKind>,
    get: &dyn Fn(&str) -> Option<String>,
) -> Option<ProviderConfig> {
    VENDORS
        .iter()
        .filter(|v| kind.is_none_or(|k| k == v.kind))
        .find_map(|v| {
            let base = get(v.base_var);
            let key = get(v.key_var);
            if base.is_none() && key.is_none() {
                return None;
            }
            let mut config = ProviderConfig::new(v.kind, base.as_deref().unwrap_or(v.url), v.model);
            config.api_key_env = key.map(|_| v.key_var.to_owned());
            Some(config)
        })
}

/// `kind`'s vendor as its SDK defaults it: the vendor's API, Quiver's default model for it and
/// the SDK's key variable.
pub(super) fn vendor(kind: ProviderKind) -> ProviderConfig {
    let vendor = VENDORS
        .iter()
        .find(|v| v.kind == kind)
        .unwrap_or(&VENDORS[0]);
    let mut config = ProviderConfig::new(vendor.kind, vendor.url, vendor.model);
    config.api_key_env = Some(vendor.key_var.to_owned());
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (variables set, kind asked for) → (kind, base URL, key variable) of the provider.
    type Case<'a> = (
        &'a [(&'a str, &'a str)],
        Option<ProviderKind>,
        Option<(ProviderKind, &'a str, Option<&'a str>)>,
    );

    #[test]
    fn the_sdks_variables_as_the_sdks_read_them() {
        use ProviderKind::{Anthropic, Openai};
        let cases: &[Case<'_>] = &[
            (&[], None, None),
            (&[("OPENAI_API_KEY", "")], None, None),
            (
                &[("OPENAI_BASE_URL", ""), ("OPENAI_API_KEY", "")],
                None,
                None,
            ),
            (
                &[("OPENAI_API_KEY", "sk")],
                None,
                Some((Openai, "https://api.openai.com/v1", Some("OPENAI_API_KEY"))),
            ),
            (
                &[("OPENAI_API_KEY", "sk"), ("OPENAI_BASE_URL", "")],
                None,
                Some((Openai, "https://api.openai.com/v1", Some("OPENAI_API_KEY"))),
            ),
            (
                &[("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")],
                None,
                Some((Openai, "http://127.0.0.1:11434/v1", None)),
            ),
            (
                &[("ANTHROPIC_API_KEY", "a")],
                None,
                Some((
                    Anthropic,
                    "https://api.anthropic.com",
                    Some("ANTHROPIC_API_KEY"),
                )),
            ),
            (
                &[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "sk")],
                None,
                Some((Openai, "https://api.openai.com/v1", Some("OPENAI_API_KEY"))),
            ),
            (
                &[
                    ("ANTHROPIC_API_KEY", "a"),
                    ("ANTHROPIC_BASE_URL", "http://proxy"),
                    ("OPENAI_API_KEY", "sk"),
                ],
                Some(Anthropic),
                Some((Anthropic, "http://proxy", Some("ANTHROPIC_API_KEY"))),
            ),
            (&[("OPENAI_API_KEY", "sk")], Some(Anthropic), None),
        ];
        for (vars, kind, want) in cases {
            let get = |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
                    .filter(|v| !v.is_empty())
            };
            let got = provider(*kind, &get);
            let got = got
                .as_ref()
                .map(|p| (p.kind, p.base_url.as_str(), p.api_key_env.as_deref()));
            assert_eq!(got, *want, "{vars:?} {kind:?}");
        }
    }

    /// The whole environment over a configuration: Quiver's variables win, a file's
    /// providers and `QUIVER_BASE_URL` leave the SDKs' variables out.
    #[test]
    fn quivers_own_variables_win() {
        use crate::config::AgentConfig;
        type Row<'a> = (
            &'a str,
            &'a [(&'a str, &'a str)],
            Option<(&'a str, &'a str, Option<&'a str>)>,
        );
        let file =
            "providers:\n  ds: {base_url: 'https://api.deepseek.com/v1', model: deepseek-chat}\n";
        let rows: &[Row<'_>] = &[
            (
                "",
                &[("OPENAI_API_KEY", "sk")],
                Some((
                    "https://api.openai.com/v1",
                    "gpt-4.1-mini",
                    Some("OPENAI_API_KEY"),
                )),
            ),
            (
                "",
                &[("OPENAI_API_KEY", "sk"), ("QUIVER_MODEL", "o4")],
                Some(("https://api.openai.com/v1", "o4", Some("OPENAI_API_KEY"))),
            ),
            (
                "",
                &[
                    ("OPENAI_API_KEY", "sk"),
                    ("QUIVER_BASE_URL", "http://local/v1"),
                    ("QUIVER_MODEL", "m"),
                ],
                Some(("http://local/v1", "m", None)),
            ),
            (
                "",
                &[
                    ("OPENAI_BASE_URL", ""),
                    ("OPENAI_API_KEY", ""),
                    ("ANTHROPIC_API_KEY", ""),
                ],
                None,
            ),
            (
                "",
                &[("ANTHROPIC_API_KEY", "a"), ("QUIVER_API_KEY_ENV", "MY_KEY")],
                Some((
                    "https://api.anthropic.com",
                    "claude-sonnet-4-5",
                    Some("MY_KEY"),
                )),
            ),
            (
                file,
                &[("OPENAI_API_KEY", "sk")],
                Some(("https://api.deepseek.com/v1", "deepseek-chat", None)),
            ),
        ];
        for (text, vars, want) in rows {
            let mut config = if text.is_empty() {
                AgentConfig::default()
            } else {
                AgentConfig::parse(text, std::path::Path::new("agent.yaml")).unwrap()
            };
            config
                .apply_env(&|name| {
                    vars.iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| (*v).to_owned())
                })
                .unwrap();
            let got = config.default_provider().ok().map(|name| {
                let p = config.provider(name).unwrap();
                (
                    p.base_url.as_str(),
                    p.model.as_str(),
                    p.api_key_env.as_deref(),
                )
            });
            assert_eq!(got, *want, "{vars:?}");
        }
    }
}
