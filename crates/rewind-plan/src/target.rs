//! Parsing a rewind target: `@<seq>` (an absolute log seq) or `<n>` (1 = newest candidate).

use std::fmt;

use thiserror::Error;

/// What a rewind aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An absolute log seq, written `@<seq>`.
    Seq(u64),
    /// A 1-based recency index into the candidate list (1 = newest).
    Index(u32),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Seq(s) => write!(f, "@{s}"),
            Target::Index(n) => write!(f, "{n}"),
        }
    }
}

/// Why a target text was refused.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetError {
    /// Nothing was given.
    #[error("no rewind target given: use @<seq> or a candidate number (1 = newest)")]
    Empty,
    /// `@` with nothing after it.
    #[error("\"@\" needs a sequence number, e.g. @12")]
    MissingSeq,
    /// `@` followed by something that is not a non-negative integer.
    #[error("\"{0}\" is not a valid sequence: use @ followed by a non-negative whole number")]
    BadSeq(String),
    /// A number that is not a positive whole number.
    #[error(
        "\"{0}\" is not a valid candidate number: use a whole number from 1 (the newest message)"
    )]
    BadIndex(String),
    /// More than one argument.
    #[error("unexpected argument \"{0}\": a rewind takes exactly one target")]
    TrailingArgument(String),
}

/// Parses a target. Surrounding whitespace is ignored; anything after the
/// target is refused rather than ignored, so a caller never believes only part
/// of its request ran.
pub fn parse_target(input: &str) -> Result<Target, TargetError> {
    let mut words = input.split_whitespace();
    let first = words.next().ok_or(TargetError::Empty)?;
    if let Some(extra) = words.next() {
        return Err(TargetError::TrailingArgument(extra.to_string()));
    }
    if let Some(digits) = first.strip_prefix('@') {
        if digits.is_empty() {
            return Err(TargetError::MissingSeq);
        }
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TargetError::BadSeq(first.to_string()));
        }
        let seq = digits
            .parse::<u64>()
            .map_err(|_| TargetError::BadSeq(first.to_string()))?;
        if seq > crate::event::MAX_SAFE_INTEGER {
            return Err(TargetError::BadSeq(first.to_string()));
        }
        return Ok(Target::Seq(seq));
    }
    if !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::BadIndex(first.to_string()));
    }
    match first.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Target::Index(n)),
        _ => Err(TargetError::BadIndex(first.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_seq_and_index() {
        assert_eq!(parse_target("@0"), Ok(Target::Seq(0)));
        assert_eq!(parse_target("  @29 "), Ok(Target::Seq(29)));
        assert_eq!(parse_target("1"), Ok(Target::Index(1)));
        assert_eq!(parse_target("12"), Ok(Target::Index(12)));
        assert_eq!(parse_target("@007"), Ok(Target::Seq(7)));
    }

    #[test]
    fn refuses_each_bad_form_with_its_reason() {
        assert_eq!(parse_target(""), Err(TargetError::Empty));
        assert_eq!(parse_target("   "), Err(TargetError::Empty));
        assert_eq!(parse_target("@"), Err(TargetError::MissingSeq));
        assert_eq!(parse_target("@-1"), Err(TargetError::BadSeq("@-1".into())));
        assert_eq!(parse_target("@x"), Err(TargetError::BadSeq("@x".into())));
        assert_eq!(parse_target("@+3"), Err(TargetError::BadSeq("@+3".into())));
        assert_eq!(
            parse_target("@9007199254740992"),
            Err(TargetError::BadSeq("@9007199254740992".into()))
        );
        assert_eq!(parse_target("0"), Err(TargetError::BadIndex("0".into())));
        assert_eq!(parse_target("-3"), Err(TargetError::BadIndex("-3".into())));
        assert_eq!(
            parse_target("1.5"),
            Err(TargetError::BadIndex("1.5".into()))
        );
        assert_eq!(parse_target("+2"), Err(TargetError::BadIndex("+2".into())));
        assert_eq!(
            parse_target("99999999999"),
            Err(TargetError::BadIndex("99999999999".into()))
        );
        assert_eq!(
            parse_target("@3 both"),
            Err(TargetError::TrailingArgument("both".into()))
        );
        assert_eq!(
            parse_target("2 3"),
            Err(TargetError::TrailingArgument("3".into()))
        );
        for e in [TargetError::Empty, TargetError::MissingSeq] {
            assert!(!e.to_string().is_empty());
        }
    }
}
