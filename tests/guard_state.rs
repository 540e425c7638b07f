//! `guard`'s state files (`--pending`, `--turn`): lock files are never followed through a
//! symlink, a pending call is neither replaced by another call nor confirmed in the turn it was
//! held in, and the arguments can come from a file or standard input.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A scratch folder for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "toolwarden-state-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A policy whose `send` always needs confirmation, one transactional call per turn.
const SEND: &str =
    "policy \"g\" version 1\neffects none, write\nmode agent { }\ndefault mode agent\n\
confirm fields \"confirmed\"\nlimit transactional 1 per turn\n\
tool read { effect none }\ntool send { effect write confirm always }\n";

fn toolwarden() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

/// (exit code, stdout, stderr)
fn outcome(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(unix)]
#[test]
fn a_symlink_in_a_lock_files_place_is_refused_and_not_followed() {
    let dir = Scratch::new("symlink");
    std::fs::write(dir.path("g.warden"), SEND).unwrap();
    let target = dir.path("created_by_guard");
    let pending = dir.path("pending.json");
    let lock = dir.path("pending.json.lock");
    std::os::unix::fs::symlink(&target, &lock).expect("symlink");
    let out = toolwarden()
        .arg("guard")
        .arg("-p")
        .arg(dir.path("g.warden"))
        .args(["--tool", "read", "--pending"])
        .arg(&pending)
        .output()
        .expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 2, "{stdout}");
    assert_eq!(
        stderr,
        format!(
            "error: lock file `{}` is a symbolic link; toolwarden does not follow it: delete it\n",
            lock.display()
        )
    );
    assert!(!target.exists(), "the symlink's target was created");
    assert!(!pending.exists());
}
