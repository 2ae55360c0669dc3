//! The seccomp filter's compiler: the rules of `seccomp.rs` to the classic BPF the kernel loads.
//!
//! A filter is a prologue (a foreign architecture tag and an x32 call kill the process, `clone3`
//! is answered `ENOSYS`), a binary search of the call number over the runs of numbers the rules
//! name, answering every call no rule names with `ret allow` and every call denied whatever its
//! arguments with `ret errno(EPERM)`, and a block for each call whose rules compare its
//! arguments. Why a search: the kernel runs a new filter on every call number when it is loaded,
//! to learn which calls it may allow without running it, and compiles it to machine code; a chain
//! that compares the number with every named call in turn made loading the filter cost more than
//! the rest of a command's start (RFC 0023).

use std::collections::BTreeMap;
use std::num::TryFromIntError;

use nix::libc;

#[cfg(target_arch = "x86_64")]
mod arch {
    pub(crate) const AUDIT: u32 = 0xC000_003E;
    /// System call numbers with this bit set are the x32 ABI.
    pub(crate) const X32_BIT: Option<u32> = Some(0x4000_0000);
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub(crate) const AUDIT: u32 = 0xC000_00B7;
    pub(crate) const X32_BIT: Option<u32> = None;
}

// An argument's low word is the first of its eight bytes (`low`).
#[cfg(not(target_endian = "little"))]
compile_error!("the seccomp filter reads an argument's low word first: little-endian only");

/// A seccomp filter: classic BPF instructions, as the kernel loads them.
pub(crate) type Program = Vec<libc::sock_filter>;

/// Why no filter was built: a call number or a jump does not fit, which the tests rule out. The
/// text is the detail of a `RunnerFailed{seccomp}`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilterError {
    #[error("{0}'s number: {1}")]
    SyscallNumber(&'static str, #[source] TryFromIntError),
    #[error("a jump too long for one instruction: {0}")]
    Jump(#[source] TryFromIntError),
}

/// How a condition compares one 32-bit word of a call's arguments with a value; `Masked(mask,
/// value)`: the word's bits under `mask` equal `value`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Test {
    Eq(u32),
    Ne(u32),
    Lt(u32),
    Gt(u32),
    Masked(u32, u32),
}

/// A test of the word at this offset of the `seccomp_data` the kernel hands the filter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cond(u32, Test);

/// A test of the low 32 bits of argument `arg`, as the kernel reads most of them (`int`).
pub(crate) const fn low(arg: u32, test: Test) -> Cond {
    Cond(OFFSET_ARGS + 8 * arg, test)
}

/// A test of the high 32 bits of argument `arg`.
pub(crate) const fn high(arg: u32, test: Test) -> Cond {
    Cond(OFFSET_ARGS + 8 * arg + 4, test)
}

/// A rule denies its call when every one of its conditions holds.
pub(crate) type Rule = Vec<Cond>;

/// The filter's rules, by system call number; an empty list denies the call outright.
pub(crate) type Rules = BTreeMap<i64, Vec<Rule>>;

/// The filter of `rules`: the prologue (architecture, x32, `clone3`), a binary search of the call
/// number that answers every call no rule names and every call denied outright, then a block for
/// each call whose rules look at its arguments. Errors only if a number or a jump does not fit,
/// which the tests rule out.
pub(crate) fn compile(rules: Rules) -> Result<Program, FilterError> {
    let mut runs: Vec<(u32, Target)> = vec![(0, Target::Allow)];
    let mut blocks = Vec::new();
    for (nr, list) in rules {
        let nr = u32::try_from(nr).map_err(|e| FilterError::SyscallNumber("a rule", e))?;
        let target = if list.is_empty() {
            Target::Deny
        } else {
            // The call's block: each rule in turn, then `ret allow`.
            let mut block = Vec::new();
            for rule in &list {
                block.extend(denial(rule)?);
            }
            block.push(insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
            blocks.push(block);
            Target::Rules(blocks.len() - 1)
        };
        // The run the previous number ended where this one starts: it goes on.
        if runs.last().is_some_and(|(start, _)| *start == nr) {
            runs.pop();
        }
        if runs.last().is_none_or(|(_, t)| *t != target) {
            runs.push((nr, target));
        }
        runs.push((nr.saturating_add(1), Target::Allow));
    }
    let mut program = prologue()?;
    program.extend(dispatch(&runs, &blocks)?);
    Ok(program)
}

/// The filter that hands every `connect` to the shim (`SECCOMP_RET_USER_NOTIF`), for
/// `unix_sockets`; it allows everything else, which the command's main filter then judges. A
/// foreign architecture or an x32 call is left to the main filter, which kills it.
pub(crate) fn connect_notify_program() -> Result<Program, FilterError> {
    let connect =
        u32::try_from(libc::SYS_connect).map_err(|e| FilterError::SyscallNumber("connect", e))?;
    Ok(vec![
        // 0: arch; 1: a foreign one → 5 (allow)
        insn(LD_W_ABS, 0, 0, OFFSET_ARCH),
        insn(JEQ_K, 0, 3, arch::AUDIT),
        // 2: nr; 3: not connect → 5
        insn(LD_W_ABS, 0, 0, OFFSET_NR),
        insn(JEQ_K, 0, 1, connect),
        // 4, 5
        insn(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

/// The instructions every call meets first: a foreign architecture tag and an x32 call kill the
/// process, `clone3` is answered `ENOSYS`; the call's number is then in the accumulator.
fn prologue() -> Result<Program, FilterError> {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let enosys = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS.unsigned_abs() & libc::SECCOMP_RET_DATA);
    let clone3 =
        u32::try_from(libc::SYS_clone3).map_err(|e| FilterError::SyscallNumber("clone3", e))?;
    let mut p = vec![
        insn(LD_W_ABS, 0, 0, OFFSET_ARCH),
        // Our architecture skips the kill.
        insn(JEQ_K, 1, 0, arch::AUDIT),
        insn(RET_K, 0, 0, kill),
        insn(LD_W_ABS, 0, 0, OFFSET_NR),
    ];
    if let Some(bit) = arch::X32_BIT {
        // nr >= bit → kill, else skip it.
        p.extend([insn(JGE_K, 0, 1, bit), insn(RET_K, 0, 0, kill)]);
    }
    // nr == clone3 → ENOSYS, else skip the return.
    p.extend([insn(JEQ_K, 0, 1, clone3), insn(RET_K, 0, 0, enosys)]);
    Ok(p)
}

/// What the search does with a run of call numbers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    /// `ret allow`: calls no rule names.
    Allow,
    /// `ret errno(EPERM)`: calls denied whatever their arguments.
    Deny,
    /// The block of this index: a call whose rules look at its arguments.
    Rules(usize),
}

/// A binary search of the call number (in the accumulator) over `runs`, then `ret allow`,
/// `ret errno(EPERM)`, a jump to each of `blocks` and the blocks. Each run is the first number
/// of a run of numbers and what to do with them; the first starts at 0, they are sorted, the last
/// runs to the end.
fn dispatch(runs: &[(u32, Target)], blocks: &[Program]) -> Result<Program, FilterError> {
    let mut program = vec![
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        insn(RET_K, 0, 0, EPERM),
    ];
    // The jumps to the blocks, which may lie further than a comparison can jump.
    let mut ahead = blocks.len();
    for (i, block) in blocks.iter().enumerate() {
        let k = u32::try_from(ahead - (i + 1)).map_err(FilterError::Jump)?;
        program.push(insn(JA, 0, 0, k));
        ahead += block.len();
    }
    program.extend(blocks.iter().flatten());
    let first = search(runs, program.len(), &mut program)?;
    if first > 0 {
        // One run, not allowed: a jump straight to its answer.
        let k = u32::try_from(first).map_err(FilterError::Jump)?;
        program.insert(0, insn(JA, 0, 0, k));
    }
    Ok(program)
}

/// Puts before `program` the comparisons (`nr >= bound`) deciding between `runs`, and returns
/// where a jump from right before them must go, counted from the front of `program`: their first,
/// or for one run its answer. The last `answers` instructions of `program` are the answers
/// (`ret allow`, `ret errno`, the jumps to the blocks). Built from the end, so that every jump
/// runs forward over what is already built.
fn search(
    runs: &[(u32, Target)],
    answers: usize,
    program: &mut Program,
) -> Result<usize, FilterError> {
    let (below, above) = runs.split_at(runs.len() / 2);
    let (Some(_), Some((bound, _))) = (below.first(), above.first()) else {
        let answer = match runs.first() {
            Some((_, Target::Allow)) | None => 0,
            Some((_, Target::Deny)) => 1,
            Some((_, Target::Rules(block))) => 2 + block,
        };
        return Ok(program.len() - answers + answer);
    };
    // The runs at or above the bound last, then those below, then the comparison before both.
    let at_or_above = search(above, answers, program)?;
    let before = program.len();
    let below = search(below, answers, program)?;
    let at_or_above = at_or_above + (program.len() - before);
    let jump = |to: usize| u8::try_from(to).map_err(FilterError::Jump);
    program.insert(0, insn(JGE_K, jump(at_or_above)?, jump(below)?, *bound));
    Ok(0)
}

/// A rule's instructions: each condition's word loaded and compared, a miss jumping past the
/// rule's closing `ret errno(EPERM)` to what follows it. Built from the end, so that each miss
/// jumps over what is already built.
fn denial(rule: &[Cond]) -> Result<Program, FilterError> {
    let mut program = vec![insn(RET_K, 0, 0, EPERM)];
    for Cond(offset, test) in rule.iter().rev() {
        let miss = u8::try_from(program.len()).map_err(FilterError::Jump)?;
        let (and, compare) = match *test {
            Test::Eq(value) => (None, insn(JEQ_K, 0, miss, value)),
            Test::Ne(value) => (None, insn(JEQ_K, miss, 0, value)),
            Test::Lt(value) => (None, insn(JGE_K, miss, 0, value)),
            Test::Gt(value) => (None, insn(JGT_K, 0, miss, value)),
            Test::Masked(mask, value) => (
                Some(insn(ALU_AND_K, 0, 0, mask)),
                insn(JEQ_K, 0, miss, value),
            ),
        };
        let load = insn(LD_W_ABS, 0, 0, *offset);
        program.splice(0..0, [Some(load), and, Some(compare)].into_iter().flatten());
    }
    Ok(program)
}

// The instructions' opcodes, and where `seccomp_data` holds the call's number, architecture and
// arguments.
const LD_W_ABS: u16 = opcode(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
const ALU_AND_K: u16 = opcode(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K);
const JA: u16 = opcode(libc::BPF_JMP | libc::BPF_JA);
const JEQ_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K);
const JGE_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K);
const JGT_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K);
const RET_K: u16 = opcode(libc::BPF_RET | libc::BPF_K);
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARGS: u32 = 16;
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs();

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// A BPF opcode as an instruction holds it: the kernel's constants are `u32`, the field is
/// `u16`, and every opcode fits in its low half.
const fn opcode(code: u32) -> u16 {
    let [first, second, _, _] = code.to_le_bytes();
    u16::from_le_bytes([first, second])
}

/// The program as the bytes `bwrap --seccomp FD` reads: native-endian `sock_filter`s.
pub(crate) fn to_bytes(program: &[libc::sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // The classic BPF seccompiler's programs use beyond the helper's own.
    const JSET_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K);
    pub(crate) const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    pub(crate) const EPERM: u32 = super::EPERM;

    /// What `program` answers to system call `nr` with `args`, on this architecture.
    pub(crate) fn answer(program: &[libc::sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        answer_as(program, arch::AUDIT, nr, args)
    }

    /// What `program` answers to system call `nr` with `args` under the architecture tag `arch`,
    /// run as the kernel runs it on a `seccomp_data`.
    pub(crate) fn answer_as(
        program: &[libc::sock_filter],
        arch: u32,
        nr: i64,
        args: [u64; 6],
    ) -> u32 {
        let mut data = Vec::new();
        let nr = u32::try_from(nr).expect("a call number");
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for arg in args {
            data.extend_from_slice(&arg.to_ne_bytes());
        }
        assert_eq!(data.len(), OFFSET_ARGS as usize + 48);
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let insn = &program[pc];
            let k = insn.k;
            let jump = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            pc += 1 + match insn.code {
                LD_W_ABS => {
                    let at = k as usize;
                    a = u32::from_ne_bytes(data[at..at + 4].try_into().expect("a word"));
                    0
                }
                ALU_AND_K => {
                    a &= k;
                    0
                }
                JA => k as usize,
                JEQ_K => jump(a == k),
                JGT_K => jump(a > k),
                JGE_K => jump(a >= k),
                JSET_K => jump(a & k != 0),
                RET_K => return k,
                other => panic!("an instruction this interpreter does not know: {other:#x}"),
            };
        }
    }

    /// Call numbers past every one the filters name (the newest is in the 460s).
    pub(crate) const PAST_EVERY_CALL: u32 = 1100;

    /// The runs of `named`'s numbers, each with `target`, between runs of allowed numbers.
    fn runs_of(named: &[u32], target: Target) -> Vec<(u32, Target)> {
        let mut runs = vec![(0, Target::Allow)];
        for nr in 0..PAST_EVERY_CALL {
            let here = if named.contains(&nr) {
                target
            } else {
                Target::Allow
            };
            if runs.last().is_some_and(|(_, t)| *t != here) {
                runs.push((nr, here));
            }
        }
        runs
    }

    #[test]
    fn the_search_answers_each_number_as_its_run_says() {
        // The one block answers with a mark of its own.
        let mark = libc::SECCOMP_RET_TRACE | 7;
        let blocks = [vec![insn(RET_K, 0, 0, mark)]];
        let mut lists: Vec<Vec<(u32, Target)>> = vec![
            vec![(0, Target::Allow)],
            vec![(0, Target::Rules(0))],
            vec![(0, Target::Deny), (1, Target::Allow)],
            vec![
                (0, Target::Allow),
                (5, Target::Deny),
                (8, Target::Rules(0)),
                (9, Target::Allow),
            ],
        ];
        for n in 1..=9 {
            let named: Vec<u32> = (0..n * 7).filter(|nr| nr % n != 1).collect();
            lists.push(runs_of(&named, Target::Deny));
            lists.push(runs_of(&named, Target::Rules(0)));
        }
        for runs in lists {
            let mut search = vec![insn(LD_W_ABS, 0, 0, OFFSET_NR)];
            search.extend(dispatch(&runs, &blocks).expect("search"));
            for nr in 0..PAST_EVERY_CALL {
                let run = runs
                    .iter()
                    .rev()
                    .find(|(start, _)| *start <= nr)
                    .expect("a run");
                let expected = match run.1 {
                    Target::Allow => ALLOW,
                    Target::Deny => EPERM,
                    _ => mark,
                };
                let got = answer(&search, i64::from(nr), [0; 6]);
                assert_eq!(got, expected, "call {nr} of {runs:?}");
            }
        }
    }

    /// The rules for seccompiler, which reads an argument as a whole: the high word is tested
    /// only as the helper's rules use it, not zero (the argument past 32 bits).
    fn for_seccompiler(rules: Rules) -> BTreeMap<i64, Vec<seccompiler::SeccompRule>> {
        use seccompiler::{SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition};
        let condition = |cond: &Cond| {
            let (arg, word) = ((cond.0 - OFFSET_ARGS) / 8, (cond.0 - OFFSET_ARGS) % 8);
            let arg = u8::try_from(arg).expect("an argument");
            let (op, value) = match (word, cond.1) {
                (4, Test::Ne(0)) => {
                    return SeccompCondition::new(arg, Len::Qword, Op::Gt, 0xFFFF_FFFF);
                }
                (0, Test::Eq(v)) => (Op::Eq, v),
                (0, Test::Ne(v)) => (Op::Ne, v),
                (0, Test::Lt(v)) => (Op::Lt, v),
                (0, Test::Gt(v)) => (Op::Gt, v),
                (0, Test::Masked(mask, value)) => (Op::MaskedEq(u64::from(mask)), value),
                other => panic!("no seccompiler condition for {other:?}"),
            };
            SeccompCondition::new(arg, Len::Dword, op, u64::from(value))
        };
        let rule = |rule: &Rule| {
            let conditions = rule.iter().map(condition).collect::<Result<_, _>>();
            seccompiler::SeccompRule::new(conditions.expect("conditions")).expect("a rule")
        };
        rules
            .into_iter()
            .map(|(nr, list)| (nr, list.iter().map(rule).collect()))
            .collect()
    }

    /// Arguments for a call's rules: each of the values they compare with, its neighbours, and
    /// each with bits above the low word, in every argument, mixed by a fixed pseudo-random walk.
    pub(crate) fn arguments_for(list: &[Rule]) -> Vec<[u64; 6]> {
        let mut pool: Vec<u64> = vec![0, 1, 2, 3, 5, 0xF, 0x10, 0xFFFF_FFFF, u64::MAX];
        for cond in list.iter().flatten() {
            let (Test::Eq(v) | Test::Ne(v) | Test::Lt(v) | Test::Gt(v) | Test::Masked(_, v)) =
                cond.1;
            let v = u64::from(v);
            pool.extend([
                v,
                v.wrapping_sub(1),
                v + 1,
                v | 1 << 32,
                v | 0x800,
                v | 0x80000,
            ]);
        }
        let mut next = walk(0x9E37_79B9_7F4A_7C15);
        let mut pick = || pool[usize::try_from(next(pool.len() as u64)).expect("an index")];
        (0..800).map(|_| [(); 6].map(|()| pick())).collect()
    }

    /// seccompiler's program of `rules`, as the helper's own instructions.
    pub(crate) fn seccompiler_program(rules: Rules) -> Program {
        let filter = seccompiler::SeccompFilter::new(
            for_seccompiler(rules),
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(libc::EPERM as u32),
            std::env::consts::ARCH.try_into().expect("an architecture"),
        )
        .expect("seccompiler's filter");
        let program: seccompiler::BpfProgram = filter.try_into().expect("seccompiler's program");
        program
            .iter()
            .map(|i| insn(i.code, i.jt, i.jf, i.k))
            .collect()
    }

    /// A fixed pseudo-random walk (xorshift): each call, a number below `below`.
    fn walk(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut state = seed;
        move |below| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        }
    }

    #[test]
    fn generated_rule_sets_compile_as_seccompiler_compiles_them() {
        // Rule sets no variant of the filter has: runs of neighbouring numbers and lone ones,
        // calls denied outright beside calls with up to three rules of up to three tests of every
        // kind, in any argument, in the low word and the high.
        let mut next = walk(0x2545_F491_4F6C_DD1D);
        let values = [0u32, 1, 2, 5, 7, 0xF, 0x80, 0xFFFF_FFFF];
        let value =
            |next: &mut dyn FnMut(u64) -> u64| values[usize::try_from(next(8)).expect("an index")];
        for _ in 0..100 {
            let mut rules = Rules::new();
            let start = i64::try_from(next(400)).expect("a number");
            for _ in 0..=next(30) {
                let nr = start + i64::try_from(next(60)).expect("a number");
                let list: Vec<Rule> = (0..next(4))
                    .map(|_| {
                        (0..=next(3))
                            .map(|_| {
                                let arg = u32::try_from(next(6)).expect("an argument");
                                let (v, mask) = (value(&mut next), value(&mut next));
                                let test = match next(6) {
                                    0 => return high(arg, Test::Ne(0)),
                                    1 => Test::Eq(v),
                                    2 => Test::Ne(v),
                                    3 => Test::Lt(v),
                                    4 => Test::Gt(v),
                                    _ => Test::Masked(mask, v & mask),
                                };
                                low(arg, test)
                            })
                            .collect()
                    })
                    .collect();
                rules.insert(nr, list);
            }
            let (ours, theirs) = (
                compile(rules.clone()).expect("filter"),
                seccompiler_program(rules.clone()),
            );
            for nr in (0..i64::from(PAST_EVERY_CALL)).filter(|nr| *nr != libc::SYS_clone3) {
                let mut args = vec![[0; 6], [u64::MAX; 6]];
                if let Some(list) = rules.get(&nr) {
                    args.extend(arguments_for(list).into_iter().take(100));
                }
                for args in args {
                    let (a, b) = (answer(&ours, nr, args), answer(&theirs, nr, args));
                    assert_eq!(a, b, "call {nr} {args:x?} of {rules:?}");
                }
            }
        }
    }

    #[test]
    fn a_foreign_architecture_and_x32_calls_are_killed() {
        let kill = libc::SECCOMP_RET_KILL_PROCESS;
        // i386's tag: its numbers mean other calls.
        let i386 = 0x4000_0003;
        let rules = Rules::from([(libc::SYS_ptrace, vec![])]);
        let program = compile(rules).expect("filter");
        assert_eq!(answer_as(&program, i386, libc::SYS_getpid, [0; 6]), kill);
        // The controls: the same call under this architecture's tag, and the rule's call.
        assert_eq!(answer(&program, libc::SYS_getpid, [0; 6]), ALLOW);
        assert_eq!(answer(&program, libc::SYS_ptrace, [0; 6]), EPERM);
        if let Some(bit) = arch::X32_BIT {
            let x32 = i64::from(bit) | libc::SYS_getpid;
            assert_eq!(answer(&program, x32, [0; 6]), kill);
        }
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(answer(&program, libc::SYS_clone3, [0; 6]), enosys);
    }

    #[test]
    fn bytes_are_eight_per_instruction() {
        let program = compile(Rules::from([(libc::SYS_ptrace, vec![])])).expect("filter");
        assert_eq!(to_bytes(&program).len(), program.len() * 8);
    }
}
