//! How deep an agent is in the tree of agents, and how deep it may go: the top level is depth 0
//! and a child is one deeper than its parent. A [`Depth`] is a whole number from 0 to
//! [`MAX_DEPTH`] (2^53 - 1, the largest integer every JSON reader holds exactly), so a depth
//! written by agentd reads back the same anywhere.
//!
//! Depths come from outside twice: as a cap in the configuration file (`agents.NAME.max_depth`)
//! and as a stored depth in a session log. Both are checked here, by [`Depth::from_toml`] and
//! [`Depth::from_json`] (or [`Depth::from_json_text`]), which refuse a negative, fractional,
//! negative-zero, non-finite or too large number and anything that is not a number, naming the
//! value and where it came from ([`DepthOrigin`]). [`check_child_start`] says whether a child may
//! start under a cap, before anything of the child exists.

use std::fmt;

/// The largest depth: 2^53 - 1.
pub const MAX_DEPTH: u64 = (1 << 53) - 1;

/// A checked depth (or depth cap): 0 to [`MAX_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Depth(u64);

impl Depth {
    /// The top-level agent's depth.
    pub const TOP: Depth = Depth(0);
    /// The largest depth.
    pub const MAX: Depth = Depth(MAX_DEPTH);

    /// `n` as a depth, `None` above [`MAX_DEPTH`].
    pub const fn new(n: u64) -> Option<Depth> {
        if n <= MAX_DEPTH { Some(Depth(n)) } else { None }
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    /// A depth (or cap) written in TOML: `value` as parsed and `written`, its text in the file
    /// (which alone tells `-0` from `0`).
    pub fn from_toml(
        value: &toml::Value,
        written: &str,
        origin: &DepthOrigin,
    ) -> Result<Depth, InvalidDepth> {
        let written = written.trim();
        let reject = |reason| Err(origin.invalid(written, reason));
        match value {
            toml::Value::Integer(n) => {
                if *n < 0 {
                    reject(Reason::Negative)
                } else if *n == 0 && written.starts_with('-') {
                    reject(Reason::NegativeZero)
                } else {
                    match u64::try_from(*n).ok().and_then(Depth::new) {
                        Some(depth) => Ok(depth),
                        None => reject(Reason::TooLarge),
                    }
                }
            }
            toml::Value::Float(f) => reject(float_reason(*f)),
            toml::Value::String(_) => reject(Reason::NotANumber("a string")),
            toml::Value::Boolean(_) => reject(Reason::NotANumber("a boolean")),
            toml::Value::Datetime(_) => reject(Reason::NotANumber("a date")),
            toml::Value::Array(_) => reject(Reason::NotANumber("an array")),
            toml::Value::Table(_) => reject(Reason::NotANumber("a table")),
        }
    }

    /// A depth stored as JSON.
    pub fn from_json(
        value: &serde_json::Value,
        origin: &DepthOrigin,
    ) -> Result<Depth, InvalidDepth> {
        let written = value.to_string();
        let reject = |reason| Err(origin.invalid(&written, reason));
        match value {
            serde_json::Value::Number(number) => {
                if let Some(n) = number.as_u64() {
                    match Depth::new(n) {
                        Some(depth) => Ok(depth),
                        None => reject(Reason::TooLarge),
                    }
                } else if number.as_i64().is_some() {
                    // Only negative integers are i64 and not u64.
                    reject(Reason::Negative)
                } else {
                    // serde_json reads `-0`, fractions, exponents and integers beyond u64 as
                    // floats.
                    reject(float_reason(number.as_f64().unwrap_or(f64::NAN)))
                }
            }
            serde_json::Value::String(_) => reject(Reason::NotANumber("a string")),
            serde_json::Value::Bool(_) => reject(Reason::NotANumber("a boolean")),
            serde_json::Value::Null => reject(Reason::NotANumber("null")),
            serde_json::Value::Array(_) => reject(Reason::NotANumber("an array")),
            serde_json::Value::Object(_) => reject(Reason::NotANumber("an object")),
        }
    }

    /// A depth stored as JSON text, which may not even be JSON.
    pub fn from_json_text(text: &str, origin: &DepthOrigin) -> Result<Depth, InvalidDepth> {
        let written = text.trim();
        match serde_json::from_str::<serde_json::Value>(written) {
            Ok(value) => match Depth::from_json(&value, origin) {
                Ok(_) if written.starts_with('-') => {
                    Err(origin.invalid(written, Reason::NegativeZero))
                }
                Ok(depth) => Ok(depth),
                Err(InvalidDepth { reason, .. }) => Err(origin.invalid(written, reason)),
            },
            Err(e) => Err(origin.invalid(written, Reason::Malformed(e.to_string()))),
        }
    }

    /// The depth of a child of an agent at this depth, `None` past [`MAX_DEPTH`].
    pub fn child(self) -> Option<Depth> {
        self.0.checked_add(1).and_then(Depth::new)
    }
}

impl fmt::Display for Depth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What is wrong with a float where a depth belongs.
fn float_reason(f: f64) -> Reason {
    if !f.is_finite() {
        Reason::NotFinite
    } else if f == 0.0 && f.is_sign_negative() {
        Reason::NegativeZero
    } else if f < 0.0 {
        Reason::Negative
    } else if f.fract() != 0.0 {
        Reason::Fractional
    } else if f > MAX_DEPTH as f64 {
        Reason::TooLarge
    } else {
        Reason::Float
    }
}

/// Where a depth came from, for the message that refuses it: the key (`agents.reviewer.max_depth`,
/// `depth`) and the place (`the configuration file /etc/agentd/agentd.toml, line 7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthOrigin {
    pub key: String,
    pub place: String,
}

impl DepthOrigin {
    pub fn new(key: impl Into<String>, place: impl Into<String>) -> DepthOrigin {
        DepthOrigin {
            key: key.into(),
            place: place.into(),
        }
    }

    fn invalid(&self, written: &str, reason: Reason) -> InvalidDepth {
        InvalidDepth {
            key: self.key.clone(),
            place: self.place.clone(),
            written: written.to_owned(),
            reason,
        }
    }
}

/// What makes a value not a depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Negative,
    /// `-0` or `-0.0`.
    NegativeZero,
    Fractional,
    /// NaN or an infinity.
    NotFinite,
    /// Above [`MAX_DEPTH`].
    TooLarge,
    /// A whole number written as a float (`2.0`, `1e3`).
    Float,
    /// Another type: "a string", "a boolean", "a table", …
    NotANumber(&'static str),
    /// Not parseable at all; the parser's words.
    Malformed(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Negative => f.write_str("it is negative"),
            Reason::NegativeZero => f.write_str("it is negative zero"),
            Reason::Fractional => f.write_str("it has a fractional part"),
            Reason::NotFinite => f.write_str("it is not a finite number"),
            Reason::TooLarge => write!(f, "it is larger than {MAX_DEPTH}"),
            Reason::Float => f.write_str("it is written as a floating-point number"),
            Reason::NotANumber(kind) => write!(f, "it is {kind}, not a number"),
            Reason::Malformed(detail) => write!(f, "it is malformed ({detail})"),
        }
    }
}

/// A value that is not a depth, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{key} = {written} in {place} is not a depth ({reason}); a depth is a whole number from 0 to \
     {MAX_DEPTH}"
)]
pub struct InvalidDepth {
    pub key: String,
    pub place: String,
    /// The value as it was written.
    pub written: String,
    pub reason: Reason,
}

/// A child that may not start: it would be deeper than the cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a child of an agent at depth {parent} would be at depth {child}, deeper than the cap of \
     {cap} (the top level is depth 0 and each child is one deeper than its parent)"
)]
pub struct TooDeep {
    pub parent: Depth,
    /// One more than `parent`; may be just past [`MAX_DEPTH`], hence a plain number.
    pub child: u64,
    pub cap: Depth,
}

/// Whether a child of an agent at depth `parent` may start under the depth cap `cap`: `Ok` with
/// the child's depth when `parent + 1 <= cap`. Cannot overflow: a depth is at most
/// [`MAX_DEPTH`], far below `u64::MAX`.
pub fn check_child_start(parent: Depth, cap: Depth) -> Result<Depth, TooDeep> {
    let refused = TooDeep {
        parent,
        child: parent.get().saturating_add(1),
        cap,
    };
    match parent.child() {
        Some(child) if child <= cap => Ok(child),
        _ => Err(refused),
    }
}

#[cfg(test)]
#[path = "depth_tests.rs"]
mod tests;
