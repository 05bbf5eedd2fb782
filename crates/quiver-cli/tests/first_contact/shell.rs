//! Item 5: shell completions, generated from the command's own definitions.

use crate::{Quiver, both};

/// Each shell's script comes out on stdout, is valid for its shell, and completes Quiver's
/// commands and their values.
#[test]
fn completions_for_bash_zsh_and_fish() {
    let q = Quiver::new();
    let cases = [
        ("bash", "complete -F _quiver"),
        ("zsh", "#compdef quiver"),
        ("fish", "complete -c quiver"),
    ];
    for (shell, marker) in cases {
        let out = q.run(&["completions", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", both(&out));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("serve") && script.contains("completions"),
            "{shell}"
        );
    }
    let out = q.run(&["completions", "tcsh"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    // Bash reads the script and completes a command and a value from it.
    let script = q.run(&["completions", "bash"], &[]).stdout;
    let file = q.write("quiver.bash", &String::from_utf8(script).unwrap());
    let probe = format!(
        "source {}; COMP_WORDS=(quiver ser); COMP_CWORD=1; _quiver quiver ser quiver; echo \"${{COMPREPLY[@]}}\"; COMP_WORDS=(quiver completions z); COMP_CWORD=2; _quiver quiver z completions; echo \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let Ok(out) = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
    else {
        eprintln!("SKIPPED: no bash to read the script");
        return;
    };
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "serve\nzsh\n",
        "{}",
        both(&out)
    );
}
