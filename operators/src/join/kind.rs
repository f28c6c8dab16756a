//! Which rows a join emits, shared by the regular, interval and window joins.

/// Which rows a join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Pairs that satisfy the condition.
    Inner,
    /// Pairs, and left rows that joined nothing padded with NULLs.
    Left,
    /// Pairs, and right rows that joined nothing padded with NULLs.
    Right,
    /// Pairs, and rows of either side that joined nothing padded with NULLs.
    Full,
    /// The left rows that join at least one right row (`IN`, `EXISTS`), once each.
    LeftSemi,
    /// The left rows that join no right row (`NOT EXISTS`).
    LeftAnti,
}

/// Which left rows a semi or anti join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filtering {
    /// Those that join at least one right row (`IN`, `EXISTS`), once each: a row comes
    /// with its first match and leaves with its last.
    Semi,
    /// Those that join no right row (`NOT EXISTS`): a row leaves with its first match
    /// and comes back when its last one leaves.
    Anti,
}

impl JoinKind {
    /// Whether unmatched rows of input `input` are emitted padded with NULLs (an outer
    /// join's preserved side).
    pub fn pads(self, input: usize) -> bool {
        matches!(
            (self, input),
            (JoinKind::Left | JoinKind::Full, 0) | (JoinKind::Right | JoinKind::Full, 1)
        )
    }

    /// Whether held rows of input `input` count their matches: a preserved side's rows, and
    /// a semi or anti join's left rows (whose output turns on their first and last match).
    pub fn counts_matches(self, input: usize) -> bool {
        self.pads(input) || (input == 0 && self.filtering().is_some())
    }

    /// Whether this is a semi or anti join, and which.
    pub fn filtering(self) -> Option<Filtering> {
        match self {
            JoinKind::LeftSemi => Some(Filtering::Semi),
            JoinKind::LeftAnti => Some(Filtering::Anti),
            _ => None,
        }
    }

    /// Whether pairs are emitted as they are found, with no bookkeeping of matches.
    pub fn is_inner(self) -> bool {
        self == JoinKind::Inner
    }
}
