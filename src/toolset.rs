//! Prepared tool sets: [`ToolSet`], a list of tools read once and offered many times.
//!
//! An agent offers the same tools on every turn. Reading them (names, or the names and MCP
//! annotations of schemas) is most of an offer's cost when the list crosses a language
//! boundary, so a binding prepares it once with [`ToolSet::from_names`] or
//! [`ToolSet::from_schemas`] and passes it to [`Policy::offer_set`] on every turn. The set
//! holds no reference to a policy: one set may be offered under any policy (a reloaded one
//! too), and the decisions are exactly those of [`Policy::offer`] and
//! [`Policy::schema_decisions`] over the same input.

use serde_json::Value;

use crate::classify::Intent;
use crate::decision::{Decision, Offer, ToolDecision};
use crate::eval::{BoundRequest, Request, RequestError};
use crate::import::mcp::{read_hints, McpEffect};
use crate::policy::Policy;
use crate::schemas::{schema_name, SchemaError};

/// Tool names (and, for schemas, the effect their MCP annotations imply), in input order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolSet {
    entries: Vec<Entry>,
    /// Whether some entry carries an annotation effect (only a schema set can).
    tightens: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: Box<str>,
    annotation_effect: Option<&'static str>,
}

impl ToolSet {
    /// A set of tool names, in the given order (duplicates kept: one decision per entry).
    pub fn from_names<I, S>(names: I) -> ToolSet
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ToolSet {
            entries: names
                .into_iter()
                .map(|n| Entry {
                    name: n.as_ref().into(),
                    annotation_effect: None,
                })
                .collect(),
            tightens: false,
        }
    }

    /// A set of tool schemas (OpenAI, Anthropic or MCP shapes, see [`Policy::offer_schemas`]):
    /// each schema's name and the effect its MCP annotations imply, read once.
    ///
    /// # Errors
    ///
    /// [`SchemaError::Schema`] naming the index of the first schema without a name or with
    /// non-boolean annotation hints (the same errors as [`Policy::schema_decisions`]).
    pub fn from_schemas(schemas: &[Value]) -> Result<ToolSet, SchemaError> {
        let mut entries = Vec::with_capacity(schemas.len());
        for (index, schema) in schemas.iter().enumerate() {
            let name =
                schema_name(schema).map_err(|message| SchemaError::Schema { index, message })?;
            let hints = match schema.as_object() {
                Some(obj) => read_hints(obj, "").map_err(|e| SchemaError::Schema {
                    index,
                    message: format!("{}: {}", e.path.trim_start_matches('.'), e.message),
                })?,
                None => None,
            };
            entries.push(Entry {
                name: name.into(),
                annotation_effect: hints.map(|(r, d)| McpEffect::from_hints(r, d).as_str()),
            });
        }
        let tightens = entries.iter().any(|e| e.annotation_effect.is_some());
        Ok(ToolSet { entries, tightens })
    }

    /// How many tools the set holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the set holds no tool.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tool names, in input order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| &*e.name)
    }
}

impl Policy {
    /// One decision per entry of `set`, in input order: for a set of names exactly
    /// [`Policy::offer`]'s answer over the same names, for a set of schemas exactly
    /// [`Policy::schema_decisions`]' decisions (MCP annotations only tighten, under `trust
    /// annotations tighten`). Use [`Offer::visible_indices`] to pick the visible tools.
    ///
    /// ```
    /// use toolwarden::{Policy, Request, ToolSet};
    /// let policy = Policy::parse(r#"
    ///     policy "p" version 1
    ///     effects none, write
    ///     mode agent { restrict none }
    ///     tool read_doc { effect none }
    ///     tool edit_doc { effect write }
    /// "#, "p.warden").unwrap();
    /// let set = ToolSet::from_names(["read_doc", "edit_doc", "rm_rf"]);
    /// let offer = policy.offer_set(&Request::new("agent"), &policy.fallback_intent(), &set).unwrap();
    /// assert_eq!(offer.visible().collect::<Vec<_>>(), ["read_doc"]);
    /// ```
    ///
    /// # Errors
    ///
    /// [`RequestError`] when the request names a mode, tier or intent the policy does not
    /// declare.
    // Inlined into the caller (a binding's call), so the decision loop is compiled there as
    // `offer`'s is, rather than through calls across the core's codegen units.
    #[inline]
    pub fn offer_set<'s>(
        &self,
        request: &Request,
        intent: &Intent,
        set: &'s ToolSet,
    ) -> Result<Offer<'s>, RequestError> {
        let bound = self.bind(request, intent)?;
        if !set.tightens || !self.tables().annotations_tighten {
            // No annotation can tighten a decision: exactly `offer` over the names (the same
            // loop, so the decision is inlined into it).
            return Ok(bound.offer(set.names()));
        }
        let mut entries = Vec::with_capacity(set.entries.len());
        for e in &set.entries {
            let (decision, _) = self.decide_tightened(&bound, &e.name, e.annotation_effect);
            entries.push((&*e.name, decision));
        }
        Ok(Offer { entries })
    }

    /// Stages 1–7 for `name`, made stricter by `annotation_effect` (the effect a schema's MCP
    /// annotations imply) under `trust annotations tighten`; the flag says whether it was.
    pub(crate) fn decide_tightened(
        &self,
        bound: &BoundRequest<'_>,
        name: &str,
        annotation_effect: Option<&'static str>,
    ) -> (ToolDecision, bool) {
        let t = self.tables();
        let decision = self.decide(bound, name);
        if !t.annotations_tighten || decision.decision == Decision::Deny {
            return (decision, false);
        }
        let implied = annotation_effect
            .and_then(|e| t.effects.iter().position(|x| &**x == e))
            .and_then(|i| u8::try_from(i).ok());
        if let Some(effect) = implied {
            let strict = self.decide_as(bound, name, Some(effect));
            if strict.decision > decision.decision {
                return (strict, true);
            }
        }
        (decision, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: &str = r#"
        policy "p" version 1
        effects none, write, delete
        intents write > read
        fallback read
        keywords write { en "edit" }
        matrix m {
                none   write    delete
          read  allow  deny     deny
          write allow  confirm  deny
        }
        mode agent { matrix m }
        tool read_doc { effect none }
        tool edit_doc { effect write }
    "#;

    fn policy() -> Policy {
        Policy::parse(POLICY, "p.warden").expect("the test policy loads")
    }

    fn decisions(offer: &Offer<'_>) -> Vec<(String, &'static str)> {
        offer
            .entries()
            .iter()
            .map(|(n, d)| (n.to_string(), d.decision.as_str()))
            .collect()
    }

    #[test]
    fn a_name_set_decides_as_offer() {
        let p = policy();
        let names = ["read_doc", "edit_doc", "rm_rf", "edit_doc"];
        let set = ToolSet::from_names(names);
        let request = Request::new("agent");
        let intent = p.classify("edit the doc");
        let by_set = p.offer_set(&request, &intent, &set).unwrap();
        let by_names = p.offer(&request, &intent, names).unwrap();
        assert_eq!(decisions(&by_set), decisions(&by_names));
        assert_eq!(
            decisions(&by_set),
            [
                ("read_doc".to_string(), "allow"),
                ("edit_doc".to_string(), "confirm"),
                ("rm_rf".to_string(), "deny"),
                ("edit_doc".to_string(), "confirm"),
            ]
        );
        assert_eq!(by_set.visible_indices().collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(set.len(), 4);
        assert!(!set.is_empty());
        assert_eq!(set.names().collect::<Vec<_>>(), names);
    }

    #[test]
    fn a_schema_set_tightens_as_schema_decisions() {
        let p = policy();
        let schemas = [
            json!({"type": "function", "function": {"name": "read_doc", "parameters": {}}}),
            json!({"name": "edit_doc", "inputSchema": {}, "annotations": {"destructiveHint": true}}),
            json!({"name": "edit_doc", "inputSchema": {}}),
        ];
        let set = ToolSet::from_schemas(&schemas).unwrap();
        let request = Request::new("agent");
        let intent = Intent::named("write");
        let by_set = p.offer_set(&request, &intent, &set).unwrap();
        let by_schemas = p.schema_decisions(&request, &intent, &schemas).unwrap();
        let expected: Vec<(String, &str)> = by_schemas
            .iter()
            .map(|d| (d.name.clone(), d.decision.decision.as_str()))
            .collect();
        assert_eq!(decisions(&by_set), expected);
        assert_eq!(
            expected,
            [
                ("read_doc".to_string(), "allow"),
                ("edit_doc".to_string(), "deny"),
                ("edit_doc".to_string(), "confirm"),
            ]
        );
    }

    #[test]
    fn a_schema_set_without_annotations_decides_as_offer_over_its_names() {
        let p = policy();
        let schemas = [
            json!({"type": "function", "function": {"name": "edit_doc", "parameters": {}}}),
            json!({"name": "rm_rf", "input_schema": {}}),
            json!({"name": "read_doc", "inputSchema": {}}),
        ];
        let set = ToolSet::from_schemas(&schemas).unwrap();
        assert!(!set.tightens);
        let request = Request::new("agent");
        let intent = Intent::named("write");
        let by_set = p.offer_set(&request, &intent, &set).unwrap();
        let by_names = p
            .offer(&request, &intent, ["edit_doc", "rm_rf", "read_doc"])
            .unwrap();
        assert_eq!(decisions(&by_set), decisions(&by_names));
        assert_eq!(
            decisions(&by_set),
            [
                ("edit_doc".to_string(), "confirm"),
                ("rm_rf".to_string(), "deny"),
                ("read_doc".to_string(), "allow"),
            ]
        );
    }

    #[test]
    fn a_schema_without_a_name_is_refused_with_its_index() {
        let err = ToolSet::from_schemas(&[json!({"name": "read_doc"}), json!({"inputSchema": {}})])
            .unwrap_err();
        assert!(
            matches!(&err, SchemaError::Schema { index: 1, message } if message.starts_with("the schema has no name")),
            "{err:?}"
        );
    }

    #[test]
    fn an_unknown_mode_is_a_request_error() {
        let p = policy();
        let set = ToolSet::from_names(["read_doc"]);
        let err = p
            .offer_set(&Request::new("nope"), &p.fallback_intent(), &set)
            .unwrap_err();
        assert!(matches!(err, RequestError::UnknownMode { .. }), "{err:?}");
    }
}
