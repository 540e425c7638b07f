//! Help lines that name declared things: the near name of a "did you mean" ([`suggest`]) and
//! the list of what is declared.

use super::Sym;

/// Names "close" to `name` among `candidates`, for a did-you-mean help.
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The first twelve of `syms` as "`a`, `b`, …", for a help line that lists what is declared.
pub(super) fn list_names(syms: &[Sym]) -> String {
    let names: Vec<String> = syms
        .iter()
        .take(12)
        .map(|s| format!("`{}`", s.name))
        .collect();
    let more = if syms.len() > 12 { ", …" } else { "" };
    format!("{}{more}", names.join(", "))
}
