//! What a file visibly uses, found by patterns: pure, text in, [`Use`]s out.
//!
//! A scan reads code the way a reviewer skims it: imports of network libraries, URLs, calls that
//! start programs, absolute and home paths, environment variable reads, code built at run time.
//! Whole-line comments are skipped; anything cleverer (a host assembled from pieces, a module
//! imported by a computed name) is what the sandbox is for.

use std::sync::LazyLock;

use regex::Regex;

/// The language of a code file, from its extension or its `#!` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Python.
    Python,
    /// JavaScript or TypeScript (Node, Deno, Bun).
    JavaScript,
    /// A POSIX shell, bash or zsh script.
    Shell,
    /// Ruby.
    Ruby,
    /// Perl.
    Perl,
}

impl Lang {
    /// The language of `name`, whose text starts with `first_line`; `None` for files that are
    /// not code (Markdown, YAML, data).
    pub fn of(name: &str, first_line: &str) -> Option<Lang> {
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let by_ext = match ext.as_deref() {
            Some("py") => Some(Lang::Python),
            Some("js" | "mjs" | "cjs" | "ts" | "mts" | "cts") => Some(Lang::JavaScript),
            Some("sh" | "bash" | "zsh") => Some(Lang::Shell),
            Some("rb") => Some(Lang::Ruby),
            Some("pl" | "pm") => Some(Lang::Perl),
            _ => None,
        };
        by_ext.or_else(|| {
            let shebang = first_line.strip_prefix("#!")?;
            let words: Vec<&str> = shebang.split_whitespace().collect();
            // `#!/usr/bin/env -S python3 -u`: the first word that is not env or its flags.
            let program = words
                .iter()
                .map(|w| w.rsplit('/').next().unwrap_or(w))
                .find(|w| *w != "env" && !w.starts_with('-'))?;
            match program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.') {
                "python" | "pypy" => Some(Lang::Python),
                "node" | "deno" | "bun" | "tsx" | "ts-node" => Some(Lang::JavaScript),
                "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" => Some(Lang::Shell),
                "ruby" => Some(Lang::Ruby),
                "perl" => Some(Lang::Perl),
                _ => None,
            }
        })
    }

    fn comment(self) -> &'static str {
        match self {
            Lang::JavaScript => "//",
            _ => "#",
        }
    }
}

/// What a line uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    /// A host named in a URL.
    Host(String),
    /// A network library, module or command.
    NetworkLibrary(String),
    /// A way of starting another program (`subprocess`, `child_process`, an external command).
    Spawn(String),
    /// An absolute path, or a path under the home folder (`~/…`), as written.
    Path(String),
    /// An environment variable read by name.
    Env(String),
    /// Code built at run time (`eval`, `exec`, `new Function`), which hides what it uses.
    DynamicCode(String),
}

/// One use and where it is: line and column counted from 1, the column in characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// What is used.
    pub what: Use,
    /// Line, from 1.
    pub line: u64,
    /// Column, from 1.
    pub column: u64,
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file; a test compiles every one of them.
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad pattern {pattern}: {e}"))
}

macro_rules! patterns {
    ($($name:ident = $pattern:expr;)*) => {
        $(static $name: LazyLock<Regex> = LazyLock::new(|| re($pattern));)*
        #[cfg(test)]
        pub(super) fn compile_all() { $(LazyLock::force(&$name);)* }
    };
}

patterns! {
    URL = r"(?i)\b(?:https?|wss?|ftp)://([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])";
    PY_NET = r"^\s*(?:import|from)\s+(requests|httpx|urllib\.request|urllib3|http\.client|socket|aiohttp|ftplib|smtplib|telnetlib|paramiko|websockets?|pycurl|xmlrpc\.client)\b|\bfrom\s+urllib\s+import\s+(?:[\w, ]*\b)?(request)\b|\b(urlopen)\s*\(";
    JS_NET = r#"(?:require\s*\(\s*|\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"](?:node:)?(https?|net|dgram|tls|http2|axios|node-fetch|undici|ws|got|superagent)['"]|\b(fetch)\s*\(|\bnew\s+(WebSocket|XMLHttpRequest)\b"#;
    RB_NET = r#"\brequire\s*\(?\s*['"](net/https?|open-uri|socket|faraday|httparty|rest-client|net/ftp)['"]"#;
    PL_NET = r"^\s*use\s+(LWP(?:::\w+)*|HTTP::Tiny|IO::Socket(?:::\w+)*|Net::\w+|Mojo::UserAgent)\b";
    SH_NET = r"(?:^|[;&|(`]|\$\()\s*(?:sudo\s+|exec\s+|command\s+)?(curl|wget|nc|ncat|netcat|ssh|scp|sftp|rsync|telnet|ftp|socat)\b";
    PY_SPAWN = r#"\b(subprocess)\b|\bos\.(system|popen|exec[lv]p?e?|spawn[lv]p?e?|fork|forkpty|posix_spawnp?)\s*\(|\b(pty\.spawn|asyncio\.create_subprocess_(?:exec|shell))\b"#;
    PY_SPAWN_PROGRAM = r#"\bsubprocess\.(?:run|call|Popen|check_output|check_call)\s*\(\s*\[?\s*['"]([\w./+-]+)['"]"#;
    JS_SPAWN = r#"['"](?:node:)?(child_process)['"]|\b(Bun\.spawn(?:Sync)?|Deno\.Command|Deno\.run)\b"#;
    RB_SPAWN = r#"(?:^|[^\w.])(system|exec|spawn)\s*[( ]\s*['"\[]|\b(Open3|IO\.popen|PTY\.spawn)\b|(%x)[({\[]|(`)[^`\n]+`"#;
    PL_SPAWN = r#"(?:^|[^\w$>])(system|exec)\s*[( ]\s*['"\[$@]|\b(qx)\s*[({/]|(`)[^`\n]+`|\bopen\s*\(?[^;]*['"]\s*\|"#;
    PY_ENV = r#"\bos\.environ\s*\[\s*['"]([A-Za-z_]\w*)['"]|\b(?:os\.environ\.get|os\.getenv|environ\.get)\s*\(\s*['"]([A-Za-z_]\w*)['"]"#;
    JS_ENV = r#"\bprocess\.env\.([A-Za-z_]\w*)|\bprocess\.env\[\s*['"]([A-Za-z_]\w*)['"]|\bDeno\.env\.get\(\s*['"]([A-Za-z_]\w*)['"]|\bBun\.env\.([A-Za-z_]\w*)"#;
    RB_ENV = r#"\bENV\s*(?:\[|\.fetch\s*\(\s*)\s*['"]([A-Za-z_]\w*)['"]"#;
    PL_ENV = r#"\$ENV\{\s*['"]?([A-Za-z_]\w*)['"]?\s*\}"#;
    SH_ENV = r"\$\{?([A-Z_][A-Z0-9_]*)\b";
    SH_ASSIGN = r"(?:^|[;&|]\s*|\b(?:export|local|readonly|declare|typeset)\s+(?:-\w+\s+)?)([A-Za-z_]\w*)=|\bfor\s+([A-Za-z_]\w*)\s+in\b|\bread\s+(?:-\w+\s+)*([A-Za-z_]\w*)";
    PATH = r#"(?:^|[\s='"(,:\[])((?:/(?:etc|home|root|var|opt|srv|mnt|media|proc|sys|dev|run|boot|Users|Library|private|Volumes)|~)(?:/[^\s'"`;|&)\],]*)?)"#;
    PY_DYNAMIC = r"(?:^|[^\w.])(eval|exec|__import__|compile)\s*\(|\b(importlib\.import_module)\s*\(\s*[^'\x22\s]";
    JS_DYNAMIC = r"(?:^|[^\w.])(eval)\s*\(|\bnew\s+(Function)\s*\(";
    SH_DYNAMIC = r"(?:^|[;&|(]\s*)(eval)\s|(base64\s+(?:-d|--decode))\b[^\n]*\|\s*(?:ba|z|da)?sh\b";
    RB_DYNAMIC = r"(?:^|[^\w.])(eval|instance_eval|class_eval)\s*[( ]";
}

/// Shell words that start no program: keywords and builtins.
const SHELL_BUILTINS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "alias",
    "break",
    "case",
    "cd",
    "command",
    "continue",
    "declare",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "if",
    "in",
    "let",
    "local",
    "printf",
    "pwd",
    "read",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "source",
    "test",
    "then",
    "time",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
    "{",
    "}",
    "(",
    ")",
    "mapfile",
    "readarray",
    "shopt",
    "builtin",
];

/// Everything `text`, a file in `lang`, visibly uses, in text order.
pub fn scan_code(lang: Lang, text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let assigned = if lang == Lang::Shell {
        shell_assigned(text)
    } else {
        Vec::new()
    };
    // The end of the text block (here-document, docstring, block comment) being skipped.
    let mut skipping: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        let line_no = index as u64 + 1;
        let trimmed = line.trim_start();
        if let Some(end) = &skipping {
            let done = if lang == Lang::Shell {
                line.trim() == end
            } else {
                line.contains(end.as_str())
            };
            if done {
                skipping = None;
            }
            continue;
        }
        if trimmed.starts_with(lang.comment()) {
            continue;
        }
        if let Some(end) = text_block(lang, trimmed) {
            if !trimmed
                .get(end.len()..)
                .is_some_and(|rest| rest.contains(end))
            {
                skipping = Some(end.to_owned());
            }
            continue;
        }
        let mut push = |what: Use, byte: usize| {
            out.push(Found {
                what,
                line: line_no,
                column: line[..byte].chars().count() as u64 + 1,
            });
        };
        for caps in URL.captures_iter(line) {
            if let (Some(url), Some(host)) = (caps.get(0), caps.get(1))
                && url_is_a_value(lang, &line[..url.start()])
            {
                push(Use::Host(host.as_str().to_ascii_lowercase()), host.start());
            }
        }
        for (pattern, make) in uses_for(lang) {
            for caps in pattern.captures_iter(line) {
                if let Some(m) = caps.iter().skip(1).flatten().next() {
                    push(make(m.as_str()), m.start());
                }
            }
        }
        for caps in PATH.captures_iter(line) {
            if let Some(path) = caps.get(1) {
                push(Use::Path(path.as_str().to_owned()), path.start());
            }
        }
        match lang {
            Lang::Shell => {
                for caps in SH_ENV.captures_iter(line) {
                    if let Some(name) = caps.get(1)
                        && !assigned.iter().any(|a| a == name.as_str())
                    {
                        push(Use::Env(name.as_str().to_owned()), name.start());
                    }
                }
                for (program, byte) in shell_programs(line) {
                    push(Use::Spawn(program), byte);
                }
                if let Some(end) = heredoc_end(line) {
                    skipping = Some(end);
                }
            }
            Lang::Python => {
                for caps in PY_SPAWN_PROGRAM.captures_iter(line) {
                    if let Some(program) = caps.get(1) {
                        push(Use::Spawn(program.as_str().to_owned()), program.start());
                    }
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|f| (f.line, f.column));
    out
}

type Make = fn(&str) -> Use;

/// The patterns of `lang` and the use each capture is.
fn uses_for(lang: Lang) -> Vec<(&'static Regex, Make)> {
    let net: Make = |s| Use::NetworkLibrary(s.to_owned());
    let spawn: Make = |s| {
        Use::Spawn(if s == "`" {
            "backticks".into()
        } else {
            s.to_owned()
        })
    };
    let env: Make = |s| Use::Env(s.to_owned());
    let dynamic: Make = |s| Use::DynamicCode(s.to_owned());
    match lang {
        Lang::Python => vec![
            (&*PY_NET, net),
            (&*PY_SPAWN, spawn),
            (&*PY_ENV, env),
            (&*PY_DYNAMIC, dynamic),
        ],
        Lang::JavaScript => vec![
            (&*JS_NET, net),
            (&*JS_SPAWN, spawn),
            (&*JS_ENV, env),
            (&*JS_DYNAMIC, dynamic),
        ],
        Lang::Shell => vec![(&*SH_NET, net), (&*SH_DYNAMIC, dynamic)],
        Lang::Ruby => vec![
            (&*RB_NET, net),
            (&*RB_SPAWN, spawn),
            (&*RB_ENV, env),
            (&*RB_DYNAMIC, dynamic),
        ],
        Lang::Perl => vec![(&*PL_NET, net), (&*PL_SPAWN, spawn), (&*PL_ENV, env)],
    }
}

/// The closing mark of a block of text that `trimmed` (a line without its indent) opens, when
/// the line is text rather than code: a Python docstring or bare string, a JavaScript block
/// comment.
fn text_block(lang: Lang, trimmed: &str) -> Option<&'static str> {
    let trimmed = trimmed.trim_start_matches(['r', 'R', 'b', 'B', 'u', 'U']);
    match lang {
        Lang::Python if trimmed.starts_with("\"\"\"") => Some("\"\"\""),
        Lang::Python if trimmed.starts_with("'''") => Some("'''"),
        Lang::JavaScript if trimmed.starts_with("/*") => Some("*/"),

        _ => None,
    }
}

/// Names a shell script sets itself (assignments, `for` and `read` variables): not read from
/// the environment.
fn shell_assigned(text: &str) -> Vec<String> {
    let mut names: Vec<String> = SH_ASSIGN
        .captures_iter(text)
        .filter_map(|c| {
            c.iter()
                .skip(1)
                .flatten()
                .next()
                .map(|m| m.as_str().to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The word ending a here-document that `line` opens (`cat <<EOF`, `<<-'END'`).
fn heredoc_end(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("<<")?;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    if rest.starts_with('<') {
        return None; // a here-string `<<<`
    }
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The external programs a shell line starts: the first word of each simple command that is
/// not a builtin, keyword, assignment, variable or function call of the script itself.
fn shell_programs(line: &str) -> Vec<(String, usize)> {
    let blanked = blank_quotes(line);
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = blanked.as_bytes();
    let mut i = 0;
    while i <= bytes.len() {
        let at_end = i == bytes.len();
        let separator = !at_end && matches!(bytes[i], b';' | b'|' | b'&' | b'(' | b'`' | b'{');
        if at_end || separator {
            if let Some((word, byte)) = first_word(&blanked[start..i]) {
                let byte = start + byte;
                let is_function = blanked[byte + word.len()..].trim_start().starts_with("()");
                let plain = word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '+'));
                if plain
                    && !is_function
                    && !SHELL_BUILTINS.contains(&word)
                    && !word.starts_with('-')
                    && !word.chars().all(|c| c.is_ascii_digit())
                {
                    out.push((word.to_owned(), byte));
                }
            }
            start = i + 1;
        }
        i += 1;
    }
    out
}

/// Words that lead a simple command without being it: keywords (`then curl …`) and
/// assignments (`LANG=C sort`).
const LEADING_KEYWORDS: &[&str] = &[
    "!", "if", "then", "do", "else", "elif", "while", "until", "time",
];

/// The word a simple command runs and its byte offset in `segment`, past leading keywords and
/// assignments.
fn first_word(segment: &str) -> Option<(&str, usize)> {
    let mut rest = segment;
    loop {
        let trimmed = rest.trim_start();
        let word = trimmed.split_whitespace().next()?;
        let offset = segment.len() - trimmed.len();
        if LEADING_KEYWORDS.contains(&word) || (word.contains('=') && !word.starts_with('=')) {
            rest = &trimmed[word.len()..];
            continue;
        }
        return Some((word, offset));
    }
}

/// `line` with the insides of quotes replaced by spaces, so separators in strings do not split
/// commands (byte offsets kept).
fn blank_quotes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                out.push(c);
            }
            Some(_) => out.extend(std::iter::repeat_n(' ', c.len_utf8())),
            None => {
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Whether a URL after `before` is a value the code uses: it starts a string literal (or, in
/// a shell, a word), rather than sitting inside one (a User-Agent's `(+https://…)`, a message).
fn url_is_a_value(lang: Lang, before: &str) -> bool {
    match before.chars().next_back() {
        None => true,
        Some('\'' | '"' | '`') => true,
        Some(c) => lang == Lang::Shell && (c.is_whitespace() || c == '='),
    }
}
