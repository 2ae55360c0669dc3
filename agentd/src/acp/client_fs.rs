//! The editor's own file access (`fs/read_text_file`, `fs/write_text_file`), used by the file
//! tools when the client advertises it, so unsaved buffers are read and edits land in the editor.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};

use crate::tools::{ClientFs, ClientFsError, FsFuture};

/// File access through the ACP client of one session; only made when the client offers both
/// reads and writes.
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

    fn write_text<'a>(&'a self, path: &'a Path, content: &'a str) -> FsFuture<'a, ()> {
        Box::pin(async move {
            let request = WriteTextFileRequest::new(
                self.session_id.clone(),
                path.to_owned(),
                content.to_owned(),
            );
            self.cx
                .send_request(request)
                .block_task()
                .await
                .map(drop)
                .map_err(|e| ClientFsError::Write {
                    path: path.to_owned(),
                    source: Box::new(e),
                })
        })
    }
}
