//! Characters a reader cannot see: control characters (C0, DEL, C1) and format characters
//! (Unicode category Cf: zero-width characters, bidirectional controls, the soft hyphen, tags).
//! Text that holds them can read as something it is not (Trojan Source), and printed on a
//! terminal they can forge lines or colours. The checker warns about them in policy text, and
//! `toolwarden` shows them as `<U+XXXX>` wherever it prints text it was given.

use std::borrow::Cow;

/// The Unicode format characters (general category Cf), as inclusive ranges.
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Characters outside category Cf that show nothing or break a line where none is seen: the
/// line and paragraph separators (U+2028, U+2029), the combining grapheme joiner (U+034F),
/// the Khmer inherent vowels (U+17B4, U+17B5) and the Hangul fillers (U+115F, U+1160,
/// U+3164, U+FFA0), all default-ignorable or line-breaking in Unicode.
const ALSO_INVISIBLE: &[char] = &[
    '\u{034F}', '\u{115F}', '\u{1160}', '\u{17B4}', '\u{17B5}', '\u{2028}', '\u{2029}', '\u{3164}',
    '\u{FFA0}',
];

/// Whether `c` is invisible: a control character (U+0000–U+001F, U+007F–U+009F, tab and line
/// feed included), a format character (category Cf: U+200B–U+200F, the bidirectional
/// controls U+202A–U+202E and U+2066–U+2069, U+061C, U+FEFF, the tags U+E0001 and
/// U+E0020–U+E007F, …), or a line or paragraph separator (U+2028, U+2029), the combining
/// grapheme joiner (U+034F), a Khmer inherent vowel (U+17B4, U+17B5) or a Hangul filler
/// (U+115F, U+1160, U+3164, U+FFA0).
pub fn is_invisible(c: char) -> bool {
    let u = u32::from(c);
    // Below U+00AD (the first format character) only the controls are invisible: most text
    // is decided here, without reading the tables.
    if u < 0xAD {
        return c.is_control();
    }
    c.is_control()
        || FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
        || ALSO_INVISIBLE.contains(&c)
}

/// Whether `c` is a bidirectional control (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
/// U+061C): it reorders the text that follows it on screen.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// `text` with every invisible character ([`is_invisible`]) written as `<U+XXXX>` (at least
/// four hex digits), so that printing it can neither forge a line, colour a terminal, nor
/// reorder or hide what follows. Borrows `text` when it holds none.
///
/// ```
/// use toolwarden::invisible::escape;
/// assert_eq!(escape("erase_all\u{200B}"), "erase_all<U+200B>");
/// assert_eq!(escape("a\nb\u{1b}[31m"), "a<U+000A>b<U+001B>[31m");
/// assert_eq!(escape("plain"), "plain");
/// ```
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_format_characters_are_invisible() {
        for c in [
            '\0',
            '\t',
            '\n',
            '\r',
            '\u{1b}',
            '\u{7f}',
            '\u{85}',
            '\u{9f}',
            '\u{ad}',
            '\u{61c}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{200e}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{2060}',
            '\u{feff}',
            '\u{e0041}',
            '\u{2028}',
            '\u{2029}',
            '\u{3164}',
            '\u{34f}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", u32::from(c));
        }
        for c in ['a', ' ', 'é', 'ک', '\u{301}', '\u{a0}', '\u{fe0f}', '😀'] {
            assert!(!is_invisible(c), "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn escape_shows_each_invisible_character_as_its_code_point() {
        assert_eq!(
            escape("e\u{202e}rase\u{85}\u{e0041}"),
            "e<U+202E>rase<U+0085><U+E0041>"
        );
        assert!(matches!(escape("ok"), Cow::Borrowed("ok")));
    }
}
