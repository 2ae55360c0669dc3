//! The value parser of a flag that takes a word of a vocabulary, so that the command line reads
//! and lists the same words as the configuration and the ACP options.

use std::ffi::OsStr;
use std::marker::PhantomData;
use std::str::FromStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::error::ErrorKind;
use confine_protocol::UnknownWord;

/// A flag whose value is a word of one of the protocol's vocabularies (`--sandbox-mode
/// read-only`): clap checks, lists and suggests the words as for any closed set of values.
#[derive(Clone)]
pub(super) struct Word<T> {
    words: PossibleValuesParser,
    parsed: PhantomData<fn() -> T>,
}

impl<T> Word<T> {
    pub(super) fn new(words: &'static [&'static str]) -> Word<T> {
        Word {
            words: PossibleValuesParser::new(words.iter().copied()),
            parsed: PhantomData,
        }
    }
}

impl<T> TypedValueParser for Word<T>
where
    T: FromStr<Err = UnknownWord> + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        // A value that is not UTF-8 is named (lossily) among the words it is not one of.
        let value = value.to_string_lossy();
        let word = self.words.parse_ref(cmd, arg, OsStr::new(value.as_ref()))?;
        word.parse()
            .map_err(|e: UnknownWord| clap::Error::raw(ErrorKind::InvalidValue, e).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        self.words.possible_values()
    }
}
