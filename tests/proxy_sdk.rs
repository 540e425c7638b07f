//! `toolwarden mcp-proxy` driven by the official Python MCP client SDK (`mcp` 2.x from PyPI,
//! tests/fixtures/proxy/sdk_client.py) in front of the fake server of tests/proxy.rs.
//!
//! The Python interpreter comes from `TOOLWARDEN_PYTHON_MCP` (.ci/run installs the SDK into the
//! venv `.ci/py` and sets it), else `.ci/py/bin/python`. The test is ignored by a plain `cargo
//! test` (reported as ignored, never as passed); .ci/run runs it with `--include-ignored` once
//! the SDK is installed, and an interpreter that cannot `import mcp` fails it.

use std::path::PathBuf;
use std::process::Command;

fn python() -> PathBuf {
    let path = match std::env::var_os("TOOLWARDEN_PYTHON_MCP") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/py/bin/python"),
    };
    let imports = Command::new(&path)
        .args(["-c", "import mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        imports,
        "no Python with the `mcp` SDK at {} (run .ci/run, or set TOOLWARDEN_PYTHON_MCP)",
        path.display()
    );
    path
}

#[test]
#[ignore = "needs the Python MCP SDK (PyPI `mcp`); .ci/run installs it and runs this"]
fn the_python_sdk_client_sees_filtering_refusals_confirmation_and_unknown_tools() {
    let python = python();
    let out = Command::new(&python)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tests/fixtures/proxy/sdk_client.py",
            env!("CARGO_BIN_EXE_toolwarden"),
            "tests/fixtures/proxy/fake.warden",
            "python3",
            "tests/fixtures/proxy/fake_server.py",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "ok: the Python MCP SDK client drove the proxy\n");
}
