//! What a [`Session`] is to the rest of agentd: a session log for what records, an asker for
//! the approval seam.

use super::sessions::Session;
use crate::approval::Asker;
use crate::session::{Event, LogError, Record, SessionLog};
use crate::words::ApprovalPolicy;

impl SessionLog for Session {
    fn records(&self) -> Vec<Record> {
        Session::records(self)
    }

    fn with_records(&self, f: &mut dyn FnMut(&[Record])) {
        Session::with_records(self, f);
    }

    fn append(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        Session::append(self, event, sync)
    }
}

impl Asker for Session {
    fn agent(&self) -> &str {
        &self.id
    }

    fn policy(&self) -> ApprovalPolicy {
        self.effective_policy()
    }
}
