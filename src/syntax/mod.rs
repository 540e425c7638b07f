//! Text to syntax tree: the pest grammar (`grammar/warden.pest`), the typed AST with byte spans,
//! and quoting text back as warden strings. Following `include`s is the loader's work
//! (the `load` module), one layer up.

pub mod ast;
mod parse;
mod quote;
pub(crate) mod strings;

pub use parse::parse_file;
pub use quote::quote;
