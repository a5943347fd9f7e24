//! What a host asks of the sandbox: `KernelOptions.sandbox`, read from JavaScript in
//! `napi/sandbox.rs`.
//!
//! The defaults are the safe ones: writes only to the kernel's workspace (its cwd, with
//! its `.git` read-only), its private TMPDIR and its session's own installs; the usual
//! credential stores under the home directory out of sight; the network as the host's.
//! Each option loosens (or tightens) one of them.

use std::path::{Path, PathBuf};

use super::allow_list::AllowList;

/// `KernelOptions.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxConfig {
    /// No isolation: for hosts that already run inside a sandbox.
    Off,
    On(Policy),
}

/// What a sandboxed kernel may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub network: Network,
    pub writable: Writable,
    pub hidden: Hidden,
    pub installs: Installs,
}

/// `sandbox.network`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// The host's network (`true`).
    Host,
    /// A network namespace of its own with only loopback up (`false`).
    Loopback,
    /// Loopback only, and HTTP(S) through a proxy of the host's that reaches only the
    /// listed hosts (`{ allow: [...] }`, see `egress_proxy.rs`).
    Allow(AllowList),
}

impl Network {
    /// Whether the kernel keeps the host's network.
    pub fn is_host(&self) -> bool {
        matches!(self, Network::Host)
    }
}

/// `sandbox.writable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writable {
    /// The workspace (cwd), the private TMPDIR, the session's installs, and these.
    Confined(Vec<PathBuf>),
    /// Anywhere the host's user may write (`'all'`), but the machine's own controls.
    All,
}

/// `sandbox.hidden`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hidden {
    /// [`DEFAULT_HIDDEN`] beneath the home directory.
    Default,
    /// These instead (relative ones beneath the home directory); empty hides nothing.
    Paths(Vec<PathBuf>),
}

/// `sandbox.installs`: where `%pip install` (and anything else writing the interpreter's
/// environment) puts what it installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installs {
    /// An overlay of the environment that belongs to the session: its kernels see what
    /// it installed, nobody else does.
    Session,
    /// The environment itself, made writable: every later kernel of every session runs
    /// what a cell installed there.
    Shared,
}

/// The usual credential stores beneath the home directory: a default kernel sees them
/// empty. Files and directories of the tools an agent's machine holds keys for: ssh and
/// gpg, the clouds and clusters, container registries, package indexes, git forges,
/// password stores and keyrings, browsers' profiles, and the coding agents' own logins.
pub const DEFAULT_HIDDEN: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/containers/auth.json",
    ".netrc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".config/pip/pip.conf",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".terraformrc",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".config/rclone",
    ".config/doctl",
    ".oci",
    ".boto",
    ".s3cfg",
    ".databrickscfg",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".config/op",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".pki",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".claude/.credentials.json",
    ".codex/auth.json",
];

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig::On(Policy::default())
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            network: Network::Host,
            writable: Writable::Confined(Vec::new()),
            hidden: Hidden::Default,
            installs: Installs::Session,
        }
    }
}

impl SandboxConfig {
    pub fn is_off(&self) -> bool {
        matches!(self, SandboxConfig::Off)
    }

    /// The policy; `None` with the sandbox off.
    pub fn policy(&self) -> Option<&Policy> {
        match self {
            SandboxConfig::Off => None,
            SandboxConfig::On(policy) => Some(policy),
        }
    }

    /// Whether a kernel's writable directories name its cwd, so that the kernel cannot
    /// serve a session elsewhere.
    pub fn confines_writes(&self) -> bool {
        self.policy()
            .is_some_and(|p| matches!(p.writable, Writable::Confined(_)))
    }

    /// Whether a kernel's installs are its session's own (its environment an overlay).
    pub fn session_installs(&self) -> bool {
        self.policy()
            .is_some_and(|p| p.installs == Installs::Session)
    }
}

impl Hidden {
    /// The paths hidden for a user whose home directories (the kernel's `HOME`, and the
    /// account's own when it differs) are `homes`: absolute ones as they are, relative
    /// ones (and `~/...`) beneath each home.
    pub fn paths(&self, homes: &[PathBuf]) -> Vec<PathBuf> {
        let beneath_homes = |entry: &Path| -> Vec<PathBuf> {
            let relative = entry.strip_prefix("~").unwrap_or(entry);
            homes.iter().map(|home| home.join(relative)).collect()
        };
        let mut paths: Vec<PathBuf> = match self {
            Hidden::Default => DEFAULT_HIDDEN
                .iter()
                .flat_map(|entry| beneath_homes(Path::new(entry)))
                .collect(),
            Hidden::Paths(entries) => entries
                .iter()
                .flat_map(|entry| {
                    if entry.is_absolute() {
                        vec![entry.clone()]
                    } else {
                        beneath_homes(entry)
                    }
                })
                .collect(),
        };
        paths.sort();
        paths.dedup();
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_entries_are_taken_beneath_every_home() {
        let homes = vec![PathBuf::from("/home/a"), PathBuf::from("/root")];
        let default = Hidden::Default.paths(&homes);
        assert!(default.contains(&PathBuf::from("/home/a/.ssh")));
        assert!(default.contains(&PathBuf::from("/root/.config/gcloud")));
        assert_eq!(default.len(), 2 * DEFAULT_HIDDEN.len());
        let own = Hidden::Paths(vec![
            PathBuf::from("~/.myapp"),
            PathBuf::from(".other"),
            PathBuf::from("/etc/secret"),
        ])
        .paths(&homes);
        assert_eq!(
            own,
            [
                "/etc/secret",
                "/home/a/.myapp",
                "/home/a/.other",
                "/root/.myapp",
                "/root/.other"
            ]
            .map(PathBuf::from)
        );
        assert!(Hidden::Paths(vec![]).paths(&homes).is_empty());
    }

    #[test]
    fn the_defaults_confine_writes_and_keep_installs_with_the_session() {
        let default = SandboxConfig::default();
        assert!(default.confines_writes() && default.session_installs());
        assert!(!SandboxConfig::Off.confines_writes());
        assert!(!SandboxConfig::Off.session_installs());
    }
}
