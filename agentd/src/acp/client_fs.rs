//! The editor's own file reads (`fs/read_text_file`), used by `read_file` when the client
//! advertises them, so unsaved buffers are read. agentd never asks the editor to write
//! (`fs/write_text_file`): every write is the helper's confined writer's, and the editor learns
//! of it from the tool call's diff and location.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ReadTextFileRequest;

use crate::tools::{ClientFs, ClientFsError, FsFuture};

/// File reads through the ACP client of one session; only made when the client offers them.
pub struct EditorFs {
    cx: ConnectionTo<Client>,
    session_id: String,
}

impl EditorFs {
    pub fn new(cx: ConnectionTo<Client>, session_id: String) -> EditorFs {
        EditorFs { cx, session_id }
    }
}

impl ClientFs for EditorFs {
    fn read_text<'a>(&'a self, path: &'a Path) -> FsFuture<'a, String> {
        Box::pin(async move {
            let request = ReadTextFileRequest::new(self.session_id.clone(), path.to_owned());
            self.cx
                .send_request(request)
                .block_task()
                .await
                .map(|r| r.content)
                .map_err(|e| ClientFsError::Read {
                    path: path.to_owned(),
                    source: Box::new(e),
                })
        })
    }
}
