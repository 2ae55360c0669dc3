//! The fixed parts of every Seatbelt profile: what a command is allowed whatever its policy
//! ([`BASE`]), the network's when it is allowed ([`NETWORK_ALLOWED`], [`TLS`]), and what is
//! taken away last, whatever a rule before allows ([`DENIED`]).
//!
//! The profile starts from `(deny default)`: an operation, a Mach service or a sysctl that no
//! rule names is denied. Each allowed one is named with why a shell, git, a compiler or a TLS
//! client needs it; the Mach services are also listed in [`SERVICES`], which the run's
//! `session-services` gap names (a service acts outside the sandbox for the command, so what it
//! does is not confined). SBPL lets the last matching rule win, so [`DENIED`] comes last.

/// The Mach services every profile lets a command look up, as the gap names them.
pub(crate) const SERVICES: &str = "com.apple.system.opendirectoryd.libinfo and \
     com.apple.system.opendirectoryd.membership (users and groups), \
     com.apple.system.notification_center (libnotify) and com.apple.bsd.dirhelper (the user's \
     temp and cache directories); with the network, com.apple.trustd and \
     com.apple.trustd.agent (certificate trust); with the whole network, \
     com.apple.SystemConfiguration.configd, com.apple.SystemConfiguration.DNSConfiguration, \
     com.apple.dnssd.service and mDNSResponder's socket (the resolver)";

/// Allowed to every command, before the policy's own rules.
pub(crate) const BASE: &str = "\
(version 1)
; Nothing is allowed that a rule below does not name.
(deny default)
; Commands start programs and processes: the shell, git, compilers.
(allow process-exec process-fork)
; Their own processes, within this sandbox alone: state (ps, wait), signals (kill, job control).
(allow process-info* (target same-sandbox))
(allow signal (target same-sandbox))
; Reads: every file, and mapping it executable (dynamic libraries, a compiler's plugins);
; the denied reads are taken back below.
(allow file-read* file-map-executable)
; CoreFoundation reads the preferences when a program starts; writing them is denied below.
(allow user-preference-read)
; System information: the CPU count, page size, OS version (build tools, runtimes);
; other processes' command lines are taken back below.
(allow sysctl-read)
; Python's multiprocessing and other runtimes lock with POSIX semaphores.
(allow ipc-posix-sem)
; libnotify keeps its state in a shared page that libSystem reads.
(allow ipc-posix-shm-read* (ipc-posix-name \"apple.shm.notification_center\"))
; Users and groups: ~ expansion, id, git's default author, file owners in ls -l.
(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\"))
(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.membership\"))
; libnotify: libSystem learns of time zone and resolver changes through it.
(allow mach-lookup (global-name \"com.apple.system.notification_center\"))
; The user's temp and cache directories' names (confstr), which clang and Foundation ask for.
(allow mach-lookup (global-name \"com.apple.bsd.dirhelper\"))
; Writes: the null device; in workspace-write also what the blocks below allow.
(allow file-write-data file-ioctl (literal \"/dev/null\"))
; A descriptor the command already holds, reopened by name (> /dev/stdout, /dev/fd/N).
(allow file-write-data (subpath \"/dev/fd\"))
";

/// Certificate trust, for TLS through the allow-list's proxy or with the whole network.
pub(crate) const TLS: &str = "\
; TLS: the system's trust evaluation (git and curl over https).
(allow mach-lookup (global-name \"com.apple.trustd\"))
(allow mach-lookup (global-name \"com.apple.trustd.agent\"))
";

/// The network when the policy allows it: everything but Unix sockets, with the resolver.
pub(crate) const NETWORK_ALLOWED: &str = "\
; The network is allowed; Unix sockets are not (as socket(AF_UNIX) is not on Linux).
(allow network*)
(deny network-outbound (remote unix-socket))
(deny network-bind (local unix-socket))
; The resolver: getaddrinfo asks mDNSResponder, by its socket or by its service, and reads the
; resolver's configuration from configd.
(allow network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))
(allow mach-lookup (global-name \"com.apple.dnssd.service\"))
(allow mach-lookup (global-name \"com.apple.SystemConfiguration.DNSConfiguration\"))
(allow mach-lookup (global-name \"com.apple.SystemConfiguration.configd\"))
; TLS: the system's trust evaluation (git and curl over https).
(allow mach-lookup (global-name \"com.apple.trustd\"))
(allow mach-lookup (global-name \"com.apple.trustd.agent\"))
";

/// Taken away last, whatever a rule above allows: each a way to act outside the sandbox.
pub(crate) const DENIED: &str = "\
; Taken away whatever is allowed above: each acts outside the sandbox.
; launchctl submit: a job that launchd runs outside the sandbox.
(deny job-creation)
; open: LaunchServices starts an application, or a browser on a URL, outside the sandbox.
(deny lsopen)
; defaults write: cfprefsd writes the preferences file for the command.
(deny user-preference-write)
; hdiutil attach -mountpoint, mount: a volume over a protected path.
(deny file-mount file-unmount)
; Another process's task port is control of it (a debugger); within this sandbox only.
(deny mach-priv-task-port)
(allow mach-priv-task-port (target same-sandbox))
; osascript, Apple Events: other applications act for the command.
(deny appleevent-send)
; The pasteboard, the window server, Apple Events, LaunchServices, the keychain (git
; credential-osxkeychain), disk images and mounts: services that act outside the sandbox.
(deny mach-lookup (global-name \"com.apple.pasteboard.1\"))
(deny mach-lookup (global-name \"com.apple.windowserver.active\"))
(deny mach-lookup (global-name \"com.apple.coreservices.appleevents\"))
(deny mach-lookup (global-name \"com.apple.coreservices.launchservicesd\"))
(deny mach-lookup (global-name \"com.apple.SecurityServer\"))
(deny mach-lookup (global-name \"com.apple.securityd.xpc\"))
(deny mach-lookup (global-name \"com.apple.DiskArbitration.diskarbitrationd\"))
; Other processes' command lines and environments (ps -ww, sysctl kern.procargs2).
(deny sysctl-read (sysctl-name-prefix \"kern.procargs\"))
; System V IPC: one namespace for all of the user's processes.
(deny ipc-sysv-shm ipc-sysv-sem ipc-sysv-msg)
";
