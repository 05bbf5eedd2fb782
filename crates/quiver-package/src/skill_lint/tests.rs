//! Tables of the instruction lint's cases.

use super::*;

fn found(text: &str) -> Vec<(Kind, String, u64, u64)> {
    scan(text)
        .into_iter()
        .map(|f| (f.kind, f.target, f.line, f.column))
        .collect()
}

type Case<'a> = (&'a str, &'a [(Kind, &'a str, u64, u64)]);

/// Every case that differs, all reported at once.
fn check_table(cases: &[Case<'_>]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(text, want)| {
            let want: Vec<_> = want
                .iter()
                .map(|(k, t, l, c)| (*k, (*t).to_owned(), *l, *c))
                .collect();
            let got = found(text);
            (got != want).then(|| format!("{text:?}\n  got  {got:?}\n  want {want:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn links_and_paths() {
    use Kind::{CodePath, Link};
    let cases: &[Case<'_>] = &[
        ("See [forms](forms.md).", &[(Link, "forms.md", 1, 13)]),
        (
            "![chart](assets/c.png \"Chart\")",
            &[(Link, "assets/c.png", 1, 10)],
        ),
        (
            "[a](reference/api.md#auth) [b](b.md?x=1)",
            &[(Link, "reference/api.md", 1, 5), (Link, "b.md", 1, 32)],
        ),
        ("[a](<my file.md>)", &[(Link, "my file.md", 1, 5)]),
        ("[a](<b.md>)", &[(Link, "b.md", 1, 5)]),
        ("[a](my%20file.md)", &[(Link, "my file.md", 1, 5)]),
        ("[a](docs/a_(b).md)", &[(Link, "docs/a_(b).md", 1, 5)]),
        ("[ref]: ./reference.md", &[(Link, "./reference.md", 1, 8)]),
        ("[^1]: a footnote", &[]),
        (
            "[web](https://example.com/x.md) [m](mailto:a@b.c) [t](#top)",
            &[],
        ),
        (
            "[abs](/etc/passwd) [home](~/x.md) [ph]({name}.md) [ph](path/<file>.md)",
            &[],
        ),
        (
            "Run `scripts/fill.py input.pdf` then read `references/api.md`.",
            &[
                (CodePath, "scripts/fill.py", 1, 6),
                (CodePath, "references/api.md", 1, 44),
            ],
        ),
        ("`python scripts/x.py`", &[(CodePath, "scripts/x.py", 1, 9)]),
        (
            "`README.md` and `src/main.rs` and `scripts/*.py` and `scripts/x.py:12`",
            &[],
        ),
        ("`[a](b.md)` is how a link is written", &[]),
        (
            "```markdown\n[a](b.md)\n`scripts/x.py`\n```\n[c](c.md)",
            &[(Link, "c.md", 5, 5)],
        ),
        ("~~~~\n```\n[a](b.md)\n~~~~\n", &[]),
        ("说明见[表单](表单.md)", &[(Link, "表单.md", 1, 9)]),
    ];
    check_table(cases);
}

#[test]
fn risky_commands() {
    use Kind::{PipeToShell, RecursiveDelete};
    let cases: &[Case<'_>] = &[
        (
            "curl -fsSL https://x.sh | sh",
            &[(PipeToShell, "curl", 1, 1)],
        ),
        (
            "  wget -qO- https://x | sudo -E bash -s --",
            &[(PipeToShell, "wget", 1, 3)],
        ),
        ("curl https://x | /bin/bash", &[(PipeToShell, "curl", 1, 1)]),
        ("bash <(curl -s https://x)", &[(PipeToShell, "curl", 1, 8)]),
        (
            "sh -c \"$(curl -fsSL https://x)\"",
            &[(PipeToShell, "curl", 1, 10)],
        ),
        ("curl https://api/x | jq .name", &[]),
        ("curl https://x -o install.sh && sh install.sh", &[]),
        ("curl x || bash fallback.sh", &[]),
        ("echo \"$(curl -s https://x)\"", &[]),
        ("libcurl | sh", &[]),
        ("rm -rf build/", &[(RecursiveDelete, "rm", 1, 1)]),
        (
            "sudo rm -fr /tmp/x; rm -Rf y",
            &[
                (RecursiveDelete, "rm", 1, 6),
                (RecursiveDelete, "rm", 1, 21),
            ],
        ),
        ("rm -r -f x", &[(RecursiveDelete, "rm", 1, 1)]),
        ("rm --recursive --force x", &[(RecursiveDelete, "rm", 1, 1)]),
        ("`rm -rf node_modules`", &[(RecursiveDelete, "rm", 1, 2)]),
        ("rm -r build/ && rm -f x.log", &[]),
        ("rm x -rf", &[]),
        ("git rm -rf --cached x", &[(RecursiveDelete, "rm", 1, 5)]),
        ("confirm -rf, perform -rf, npm rm", &[]),
        (
            "```bash\nrm -rf dist\n```",
            &[(RecursiveDelete, "rm", 2, 1)],
        ),
    ];
    check_table(cases);
}

proptest::proptest! {
    /// Any text, Unicode and stray backticks, brackets and `%` included, scans without a
    /// panic, and every finding points into the text.
    #[test]
    fn any_text_scans(text in "[a-z\\[\\]()`~%|<>$ \n.:/#-]{0,60}|\\PC{0,40}") {
        let lines = text.lines().count() as u64;
        for f in scan(&text) {
            proptest::prop_assert!(f.line >= 1 && f.line <= lines.max(1));
        }
    }
}

#[test]
fn links_resolve_inside_the_package_only() {
    let root = Path::new("/p");
    let cases = [
        ("/p", "forms.md", Some("/p/forms.md")),
        ("/p/skills/s", "../../shared/x.md", Some("/p/shared/x.md")),
        ("/p/skills/s", "./a/../b.md", Some("/p/skills/s/b.md")),
        ("/p", "../x.md", None),
        ("/p/skills/s", "../../../x.md", None),
    ];
    for (dir, target, want) in cases {
        assert_eq!(
            resolve(root, Path::new(dir), target),
            want.map(PathBuf::from),
            "{dir} {target}"
        );
    }
}
