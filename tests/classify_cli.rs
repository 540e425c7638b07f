//! The `classify` command: invalid UTF-8 input and the `--eval` mode (issue 3).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_toolwarden");

fn finance() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/policies/finance.warden").to_string()
}

fn run(args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("cannot start toolwarden: {e}"),
    };
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(bytes) = stdin {
            let _ = pipe.write_all(bytes);
        }
    }
    match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => panic!("toolwarden did not finish: {e}"),
    }
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// A JSON Lines file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("toolwarden-{}-{name}", std::process::id()));
        if let Err(e) = std::fs::write(&path, bytes) {
            panic!("cannot write {}: {e}", path.display());
        }
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const ROWS: &str = r#"{"text": "delete the draft invoice", "intent": "destructive", "lang": "en"}
{"text": "exporta las facturas a una planilla", "intent": "export", "lang": "es"}

{"text": "what is the vendor's address", "intent": "read", "lang": "en", "confidence": "clear"}
{"text": "make the vendor records look nicer", "intent": "write", "lang": "en"}
{"text": "فاکتور را حذف کن", "intent": "destructive", "lang": "fa", "confidence": "ambiguous"}
{"text": "no borres nada", "intent": "destructive", "confidence": "ambiguous"}
"#;

#[test]
fn invalid_utf8_argument_is_a_clear_error() {
    let p = finance();
    let out = run(
        &[
            os("classify"),
            os("-p"),
            os(&p),
            std::ffi::OsStr::from_bytes(b"del\xffete"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid UTF-8"), "{err}");
}

#[test]
fn a_truncated_query_says_so() {
    let p = finance();
    let query = "x ".repeat(600_000);
    let out = run(
        &[os("classify"), os("-p"), os(&p), os("-")],
        Some(query.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "intent: read (fallback: no keyword hit)\n  truncated: only the start of the query was read (it is over 1048576 bytes or 10000 keyword occurrences)\n"
    );
}

#[test]
fn invalid_utf8_on_stdin_is_a_clear_error() {
    let p = finance();
    let out = run(
        &[os("classify"), os("-p"), os(&p), os("-")],
        Some(b"borra \xc3("),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "error: the query on standard input is not valid UTF-8 (invalid byte at offset 6)"
    );
    let out = run(
        &[os("classify"), os("-p"), os(&p), os("-")],
        Some("borra la factura".as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("intent: destructive\n"));
}

#[test]
fn eval_reports_accuracy_per_language_and_misses() {
    let f = TempFile::new("eval.jsonl", ROWS.as_bytes());
    let p = finance();
    let out = run(
        &[
            os("classify"),
            os("-p"),
            os(&p),
            os("--eval"),
            f.0.as_os_str(),
            os("--json"),
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => panic!("not JSON: {e}"),
    };
    // 4 clear rows: 3 right ("make ... look nicer" has no write keyword: fallback read).
    assert_eq!(v["overall"]["clear"]["rows"], 4);
    assert_eq!(v["overall"]["clear"]["correct"], 3);
    assert_eq!(v["overall"]["clear"]["accuracy"], 0.75);
    // 2 ambiguous rows: the Persian one right, the negated Spanish one not.
    assert_eq!(v["overall"]["ambiguous"]["rows"], 2);
    assert_eq!(v["overall"]["ambiguous"]["correct"], 1);
    assert_eq!(v["languages"]["en"]["clear"]["rows"], 3);
    assert_eq!(v["languages"]["en"]["clear"]["correct"], 2);
    assert_eq!(v["languages"]["es"]["all"]["correct"], 1);
    assert_eq!(v["languages"]["-"]["ambiguous"]["rows"], 1);
    assert_eq!(v["languages"]["fa"]["ambiguous"]["accuracy"], 1.0);
    // Confusion: labels in priority order; write expected, read got.
    assert_eq!(
        v["confusion_clear"]["labels"],
        serde_json::json!(["destructive", "execute", "export", "write", "read"])
    );
    assert_eq!(v["confusion_clear"]["counts"][3][4], 1);
    assert_eq!(v["confusion_clear"]["counts"][0][0], 1);
    assert_eq!(v["confusion_ambiguous"]["counts"][0][4], 1);
    let misses = v["misclassified"].as_array().map(Vec::len);
    assert_eq!(misses, Some(2));
    assert_eq!(v["misclassified"][0]["line"], 5);
    assert_eq!(v["misclassified"][0]["got"], "read");
    assert_eq!(v["misclassified"][0]["fallback"], true);
    assert_eq!(v["misclassified"][1]["line"], 7);
    assert_eq!(v["misclassified"][1]["dropped"][0]["keyword"], "borres");
    assert_eq!(v["misclassified"][1]["dropped"][0]["negated_by"], "no");
}

#[test]
fn eval_min_accuracy_gates_on_clear_rows() {
    let f = TempFile::new("gate.jsonl", ROWS.as_bytes());
    let p = finance();
    let gate = |x: &str| {
        run(
            &[
                os("classify"),
                os("-p"),
                os(&p),
                os("--eval"),
                f.0.as_os_str(),
                os("--min-accuracy"),
                os(x),
            ],
            None,
        )
    };
    // Clear accuracy is 75%.
    assert_eq!(gate("0.75").status.code(), Some(0));
    assert_eq!(gate("75%").status.code(), Some(0));
    let out = gate("0.8");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("min accuracy 80.0% on clear rows: FAIL (75.0%)"),
        "{text}"
    );
    let out = gate("80");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("for a percentage write `80%`"));
}

#[test]
fn eval_bad_lines_are_clear_errors() {
    let p = finance();
    let cases: [(&[u8], &str); 4] = [
        (b"{\"text\": \"x\"}\n", "line 1: expected a JSON object"),
        (
            b"{\"text\": \"x\", \"intent\": \"read\"}\n{\"text\": \"y\", \"intent\": \"read\", \"confidence\": \"low\"}\n",
            "line 2: \"confidence\" is `low`",
        ),
        (b"{\"text\": \"x\", \"intent\": \"browse\"}\n", "line 1: expected intent `browse` is not declared"),
        (b"{\"text\": \"\xff\", \"intent\": \"read\"}\n", "line 1: not valid UTF-8"),
    ];
    for (i, (bytes, want)) in cases.iter().enumerate() {
        let f = TempFile::new(&format!("bad{i}.jsonl"), bytes);
        let out = run(
            &[
                os("classify"),
                os("-p"),
                os(&p),
                os("--eval"),
                f.0.as_os_str(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "case {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "case {i}: {err}");
    }
}
