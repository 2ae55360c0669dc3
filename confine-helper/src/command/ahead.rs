//! The user and network namespaces the helper makes ahead of the namespace backend's
//! commands (RFC 0023, step 6): when to start the maker, and the pair it leaves ready.

use std::ffi::c_int;

use crate::sys::{Ahead, Making};

/// The user and network namespaces made ahead for the namespace backend's commands with a
/// network namespace of their own (RFC 0023, `sys::Ahead`): one pair at a time, made when a
/// command ends and the helper has started two such commands (a helper that runs one, as
/// `agentd run`'s, makes none), so the making is off every command's path. A maker that fails
/// turns them off for this helper.
#[derive(Debug, Default)]
pub(crate) struct Pairs {
    wanted: u8,
    making: Option<Making>,
    pub(crate) ready: Option<Ahead>,
    off: bool,
}

impl Pairs {
    /// A command started whose plan `wanted` a pair, lent one or not.
    pub(crate) fn started(&mut self, wanted: bool) {
        self.wanted = self.wanted.saturating_add(u8::from(wanted));
    }

    /// A command ended, and its reply is sent: the next pair is made if one is wanted.
    pub(crate) fn ended(&mut self) {
        if self.wanted >= 2 && !self.off && self.making.is_none() && self.ready.is_none() {
            self.making = Making::start();
            self.off = self.making.is_none();
        }
    }

    /// The running maker's socket, readable once it has sent the pair or ended.
    pub(crate) fn making(&self) -> Option<c_int> {
        self.making.as_ref().map(Making::fd)
    }

    /// The maker has sent the pair, or ended without it.
    pub(crate) fn made(&mut self) {
        if let Some(making) = self.making.take() {
            self.ready = making.finish();
            self.off = self.ready.is_none();
        }
    }
}
