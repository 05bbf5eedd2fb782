//! DNS rebinding through the proxy without real DNS: the test enters a private mount namespace
//! whose `/etc/hosts` maps test names to 127.0.0.1 and 169.254.169.254, then a sandboxed tool
//! that declares those names (and `localhost`) asks for them. Its own binary, because the
//! proxy's runtime must start inside that namespace. Skips where the sandbox cannot run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{TcpListener, ToSocketAddrs};
use std::time::{Duration, Instant};

use quiver_sandbox::proxy::denial_message;
use quiver_sandbox::{Access, Job, Sandbox, SandboxConfig, SandboxError};

/// Gives this thread (and the threads it starts) a private mount namespace whose `/etc/hosts`
/// is `hosts`.
#[allow(unsafe_code)]
fn private_hosts(hosts: &str, file: &std::path::Path) -> Result<(), String> {
    std::fs::write(file, hosts).unwrap();
    let c = |s: &str| CString::new(s).unwrap();
    let (root, etc_hosts, source) = (c("/"), c("/etc/hosts"), c(file.to_str().unwrap()));
    // SAFETY: plain syscalls on valid NUL-terminated strings.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        let private = libc::MS_REC | libc::MS_PRIVATE;
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            private,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!(
                "making / private: {}",
                std::io::Error::last_os_error()
            ));
        }
        if libc::mount(
            source.as_ptr(),
            etc_hosts.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!(
                "binding /etc/hosts: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[test]
fn a_declared_name_resolving_to_a_host_address_is_refused() {
    if let Err(why) = quiver_sandbox::support() {
        eprintln!("SKIPPED: the sandbox cannot run here: {why}");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let hosts =
        "127.0.0.1 localhost\n127.0.0.1 rebind.quiver.test\n169.254.169.254 metadata.quiver.test\n";
    if let Err(why) = private_hosts(hosts, &scratch.path().join("hosts")) {
        eprintln!("SKIPPED: no private mount namespace here: {why}");
        return;
    }
    let resolved: Vec<_> = ("rebind.quiver.test", 80)
        .to_socket_addrs()
        .unwrap()
        .collect();
    assert_eq!(resolved, ["127.0.0.1:80".parse().unwrap()]);

    let secret = format!(
        "CANARY-{:x}",
        Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id()) << 64
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = secret.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.read(&mut [0u8; 4096]);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });

    let state = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::new(
        vec![env!("CARGO_BIN_EXE_quiver-sandbox-exec").into()],
        state.path().to_owned(),
    ))
    .unwrap();
    let run = |id: &str, url: &str, network: &[&str]| {
        let dir = scratch.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("main.py"),
            format!("import urllib.request, sys\nsys.stdout.write(urllib.request.urlopen({url:?}, timeout=10).read().decode())\n"),
        )
        .unwrap();
        let job = Job {
            package: id.to_owned(),
            package_dir: dir.clone(),
            command: vec!["python3".into(), "main.py".into()],
            command_dir: dir,
            access: Access {
                network: network.iter().map(|s| (*s).to_owned()).collect(),
                ..Access::default()
            },
            settings: serde_json::Map::new(),
            timeout: Duration::from_secs(30),
            limits: Default::default(),
            python_env: None,
        };
        sandbox
            .run(&job, b"{}")
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    type Case<'a> = (&'a str, String, &'a [&'a str], Result<&'a str, String>);
    let cases: [Case; 4] = [
        (
            "rebind",
            format!("http://rebind.quiver.test:{port}/"),
            &["rebind.quiver.test", "localhost"],
            Err(denial_message("rebind.quiver.test")),
        ),
        (
            "rebind-tls",
            format!("https://rebind.quiver.test:{port}/"),
            &["*.quiver.test"],
            Err(denial_message("rebind.quiver.test")),
        ),
        (
            "metadata",
            "http://metadata.quiver.test/latest/".to_owned(),
            &["*"],
            Err(denial_message("metadata.quiver.test")),
        ),
        // The control: with the literal address declared, the same name is served.
        (
            "declared",
            format!("http://rebind.quiver.test:{port}/"),
            &["rebind.quiver.test", "127.0.0.1"],
            Ok(secret.as_str()),
        ),
    ];
    for (id, url, network, want) in cases {
        let got = run(id, &url, network);
        match want {
            Ok(body) => assert_eq!(got.as_deref(), Ok(body), "{id}"),
            Err(message) => assert_eq!(got, Err(SandboxError::Denied(message)), "{id}"),
        }
    }
}
