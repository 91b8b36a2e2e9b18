//! The manual pages and shell completions: generated from the command
//! line's definition, and the copies the wheel and the release archives
//! install (packaging/wheel-data/data/share/) are what the binary prints.

use crate::common::run::{command, streams};
use std::path::Path;

const SHARE: &str = "packaging/wheel-data/data/share";

fn stdout_of(args: &[&str]) -> String {
    let out = streams(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn committed(path: &str) -> String {
    std::fs::read_to_string(Path::new(SHARE).join(path)).unwrap_or_else(|e| {
        panic!("{SHARE}/{path}: {e}: regenerate with `scripts/generate-share.sh`")
    })
}

#[test]
fn the_shipped_completions_and_pages_are_what_servegate_prints() {
    let stale = "is stale: regenerate it with `scripts/generate-share.sh`";
    for (shell, path) in [
        ("bash", "bash-completion/completions/servegate"),
        ("zsh", "zsh/site-functions/_servegate"),
        ("fish", "fish/vendor_completions.d/servegate.fish"),
    ] {
        let printed = stdout_of(&["completions", shell]);
        assert!(printed == committed(path), "{SHARE}/{path} {stale}");
    }
    // Every command's page, and no page of a command that is gone.
    let dir = std::env::temp_dir().join(format!("servegate-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    stdout_of(&["man", "--dir", dir.to_str().unwrap()]);
    let names = |d: &Path| {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let pages = names(&dir);
    assert_eq!(pages, names(&Path::new(SHARE).join("man/man1")), "{stale}");
    for page in &pages {
        let printed = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(
            printed == committed(&format!("man/man1/{page}")),
            "{page} {stale}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    // What the pages and the scripts say: every command, its options.
    let page = stdout_of(&["man"]);
    assert_eq!(page, committed("man/man1/servegate.1"));
    for command in ["run", "list", "init", "history", "completions", "man"] {
        assert!(
            pages.contains(&format!("servegate-{command}.1")),
            "{pages:?}"
        );
        assert!(
            page.contains(&format!("servegate\\-{command}(1)")),
            "{page}"
        );
    }
    let run = committed("man/man1/servegate-run.1");
    assert!(run.contains("\\-\\-client\\-threads"), "{run}");
    let bash = committed("bash-completion/completions/servegate");
    assert!(
        bash.contains("--client-limited") && bash.contains("history"),
        "{bash}"
    );
}

/// An unknown shell is refused with the ones there are (exit 2, clap's).
#[test]
fn an_unknown_shell_is_named_with_the_known_ones() {
    let out = command(&["completions", "tcsh"], &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bash") && err.contains("zsh") && err.contains("fish"),
        "{err}"
    );
}
