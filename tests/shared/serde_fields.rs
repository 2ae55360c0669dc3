//! The names of the keys a struct's derived `Deserialize` accepts, asked of serde itself: the
//! tests that hold a documented key table to its struct use it (agentd's `agentd.toml` keys,
//! confine-helper's ceiling keys). Included by `#[path]` into each crate's unit tests, which
//! depend on no common test crate.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// What `T`'s derived `Deserialize` hands `deserialize_struct`: the names of the keys it
/// accepts. The probe answers that call with the names, as its error, and every other call with
/// no names.
pub(crate) fn struct_fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(Probe) {
        Err(Fields(names)) => names,
        Ok(_) => &[],
    }
}

struct Probe;

#[derive(Debug)]
struct Fields(&'static [&'static str]);

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fields {:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Fields(&[])
    }
}

impl<'de> Deserializer<'de> for Probe {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
