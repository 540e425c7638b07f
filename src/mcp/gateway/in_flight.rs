//! The requests each MCP session has in flight, by JSON-RPC id. rmcp routes a response to the
//! request of the same id in the session, so two requests with one id at once would have one
//! answered with the other's result (both judged, but the client reads the wrong one, and the
//! other waits until its connection closes). The guard layer refuses a second request with an
//! id still being answered. The id is held by the answer's body and by the request that rmcp's
//! handler reads (a clone in its extensions): it is free again only when the body is done
//! (sent, or dropped with its connection) and the handler has finished with the request (a
//! call waiting for the user outlives a closed connection, and its result would otherwise
//! answer the next request that takes the id).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// The ids in flight: `(Mcp-Session-Id, the id as JSON text)`. An entry lives as long as its
/// answer's body, so the set is bounded by the connections the listener admits.
#[derive(Clone, Default)]
pub(crate) struct InFlight {
    ids: Arc<Mutex<HashSet<(String, String)>>>,
}

/// One id held in flight; dropping its last clone frees the id.
#[derive(Clone)]
pub(crate) struct Held {
    _entry: Arc<HeldId>,
}

/// The entry of [`Held`]; removed from the set when dropped.
struct HeldId {
    ids: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl InFlight {
    /// Holds `id` (its JSON text) in `session`: `None` when a request with that id is still
    /// being answered there.
    pub(crate) fn hold(&self, session: &str, id: &serde_json::Value) -> Option<Held> {
        let key = (session.to_string(), id.to_string());
        let fresh = self
            .ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
        fresh.then(|| Held {
            _entry: Arc::new(HeldId {
                ids: self.ids.clone(),
                key,
            }),
        })
    }
}

impl Drop for HeldId {
    fn drop(&mut self) {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// `response` with `held` kept until its body is done or dropped.
pub(crate) fn until_answered(response: Response, held: Held) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Holding {
            body,
            held: Some(held),
        }),
    )
}

/// A body that frees its id once it has ended (or when it is dropped unfinished).
struct Holding {
    body: Body,
    held: Option<Held>,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            this.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;
    use serde_json::json;

    #[test]
    fn an_id_is_held_once_per_session_until_it_is_released() {
        let f = InFlight::default();
        let a = f.hold("s1", &json!(7)).expect("free");
        assert!(f.hold("s1", &json!(7)).is_none());
        // A clone (the handler's) keeps the id held after the first is dropped.
        let handler = a.clone();
        drop(a);
        assert!(f.hold("s1", &json!(7)).is_none());
        let a = handler;
        // Another session, or another id (a string "7" is not the number 7), is free.
        let b = f.hold("s2", &json!(7)).expect("another session");
        let c = f.hold("s1", &json!("7")).expect("another id");
        drop(a);
        assert!(f.hold("s1", &json!(7)).is_some());
        drop((b, c));
    }
}
