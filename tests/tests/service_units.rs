//! The packaged systemd units' service mode, run without systemd: the `ExecStart` line of
//! `packaging/confine-service/confine-helper.service` as written (`confine-service` binds its
//! socket itself), and as the socket unit would start it (the socket made from
//! `confine-helper.socket`'s settings and passed as descriptor 3 with `LISTEN_PID` and
//! `LISTEN_FDS`). Both as root, with two users made for the test: a member of the unit's group,
//! whose command runs as itself and confined (a write outside its workspace, to a file it owns,
//! leaves the file as it was), and a user outside the group, who cannot connect, is told which
//! group it needs, and gets nothing run. Opened to everyone, the socket still refuses the
//! outsider by its credentials.

#[path = "../shared/socket_activation.rs"]
mod socket_activation;
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentd::api::helper_client::{HelperClient, HelperEndpoint, Outcome, SpawnSpec};
use confine_protocol::{ExitStatus, Mode};
use support::users::{Group, system_group, system_user};

/// The users this test makes, and removes when it ends (`support::users`).
const MEMBER: &str = "agentd-svc-member";
const OUTSIDER: &str = "agentd-svc-outsider";
/// A second member, served while the first is at its cap.
const SECOND_MEMBER: &str = "agentd-svc-second";
/// A second group of the member's, which its commands must have too.
const EXTRA_GROUP: &str = "agentd-svc-extra";

fn unit(name: &str) -> String {
    let path = support::workspace()
        .join("packaging/confine-service")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of `key=` in a unit file (the last one, as systemd reads it).
fn setting(text: &str, key: &str) -> String {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .trim()
        .to_owned()
}

/// A root-owned directory tree for this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(base: &str, tag: &str) -> Scratch {
        let dir = Path::new(base).join(format!("agentd-units-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Stops a service and returns its log (its stderr, which its peers' helpers share).
fn stop(mut service: Child) -> String {
    let _ = service.kill();
    let out = service.wait_with_output().expect("the service's log");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Where everything lives: the binaries (root-owned, reachable by every user), the socket, and
/// a home and a workspace per user.
struct Layout {
    _bin: Scratch,
    _run: Scratch,
    _homes: Scratch,
    service: PathBuf,
    agentd: PathBuf,
    socket: PathBuf,
    homes: PathBuf,
}

impl Layout {
    fn new(tag: &str, listen_stream: &str) -> Layout {
        let bin = Scratch::new("/var/tmp", &format!("{tag}-bin"));
        let service = bin.0.join("confine-service");
        let agentd = bin.0.join("agentd");
        // The service executes the helper beside it.
        for name in ["confine-helper", "confine-service", "agentd"] {
            std::fs::copy(support::binary(name), bin.0.join(name)).expect("copy a binary");
        }
        let run = Scratch::new("/run", tag);
        let socket = run.0.join("sock").join(
            Path::new(listen_stream)
                .file_name()
                .expect("the socket's name"),
        );
        let homes = Scratch::new("/var/tmp", &format!("{tag}-homes"));
        Layout {
            service,
            agentd,
            socket,
            homes: homes.0.clone(),
            _bin: bin,
            _run: run,
            _homes: homes,
        }
    }

    /// The unit's `ExecStart`, its binary and socket replaced by this layout's.
    fn exec_start(&self, service: &str, listen_stream: &str) -> Command {
        let line = setting(service, "ExecStart");
        let mut words = line.split_whitespace().map(|w| {
            if w == listen_stream {
                self.socket.to_str().expect("utf-8").to_owned()
            } else {
                w.to_owned()
            }
        });
        let program = words.next().expect("a program");
        assert_eq!(program, "/usr/bin/confine-service", "{line}");
        let mut command = Command::new(&self.service);
        command
            .args(words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// `agentd run` as `user` (with its groups, by `runuser`), in a workspace of its own.
    fn agentd_run(&self, user: &str, ids: (u32, u32), script: &str) -> (Output, PathBuf) {
        self.agentd_run_with(user, ids, &[], script)
    }

    /// `agentd run` as `user` with `extra` options besides the layout's.
    fn agentd_run_with(
        &self,
        user: &str,
        ids: (u32, u32),
        extra: &[&str],
        script: &str,
    ) -> (Output, PathBuf) {
        let (mut command, home) = self.agentd_command(user, ids, extra, script);
        let out = command.output().expect("runuser agentd run");
        (out, home)
    }

    /// The command of `agentd run` as `user`, and the user's home (its workspace is `ws` there).
    fn agentd_command(
        &self,
        user: &str,
        (uid, gid): (u32, u32),
        extra: &[&str],
        script: &str,
    ) -> (Command, PathBuf) {
        let home = self.homes.join(user);
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).expect("workspace");
        for dir in [&home, &ws] {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown");
        }
        let mut command = Command::new("runuser");
        command
            .args(["-u", user, "--", "env", "-i"])
            .arg(format!("HOME={}", home.display()))
            .arg("PATH=/usr/bin:/bin")
            .arg(&self.agentd)
            .args([
                "run",
                "--json",
                "--mode",
                "workspace-write",
                "--helper-socket",
            ])
            .arg(&self.socket)
            .arg("--workspace")
            .arg(&ws)
            .args(extra)
            .args(["--", "sh", "-c", script])
            .current_dir(&ws);
        (command, home)
    }
}

/// The socket `confine-helper.socket` describes, made as systemd makes it; `group` is the
/// unit's `SocketGroup`, held by the caller.
fn socket_as_the_unit_makes_it(socket_unit: &str, path: &Path, group: &Group) -> OwnedFd {
    let dir = path.parent().expect("the socket's directory");
    let mode = |text: String| u32::from_str_radix(&text, 8).expect("an octal mode");
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::set_permissions(
        dir,
        std::fs::Permissions::from_mode(mode(setting(socket_unit, "DirectoryMode"))),
    )
    .expect("chmod");
    let sock = socket_activation::bound(path, true);
    assert_eq!(setting(socket_unit, "SocketUser"), "root");
    assert_eq!(setting(socket_unit, "SocketGroup"), group.name);
    std::os::unix::fs::chown(path, Some(0), Some(group.gid)).expect("chown");
    std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(mode(setting(socket_unit, "SocketMode"))),
    )
    .expect("chmod");
    sock
}

/// `command` started with `listener` as descriptor 3 and `LISTEN_PID`/`LISTEN_FDS` naming it,
/// as systemd starts a socket-activated service.
fn activated(command: Command, listener: OwnedFd) -> Command {
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let mut shell = socket_activation::activated(command.get_program(), &args, listener);
    shell
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    shell
}

/// Waits (by connecting, which the listening socket answers at once) until the socket exists.
fn until_listening(socket: &Path, service: &mut Child) {
    let start = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(
            service.try_wait().expect("try_wait").is_none(),
            "the service exited before it listened"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the service did not listen on {} within 30 s",
            socket.display()
        );
        std::thread::yield_now();
    }
}

/// The last line of `agentd run --json`'s stderr: the command's facts.
fn facts(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no facts ({e}): {stderr}"))
}

/// The member is served as itself and confined; the outsider cannot connect and is told why.
fn check_both_users(
    layout: &Layout,
    group_name: &str,
    extra: &Group,
    member: (u32, u32),
    outsider: (u32, u32),
) {
    let script =
        "id -u > who; cat \"$HOME/extra-only\" > extra; echo changed > \"$HOME/outside\" || true";
    // The file outside the workspace is the member's own: only the sandbox can stop the write.
    let home = layout.homes.join(MEMBER);
    std::fs::create_dir_all(&home).expect("home");
    std::os::unix::fs::chown(&home, Some(member.0), Some(member.1)).expect("chown");
    let outside = home.join("outside");
    std::fs::write(&outside, "original\n").expect("canary");
    std::os::unix::fs::chown(&outside, Some(member.0), Some(member.1)).expect("chown");
    let extra_only = home.join("extra-only");
    std::fs::write(&extra_only, "for the extra group\n").expect("the extra group's file");
    std::os::unix::fs::chown(&extra_only, Some(0), Some(extra.gid)).expect("chown");
    std::fs::set_permissions(&extra_only, std::fs::Permissions::from_mode(0o040)).expect("chmod");
    let (out, home) = layout.agentd_run(MEMBER, member, script);
    assert!(out.status.success(), "the member was not served: {out:?}");
    let who = std::fs::read_to_string(home.join("ws/who")).expect("the command's output");
    assert_eq!(
        who.trim(),
        member.0.to_string(),
        "the command ran as another uid"
    );
    assert_eq!(
        std::fs::metadata(home.join("ws/who")).expect("who").uid(),
        member.0
    );
    // With the member's groups, as its login has them: a file only the extra group may read is
    // read. (Not by `id -G`: inside bwrap's user namespace an unmapped group shows as nogroup,
    // though the kernel still grants by it.)
    assert_eq!(
        std::fs::read_to_string(home.join("ws/extra")).unwrap_or_default(),
        "for the extra group\n",
        "the command could not read a file of the member's extra group"
    );
    assert_eq!(
        std::fs::read_to_string(&outside).expect("canary"),
        "original\n",
        "a write outside the workspace reached the host"
    );
    let facts = facts(&out);
    assert_eq!(facts["refused"], serde_json::Value::Null, "{facts}");
    assert_eq!(facts["runner_failure"], serde_json::Value::Null, "{facts}");

    // The service socket is never one a member's command may connect to: the member's helper
    // knows it as one of its own (`--served-from`), though it never bound it.
    let socket = layout.socket.to_str().expect("utf-8");
    let (out, home) =
        layout.agentd_run_with(MEMBER, member, &["--unix-socket", socket], "id -u > listed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("one of the helper's own files"),
        "refused for another reason: {stderr}"
    );
    assert!(!home.join("ws/listed").exists(), "the command ran");

    let (out, home) = layout.agentd_run(OUTSIDER, outsider, "id -u > who");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("Permission denied") && stderr.contains(&format!("group {group_name}")),
        "the hint does not name the group: {stderr}"
    );
    assert!(!home.join("ws/who").exists(), "the outsider's command ran");
}

#[test]
fn the_packaged_units_serve_a_member_of_their_group_as_itself_and_refuse_anyone_else() {
    const NAME: &str =
        "the_packaged_units_serve_a_member_of_their_group_as_itself_and_refuse_anyone_else";
    if !nix::unistd::geteuid().is_root() {
        support::skip::skip(
            NAME,
            support::skip::Need::Root,
            "making users and a root service needs root",
        );
        return;
    }
    let service = unit("confine-helper.service");
    let socket_unit = unit("confine-helper.socket");
    let listen_stream = setting(&socket_unit, "ListenStream");
    let group_name = setting(&socket_unit, "SocketGroup");
    assert!(
        setting(&service, "ExecStart").contains(&format!("--group {group_name}")),
        "the service and the socket unit name different groups"
    );
    // Held to the end of the test, after the services below are stopped: then removed.
    let group = system_group(&group_name);
    let extra = system_group(EXTRA_GROUP);
    let member_user = system_user(MEMBER, &[&group_name, EXTRA_GROUP]);
    let outsider_user = system_user(OUTSIDER, &[]);
    let (member, outsider) = (member_user.ids(), outsider_user.ids());

    // The ExecStart line alone: the service binds the socket itself.
    let layout = Layout::new("bound", &listen_stream);
    let mut child = layout
        .exec_start(&service, &listen_stream)
        .spawn()
        .expect("start the ExecStart line");
    until_listening(&layout.socket, &mut child);
    let dir = std::fs::metadata(layout.socket.parent().expect("dir")).expect("dir");
    assert_eq!(dir.mode() & 0o777, 0o750);
    check_both_users(&layout, &group_name, &extra, member, outsider);

    // Opened to everyone, the outsider reaches the socket and is refused by its credentials.
    std::fs::set_permissions(&layout.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod");
    std::fs::set_permissions(
        layout.socket.parent().expect("dir"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let (out, home) = layout.agentd_run(OUTSIDER, outsider, "id -u > who");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!home.join("ws/who").exists(), "the outsider's command ran");
    let log = stop(child);
    assert!(
        log.contains(&format!("refused peer uid {}", outsider.0)),
        "the refusal was not logged: {log}"
    );
    assert!(
        log.contains("served by helper pid") && log.contains(&format!("as uid {}", member.0)),
        "{log}"
    );

    // As the socket unit starts it: the socket made from the unit's settings, passed in.
    let layout = Layout::new("activated", &listen_stream);
    let listener = socket_as_the_unit_makes_it(&socket_unit, &layout.socket, &group);
    let mut child = activated(layout.exec_start(&service, &listen_stream), listener)
        .spawn()
        .expect("start the ExecStart line as the socket unit would");
    until_listening(&layout.socket, &mut child);
    check_both_users(&layout, &group_name, &extra, member, outsider);
    let log = stop(child);
    assert!(log.contains("served by helper pid"), "{log}");
}

/// A share of the machine a unit setting gives as a percentage (`33%`), as a number.
fn percent(value: &str) -> Option<u32> {
    value.strip_suffix('%')?.parse().ok()
}

#[test]
fn the_packaged_service_bounds_its_tasks_and_memory_and_delegates_its_cgroup_to_the_helper() {
    const NAME: &str =
        "the_packaged_service_bounds_its_tasks_and_memory_and_delegates_its_cgroup_to_the_helper";
    let service = unit("confine-helper.service");
    // A share of the machine, never all of it: the rest of the system and its other users
    // keep theirs.
    for key in ["TasksMax", "MemoryMax"] {
        let value = setting(&service, key);
        assert!(
            percent(&value).is_some_and(|p| (1..100).contains(&p)),
            "{key}={value} is not a share of the machine below 100%"
        );
    }
    // A cgroup per member only where systemd hands the unit's cgroup over, and handed over only
    // to a helper that uses it: either alone would let the two managers fight over it.
    let delegated = setting(&service, "ExecStart").contains("--delegated-cgroup");
    assert_eq!(setting(&service, "Delegate"), "yes");
    assert!(delegated, "Delegate=yes, but the helper is not told so");
    // systemd reads the units as written, where it is installed (a copy whose program exists
    // and whose manual page is not looked up). The control: a value it cannot read is reported.
    let verify = |text: &str| -> Option<String> {
        let dir = Scratch::new("/var/tmp", "verify");
        let socket = unit("confine-helper.socket");
        for (name, text) in [
            ("confine-helper.service", text),
            ("confine-helper.socket", &socket),
        ] {
            let usable: Vec<&str> = text
                .lines()
                .filter(|line| !line.starts_with("Documentation="))
                .collect();
            let usable = usable
                .join("\n")
                .replace("/usr/bin/confine-service", "/bin/true");
            std::fs::write(dir.0.join(name), usable).expect("a copy of the unit");
        }
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(dir.0.join("confine-helper.service"))
            .output()
            .ok()?;
        Some(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    match verify(&service) {
        None => support::skip::skip_part(
            NAME,
            "systemd's reading",
            support::skip::Need::SystemdAnalyze,
            "no systemd-analyze here (apt-get install systemd)",
        ),
        Some(said) => {
            assert_eq!(said, "", "systemd-analyze verify");
            let broken = service.replace("TasksMax=", "TasksMax=many");
            let said = verify(&broken).expect("systemd-analyze ran a moment ago");
            assert!(said.contains("many33%"), "{said}");
        }
    }
}

/// How long a test waits for an event of the service (a log line, a file a command makes).
const LIMIT: Duration = Duration::from_secs(30);

/// The lines a running service logs, as they come.
struct LogLines(mpsc::Receiver<String>);

impl LogLines {
    fn of(service: &mut Child) -> LogLines {
        let stderr = service.stderr.take().expect("the service's stderr");
        let (lines, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        LogLines(receiver)
    }

    /// Waits (up to `LIMIT`) for a line holding `words`, returning it.
    fn wait_for(&self, words: &str) -> String {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) if line.contains(words) => return line,
                Ok(_) => {}
                Err(e) => panic!("the service logged no line holding {words:?}: {e}"),
            }
        }
    }
}

/// A running service, stopped when dropped, also when a test fails on the way.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The packaged service's `ExecStart` line, for its group (held: made if missing), with `extra`
/// arguments, started in a layout of its own and listening; and its log. Bound in this order,
/// the service stops before the group can go.
fn unit_service(tag: &str, extra: &[&str]) -> (Group, Layout, Running, LogLines) {
    let service = unit("confine-helper.service");
    let listen_stream = setting(&unit("confine-helper.socket"), "ListenStream");
    let group = system_group(&setting(&unit("confine-helper.socket"), "SocketGroup"));
    let layout = Layout::new(tag, &listen_stream);
    let mut child = layout
        .exec_start(&service, &listen_stream)
        .args(extra)
        .spawn()
        .expect("start the ExecStart line");
    let log = LogLines::of(&mut child);
    let mut running = Running(child);
    until_listening(&layout.socket, &mut running.0);
    (group, layout, running, log)
}

#[test]
fn a_member_past_its_cap_is_told_which_by_agentd_while_another_member_is_served() {
    const NAME: &str =
        "a_member_past_its_cap_is_told_which_by_agentd_while_another_member_is_served";
    if !nix::unistd::geteuid().is_root() {
        support::skip::skip(
            NAME,
            support::skip::Need::Root,
            "making users and a root service needs root",
        );
        return;
    }
    let group = setting(&unit("confine-helper.socket"), "SocketGroup");
    let _group = system_group(&group);
    let _extra = system_group(EXTRA_GROUP);
    let member_user = system_user(MEMBER, &[&group, EXTRA_GROUP]);
    let second_user = system_user(SECOND_MEMBER, &[&group]);
    let (member, second) = (member_user.ids(), second_user.ids());
    let (_unit_group, layout, _running, log) = unit_service("capped", &["--max-per-user", "1"]);

    // The member's one connection: an `agentd run` whose command waits for a line.
    let script = ": > started; read line; echo \"$line\" > done";
    let (mut first, home) = layout.agentd_command(MEMBER, member, &[], script);
    let ws = home.join("ws");
    let mut first = first
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the first agentd run");
    assert!(
        support::wait_for_file(&ws, "started", LIMIT),
        "the first command did not start"
    );

    // A second one is refused: agentd says which cap, in the service's words, and runs nothing.
    let (out, _) = layout.agentd_run(MEMBER, member, ": > second");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "confine-helper service: uid {} has reached the cap on connections per user, 1 \
             (--max-per-user)",
            member.0
        )),
        "agentd did not show the cap: {stderr}"
    );
    assert!(
        !stderr.contains("protocol mismatch"),
        "agentd took the refusal for another protocol: {stderr}"
    );
    assert!(!ws.join("second").exists(), "the refused command ran");
    let line = log.wait_for("--max-per-user");
    assert!(
        line.contains(&format!("refused peer uid {}", member.0)),
        "{line}"
    );

    // The control: another member is served meanwhile, as itself.
    let (out, second_home) = layout.agentd_run(SECOND_MEMBER, second, "id -u > who");
    assert!(
        out.status.success(),
        "the second member was not served: {out:?}"
    );
    let who = std::fs::read_to_string(second_home.join("ws/who")).expect("its output");
    assert_eq!(who.trim(), second.0.to_string());

    // The first command, never disturbed, ends once it has its line.
    let mut stdin = first.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("write the line");
    drop(stdin);
    let out = first.wait_with_output().expect("the first agentd run");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("done")).expect("done"),
        "go\n"
    );
}

/// `echo WORD` run through `client` (unconfined: this is about the connection); its output.
async fn echo(client: &HelperClient, word: &str) -> String {
    let (mut output, stdout) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map(|(r, w)| (std::fs::File::from(r), w))
        .expect("pipe");
    let mut spec = SpawnSpec::new(["echo", word]);
    spec.policy.mode = Mode::DangerFullAccess;
    spec.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    spec.stdout = Some(stdout);
    let handle = client.spawn(spec).await.expect("the command was taken");
    match handle.wait().await {
        Outcome::Exited(exited) => assert_eq!(exited.status, ExitStatus::Code(0)),
        other => panic!("echo {word} did not run: {other:?}"),
    }
    let mut text = String::new();
    output.read_to_string(&mut text).expect("its output");
    text
}

#[test]
fn agentd_s_next_command_runs_on_a_new_connection_after_the_service_closed_an_idle_one() {
    const NAME: &str =
        "agentd_s_next_command_runs_on_a_new_connection_after_the_service_closed_an_idle_one";
    if !nix::unistd::geteuid().is_root() {
        support::skip::skip(
            NAME,
            support::skip::Need::Root,
            "a root service, whose helpers close idle connections, needs root",
        );
        return;
    }
    // Root is admitted (its own uid), served by a helper of its own like any member.
    let (_group, layout, _running, log) = unit_service("idle", &["--idle-limit", "1"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = HelperClient::new(HelperEndpoint::Service(layout.socket.clone()));
        assert_eq!(echo(&client, "one").await, "one\n");
        // Nothing runs, nothing is sent: the helper serving agentd closes the connection.
        let closed = log.wait_for("idle for 1 s");
        assert!(closed.contains("--idle-limit"), "{closed}");
        let idle_helper = closed
            .strip_prefix("confine-helper[")
            .and_then(|rest| rest.split(']').next())
            .expect("the helper's pid")
            .to_owned();
        // The next command runs, served by a new helper.
        assert_eq!(echo(&client, "two").await, "two\n");
        let served = log.wait_for("served by helper pid");
        assert!(
            !served.contains(&format!("served by helper pid {idle_helper},")),
            "{served}"
        );
    });
}
