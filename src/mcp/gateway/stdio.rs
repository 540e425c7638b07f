//! The gateway for one client on stdio: each line from the client is parsed strictly
//! ([`parse_message`]) and refused (-32700, -32600) or handed to rmcp as that parsed value
//! serialized again; a batch and a `tools/call` without an id are refused as on HTTP.

use std::sync::Arc;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::core::{log, Gateway};
use super::handler::GatewayHandler;
use super::identity::Identity;
use crate::mcp::message::{parse_message, rpc_error, INVALID_REQUEST, MAX_MESSAGE_BYTES};

/// Pipe buffer between the strict reader and rmcp.
const PIPE: usize = 1 << 16;

async fn write_line(out: &Mutex<tokio::io::Stdout>, line: &[u8]) {
    let mut o = out.lock().await;
    let _ = o.write_all(line).await;
    let _ = o.write_all(b"\n").await;
    let _ = o.flush().await;
}

/// Serves `gateway` to the client on stdin/stdout, who is `identity`, until stdin closes.
///
/// # Errors
///
/// A message when rmcp cannot start the session.
pub async fn serve(gateway: Arc<Gateway>, identity: Identity) -> Result<(), String> {
    let (to_rmcp, rmcp_in) = tokio::io::duplex(PIPE);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE);
    let stdout = Arc::new(Mutex::new(tokio::io::stdout()));
    {
        let stdout = stdout.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(from_rmcp).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                write_line(&stdout, line.as_bytes()).await;
            }
        });
    }
    {
        let stdout = stdout.clone();
        tokio::spawn(async move {
            let mut to_rmcp = to_rmcp;
            let mut input = BufReader::new(tokio::io::stdin());
            loop {
                let mut line = Vec::new();
                let read = (&mut input)
                    .take(MAX_MESSAGE_BYTES as u64 + 1)
                    .read_until(b'\n', &mut line)
                    .await;
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if line.len() > MAX_MESSAGE_BYTES {
                    // Skip the rest of the over-long line.
                    let mut rest = Vec::new();
                    let _ = input.read_until(b'\n', &mut rest).await;
                    let e = rpc_error(
                        &Value::Null,
                        INVALID_REQUEST,
                        &format!("Invalid Request: the message is over {MAX_MESSAGE_BYTES} bytes"),
                        None,
                    );
                    write_line(&stdout, e.to_string().as_bytes()).await;
                    continue;
                }
                while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let refusal = match parse_message(&line) {
                    Err(e) => Some((e.code(), e.to_string())),
                    Ok(msg) => match super::http::refuse_framing(&msg) {
                        Some(why) => Some((INVALID_REQUEST, why.to_string())),
                        None => {
                            let mut text = msg.to_string().into_bytes();
                            text.push(b'\n');
                            if to_rmcp.write_all(&text).await.is_err() {
                                break;
                            }
                            None
                        }
                    },
                };
                if let Some((code, message)) = refusal {
                    log(&format!("refused a client message: {message}"));
                    let e = rpc_error(&Value::Null, code, &message, None);
                    write_line(&stdout, e.to_string().as_bytes()).await;
                }
            }
            let _ = to_rmcp.shutdown().await;
        });
    }
    if let Some(why) = gateway.unknown_mode(&identity) {
        return Err(format!("--mode: {why}"));
    }
    let session = gateway
        .store()
        .open(&identity.principal(), None)
        .await
        .map_err(|e| format!("the stdio session cannot be opened: {e}"))?;
    let running = GatewayHandler::stdio(gateway, identity, session.id)
        .serve((rmcp_in, rmcp_out))
        .await
        .map_err(|e| format!("the MCP session did not start: {e}"))?;
    let _ = running.waiting().await;
    Ok(())
}
