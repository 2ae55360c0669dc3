//! The network lab of `netns.rs` where there are no network namespaces (macOS): the same
//! interface, and every case that asks for a lab skips, saying why.

use std::convert::Infallible;
use std::path::Path;

use crate::case::Stop;

/// The lab's address here, as `netns.rs` has it (the cases name it in their host files).
pub const HERE_V4: &str = "10.77.0.1";
pub const HERE_V6: &str = "fd77::1";

/// No lab can be made: [`NetLab::new`] always skips, so no value of it exists.
#[derive(Debug)]
pub struct NetLab(Infallible);

impl NetLab {
    /// Skips: a lab is two network namespaces and a veth pair between them.
    pub fn new(_hosts: &Path) -> Result<NetLab, Stop> {
        Err(Stop::Skip(
            "a network lab needs network namespaces, which only Linux has".into(),
        ))
    }

    pub fn here<T: Send>(&self, _body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        match self.0 {}
    }

    pub fn in_here<T: Send>(&self, _body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        match self.0 {}
    }

    pub fn in_there<T: Send>(&self, _body: impl FnOnce() -> T + Send) -> Result<T, Stop> {
        match self.0 {}
    }
}
