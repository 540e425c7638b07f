//! `toolwarden gateway` end to end with real parts: the official Python MCP client SDK (its
//! Streamable HTTP client and elicitation callback) against the gateway, in front of the
//! reference npm filesystem server on stdio and a notes server built with the Python SDK over
//! Streamable HTTP (tests/fixtures/gateway/notes_server.py). The checks are in
//! tests/fixtures/gateway/sdk_client.py: listing, a read, a hidden tool called by name, one
//! confirmation accepted and one declined by elicitation, another role's token, a missing
//! token, the HTTP upstream killed mid-session.
//!
//! Needs `TOOLWARDEN_MCP_FILESYSTEM` (the mcp-server-filesystem executable) and
//! `TOOLWARDEN_PYTHON_MCP` (a Python with `mcp` 2.x): ignored by a plain `cargo test`; .ci/run
//! installs both and runs it with `--include-ignored`, where a missing part fails it.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gateway_support::fixture;
use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::json;

fn env_path(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("set {name} (see .ci/run)"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs TOOLWARDEN_MCP_FILESYSTEM and TOOLWARDEN_PYTHON_MCP (.ci/run installs both)"]
fn the_python_sdk_client_drives_the_gateway_in_front_of_two_real_servers() {
    let fs = env_path("TOOLWARDEN_MCP_FILESYSTEM");
    let python = env_path("TOOLWARDEN_PYTHON_MCP");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let data = data.canonicalize().unwrap();
    std::fs::write(data.join("hello.txt"), "hello from the gateway").unwrap();
    let secret = "the e2e secret";
    std::fs::write(dir.path().join("jwt.secret"), secret).unwrap();

    let notes_port = free_port();
    let mut notes = Command::new(&python)
        .arg(fixture("notes_server.py"))
        .arg(notes_port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the notes server accepts connections.
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", notes_port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let port = free_port();
    let config = format!(
        "policy = {policy:?}\nlisten = \"127.0.0.1:{port}\"\nintent = \"write\"\n\
         [identity]\njwt_hs256_secret_file = {secret:?}\n\
         [servers.fs]\ncommand = [{fs:?}, {data:?}]\n\
         [servers.notes]\nurl = \"http://127.0.0.1:{notes_port}/mcp\"\n",
        policy = fixture("e2e.warden").display().to_string(),
        secret = dir.path().join("jwt.secret").display().to_string(),
        data = data.display().to_string(),
    );
    std::fs::write(dir.path().join("gateway.toml"), config).unwrap();
    let mut gateway = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["gateway", "--config"])
        .arg(dir.path().join("gateway.toml"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let token = |roles: &[&str]| {
        encode(
            &Header::default(),
            &json!({"sub": roles[0], "roles": roles, "exp": exp}),
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let out = Command::new(&python)
        .arg(fixture("sdk_client.py"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token(&["editor"]))
        .arg(token(&["admin"]))
        .arg(&data)
        .arg(notes.id().to_string())
        .output()
        .unwrap();
    let _ = gateway.kill();
    let _ = gateway.wait();
    let _ = notes.kill();
    let _ = notes.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        "ok: the Python MCP SDK client drove the gateway"
    );
}
