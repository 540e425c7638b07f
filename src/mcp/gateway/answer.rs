//! The framing of the answer to one `/mcp` request: rmcp's Streamable HTTP server answers every
//! request of a session with an event stream (`text/event-stream`): a priming event (the retry
//! hint, no message), then the messages, then the end of the stream. When the first message is
//! the request's own response (nothing else was sent on that answer: no elicitation, no
//! notification), the gateway answers with that message as one `application/json` body instead,
//! as the MCP Streamable HTTP transport allows for a client accepting both (rmcp refuses one
//! that does not); the message is rmcp's bytes, unchanged. One body is one write on the
//! connection where the stream was three (the head and the priming event, the message, the
//! stream's end), and a client reads it without an event-stream parser.
//!
//! Anything else keeps the stream, with what was read of it first: a server→client request
//! (an elicitation needs the stream open until the user answered), a notification, a
//! keep-alive comment (the call is slow: the bytes keep the connection from being closed as
//! idle), an event this reading does not know, an error, or a status other than 200.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use serde_json::Value;

/// What one event of rmcp's stream is, for the answer to the request `id`.
#[derive(Debug, PartialEq, Eq)]
enum Event<'a> {
    /// A priming event: an id and a retry hint, no message.
    Priming,
    /// The response (`result` or `error`) to the request, as sent.
    Answer(&'a [u8]),
    /// Anything else: another message, a comment, several events, not an event.
    Other,
}

/// Reads `frame`, one event as rmcp's server writes it (`data: …`, `id: …`, `retry: …` lines,
/// then an empty line), for the answer to the request `id`.
fn event<'a>(frame: &'a [u8], id: &Value) -> Event<'a> {
    let Some(text) = frame.strip_suffix(b"\n\n") else {
        return Event::Other;
    };
    let mut data: Option<&[u8]> = None;
    for line in text.split(|&b| b == b'\n') {
        if line.is_empty() || line.starts_with(b":") {
            // A second event in the frame, or a comment (a keep-alive).
            return Event::Other;
        }
        if let Some(d) = line.strip_prefix(b"data:") {
            if data.is_some() {
                // A message on several lines: not one rmcp writes.
                return Event::Other;
            }
            data = Some(d.strip_prefix(b" ").unwrap_or(d));
        } else if !(line.starts_with(b"id:") || line.starts_with(b"retry:")) {
            return Event::Other;
        }
    }
    match data {
        None => Event::Other,
        Some([]) => Event::Priming,
        Some(d) => {
            let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(d) else {
                return Event::Other;
            };
            let answers = msg.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
                && msg.get("id") == Some(id)
                && !msg.contains_key("method")
                && (msg.contains_key("result") ^ msg.contains_key("error"));
            if answers {
                Event::Answer(d)
            } else {
                Event::Other
            }
        }
    }
}

/// An event stream's frames read ahead, then the rest of it.
struct Resumed {
    read: VecDeque<Frame<Bytes>>,
    failed: Option<axum::Error>,
    rest: Body,
}

impl HttpBody for Resumed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Some(frame) = this.read.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        Pin::new(&mut this.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.failed.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

fn is_event_stream(response: &Response) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The answer to the JSON-RPC request `id`: `response` (rmcp's), or, when its event stream's
/// first message is the request's response, that message as an `application/json` body with
/// the same status and headers (`Mcp-Session-Id` included). At most the priming event and one
/// more event are read before deciding; the stream is kept otherwise, nothing of it lost.
pub(crate) async fn plain(response: Response, id: &Value) -> Response {
    if !is_event_stream(&response) {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut read = VecDeque::new();
    let mut failed = None;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Err(e)) => {
                failed = Some(e);
                break;
            }
            Some(Ok(frame)) => frame,
        };
        // `Some(None)`: the priming event, read on; `Some(Some(message))`: the answer.
        let step = match frame.data_ref() {
            Some(d) => match event(d, id) {
                Event::Priming if read.is_empty() => Some(None),
                Event::Answer(message) => Some(Some(d.slice_ref(message))),
                Event::Priming | Event::Other => None,
            },
            None => None,
        };
        match step {
            None => {
                read.push_back(frame);
                break;
            }
            Some(None) => read.push_back(frame),
            Some(Some(message)) => {
                // The request is answered: the stream ends here (dropping it ends it).
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                parts.headers.remove(header::CACHE_CONTROL);
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(message.len()));
                return Response::from_parts(parts, Body::from(message));
            }
        }
    }
    let resumed = Resumed {
        read,
        failed,
        rest: body,
    };
    Response::from_parts(parts, Body::new(resumed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_events_of_rmcps_stream_are_read_for_the_request_they_answer() {
        let id = json!(7);
        assert_eq!(event(b"data:\nid: 0\nretry: 3000\n\n", &id), Event::Priming);
        let answer = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        let mut frame = b"data: ".to_vec();
        frame.extend_from_slice(answer);
        frame.extend_from_slice(b"\nid: 1\n\n");
        assert_eq!(event(&frame, &id), Event::Answer(answer));
        // Another request's answer, a string id for a number, a request, a notification.
        for other in [
            r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"7","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"id":7,"result":{}}"#,
            "[1]",
            "not json",
        ] {
            let frame = format!("data: {other}\nid: 1\n\n");
            assert_eq!(event(frame.as_bytes(), &id), Event::Other, "{other}");
        }
        // A keep-alive comment, two events in one frame, an unfinished event, other fields.
        for other in [
            ":\n\n",
            "data:\nid: 0\n\ndata: {}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
            "data: {}\ndata: {}\n\n",
            "id: 0\n\n",
        ] {
            assert_eq!(event(other.as_bytes(), &id), Event::Other, "{other:?}");
        }
    }

    fn stream(frames: &[&'static str]) -> Response {
        let body = Resumed {
            read: frames
                .iter()
                .map(|f| Frame::data(Bytes::from_static(f.as_bytes())))
                .collect(),
            failed: None,
            rest: Body::empty(),
        };
        let mut r = Response::new(Body::new(body));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut()
            .insert("mcp-session-id", HeaderValue::from_static("s"));
        r
    }

    async fn text(r: Response) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_stream_whose_first_message_answers_the_request_becomes_one_json_body() {
        let answer = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let r = plain(
            stream(&[
                "data:\nid: 0\nretry: 3000\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 1\n\n",
            ]),
            &json!(7),
        )
        .await;
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(r.headers()["mcp-session-id"], "s");
        assert_eq!(text(r).await, answer);
    }

    #[tokio::test]
    async fn a_stream_with_anything_else_first_is_kept_whole() {
        let frames: [&[&'static str]; 4] = [
            &[
                "data:\nid: 0\nretry: 3000\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"elicitation/create\",\"params\":{}}\nid: 1\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 2\n\n",
            ],
            &["data:\nid: 0\nretry: 3000\n\n", ":\n\n"],
            &["data:\nid: 0\nretry: 3000\n\n", "data:\nid: 1\nretry: 3000\n\n"],
            &["data:\nid: 0\nretry: 3000\n\n"],
        ];
        for frames in frames {
            let r = plain(stream(frames), &json!(7)).await;
            assert_eq!(r.headers()[header::CONTENT_TYPE], "text/event-stream");
            assert_eq!(text(r).await, frames.concat());
        }
    }
}
