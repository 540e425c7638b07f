//! Hostile files and positions: a diagnostic far to the right of its line renders (a window of
//! the line, the true `line:col` in the header) in every path, and no command blocks reading a
//! FIFO. Each CLI run is a child process with a deadline: one that would hang is killed and
//! fails the test instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolwarden::Policy;

const BIN: &str = env!("CARGO_BIN_EXE_toolwarden");

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("toolwarden-hostile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the CLI with `args`; kills it and fails when it has not ended within 20 s.
fn run(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolwarden");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`toolwarden {}` hung", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A policy whose undefined effect `wrte` starts at line 4, column 70,017.
fn far_right() -> String {
    format!(
        "policy \"p\" version 1\neffects none\nmode m {{ }}\n{}tool t {{ effect wrte }}\n",
        " ".repeat(70_000)
    )
}

/// How the diagnostic of [`far_right`] renders from a file named `name`.
fn far_right_report(name: &str) -> String {
    format!(
        "  × undefined effect `wrte`
   ╭─[{name}:4:70017]
 4 │ …                        tool t {{ effect wrte }}
   ·                                          ──┬─
   ·                                            ╰── not declared in `effects`
   ╰────
  help: declared effects are `none`; add `wrte` to `effects` to declare it
"
    )
}

#[test]
fn a_diagnostic_past_column_65535_renders_a_window_with_the_true_position() {
    let err = Policy::parse(&far_right(), "p.warden").expect_err("undefined effect");
    assert_eq!(
        err.render(),
        far_right_report("p.warden") + "\n1 error, 0 warnings\n"
    );
    let d = &err.diagnostics()[0];
    assert_eq!(
        d.one_line(err.sources()),
        "p.warden:4:70017: error[undefined-effect]: undefined effect `wrte`"
    );
}

#[test]
fn check_renders_a_diagnostic_past_column_65535() {
    let dir = TempDir::new("far-right");
    let file = dir.path("p.warden");
    std::fs::write(&file, far_right()).expect("write");
    let shown = file.to_string_lossy().into_owned();
    let (code, out, err) = run(&["check", &shown]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            1,
            format!(
                "{}\n1 error, 0 warnings\n{shown}: failed\n",
                far_right_report(&shown)
            )
            .as_str(),
            ""
        )
    );
}

#[test]
fn a_one_mib_keyword_renders_a_bounded_window() {
    let keyword = "a".repeat(1024 * 1024);
    let text = format!(
        "policy \"kw\"\nmode m {{ }}\neffects none\nintents write > read\nfallback read\n\
         keywords write {{ en \"{keyword}\" }}\n"
    );
    let err = Policy::parse(&text, "kw.warden").expect_err("too long");
    let rendered = err.render();
    let window = "a".repeat(99);
    assert_eq!(
        rendered,
        format!(
            "  × keyword `aaaaaaaaaaaaaaaaaaaaaaaa…` is 1048576 bytes once normalized; at most 128 are
  │ supported
   ╭─[kw.warden:6:21]
 6 │ keywords write {{ en \"{window}…
   ·                     {underline}
   ╰────
  help: split it into shorter keywords, or match the start of its first word with a stem

1 error, 0 warnings
",
            underline = "─".repeat(100)
        )
    );
}

/// Every diagnostic of a file with an error on each of its 20,000 lines renders on its own (a
/// binding renders each one it hands out) from the span's lines alone, which keeps rendering
/// them all linear: the report of the last one numbers lines 19,999 to 20,001 as the file does.
#[test]
fn each_diagnostic_of_a_file_with_an_error_per_line_draws_its_own_lines() {
    let lines = 20_000;
    let text = format!(
        "{}effects none\nmode m {{ }}\n",
        "policy \"x\" version 1\n".repeat(lines)
    );
    let err = Policy::parse(&text, "many.warden").expect_err("duplicates");
    let diagnostics = err.diagnostics();
    assert_eq!(diagnostics.len(), lines - 1);
    let rendered: Vec<String> = diagnostics
        .iter()
        .map(|d| d.render(err.sources()))
        .collect();
    assert_eq!(
        rendered[lines - 2],
        "  × `policy` is declared twice
       ╭─[many.warden:20000:1]
 19999 │ policy \"x\" version 1
 20000 │ policy \"x\" version 1
       · ──────────┬─────────
       ·           ╰── second declaration
 20001 │ effects none
       ╰────
  help: keep one `policy` declaration and delete the other
        note: the first declaration is at many.warden:1:1
"
    );
    let drawn = |r: &String| r.lines().filter(|l| l.contains(" │ ")).count();
    assert!(
        rendered.iter().all(|r| drawn(r) <= 3),
        "each report draws its line and one line of context on either side"
    );
}

/// A FIFO at `path` (no writer ever opens it: a reader that blocks on it blocks for good).
fn fifo(path: &Path) -> String {
    let c = std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("path");
    // SAFETY: `c` is a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
    path.to_string_lossy().into_owned()
}

#[test]
fn check_refuses_a_fifo_policy_without_blocking() {
    let dir = TempDir::new("fifo-check");
    let p = fifo(&dir.path("p.warden"));
    let (code, out, err) = run(&["check", &p]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            2,
            "",
            format!("error: cannot read `{p}`: not a regular file (a FIFO)\n").as_str()
        )
    );
}

#[test]
fn an_include_of_a_fifo_is_an_error_not_a_hang() {
    let dir = TempDir::new("fifo-include");
    fifo(&dir.path("inc.warden"));
    let main = dir.path("main.warden");
    std::fs::write(
        &main,
        "policy \"m\" version 1\neffects none\nmode m { }\ninclude \"inc.warden\"\n",
    )
    .expect("write");
    let (code, out, err) = run(&["check", &main.to_string_lossy()]);
    assert_eq!((code, err.as_str()), (1, ""));
    // The message wraps at 100 columns; its words are all there.
    let words: Vec<&str> = out.split_whitespace().filter(|w| *w != "│").collect();
    let expected = format!(
        "× cannot read included file `{}`: not a regular file (a FIFO)",
        dir.path("inc.warden").display()
    );
    assert!(words.join(" ").starts_with(&expected), "{out}");
}

#[test]
fn guard_state_files_that_are_fifos_are_refused() {
    let dir = TempDir::new("fifo-guard");
    for (flag, what) in [("--pending", "pending"), ("--turn", "turn")] {
        let f = fifo(&dir.path(&format!("{what}.json")));
        let (code, out, err) = run(&[
            "guard",
            "-p",
            "policies/retail.warden",
            "--tool",
            "devolver_pedido",
            "--args",
            "{}",
            flag,
            &f,
        ]);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (
                2,
                "",
                format!("error: cannot read {what} file `{f}`: not a regular file (a FIFO)\n")
                    .as_str()
            )
        );
    }
}

#[test]
fn a_fifo_tools_file_or_eval_file_is_refused() {
    let dir = TempDir::new("fifo-data");
    let tools = fifo(&dir.path("tools.json"));
    let (code, out, err) = run(&[
        "offer",
        "-p",
        "policies/finance.warden",
        "--tools-file",
        &tools,
    ]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            2,
            "",
            format!("error: cannot read tools file `{tools}`: not a regular file (a FIFO)\n")
                .as_str()
        )
    );
    let eval = fifo(&dir.path("eval.jsonl"));
    let (code, out, err) = run(&["classify", "-p", "policies/finance.warden", "--eval", &eval]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            2,
            "",
            format!("error: cannot read `{eval}`: not a regular file (a FIFO)\n").as_str()
        )
    );
}

#[test]
fn a_fifo_test_file_fails_as_a_file_error() {
    let dir = TempDir::new("fifo-test");
    std::fs::create_dir_all(dir.path("suite")).expect("dir");
    let given = fifo(&dir.path("f.test.yaml"));
    let found = fifo(&dir.path("suite/x.test.yaml"));
    for (arg, file) in [
        (given.clone(), given.clone()),
        (
            dir.path("suite").to_string_lossy().into_owned(),
            found.clone(),
        ),
    ] {
        let (code, out, _) = run(&["test", &arg]);
        assert_eq!(
            (code, out.as_str()),
            (
                1,
                format!(
                    "ERROR {file}: cannot read: not a regular file (a FIFO)\n0 passed, 1 failed\n"
                )
                .as_str()
            )
        );
    }
}

#[test]
fn a_fifo_yaml_policy_is_refused_by_import_and_load() {
    let dir = TempDir::new("fifo-yaml");
    let y = fifo(&dir.path("p.yaml"));
    let (code, out, err) = run(&["import", "yaml", &y]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains(&format!("cannot read `{y}`: not a regular file (a FIFO)")),
        "{err}"
    );
    let (code, out, err) = run(&["offer", "-p", &y]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains(&format!("cannot read `{y}`: not a regular file (a FIFO)")),
        "{err}"
    );
}
