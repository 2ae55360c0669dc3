//! What the randomized tests share: a seeded generator, the seed a run starts from, and
//! random values of every wire type.
//!
//! A failure names its seed; the variable the test reads (`ROUNDTRIP_SEED`, `DECODER_SEED`)
//! replays it. Without the variable a fixed default keeps CI deterministic.

#![allow(dead_code)]

pub mod heap;
pub mod stream;

use confine_protocol::*;

/// SplitMix64: tiny, fast, and every seed (zero included) gives a full-period stream.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// Integers biased towards the varint and zigzag boundaries, where encodings change length.
    pub fn u64(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            i64::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
            1 << 56,
        ];
        match self.below(4) {
            0 => EDGES[self.below(EDGES.len())],
            1 => self.next_u64() >> self.below(64),
            _ => self.next_u64(),
        }
    }

    pub fn u32(&mut self) -> u32 {
        match self.below(4) {
            0 => [0, 1, 127, 128, 16_383, 16_384, u32::MAX - 1, u32::MAX][self.below(8)],
            _ => (self.next_u64() >> self.below(64)) as u32,
        }
    }

    pub fn i32(&mut self) -> i32 {
        match self.below(4) {
            0 => [0, 1, -1, 63, -64, 64, -65, i32::MIN, i32::MAX][self.below(9)],
            _ => self.next_u64() as i32 >> self.below(32),
        }
    }

    pub fn option<T>(&mut self, make: impl FnOnce(&mut Rng) -> T) -> Option<T> {
        if self.bool() { Some(make(self)) } else { None }
    }

    /// Mostly short, sometimes empty, now and then long enough for a multi-byte length varint.
    pub fn len(&mut self) -> usize {
        match self.below(20) {
            0..=3 => 0,
            4..=17 => self.below(24),
            18 => self.below(300),
            _ => self.below(20_000),
        }
    }

    pub fn count(&mut self) -> usize {
        match self.below(10) {
            0..=2 => 0,
            3..=8 => self.below(5),
            _ => self.below(40),
        }
    }

    /// Arbitrary bytes: most samples are not UTF-8.
    pub fn bytes(&mut self) -> Vec<u8> {
        let len = self.len();
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    pub fn bytes_list(&mut self) -> Vec<Vec<u8>> {
        let count = self.count();
        (0..count).map(|_| self.bytes()).collect()
    }

    /// Strings mixing one- to four-byte UTF-8 characters.
    pub fn string(&mut self) -> String {
        const CHARS: [char; 8] = ['a', 'Z', ' ', '\0', 'é', '✓', '\u{10FFFF}', '🦀'];
        let len = self.len();
        (0..len)
            .map(|_| {
                if self.bool() {
                    CHARS[self.below(CHARS.len())]
                } else {
                    char::from_u32(self.next_u64() as u32 % 0x11_0000).unwrap_or('\u{FFFD}')
                }
            })
            .collect()
    }

    pub fn pick<T: Copy>(&mut self, options: &[T]) -> T {
        options[self.below(options.len())]
    }
}

/// The seed of a run: the variable `var` if set (decimal, or hex after `0x`), else `default`.
pub fn seed(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("{var}={text:?} is not a u64: {e}"))
        }
        Err(_) => default,
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------------------------

pub fn hello(rng: &mut Rng) -> Hello {
    Hello {
        protocol_version: rng.u32(),
        schema_hash: rng.u64(),
        software: rng.string(),
    }
}

pub fn stdio_spec(rng: &mut Rng) -> StdioSpec {
    rng.pick(&[StdioSpec::Null, StdioSpec::Fd])
}

pub fn spawn(rng: &mut Rng) -> Spawn {
    Spawn {
        id: rng.u64(),
        argv: rng.bytes_list(),
        cwd: rng.bytes(),
        env: (0..rng.count())
            .map(|_| EnvVar {
                name: rng.bytes(),
                value: rng.bytes(),
            })
            .collect(),
        policy: Policy {
            mode: rng.pick(&[Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess]),
            workspace_root: rng.option(Rng::bytes),
            writable_roots: rng.bytes_list(),
            network: rng.pick(&[Network::Deny, Network::Allow]),
            protected: rng.bytes_list(),
            never_writable: rng.bytes_list(),
            local_binding: rng.bool(),
            deny_read: rng.bytes_list(),
            session_temp: rng.option(Rng::bytes),
            unix_sockets: rng.bytes_list(),
            visible: rng.bytes_list(),
        },
        backend: rng.pick(&[
            BackendChoice::Auto,
            BackendChoice::Bwrap,
            BackendChoice::Landlock,
            BackendChoice::Seatbelt,
            BackendChoice::Namespaces,
        ]),
        limits: Limits {
            timeout_ms: rng.option(Rng::u64),
            kill_grace_ms: rng.u32(),
            max_processes: rng.option(|r| r.u64()),
            max_file_size: rng.option(|r| r.u64()),
            max_address_space: rng.option(|r| r.u64()),
            max_memory: rng.option(|r| r.u64()),
        },
        stdio: Stdio {
            stdin: stdio_spec(rng),
            stdout: stdio_spec(rng),
            stderr: stdio_spec(rng),
        },
        proxy: false,
    }
}

pub fn request(rng: &mut Rng) -> Request {
    match rng.below(4) {
        0 => Request::Spawn(spawn(rng)),
        1 => Request::Cancel(Cancel {
            id: rng.u64(),
            grace_ms: rng.u32(),
        }),
        2 => Request::Hints(
            (0..rng.count())
                .map(|_| UsableBefore {
                    backend: backend(rng),
                    fingerprint: rng.string(),
                })
                .collect(),
        ),
        _ => Request::Info,
    }
}

pub fn backend(rng: &mut Rng) -> Backend {
    rng.pick(&[
        Backend::None,
        Backend::Bwrap,
        Backend::Landlock,
        Backend::Seatbelt,
        Backend::Namespaces,
    ])
}

pub fn layer(rng: &mut Rng) -> Layer {
    rng.pick(&[Layer::Namespaces, Layer::Landlock, Layer::Seccomp])
}

pub fn exited(rng: &mut Rng) -> Exited {
    Exited {
        id: rng.u64(),
        status: if rng.bool() {
            ExitStatus::Code(rng.i32())
        } else {
            ExitStatus::Signal(rng.i32())
        },
        exec_errno: rng.option(Rng::i32),
        ending: rng.pick(&[Ending::Exited, Ending::TimedOut, Ending::Cancelled]),
        backend: backend(rng),
        enforcement: rng.option(|rng| {
            if rng.bool() {
                Enforcement::Full
            } else {
                Enforcement::Partial {
                    missing: (0..rng.count()).map(|_| gap(rng)).collect(),
                }
            }
        }),
        layers: (0..rng.count()).map(|_| layer(rng)).collect(),
        usage: Usage {
            wall_us: rng.u64(),
            user_us: rng.u64(),
            sys_us: rng.u64(),
            max_rss_kib: rng.u64(),
        },
        caps: Caps {
            processes: rng.option(cap),
            memory: rng.option(cap),
        },
    }
}

fn gap(rng: &mut Rng) -> Gap {
    match rng.below(3) {
        0 => Gap::Truncate,
        1 => Gap::ProcessCap {
            processes: rng.u64(),
            why: rng.string(),
        },
        _ => Gap::NoRepository { dot: rng.string() },
    }
}

fn refusal(rng: &mut Rng) -> Refusal {
    match rng.below(4) {
        0 => Refusal::EmptyArgv,
        1 => Refusal::IdInUse { id: rng.u64() },
        2 => Refusal::CeilingPartial {
            backend: backend(rng),
            missing: (0..rng.count()).map(|_| gap(rng)).collect(),
        },
        _ => Refusal::Unusable {
            role: rng.pick(&[PathRole::WritableRoot, PathRole::Visible]),
            path: rng.string(),
            why: rng.string(),
        },
    }
}

fn cap(rng: &mut Rng) -> Cap {
    Cap {
        max: rng.u64(),
        reached: rng.option(|r| r.bool()),
    }
}

pub fn reply(rng: &mut Rng) -> Reply {
    match rng.below(5) {
        0 => Reply::Started(Started {
            id: rng.u64(),
            pid: rng.u32(),
        }),
        1 => Reply::Exited(exited(rng)),
        2 => Reply::RunnerFailed(RunnerFailed {
            id: rng.u64(),
            stage: rng.pick(&Stage::ALL),
            errno: rng.i32(),
            detail: rng.string(),
        }),
        3 => Reply::Refused(Refused {
            id: rng.u64(),
            reason: refusal(rng),
        }),
        _ => Reply::Info(HelperInfo {
            software: rng.string(),
            pid: rng.u32(),
            backends: (0..rng.count())
                .map(|_| BackendReport {
                    backend: backend(rng),
                    usable: rng.bool(),
                    detail: rng.string(),
                    layers: (0..rng.count()).map(|_| layer(rng)).collect(),
                    fingerprint: rng.option(Rng::string),
                })
                .collect(),
            landlock_abi: rng.option(Rng::u32),
            grant: Grant {
                max_mode: rng.pick(&[Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess]),
                network: rng.pick(&[Network::Deny, Network::Allow]),
                sources: (0..rng.count()).map(|_| rng.string()).collect(),
                broken: rng.option(Rng::string),
            },
        }),
    }
}

/// Chunk sizes that favour the interesting splits: single bytes, a cut inside a prefix, and
/// everything at once.
pub fn chunk_len(rng: &mut Rng, remaining: usize) -> usize {
    let len = match rng.below(6) {
        0 => 1,
        1 => 1 + rng.below(4),
        2 => remaining,
        _ => 1 + rng.below(remaining.min(64)),
    };
    len.clamp(1, remaining)
}
