//! The console's gate over a real socket: login, the Host allowlist, CSRF and Origin, the
//! headers, and a prompt section's text on no page.

use super::harness::{CANARY, SECRET_SETTING, TOKEN, serve};

#[tokio::test]
async fn without_a_cookie_a_browser_gets_the_login_page_and_a_script_401() {
    let s = serve().await;
    let client = s.client();
    for path in [
        "/",
        "/approvals",
        "/packages",
        "/audit",
        "/control",
        "/events",
    ] {
        let response = client
            .get(format!("{}{path}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{path}");
        assert_eq!(response.headers()["location"], "/login", "{path}");
        let json = client
            .get(format!("{}{path}", s.base))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(json.status(), 401, "{path}");
    }
    // A change without a cookie is refused, and changes nothing.
    let response = client
        .post(format!("{}/control", s.base))
        .header("origin", &s.base)
        .form(&[("mode", "emergency-stop")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(!s.admin.switches().unwrap().control.emergency_stop);
    // A wrong bearer token is refused; the right one reads JSON.
    let wrong = client
        .get(format!("{}/approvals", s.base))
        .bearer_auth("qc_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = client
        .get(format!("{}/approvals", s.base))
        .bearer_auth(TOKEN)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(
        right.json::<serde_json::Value>().await.unwrap(),
        serde_json::json!([])
    );
}

#[tokio::test]
async fn login_sets_a_strict_http_only_cookie_and_needs_the_token_and_its_own_page() {
    let s = serve().await;
    let client = s.client();
    // The link's GET only shows the form (a prefetch signs nothing in).
    let page = client
        .get(format!("{}/login?token={TOKEN}", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers().get("set-cookie").is_none());
    let wrong = client
        .post(format!("{}/login", s.base))
        .header("origin", &s.base)
        .form(&[("token", "qc_nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    let cross_site = client
        .post(format!("{}/login", s.base))
        .header("origin", "http://evil.example")
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    let ok = client
        .post(format!("{}/login", s.base))
        .header("origin", &s.base)
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 303);
    let cookie = ok.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    // The sign-in is audited with the operator.
    let records = s
        .admin
        .audit(&quiver_store::AuditQuery {
            kind: Some(quiver_store::AuditKind::Operator),
            ..Default::default()
        })
        .unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.entry.decisions[0].decision == "sign-in"
                && r.entry.principal["user_id"] == "console:owner"),
        "{records:#?}"
    );
}

#[tokio::test]
async fn a_rebinding_host_gets_421() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let port = s.addr.port();
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        "127.0.0.1".to_owned(),
        format!("localhost:{}", port.wrapping_add(1)),
    ] {
        for path in ["/", "/login", "/static/console.js", "/approvals"] {
            let response = s
                .client()
                .get(format!("{}{path}", s.base))
                .header("host", &host)
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 421, "{host} {path}");
        }
    }
    let ok = s
        .client()
        .get(format!("{}/", s.base))
        .header("host", format!("localhost:{port}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_cross_site_form_is_refused() {
    let s = serve().await;
    let (cookie, csrf) = s.sign_in().await;
    let post = |origin: Option<&str>, fields: Vec<(&'static str, String)>| {
        let mut request = s
            .client()
            .post(format!("{}/control", s.base))
            .header("cookie", &cookie)
            .form(&fields);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let stop = |csrf: &str| {
        vec![
            ("mode", "emergency-stop".to_owned()),
            ("csrf", csrf.to_owned()),
        ]
    };
    let cases = [
        (Some("http://evil.example"), stop(&csrf)),
        (Some("null"), stop(&csrf)),
        (None, stop(&csrf)),
        (Some(s.base.as_str()), stop("")),
        (Some(s.base.as_str()), stop("00ff")),
        (
            Some(s.base.as_str()),
            vec![("mode", "emergency-stop".to_owned())],
        ),
    ];
    for (origin, fields) in cases {
        let response = post(origin, fields.clone()).await.unwrap();
        assert_eq!(response.status(), 403, "{origin:?} {fields:?}");
        assert!(!s.admin.switches().unwrap().control.emergency_stop);
    }
    let response = post(Some(&s.base), stop(&csrf)).await.unwrap();
    assert_eq!(response.status(), 303);
    assert!(s.admin.switches().unwrap().control.emergency_stop);
}

#[tokio::test]
async fn every_page_carries_the_csp_and_the_usual_headers() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    for path in [
        "/",
        "/login",
        "/approvals",
        "/packages",
        "/packages/weather",
        "/prompts",
        "/audit",
        "/sessions",
        "/runs",
        "/runs/run-nope",
        "/control",
        "/nope",
    ] {
        let response = s
            .client()
            .get(format!("{}{path}", s.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        let h = response.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{path}: {csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        let body = response.text().await.unwrap();
        // No inline script: every <script> has a src.
        assert_eq!(
            body.matches("<script").count(),
            body.matches("<script src=\"/static/").count(),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_prompt_sections_text_appears_on_no_page() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let mut seen_section = false;
    for path in [
        "/",
        "/approvals",
        "/packages",
        "/packages/weather",
        "/packages/notes",
        "/prompts",
        "/audit",
        "/audit/export?format=jsonl",
        "/audit/export?format=csv",
        "/sessions",
        "/runs",
        "/control",
    ] {
        for accept in ["text/html", "application/json"] {
            let body = s
                .client()
                .get(format!("{}{path}", s.base))
                .header("cookie", &cookie)
                .header("accept", accept)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert!(
                !body.contains(CANARY),
                "{path} ({accept}) shows a prompt section's text"
            );
            assert!(
                !body.contains(SECRET_SETTING),
                "{path} ({accept}) shows a setting's value"
            );
            if path == "/packages/weather" {
                assert!(
                    body.contains("api_key (set, secret)") && body.contains("units (unset)"),
                    "{body}"
                );
            }
            seen_section |= body.contains("house-rules");
        }
    }
    // The directory does list the section (by its metadata).
    assert!(seen_section);
}

#[tokio::test]
async fn shutdown_with_open_event_streams_takes_under_a_second() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let response = s
            .client()
            .get(format!("{}/events", s.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        streams.push(response);
    }
    let started = std::time::Instant::now();
    s.shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(1), s.server)
        .await
        .expect("the console still serves a second after shutdown")
        .unwrap();
    // Each stream ended (its body finishes instead of hanging).
    for stream in streams {
        tokio::time::timeout(std::time::Duration::from_secs(1), stream.bytes())
            .await
            .expect("a stream outlived the shutdown")
            .ok();
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[tokio::test]
async fn a_new_card_sends_a_hint_on_the_event_stream() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let mut stream = s
        .client()
        .get(format!("{}/events", s.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    let session = s.session(&["notes"]);
    let call = s.call(
        &session,
        "notes__add_note",
        serde_json::json!({"text": "hint"}),
    );
    // Other hints may come first (`audit`: the consent grant's record).
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while !text.contains("event: approvals") {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk())
            .await
            .unwrap_or_else(|_| panic!("no `approvals` hint within 5 s: {text}"))
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let card = s.pending(1).await.remove(0);
    s.admin
        .answer_approval(&card.card.id, quiver_store::Decision::Deny, "test", None)
        .unwrap();
    call.join().unwrap();
}

#[tokio::test]
async fn package_pages_are_sandboxed_and_stay_in_their_folder() {
    let s = serve().await;
    let (cookie, _) = s.sign_in().await;
    let get = |path: &str| {
        s.client()
            .get(format!("{}{path}", s.base))
            .header("cookie", &cookie)
            .send()
    };
    let page = get("/packages/weather/pages/index.html").await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()["cross-origin-resource-policy"],
        "same-origin"
    );
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.starts_with("sandbox allow-scripts"), "{csp}");
    assert!(
        !csp.contains("allow-same-origin") && csp.contains("connect-src 'none'"),
        "{csp}"
    );
    assert!(page.text().await.unwrap().contains("天气页面"));
    for path in [
        "/packages/weather/pages/../secret.txt",
        "/packages/weather/pages/%2e%2e/secret.txt",
        "/packages/weather/pages/..%2fsecret.txt",
        "/packages/notes/pages/index.html",
        "/packages/nope/pages/index.html",
    ] {
        let response = get(path).await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
    // Behind the login like every page.
    let anonymous = s
        .client()
        .get(format!("{}/packages/weather/pages/index.html", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 303);
}

/// A page's own CSS and scripts come from its opaque origin without the cookie: served
/// without a sign-in, sandboxed and `nosniff`, and only from inside its package's `pages/`.
#[tokio::test]
async fn a_pages_own_assets_are_served_without_the_cookie_and_nothing_else_is() {
    let s = serve().await;
    let anonymous = |path: &str| s.client().get(format!("{}{path}", s.base)).send();
    for (path, kind) in [
        (
            "/packages/weather/pages/app.js",
            "text/javascript; charset=utf-8",
        ),
        (
            "/packages/weather/pages/style.css",
            "text/css; charset=utf-8",
        ),
    ] {
        let asset = anonymous(path).await.unwrap();
        assert_eq!(asset.status(), 200, "{path}");
        let h = asset.headers();
        assert_eq!(h["content-type"], kind);
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["cross-origin-resource-policy"], "cross-origin");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.starts_with("sandbox allow-scripts") && !csp.contains("allow-same-origin"),
            "{csp}"
        );
    }
    // Pages, other files, files outside the folder, other packages: behind the login or absent.
    for (path, want) in [
        ("/packages/weather/pages/index.html", 303),
        ("/packages/weather/pages/", 303),
        ("/packages/weather/secret.txt", 303),
        ("/packages/weather/pages/..%2foutside.css", 303),
        ("/packages/weather/pages/%2e%2e/outside.css", 303),
        ("/packages/notes/pages/app.js", 404),
        ("/packages/weather/pages/missing.js", 404),
        ("/approvals", 303),
    ] {
        assert_eq!(anonymous(path).await.unwrap().status(), want, "{path}");
    }
    // The page's policy loads scripts and styles from its own package's folder only.
    let (cookie, _) = s.sign_in().await;
    let page = s
        .client()
        .get(format!("{}/packages/weather/pages/index.html", s.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let own = format!("http://{}/packages/weather/pages/", s.addr);
    assert!(
        csp.contains(&format!("script-src 'unsafe-inline' {own};"))
            && csp.contains(&format!("style-src 'unsafe-inline' {own};")),
        "{csp}"
    );
}

#[tokio::test]
async fn the_control_plane_says_who_when_and_why() {
    let s = serve().await;
    let set = |mode: &'static str, reason: &'static str| {
        s.client()
            .post(format!("{}/control", s.base))
            .bearer_auth(TOKEN)
            .header("accept", "application/json")
            .form(&[("mode", mode), ("reason", reason)])
            .send()
    };
    assert_eq!(set("read-only", "maintenance").await.unwrap().status(), 200);
    assert!(s.admin.switches().unwrap().control.read_only);
    let view: serde_json::Value = set("normal", "done").await.unwrap().json().await.unwrap();
    assert_eq!(view["mode"], "normal");
    let changes = view["changes"].as_array().unwrap();
    assert_eq!(changes[0]["mode"], "normal");
    assert_eq!(changes[0]["why"], "done");
    assert_eq!(changes[0]["by"], "console:owner");
    assert_eq!(changes[1]["mode"], "read-only");
    assert_eq!(changes[1]["why"], "maintenance");
    assert!(changes[1]["at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(set("off", "").await.unwrap().status(), 400);
}
