//! The checked model's classification declarations as the classifier's [`Lexicon`]: intents in
//! priority order, keywords, negators, `embedded` and `except` entries with the spellings the
//! checker normalized, and the `combine`, `quoted` and `accents` settings.

use crate::check::Model;
use crate::classify::{Combine, Direction, Keyword, Lexicon, Negator, Phrase, Quoted};
use crate::syntax::ast;

/// The lexicon the classifier of `model` is built from.
pub(super) fn lexicon(model: &Model) -> Lexicon {
    let phrases = |rules: &[crate::check::PhraseRule]| {
        rules
            .iter()
            .map(|r| Phrase {
                text: r.text.clone(),
                clause: r.clause,
                spellings: r.spellings.clone(),
            })
            .collect()
    };
    Lexicon {
        intents: model.intents.iter().map(|s| s.name.clone()).collect(),
        fallback: model.fallback.map(|(i, _)| i),
        combine: match model.combine {
            ast::Combine::Priority => Combine::Priority,
            ast::Combine::Union => Combine::Union,
        },
        keywords: model
            .keywords
            .iter()
            .map(|k| Keyword {
                intent: k.intent,
                lang: k.lang.clone(),
                text: k.text.clone(),
                spellings: k.spellings.clone(),
            })
            .collect(),
        negators: model
            .negations
            .iter()
            .map(|n| Negator {
                direction: match n.direction {
                    ast::Direction::Before => Direction::Before,
                    ast::Direction::After => Direction::After,
                },
                window: n.window,
                clause: n.clause,
                text: n.text.clone(),
                spellings: n.spellings.clone(),
            })
            .collect(),
        quoted: match model.quoted {
            ast::Quoted::Count => Quoted::Count,
            ast::Quoted::Data => Quoted::Data,
            ast::Quoted::Ignore => Quoted::Ignore,
        },
        embedded: phrases(&model.embedded),
        exceptions: phrases(&model.exceptions),
        fold_accents: model.fold_accents,
    }
}
