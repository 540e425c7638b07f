//! OpenTelemetry spans of the gateway's decisions (`[telemetry] otlp_endpoint`), exported
//! over OTLP/HTTP with protobuf bodies to `{otlp_endpoint}/v1/traces`, in batches.
//!
//! One span per `tools/call`, named `execute_tool {gen_ai.tool.name}` (the GenAI
//! execute-tool span, kind server as the MCP server span), with the MCP and GenAI attributes
//! (`gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `mcp.method.name`,
//! `mcp.session.id`, `jsonrpc.request.id`, `error.type` when the call failed) and toolwarden's
//! own (`toolwarden.decision`, `toolwarden.stage`, `toolwarden.rule`, `toolwarden.policy`,
//! `toolwarden.policy.version`, `toolwarden.decision_id`, `toolwarden.forwarded`). Its parent
//! is the W3C trace context the client put in `params._meta` (`traceparent`, `tracestate`),
//! as the MCP conventions propagate it.
//!
//! Built without the `otel` feature, [`Telemetry::new`] refuses an endpoint and every
//! [`CallSpan`] is inert.

use serde_json::Value;

use crate::mcp::record::{CallRecord, PolicyRef};

/// The span exporter of a gateway; `None` inside when no endpoint is configured.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    inner: Option<otel::Exporter>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.is_on())
            .finish()
    }
}

/// The span of one `tools/call`; ends when dropped. Inert when telemetry is off.
#[derive(Default)]
pub struct CallSpan {
    #[cfg(feature = "otel")]
    span: Option<opentelemetry_sdk::trace::Span>,
}

impl std::fmt::Debug for CallSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSpan").finish_non_exhaustive()
    }
}

/// What the span of one `tools/call` starts with.
#[derive(Clone, Copy, Debug)]
pub struct CallStart<'a> {
    /// The tool as the client named it (`mcp__<server>__<tool>`).
    pub tool: &'a str,
    /// The JSON-RPC id of the request.
    pub request_id: &'a Value,
    /// The session the call is judged in.
    pub session: &'a str,
    /// The request's `params._meta`, for `traceparent` and `tracestate`.
    pub meta: &'a Value,
}

impl Telemetry {
    /// Telemetry that exports nothing.
    pub fn off() -> Telemetry {
        Telemetry {
            #[cfg(feature = "otel")]
            inner: None,
        }
    }

    /// Telemetry exporting to the OTLP/HTTP collector at `endpoint` (`http://host:4318`),
    /// or none when `None`.
    ///
    /// # Errors
    ///
    /// A message when the exporter cannot be built, or when this toolwarden was built without
    /// the `otel` feature and an endpoint is given.
    pub fn new(endpoint: Option<&str>) -> Result<Telemetry, String> {
        let Some(endpoint) = endpoint else {
            return Ok(Telemetry::off());
        };
        #[cfg(feature = "otel")]
        {
            Ok(Telemetry {
                inner: Some(otel::Exporter::new(endpoint)?),
            })
        }
        #[cfg(not(feature = "otel"))]
        {
            Err(format!(
                "[telemetry] `otlp_endpoint = \"{endpoint}\"`: this toolwarden was built without the `otel` feature"
            ))
        }
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        #[cfg(feature = "otel")]
        {
            self.inner.is_some()
        }
        #[cfg(not(feature = "otel"))]
        {
            false
        }
    }

    /// Starts the span of one `tools/call` (inert when telemetry is off).
    pub fn start(&self, start: CallStart<'_>) -> CallSpan {
        #[cfg(feature = "otel")]
        {
            CallSpan {
                span: self.inner.as_ref().map(|e| e.start(start)),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = start;
            CallSpan::default()
        }
    }

    /// Exports the spans not yet sent and stops the exporter (at shutdown).
    pub fn shutdown(&self) {
        #[cfg(feature = "otel")]
        if let Some(e) = &self.inner {
            e.shutdown();
        }
    }
}

impl CallSpan {
    /// Records the decision of the call: `record`'s decision, stage, rule and whether it was
    /// forwarded, the policy, and the `decision_id` of its audit record.
    pub fn decided(&mut self, record: &CallRecord, policy: &PolicyRef, decision_id: &str) {
        #[cfg(feature = "otel")]
        if let Some(span) = &mut self.span {
            otel::decided(span, record, policy, decision_id);
        }
        #[cfg(not(feature = "otel"))]
        let _ = (record, policy, decision_id);
    }

    /// Marks the call failed with `error_type` (the JSON-RPC error code, or `tool_error` for an
    /// `isError` result) and `message`.
    pub fn failed(&mut self, error_type: &str, message: &str) {
        #[cfg(feature = "otel")]
        if let Some(span) = &mut self.span {
            otel::failed(span, error_type, message);
        }
        #[cfg(not(feature = "otel"))]
        let _ = (error_type, message);
    }
}

#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;
    use std::time::Duration;

    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
    use opentelemetry::KeyValue;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::{
        BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, Span,
    };
    use opentelemetry_sdk::Resource;
    use serde_json::Value;

    use super::CallStart;
    use crate::mcp::record::{CallRecord, PolicyRef};

    /// How often a batch of spans is sent.
    const EVERY: Duration = Duration::from_millis(500);

    pub(super) struct Exporter {
        provider: SdkTracerProvider,
        tracer: SdkTracer,
    }

    impl Exporter {
        pub(super) fn new(endpoint: &str) -> Result<Exporter, String> {
            // The HTTP client's TLS (for an https:// endpoint) needs a crypto provider.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url)
                .with_timeout(Duration::from_secs(5))
                .build()
                .map_err(|e| format!("[telemetry] cannot set up the OTLP exporter ({e})"))?;
            let batch = BatchSpanProcessor::builder(exporter)
                .with_batch_config(
                    BatchConfigBuilder::default()
                        .with_scheduled_delay(EVERY)
                        .build(),
                )
                .build();
            let provider = SdkTracerProvider::builder()
                .with_span_processor(batch)
                .with_resource(
                    Resource::builder()
                        .with_service_name("toolwarden-gateway")
                        .build(),
                )
                .build();
            let tracer = provider.tracer("toolwarden");
            Ok(Exporter { provider, tracer })
        }

        pub(super) fn start(&self, start: CallStart<'_>) -> Span {
            let carrier: HashMap<String, String> = ["traceparent", "tracestate"]
                .iter()
                .filter_map(|k| {
                    start
                        .meta
                        .get(*k)
                        .and_then(Value::as_str)
                        .map(|v| (k.to_string(), v.to_string()))
                })
                .collect();
            let parent = TraceContextPropagator::new().extract(&carrier);
            let id = match start.request_id {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.tracer
                .span_builder(format!("execute_tool {}", start.tool))
                .with_kind(SpanKind::Server)
                .with_attributes([
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", start.tool.to_string()),
                    KeyValue::new("gen_ai.tool.call.id", id.clone()),
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("mcp.session.id", start.session.to_string()),
                    KeyValue::new("jsonrpc.request.id", id),
                ])
                .start_with_context(&self.tracer, &parent)
        }

        pub(super) fn shutdown(&self) {
            let _ = self.provider.force_flush();
            let _ = self.provider.shutdown();
        }
    }

    pub(super) fn decided(span: &mut Span, r: &CallRecord, policy: &PolicyRef, decision_id: &str) {
        span.set_attribute(KeyValue::new("toolwarden.decision", r.decision));
        if let Some(stage) = &r.stage {
            span.set_attribute(KeyValue::new("toolwarden.stage", stage.clone()));
        }
        if let Some(rule) = &r.rule {
            span.set_attribute(KeyValue::new("toolwarden.rule", rule.clone()));
        }
        span.set_attribute(KeyValue::new("toolwarden.policy", policy.name.clone()));
        if let Some(v) = policy.version {
            span.set_attribute(KeyValue::new(
                "toolwarden.policy.version",
                i64::try_from(v).unwrap_or(i64::MAX),
            ));
        }
        span.set_attribute(KeyValue::new(
            "toolwarden.decision_id",
            decision_id.to_string(),
        ));
        span.set_attribute(KeyValue::new("toolwarden.forwarded", r.forwarded));
    }

    pub(super) fn failed(span: &mut Span, error_type: &str, message: &str) {
        span.set_attribute(KeyValue::new("error.type", error_type.to_string()));
        span.set_status(Status::error(message.to_string()));
    }
}
