//! The records a shim writes to the helper on its status pipe: a fixed-size layout, encoded and
//! decoded here in safe code. One `write` of [`Record::SIZE`] bytes, below `PIPE_BUF`, so
//! records never interleave or tear.

/// The exit status an `execve` that failed with `errno` stands for, by the shell's convention:
/// 127 when the program was not found, 126 when it could not run.
pub(crate) fn exec_failure_code(errno: i32) -> i32 {
    if errno == nix::libc::ENOENT { 127 } else { 126 }
}

/// A fixed-size message from a shim to the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// `execve` of the command succeeded; this is its pid.
    Started { pid: u32 },
    /// A runner step failed (stage index of `confine_protocol::Stage`).
    StageFailed { stage: u32, errno: i32 },
    /// `execve` of the command itself failed.
    ExecFailed { errno: i32 },
    /// The command's main process ended and its whole tree is gone.
    Exited {
        wait_status: i32,
        user_us: u64,
        sys_us: u64,
        max_rss_kib: u64,
    },
}

const TAG_STARTED: u32 = 1;
const TAG_STAGE_FAILED: u32 = 2;
const TAG_EXEC_FAILED: u32 = 3;
const TAG_EXITED: u32 = 4;
/// Where the tag (u32) and the four 64-bit words start; bytes 4..8 are zero.
const TAG_AT: usize = 0;
const WORDS_AT: [usize; 4] = [8, 16, 24, 32];

impl Record {
    pub(crate) const SIZE: usize = 40;

    pub(crate) fn encode(self) -> [u8; Record::SIZE] {
        let (tag, words): (u32, [[u8; 8]; 4]) = match self {
            Record::Started { pid } => (
                TAG_STARTED,
                [u64::from(pid).to_le_bytes(), [0; 8], [0; 8], [0; 8]],
            ),
            Record::StageFailed { stage, errno } => (
                TAG_STAGE_FAILED,
                [
                    u64::from(stage).to_le_bytes(),
                    i64::from(errno).to_le_bytes(),
                    [0; 8],
                    [0; 8],
                ],
            ),
            Record::ExecFailed { errno } => (
                TAG_EXEC_FAILED,
                [i64::from(errno).to_le_bytes(), [0; 8], [0; 8], [0; 8]],
            ),
            Record::Exited {
                wait_status,
                user_us,
                sys_us,
                max_rss_kib,
            } => (
                TAG_EXITED,
                [
                    i64::from(wait_status).to_le_bytes(),
                    user_us.to_le_bytes(),
                    sys_us.to_le_bytes(),
                    max_rss_kib.to_le_bytes(),
                ],
            ),
        };
        let mut out = [0u8; Record::SIZE];
        let tag = tag.to_le_bytes();
        let fields = std::iter::once((TAG_AT, tag.as_slice())).chain(
            WORDS_AT
                .iter()
                .copied()
                .zip(words.iter().map(|w| w.as_slice())),
        );
        for (at, bytes) in fields {
            for (slot, byte) in out.iter_mut().skip(at).zip(bytes) {
                *slot = *byte;
            }
        }
        out
    }

    /// Decodes one record; `None` for bytes no shim writes.
    pub(crate) fn decode(raw: &[u8; Record::SIZE]) -> Option<Record> {
        let word = |i: usize| -> Option<[u8; 8]> {
            let at = *WORDS_AT.get(i)?;
            raw.get(at..at + 8)?.try_into().ok()
        };
        let signed = |i: usize| word(i).map(i64::from_le_bytes);
        let unsigned = |i: usize| word(i).map(u64::from_le_bytes);
        let tag = u32::from_le_bytes(raw.get(TAG_AT..TAG_AT + 4)?.try_into().ok()?);
        match tag {
            TAG_STARTED => Some(Record::Started {
                pid: u32::try_from(unsigned(0)?).ok()?,
            }),
            TAG_STAGE_FAILED => Some(Record::StageFailed {
                stage: u32::try_from(unsigned(0)?).ok()?,
                errno: i32::try_from(signed(1)?).ok()?,
            }),
            TAG_EXEC_FAILED => Some(Record::ExecFailed {
                errno: i32::try_from(signed(0)?).ok()?,
            }),
            TAG_EXITED => Some(Record::Exited {
                wait_status: i32::try_from(signed(0)?).ok()?,
                user_us: unsigned(1)?,
                sys_us: unsigned(2)?,
                max_rss_kib: unsigned(3)?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_decodes_to_itself() {
        let records = [
            Record::Started { pid: 4_000_000 },
            Record::StageFailed {
                stage: 7,
                errno: -1,
            },
            Record::ExecFailed { errno: 2 },
            Record::Exited {
                wait_status: 0x0f00,
                user_us: u64::MAX,
                sys_us: 1,
                max_rss_kib: 2,
            },
        ];
        for record in records {
            assert_eq!(Record::decode(&record.encode()), Some(record));
        }
    }

    #[test]
    fn an_unknown_tag_decodes_to_nothing() {
        let mut raw = Record::ExecFailed { errno: 2 }.encode();
        raw[0] = 9;
        assert_eq!(Record::decode(&raw), None);
    }
}
