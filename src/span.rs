//! Source positions: [`FileId`] names one loaded source file and [`Span`] a byte range in it.
//!
//! The leaf both the syntax tree and the diagnostics build on: every node of the tree carries
//! the span of the text it came from, and every diagnostic points at spans. Spans never take
//! part in equality: two trees that differ only in layout compare equal, which is what the
//! formatter's round-trip tests rely on.

use std::fmt;

/// Index of a source file inside a [`crate::Sources`] map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `[start, end)` in one source file.
///
/// Equality always holds between two spans (see the module docs); compare `start`/`end` directly
/// when the position matters.
#[derive(Clone, Copy, Default)]
pub struct Span {
    /// The file the range belongs to.
    pub file: FileId,
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset one past the last byte.
    pub end: u32,
}

impl Span {
    /// Builds a span over bytes `start..end` of `file`.
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The smallest span covering `self` and `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The range as `usize` offsets, for slicing the source text.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

impl PartialEq for Span {
    fn eq(&self, _other: &Span) -> bool {
        true
    }
}
impl Eq for Span {}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}..{}", self.file.0, self.start, self.end)
    }
}
