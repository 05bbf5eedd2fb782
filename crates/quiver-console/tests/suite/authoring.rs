//! Package authoring over a real socket: a draft made from a template, edited with lint
//! diagnostics inline, installed through the install store (unsigned, after its summary was
//! confirmed), and the paths a request may name kept inside the draft.

use std::path::Path;
use std::sync::Arc;

use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_console::Authoring;
use quiver_runtime::Runtime;
use quiver_store::{AuditKind, AuditQuery};
use serde_json::Value;

use super::harness::{Served, serve};

/// Authoring over the state folder `state`; an install reloads `runtime`'s catalog from the
/// fixture `packages` and the installed packages (as the host's reload does).
pub fn config(state: &Path, packages: &Path, runtime: &Arc<Runtime>) -> Authoring {
    let (dir, packages, runtime) = (state.to_owned(), packages.to_owned(), runtime.clone());
    Authoring {
        state_dir: state.to_owned(),
        after_install: Arc::new(move || {
            let trust = quiver_install::trust::TrustStore::load(&dir).unwrap();
            let installed = quiver_install::store::Store::new(&dir)
                .roots(&trust)
                .unwrap();
            let mut roots = vec![Root {
                path: packages.clone(),
                scope: Scope::Project,
            }];
            roots.extend(installed.roots.into_iter().map(|(path, _)| Root {
                path,
                scope: Scope::Installed,
            }));
            runtime.swap_catalog(Catalog::load(&roots, &CatalogOptions::default()));
        }),
    }
}

/// A tool.yaml that does not parse: an unclosed flow sequence on line 7.
pub const BROKEN: &str = "name: hello\nversion: 0.1.0\ndescription:\n  summary: Greet someone by name.\n  when_to_use: The user asks to be greeted.\ncategory: decision\nexpose: [true\n";

/// [`BROKEN`] mended: it lints clean.
pub fn fixed() -> String {
    BROKEN.replace(
        "expose: [true\n",
        "expose: true\ninput:\n  type: object\n  properties:\n    who: {type: string, description: Whom to greet.}\n  required: [who]\nrun:\n  command: [python3, main.py]\n",
    )
}

struct Browser<'a> {
    s: &'a Served,
    cookie: String,
    csrf: String,
}

impl Browser<'_> {
    async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let mut fields = vec![("csrf", self.csrf.as_str())];
        fields.extend_from_slice(form);
        self.s
            .client()
            .post(format!("{}{path}", self.s.base))
            .header("cookie", &self.cookie)
            .header("origin", &self.s.base)
            .form(&fields)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .s
            .client()
            .get(format!("{}{path}", self.s.base))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn json(&self, path: &str) -> Value {
        self.s
            .client()
            .get(format!("{}{path}", self.s.base))
            .header("cookie", &self.cookie)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

async fn signed(s: &Served) -> Browser<'_> {
    let (cookie, csrf) = s.sign_in().await;
    Browser { s, cookie, csrf }
}

fn operator_words(s: &Served) -> Vec<String> {
    s.admin
        .audit(&AuditQuery {
            kind: Some(AuditKind::Operator),
            ..AuditQuery::default()
        })
        .unwrap()
        .into_iter()
        .rev()
        .filter_map(|r| r.entry.decisions.first().map(|d| d.decision.clone()))
        .filter(|w| w.starts_with("draft-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_edit_lint_and_install() {
    let s = serve().await;
    let b = signed(&s).await;
    let create = [
        ("id", "greeter"),
        ("description", "问候 \"greetings\": say hello"),
        ("starter", "tool"),
        ("item", "hello"),
    ];
    // A cross-site form makes nothing.
    let r = s
        .client()
        .post(format!("{}/drafts", s.base))
        .header("cookie", &b.cookie)
        .header("origin", "http://evil.example")
        .form(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(b.json("/drafts").await, serde_json::json!([]));

    let r = b.post("/drafts", &create).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/drafts/greeter");
    assert_eq!(b.post("/drafts", &create).await.status(), 409);
    for (field, value) in [("id", "Bad Id"), ("item", "../x"), ("starter", "agent")] {
        let mut form = create.to_vec();
        form.retain(|(k, _)| *k != field);
        form.push((field, value));
        assert_eq!(b.post("/drafts", &form).await.status(), 400, "{field}");
    }
    // Drafts are not a catalog root: nothing loads it before it is installed.
    assert!(s.runtime.catalog().package("greeter").is_none());

    let (status, page) = b.get("/drafts/greeter").await;
    assert_eq!(status, 200);
    assert!(page.contains("0 errors"), "{page}");
    assert!(page.contains("tools/hello/tool.yaml") && page.contains("<textarea"));
    // A newline right after `<textarea>` is dropped by the HTML parser: the file's own first
    // line comes after one, so a file that starts with a blank line keeps it.
    assert!(
        page.contains("spellcheck=\"false\">\nid: greeter\n"),
        "{page}"
    );
    assert!(
        page.contains("问候 &quot;greetings&quot;") || page.contains("问候 &#34;greetings&#34;"),
        "{page}"
    );

    // A broken file: the diagnostic is shown beside it, with its line.
    let r = b
        .post(
            "/drafts/greeter/files",
            &[
                ("path", "tools/hello/tool.yaml"),
                ("text", &BROKEN.replace('\n', "\r\n")),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let view = b.json("/drafts/greeter").await;
    let file = view["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "tools/hello/tool.yaml")
        .unwrap()
        .clone();
    assert_eq!(
        file["text"], BROKEN,
        "CRLF from the textarea is stored as LF"
    );
    let lint = &file["lints"][0];
    assert_eq!(lint["severity"], "error", "{view:#}");
    assert!(lint["line"].as_u64().is_some(), "{view:#}");
    let (_, page) = b.get("/drafts/greeter").await;
    assert!(page.contains("class=\"lint error\""), "{page}");

    // Installing it is refused, and why is shown.
    let r = b.post("/drafts/greeter/install", &[]).await;
    assert_eq!(r.status(), 409);
    let text = r.text().await.unwrap();
    assert!(text.contains("Not installed"), "{text}");
    assert!(s.runtime.catalog().package("greeter").is_none());

    // Fixed: the summary `quiver install` prints, marked unsigned; then confirmed.
    let fixed = fixed();
    let r = b
        .post(
            "/drafts/greeter/files",
            &[("path", "tools/hello/tool.yaml"), ("text", &fixed)],
        )
        .await;
    assert_eq!(r.status(), 303);
    let view = b.json("/drafts/greeter").await;
    assert_eq!(view["errors"], 0, "{view:#}");
    let r = b.post("/drafts/greeter/install", &[]).await;
    assert_eq!(r.status(), 200);
    let summary = r.text().await.unwrap();
    assert!(
        summary.contains("UNSIGNED: nothing vouches for this package"),
        "{summary}"
    );
    assert!(summary.contains("local/greeter 0.1.0"), "{summary}");
    assert!(summary.contains("exposed tools: hello"), "{summary}");
    let digest = summary
        .split("name=\"digest\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        s.runtime.catalog().package("greeter").is_none(),
        "not before the confirm"
    );
    // A confirm for other contents (the draft changed since) installs nothing.
    let r = b
        .post(
            "/drafts/greeter/install",
            &[("confirm", "yes"), ("digest", "sha256:0")],
        )
        .await;
    assert_eq!(r.status(), 409);
    assert!(s.runtime.catalog().package("greeter").is_none());
    let r = b
        .post(
            "/drafts/greeter/install",
            &[("confirm", "yes"), ("digest", &digest)],
        )
        .await;
    assert_eq!(r.status(), 200);
    let done = r.text().await.unwrap();
    assert!(done.contains("installed greeter 0.1.0"), "{done}");
    let (_, packages) = b.get("/packages").await;
    assert!(
        packages.contains("/packages/greeter") && packages.contains("问候"),
        "{packages}"
    );
    let installed = quiver_install::store::Store::new(&s._dir.path().join("state"))
        .installed()
        .unwrap();
    assert!(installed.packages["greeter"].current.unsigned);

    // Each step is audited with the operator.
    assert_eq!(
        operator_words(&s),
        ["draft-create", "draft-save", "draft-save", "draft-install"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_stay_inside_the_draft() {
    let s = serve().await;
    let b = signed(&s).await;
    let r = b
        .post(
            "/drafts",
            &[
                ("id", "notes-zh"),
                ("description", "笔记"),
                ("starter", "skill"),
                ("item", "take-notes"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let state = s._dir.path().join("state");
    let draft = state.join("drafts/notes-zh");
    assert!(draft.join("skills/take-notes/SKILL.md").is_file());
    std::os::unix::fs::symlink(s._dir.path(), draft.join("link")).unwrap();
    let big = "x".repeat(65 * 1024);
    let attacks = [
        "../escaped.md",
        "skills/../../escaped.md",
        "/tmp/escaped.md",
        ".hidden",
        "skills/.git/config",
        "a//b",
        "link/escaped.md",
        "skills\\..\\..\\escaped.md",
        "docs",
        "",
    ];
    for path in attacks {
        let r = b
            .post(
                "/drafts/notes-zh/files",
                &[("path", path), ("text", "pwned")],
            )
            .await;
        assert_eq!(r.status(), 400, "{path:?}");
    }
    let r = b
        .post(
            "/drafts/notes-zh/files",
            &[("path", "docs/big.md"), ("text", &big)],
        )
        .await;
    assert_eq!(r.status(), 400);
    // Another draft's folder, or one outside the drafts, by its id in the URL.
    for id in ["..", "..%2Fstate", "%2E%2E", "Notes"] {
        let r = b
            .post(
                &format!("/drafts/{id}/files"),
                &[("path", "x.md"), ("text", "pwned")],
            )
            .await;
        assert!(
            [400, 404].contains(&r.status().as_u16()),
            "{id}: {}",
            r.status()
        );
    }
    let r = b
        .post("/drafts/nope/files", &[("path", "x.md"), ("text", "pwned")])
        .await;
    assert_eq!(r.status(), 404);
    // Nothing was written anywhere but inside the draft.
    let mut found = Vec::new();
    let mut stack = vec![s._dir.path().to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && std::fs::read(entry.path()).unwrap() == b"pwned" {
                found.push(entry.path());
            }
        }
    }
    assert!(found.is_empty(), "{found:?}");
    // A good path inside works, Chinese included.
    let r = b
        .post(
            "/drafts/notes-zh/files",
            &[("path", "docs/说明.md"), ("text", "# 说明\n")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        std::fs::read_to_string(draft.join("docs/说明.md")).unwrap(),
        "# 说明\n"
    );
    // The list shows the draft; the link is not a file of it.
    let view = b.json("/drafts/notes-zh").await;
    let paths: Vec<&str> = view["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"docs/说明.md") && !paths.iter().any(|p| p.starts_with("link")),
        "{paths:?}"
    );
}
