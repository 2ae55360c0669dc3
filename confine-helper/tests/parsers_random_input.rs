//! Randomized hostile input for the helper's parsers of bytes a command (or a repository it
//! cloned) may have written, in the normal suite (the coverage-guided targets
//! `fuzz/fuzz_targets/git_files.rs` and `ceiling_file.rs` check the same properties for longer):
//! git index files (versions 2, 3 and 4, SHA-1 and SHA-256, split indexes), `.git` files,
//! `commondir` and worktree `gitdir` files, and ceiling files. The parsers are reached through
//! the crate's `fuzzing` module (the feature this crate's tests enable).
//!
//! What must hold is stated once, in `support/parser_bounds.rs`, which the fuzz targets share:
//! nothing panics, heap and results stay in proportion to the input, gitlinks are plain relative
//! paths, pointer files yield their first line where they lie. Here besides: an index built
//! whole (before any damage) yields exactly the gitlinks it was built with.
//!
//! Seeded: a failure names its seed, and `PARSERS_SEED=<seed> cargo test -p confine-helper
//! --test parsers_random_input` replays it. Without the variable the default seed keeps CI
//! deterministic.

/// What the parsers must hold; it makes the heap counter this binary's global allocator.
#[path = "support/parser_bounds.rs"]
mod bounds;

use seeded::heap;
/// The seeded generator of the protocol's randomized tests.
#[path = "../../protocol/tests/support/mod.rs"]
mod seeded;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bounds::{MAX_NAME, Pointer, check_ceiling, check_index, check_pointer, plain};
use seeded::Rng;

const ITERATIONS: usize = 3_000;
const DEFAULT_SEED: u64 = 0x5eed_91d0_1dec_0001;

/// Object-name sizes: SHA-1 and SHA-256.
const HASHES: [usize; 2] = [20, 32];
/// ctime, mtime, dev, ino, mode, uid, gid, size: ten 32-bit words.
const STAT_BYTES: usize = 40;
const GITLINK: u32 = 0o160000;
const FILE: u32 = 0o100644;

// ---------------------------------------------------------------------------------------------
// Index files.
// ---------------------------------------------------------------------------------------------

/// A name git could write, or one the helper must refuse: `..`, absolute, a `.git` component.
fn name(rng: &mut Rng) -> Vec<u8> {
    const PARTS: [&[u8]; 9] = [
        b"src",
        b"vendor",
        b"lib",
        b"a",
        b"..",
        b".git",
        b"",
        b"\xff\xfe",
        b"x y",
    ];
    let mut name = Vec::new();
    if rng.below(10) == 0 {
        name.push(b'/');
    }
    for i in 0..1 + rng.below(4) {
        if i > 0 {
            name.push(b'/');
        }
        name.extend_from_slice(rng.pick(&PARTS));
    }
    if rng.below(20) == 0 {
        name.extend(std::iter::repeat_n(b'z', rng.below(5000)));
    }
    name
}

/// An index built whole: its bytes, and the gitlinks and shared index it must yield.
struct Built {
    bytes: Vec<u8>,
    gitlinks: Vec<PathBuf>,
    shared: Option<String>,
}

/// A valid index of `version` with random entries (a name git would write, one way in three a
/// gitlink), optional extensions (a split index's `link`, another one), and its checksum.
fn index(rng: &mut Rng) -> Built {
    let version = 2 + rng.below(3) as u32;
    let hash = rng.pick(&HASHES);
    let count = rng.count();
    let mut bytes = b"DIRC".to_vec();
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes.extend_from_slice(&(count as u32).to_be_bytes());
    let mut previous: Vec<u8> = Vec::new();
    let mut gitlinks = Vec::new();
    for _ in 0..count {
        let mut name = name(rng);
        if name.is_empty() || name.contains(&0) {
            name = b"f".to_vec();
        }
        name.truncate(MAX_NAME);
        let mode = if rng.below(3) == 0 { GITLINK } else { FILE };
        if mode == GITLINK && plain(&name) {
            gitlinks.push(PathBuf::from(OsStr::from_bytes(&name)));
        }
        let start = bytes.len();
        bytes.extend((0..STAT_BYTES + hash).map(|_| rng.next_u64() as u8));
        bytes[start + 24..start + 28].copy_from_slice(&mode.to_be_bytes());
        let recorded = name.len().min(0xfff) as u16;
        let extended = version >= 3 && rng.bool();
        let flags = recorded | if extended { 0x4000 } else { 0 };
        bytes.extend_from_slice(&flags.to_be_bytes());
        if extended {
            bytes.extend_from_slice(&[0, 0]);
        }
        if version == 4 {
            let common = previous
                .iter()
                .zip(&name)
                .take_while(|(a, b)| a == b)
                .count();
            let keep = rng.below(common + 1);
            varint(&mut bytes, previous.len() - keep);
            bytes.extend_from_slice(&name[keep..]);
            bytes.push(0);
        } else {
            bytes.extend_from_slice(&name);
            let size = (bytes.len() - start + 8) & !7;
            bytes.resize(start + size, 0);
        }
        previous = name;
    }
    let mut shared = None;
    for _ in 0..rng.below(3) {
        if rng.bool() {
            let object: Vec<u8> = (0..hash).map(|_| rng.next_u64() as u8).collect();
            bytes.extend_from_slice(b"link");
            bytes.extend_from_slice(&((hash + 4) as u32).to_be_bytes());
            bytes.extend_from_slice(&object);
            bytes.extend_from_slice(&[0, 0, 0, 0]);
            if object.iter().any(|b| *b != 0) {
                let hex: String = object.iter().map(|b| format!("{b:02x}")).collect();
                shared = Some(format!("sharedindex.{hex}"));
            }
        } else {
            let data: Vec<u8> = (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect();
            bytes.extend_from_slice(b"TREE");
            bytes.extend_from_slice(&(data.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&data);
        }
    }
    bytes.extend((0..hash).map(|_| rng.next_u64() as u8));
    Built {
        bytes,
        gitlinks,
        shared,
    }
}

/// git's offset varint, as version 4 writes a name's prefix length.
fn varint(out: &mut Vec<u8>, mut value: usize) {
    let mut bytes = vec![(value & 0x7f) as u8];
    while value >= 0x80 {
        value = (value >> 7) - 1;
        bytes.push(0x80 | (value & 0x7f) as u8);
    }
    out.extend(bytes.iter().rev());
}

/// `bytes` damaged in one to four places: flipped bits, edge values, inserted or removed
/// bytes, a truncation, or a count or length made huge.
fn damage(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            return;
        }
        let at = rng.below(bytes.len());
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.pick(&[0, 0x7f, 0x80, 0xff]),
            2 => bytes.insert(at, rng.next_u64() as u8),
            3 => {
                bytes.remove(at);
            }
            4 => bytes.truncate(at),
            _ if at + 4 <= bytes.len() => {
                let huge = rng.pick(&[u32::MAX, 0x7fff_ffff, 0x0fff_ffff, 4096]);
                bytes[at..at + 4].copy_from_slice(&huge.to_be_bytes());
            }
            _ => {}
        }
    }
}

#[test]
fn the_heap_counter_sees_what_is_held_while_it_measures() {
    // The control of every heap bound here: the counter is this binary's allocator, and a
    // parse that held more than its bound would be seen holding it.
    let (block, held) = heap::measured(|| vec![1u8; 100_000]);
    assert!(
        held >= block.len(),
        "held {held} while making {} bytes",
        block.len()
    );
    let mut rng = Rng(DEFAULT_SEED);
    let built = std::iter::repeat_with(|| index(&mut rng))
        .find(|built| !built.gitlinks.is_empty())
        .expect("an index with a gitlink");
    let (parsed, held) = heap::measured(|| confine_helper::fuzzing::index(&built.bytes));
    let (gitlinks, _) = parsed.expect("an index built whole parses");
    let names: usize = gitlinks.iter().map(|p| p.as_os_str().len()).sum();
    assert!(
        held >= names,
        "a parse that returned {names} bytes of names held {held}"
    );
}

#[test]
fn index_files_whole_damaged_and_random_are_parsed_within_bounds() {
    let seed = seeded::seed("PARSERS_SEED", DEFAULT_SEED);
    let mut rng = Rng(seed);
    for n in 0..ITERATIONS {
        let context = format!("iteration {n}, seed {seed:#x} (PARSERS_SEED replays it)");
        let built = index(&mut rng);
        let whole = check_index(&built.bytes, &context);
        // An index as git writes it yields exactly its gitlinks (SHA-1 is tried first, and a
        // SHA-256 index never parses as SHA-1: its names sit 12 bytes further on).
        assert_eq!(
            whole
                .as_ref()
                .map(|(links, shared)| (links, shared.as_ref())),
            Ok((&built.gitlinks, built.shared.as_ref())),
            "{context}"
        );
        let mut damaged = built.bytes.clone();
        damage(&mut rng, &mut damaged);
        let _ = check_index(&damaged, &context);
        let mut random = b"DIRC".to_vec();
        random.extend_from_slice(&(2 + rng.below(3) as u32).to_be_bytes());
        random.extend(rng.bytes());
        let _ = check_index(&random, &context);
        let _ = check_index(&rng.bytes(), &context);
    }
}

#[test]
fn a_version_4_index_whose_names_grow_by_their_prefix_is_held_to_the_bound() {
    // Each entry keeps all of the previous name and adds one byte: a few bytes an entry, a name
    // as long as every entry before it. Unbounded, the gitlinks alone would be quadratic in the
    // file's size.
    let hash = 20;
    let count = 20_000;
    let mut bytes = b"DIRC".to_vec();
    bytes.extend_from_slice(&4u32.to_be_bytes());
    bytes.extend_from_slice(&(count as u32).to_be_bytes());
    for i in 0..count {
        let start = bytes.len();
        bytes.extend(std::iter::repeat_n(0, STAT_BYTES + hash));
        bytes[start + 24..start + 28].copy_from_slice(&GITLINK.to_be_bytes());
        bytes.extend_from_slice(&0x0fffu16.to_be_bytes());
        bytes.push(0);
        bytes.push(if i % 64 == 63 { b'/' } else { b'a' });
        bytes.push(0);
    }
    bytes.extend(std::iter::repeat_n(0, hash));
    let parsed = check_index(&bytes, &"names growing by their prefix");
    assert!(
        parsed.is_err(),
        "names past {MAX_NAME} bytes are no paths: {:?}",
        parsed.map(|(links, _)| links.len())
    );
}

// ---------------------------------------------------------------------------------------------
// `.git` files, `commondir` and worktree `gitdir` files.
// ---------------------------------------------------------------------------------------------

/// A pointer file's content: a path (relative, absolute, odd), maybe after `gitdir: `, maybe
/// with trailing whitespace and more lines.
fn pointer(rng: &mut Rng) -> Vec<u8> {
    let mut content = Vec::new();
    if rng.below(4) != 0 {
        content.extend_from_slice(b"gitdir: ");
    }
    match rng.below(3) {
        0 => content.extend(name(rng)),
        1 => content.extend(rng.bytes()),
        _ => {}
    }
    content.extend_from_slice(rng.pick(&[&b""[..], b"\n", b" \r\n", b"\t\n\nmore\n"]));
    if rng.bool() {
        content.extend(rng.bytes());
    }
    content
}

#[test]
fn gitfiles_and_commondirs_yield_their_first_line_where_they_are() {
    let seed = seeded::seed("PARSERS_SEED", DEFAULT_SEED);
    let mut rng = Rng(seed);
    let base = Path::new("/srv/repo/sub");
    for n in 0..ITERATIONS {
        let context = format!("iteration {n}, seed {seed:#x} (PARSERS_SEED replays it)");
        let mut content = pointer(&mut rng);
        if rng.below(8) == 0 {
            damage(&mut rng, &mut content);
        }
        for which in [
            Pointer::GitFile,
            Pointer::CommonDir,
            Pointer::WorktreeGitdir,
        ] {
            check_pointer(which, &content, base, &context);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ceiling files.
// ---------------------------------------------------------------------------------------------

/// A ceiling file: its keys with values of the right shape or not, repeated, in tables, with
/// comments, sometimes damaged.
fn ceiling(rng: &mut Rng) -> String {
    const KEYS: [&str; 13] = [
        "max_mode",
        "allow_network",
        "allow_unix_sockets",
        "writable_roots_under",
        "never_writable",
        "env_allow",
        "env_deny",
        "max_processes",
        "max_file_size",
        "max_address_space",
        "max_memory",
        "refuse_partial",
        "unknown_key",
    ];
    const VALUES: [&str; 14] = [
        "\"read-only\"",
        "\"workspace-write\"",
        "\"danger-full-access\"",
        "\"yolo\"",
        "true",
        "false",
        "0",
        "18446744073709551615",
        "-1",
        "[\"/home\", \"/tmp/x\"]",
        "[\"relative\"]",
        "[\"PATH\", \"*TOKEN*\"]",
        "[[1, 2], {a = 1}]",
        "{ inline = \"table\" }",
    ];
    let mut text = String::new();
    for _ in 0..rng.count() {
        match rng.below(10) {
            0 => text.push_str("[section]\n"),
            1 => text.push_str("# a comment\n"),
            2 => text.push_str(&rng.string()),
            _ => {
                let key = rng.pick(&KEYS);
                let value = rng.pick(&VALUES);
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
    }
    if rng.below(8) == 0 {
        let mut bytes = text.into_bytes();
        damage(rng, &mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

#[test]
fn ceiling_files_of_every_shape_are_read_within_bounds() {
    // The control: the parser under test tells a ceiling from a broken one.
    assert_eq!(
        check_ceiling("max_mode = \"read-only\"\n", &"control"),
        Ok(())
    );
    assert!(check_ceiling("max_mode = \"yolo\"\n", &"control").is_err());
    let seed = seeded::seed("PARSERS_SEED", DEFAULT_SEED);
    let mut rng = Rng(seed);
    for n in 0..ITERATIONS {
        let context = format!("iteration {n}, seed {seed:#x} (PARSERS_SEED replays it)");
        let text = ceiling(&mut rng);
        let _ = check_ceiling(&text, &context);
    }
}
